//! MatMul and Gemm: `y[b, i, j] = chain(sum_k A[b, i, k] B[b, k, j])`, either operand without
//! batch (a weight), either transposed (Gemm's `transA`/`transB`).
//!
//!   WGX, WGY   work-group shape (columns, rows)        [4, 8, 16, 32]  ref 16, 16
//!   TM, TN     outputs per item (rows, columns),       [1, 2, 4, 8]    ref 1, 1
//!              strided by WGY and WGX (coalesced)
//!   USE_LOCAL  A and B tiles staged in local memory     [0, 1]          ref 0
//!   TK         depth of a local tile                    [8, 16, 32]     ref 8
//!   UNROLL     k steps per loop iteration               [1, 2, 4]       ref 1
//!   MMA        1: the suite's 3xTF32 tensor-core path     [0, 1]          ref 0
//!              (mma.sync + cp.async; NVIDIA, sm >= 80; full
//!              tiles), FP32-accurate; A not transposed
//!   WM         MMA: warps along m                        [1, 2, 4]       ref 1
//!   STAGES     MMA: k-tiles in flight                    [2, 3, 4]       ref 2
//!   FLUSH      MMA: 8-deep steps summed in the tensor     [1, 2, 4]       ref 1
//!              cores before the FP32 add
//!
//! The tensor-core path is kfoundry's template library (`kfoundry_tooling::library`), the text of the suite's
//! `examples/kernels/gemm.cl` (a test there keeps the two equal).

use super::tensor_core::{self, Loader};
use super::{
    chain_call, chain_function, fits_int, params, prelude, product, side_buffers, BufferArg, Cx,
    Dims, Kernel, Precision, Size,
};
use crate::fuse::Anchor;

pub(super) fn generate(cx: &Cx) -> Kernel {
    let g = cx.group;
    let Anchor::MatMul {
        a,
        b,
        trans_a,
        trans_b,
    } = &g.anchor
    else {
        unreachable!("gemm::generate on a MatMul")
    };
    let (sa, sb) = (cx.shape(*a).to_vec(), cx.shape(*b).to_vec());
    let mut k = cx.kernel();
    // (batch..., m, k) and (batch..., k, n), 1-D operands as matrices.
    let a2 = if sa.len() == 1 {
        vec![1, sa[0]]
    } else {
        sa.clone()
    };
    let b2 = if sb.len() == 1 {
        vec![sb[0], 1]
    } else {
        sb.clone()
    };
    let (m, kk) = if *trans_a {
        (a2[a2.len() - 1], a2[a2.len() - 2])
    } else {
        (a2[a2.len() - 2], a2[a2.len() - 1])
    };
    let n = if *trans_b {
        b2[b2.len() - 2]
    } else {
        b2[b2.len() - 1]
    };
    let out_rank = g.shape.len();
    let batch_rank = out_rank - usize::from(sa.len() > 1) - usize::from(sb.len() > 1);
    let batch = Dims::named("b", &g.shape[..batch_rank], &mut k.sizes, 2);
    for (name, full, cap) in [("m", m, 64), ("n", n, 64), ("k", kk, 64)] {
        k.sizes.push(Size {
            name: name.into(),
            full,
            small: full.min(cap),
        });
    }
    let bt = batch.total();
    // The chain's index space is the graph's output shape.
    let mut out_exprs = batch.exprs.clone();
    if sa.len() > 1 {
        out_exprs.push("m".into());
    }
    if sb.len() > 1 {
        out_exprs.push("n".into());
    }
    let dims = Dims {
        exprs: out_exprs,
        full: g.shape.clone(),
    };
    let a_batched = a2[..a2.len() - 2].iter().any(|&d| d != 1);
    let b_batched = b2[..b2.len() - 2].iter().any(|&d| d != 1);
    params(
        &mut k,
        &[
            ("WGX", "[4, 8, 16, 32]", 16),
            ("WGY", "[4, 8, 16, 32]", 16),
            ("TM", "[1, 2, 4, 8]", 1),
            ("TN", "[1, 2, 4, 8]", 1),
            ("USE_LOCAL", "[0, 1]", 0),
            ("TK", "[8, 16, 32]", 8),
            ("UNROLL", "[1, 2, 4]", 1),
        ],
    );
    // The tensor-core path reads A along k (not transposed) and B along n, or along k when
    // transposed; it needs whole tiles and 16-byte rows.
    let mma = !*trans_a;
    if mma {
        params(
            &mut k,
            &[
                ("MMA", "[0, 1]", 0),
                ("WM", "[1, 2, 4]", 1),
                ("STAGES", "[2, 3, 4]", 2),
                ("FLUSH", "[1, 2, 4]", 1),
            ],
        );
        let b_tile = if *trans_b {
            "WGX * TN * (TK + TK / 32 * 4)"
        } else {
            "TK * WGX * TN"
        };
        k.require.extend([
            "MMA == 0 || device_nvidia && device_sm >= 80".to_string(),
            "MMA == 1 || (WM == 1 && STAGES == 2 && FLUSH == 1)".into(),
            "MMA == 0 || (USE_LOCAL == 0 && UNROLL == 1 && TK % (8 * FLUSH) == 0)".into(),
            "MMA == 0 || (WGX * WGY % 32 == 0 && WGX * WGY / 32 % WM == 0)".into(),
            "MMA == 0 || (WGY * TM % (16 * WM) == 0 && WGX * TN * WM * 32 % (8 * WGX * WGY) == 0)".into(),
            "MMA == 0 || (m % (WGY * TM) == 0 && n % (WGX * TN) == 0 && k % TK == 0 && k % 4 == 0 && n % 4 == 0)".into(),
            format!("MMA * 4 * STAGES * (WGY * TM * (TK + TK / 32 * 4) + {b_tile}) <= min(device_local_mem, 49152)"),
        ]);
        // The TF32 split turns an infinity into NaN (inf - inf): finite inputs only.
        k.edges_finite = true;
    }
    k.require.extend([
        "WGX * WGY >= 32".to_string(),
        "WGX * WGY <= 256".into(),
        "TM * TN <= 32".into(),
        // TK is the tensor-core path's k-tile too.
        if mma {
            "USE_LOCAL == 1 || MMA == 1 || TK == 8"
        } else {
            "USE_LOCAL == 1 || TK == 8"
        }
        .into(),
        "USE_LOCAL * 4 * TK * (WGY * TM + WGX * TN + 2) <= min(device_local_mem, 49152)".into(),
    ]);
    let a_len = product(&[
        if a_batched { bt.clone() } else { "1".into() },
        "m".into(),
        "k".into(),
    ]);
    let b_len = product(&[
        if b_batched { bt.clone() } else { "1".into() },
        "k".into(),
        "n".into(),
    ]);
    let y_len = product(&[bt.clone(), "m".into(), "n".into()]);
    fits_int(&mut k, &[a_len.clone(), b_len.clone(), y_len.clone()]);
    k.buffers.push(BufferArg {
        name: "a".into(),
        len: a_len,
        value: *a,
        output: false,
        inputs: None,
    });
    k.buffers.push(BufferArg {
        name: "b".into(),
        len: b_len,
        value: *b,
        output: false,
        inputs: None,
    });
    side_buffers(cx, &mut k, &[(&g.chain, &dims)]);
    k.buffers.push(BufferArg {
        name: "y".into(),
        len: y_len.clone(),
        value: g.output,
        output: true,
        inputs: None,
    });
    k.global = vec![
        "ceil_div(n, WGX * TN) * WGX".into(),
        "ceil_div(m, WGY * TM) * WGY".into(),
        bt.clone(),
    ];
    k.local = vec!["WGX".into(), "WGY".into(), "1".into()];
    // Sums of k products: another order differs by about k ulps of the result. With TF32
    // products (10-bit mantissas), about 1e-3 of the terms' size, growing as sqrt(k).
    k.atol = (2.5e-7 * kk as f64).max(1e-5);
    if mma && cx.precision == Precision::Tf32 {
        k.atol = (1e-3 * (kk as f64).sqrt()).max(1e-3);
        k.rtol = 1e-2;
        k.check_note = Some("TF32 products on the tensor cores (`import --precision tf32`): TF32's tolerance, not FP32's");
    }
    k.bytes = super::compulsory_bytes(&k);
    k.flops = format!("2 * {y_len} * k");

    let mut s = prelude(&k, "matrix product");
    s += &chain_function(cx, &k, "kf_chain", &g.chain, &dims);
    // Element (r, c) of A and B for batch `bb`, transposes and batch strides resolved.
    let (am, ak) = if *trans_a { ("1", "m") } else { ("k", "1") };
    let (bk, bn) = if *trans_b { ("1", "k") } else { ("n", "1") };
    let a_off = if a_batched { "bb * m * k" } else { "0" };
    let b_off = if b_batched { "bb * k * n" } else { "0" };
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict a, __global const float* restrict b"],
        "__global float* restrict y",
    );
    let call = chain_call(cx, &k, "kf_chain", "acc[i][j]", "o");
    let (machinery, main_loop) = tensor_core::parts(cx.precision, Loader::Tiles);
    let tensor_cores = if mma {
        let call = chain_call(cx, &k, "kf_chain", "v", "o");
        let store = tensor_core::for_each_accumulator(
            "row",
            "col",
            &format!("                const int o = (bb * m + row) * n + col;\n                const float v = acc[i][j][r];\n                y[o] = {call};\n"),
        );
        format!("#if MMA\n    a += aoff;\n    b += boff;\n{main_loop}{store}#else\n")
    } else {
        String::new()
    };
    if mma {
        s += &format!(
            "#if MMA\n#define KM_B_KMAJOR {}\n{machinery}#endif\n",
            u8::from(*trans_b)
        );
    }
    s += &format!(
        r#"
#define KF_A(r, c) a[aoff + (r) * {am} + (c) * {ak}]
#define KF_B(r, c) b[boff + (r) * {bk} + (c) * {bn}]

__kernel __attribute__((reqd_work_group_size(WGX, WGY, 1)))
void {entry}({args})
{{
    const int bb = get_global_id(2);
    const int aoff = {a_off};
    const int boff = {b_off};
{tensor_cores}    const int lx = get_local_id(0), ly = get_local_id(1);
    const int row0 = get_group_id(1) * (WGY * TM);
    const int col0 = get_group_id(0) * (WGX * TN);
    float acc[TM][TN];
    for (int i = 0; i < TM; i++)
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.0f;
#if USE_LOCAL
    __local float As[TK][WGY * TM + 1];
    __local float Bs[TK][WGX * TN + 1];
    const int lid = ly * WGX + lx;
    for (int k0 = 0; k0 < k; k0 += TK) {{
        for (int e = lid; e < WGY * TM * TK; e += WGX * WGY) {{
            const int r = e / TK, c = e % TK;
            const int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < m && gc < k) ? KF_A(gr, gc) : 0.0f;
        }}
        for (int e = lid; e < TK * WGX * TN; e += WGX * WGY) {{
            const int r = e / (WGX * TN), c = e % (WGX * TN);
            const int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < k && gc < n) ? KF_B(gr, gc) : 0.0f;
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TK; kk += UNROLL) {{
            for (int u = 0; u < UNROLL; u++) {{
                float ar[TM], br[TN];
                for (int i = 0; i < TM; i++) ar[i] = As[kk + u][ly + i * WGY];
                for (int j = 0; j < TN; j++) br[j] = Bs[kk + u][lx + j * WGX];
                for (int i = 0; i < TM; i++)
                    for (int j = 0; j < TN; j++)
                        acc[i][j] = fma(ar[i], br[j], acc[i][j]);
            }}
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
#else
    int rows[TM], cols[TN];
    for (int i = 0; i < TM; i++) rows[i] = min(row0 + ly + i * WGY, m - 1);
    for (int j = 0; j < TN; j++) cols[j] = min(col0 + lx + j * WGX, n - 1);
    int kk = 0;
    for (; kk + UNROLL <= k; kk += UNROLL) {{
        for (int u = 0; u < UNROLL; u++) {{
            float ar[TM], br[TN];
            for (int i = 0; i < TM; i++) ar[i] = KF_A(rows[i], kk + u);
            for (int j = 0; j < TN; j++) br[j] = KF_B(kk + u, cols[j]);
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++)
                    acc[i][j] = fma(ar[i], br[j], acc[i][j]);
        }}
    }}
    for (; kk < k; kk++) {{
        float ar[TM], br[TN];
        for (int i = 0; i < TM; i++) ar[i] = KF_A(rows[i], kk);
        for (int j = 0; j < TN; j++) br[j] = KF_B(kk, cols[j]);
        for (int i = 0; i < TM; i++)
            for (int j = 0; j < TN; j++)
                acc[i][j] = fma(ar[i], br[j], acc[i][j]);
    }}
#endif
    for (int i = 0; i < TM; i++) {{
        const int r = row0 + ly + i * WGY;
        for (int j = 0; j < TN; j++) {{
            const int c = col0 + lx + j * WGX;
            if (r < m && c < n) {{
                const int o = (bb * m + r) * n + c;
                y[o] = {call};
            }}
        }}
    }}
{end_mma}}}
"#,
        end_mma = if mma { "#endif\n" } else { "" },
        entry = k.entry
    );
    k.source = s;
    k
}
