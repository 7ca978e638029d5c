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
//!   SPLITK     k slices, summed by the last work-group    [1, 2, ..., 64] ref 1
//!              of a tile to arrive (skinny products only)
//!
//! The tensor-core path is kfoundry's template library (`kfoundry_tooling::library`), the text of the suite's
//! `examples/kernels/gemm.cl` (a test there keeps the two equal). So is split-K (`split_k.cl`,
//! as `examples/kernels/gemm_splitk.cl` uses it): offered for one product (no batch) whose
//! output is small for its k ([`offers_split_k`]), on two scratch buffers the launcher owns;
//! every other product's text is as before.

use super::tensor_core::{self, Loader};
use super::{
    chain_call, chain_function, fits_int, library_part, params, prelude, product, side_buffers,
    BufferArg, Cx, Dims, Kernel, Precision, Size,
};
use crate::fuse::Anchor;

/// Outputs at most, and k at least, of a product that gets split-K: one work-group per output
/// tile leaves most units of a GPU idle when the tiles are few and each is a long sum (256 x 256
/// outputs are 16 tiles of 64 x 64; an H200 has 132 units).
const SPLIT_MAX_OUTPUTS: usize = 1 << 20;
const SPLIT_MIN_K: usize = 4096;

/// Whether a product of `batch` batches of `m` x `n` outputs over `k` gets the split-K path.
pub(crate) fn offers_split_k(batch: usize, m: usize, n: usize, k: usize) -> bool {
    batch == 1 && m.saturating_mul(n) <= SPLIT_MAX_OUTPUTS && k >= SPLIT_MIN_K
}

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
    let split = offers_split_k(g.shape[..batch_rank].iter().product(), m, n, kk);
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
    if split {
        params(&mut k, &[("SPLITK", "[1, 2, 4, 8, 16, 32, 64]", 1)]);
        // The slices' reduction needs a device-scope fence (the library's split_k.cl).
        k.require
            .push("SPLITK == 1 || device_nvidia || device_cpu".into());
    }
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
        if split { "SPLITK".into() } else { bt.clone() },
    ];
    if split {
        k.scratch = vec![
            ("ws".into(), "SPLITK * m * n".into()),
            (
                "arrivals".into(),
                "ceil_div(m, WGY * TM) * ceil_div(n, WGX * TN)".into(),
            ),
        ];
    }
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
    let outputs = if split {
        "__global float* restrict y, __global float* ws, __global uint* arrivals"
    } else {
        "__global float* restrict y"
    };
    let args = super::arguments(
        cx,
        &k,
        &["__global const float* restrict a, __global const float* restrict b"],
        outputs,
    );
    let call = chain_call(cx, &k, "kf_chain", "acc[i][j]", "o");
    let call_v = chain_call(cx, &k, "kf_chain", "v", "o");
    // Split-K: the work-group's slice of k (whole TK tiles), and its tile's counter.
    let (setup, kb, ke) = if split {
        (
            "    const int bb = 0;
    const int slice = get_global_id(2);
    const int tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
    __local int ks_flag;
    const int ks_chunk = (k + SPLITK * TK - 1) / (SPLITK * TK) * TK;
    const int ks_k0 = min(k, slice * ks_chunk), ks_k1 = min(k, ks_k0 + ks_chunk);
",
            "ks_k0",
            "ks_k1",
        )
    } else {
        ("    const int bb = get_global_id(2);\n", "0", "k")
    };
    // Each output in range: its index `o`, then `body` (split-K: partial sums to the slice,
    // then the last work-group's sums through the chain).
    let outputs_loop = |body: &str| {
        format!(
            "    for (int i = 0; i < TM; i++) {{
        const int r = row0 + ly + i * WGY;
        for (int j = 0; j < TN; j++) {{
            const int c = col0 + lx + j * WGX;
            if (r < m && c < n) {{
                const int o = (bb * m + r) * n + c;
{body}            }}
        }}
    }}
"
        )
    };
    let direct = outputs_loop(&format!("                y[o] = {call};\n"));
    let store = if split {
        format!(
            "#if SPLITK == 1\n{direct}#else\n{}    if (ks_last(arrivals, tile, &ks_flag, ly * WGX + lx)) {{\n{}    }}\n#endif\n",
            outputs_loop("                ks_put(ws, (size_t)m * n, slice, o, acc[i][j]);\n"),
            outputs_loop(&format!(
                "                const float v = ks_take(ws, (size_t)m * n, o);\n                y[o] = {call_v};\n"
            ))
        )
    } else {
        direct
    };
    let (machinery, main_loop) = tensor_core::parts(cx.precision, Loader::Tiles);
    // The tensor-core path's outputs stored through the chain (written only with that path).
    let direct_mma = || {
        tensor_core::for_each_accumulator(
            "row",
            "col",
            &format!("                const int o = (bb * m + row) * n + col;\n                const float v = acc[i][j][r];\n                y[o] = {call_v};\n"),
        )
    };
    let tensor_cores = if mma && split {
        // The slice's k-tiles: A (m x k) and B advanced to the first.
        let b_step = if *trans_b {
            "km_kt0 * TK"
        } else {
            "km_kt0 * TK * n"
        };
        let put = tensor_core::for_each_accumulator(
            "row",
            "col",
            "                ks_put(ws, (size_t)m * n, slice, (bb * m + row) * n + col, acc[i][j][r]);\n",
        );
        let take = tensor_core::for_each_accumulator(
            "row",
            "col",
            &format!("                const int o = (bb * m + row) * n + col;\n                const float v = ks_take(ws, (size_t)m * n, o);\n                y[o] = {call_v};\n"),
        );
        format!(
            "#if MMA\n    a += aoff;\n    b += boff;\n    const int km_all = k / TK, km_per = (km_all + SPLITK - 1) / SPLITK;\n    const int km_kt0 = min(km_all, slice * km_per);\n    const int km_kts = min(km_per, km_all - km_kt0);\n    a += km_kt0 * TK;\n    b += {b_step};\n{main_loop}#if SPLITK == 1\n{}#else\n{put}    if (ks_last(arrivals, tile, &ks_flag, tid)) {{\n{take}    }}\n#endif\n#else\n",
            direct_mma()
        )
    } else if mma {
        format!(
            "#if MMA\n    a += aoff;\n    b += boff;\n{main_loop}{}#else\n",
            direct_mma()
        )
    } else {
        String::new()
    };
    if split {
        s += &format!("#define KS_SLICES SPLITK\n{}", library_part("split_k.cl"));
    }
    if mma {
        let ktiles = if split {
            "#define KM_KTILES km_kts\n"
        } else {
            ""
        };
        s += &format!(
            "#if MMA\n#define KM_B_KMAJOR {}\n{ktiles}{machinery}#endif\n",
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
{setup}    const int aoff = {a_off};
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
    for (int k0 = {kb}; k0 < {ke}; k0 += TK) {{
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
    int kk = {kb};
    for (; kk + UNROLL <= {ke}; kk += UNROLL) {{
        for (int u = 0; u < UNROLL; u++) {{
            float ar[TM], br[TN];
            for (int i = 0; i < TM; i++) ar[i] = KF_A(rows[i], kk + u);
            for (int j = 0; j < TN; j++) br[j] = KF_B(kk + u, cols[j]);
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++)
                    acc[i][j] = fma(ar[i], br[j], acc[i][j]);
        }}
    }}
    for (; kk < {ke}; kk++) {{
        float ar[TM], br[TN];
        for (int i = 0; i < TM; i++) ar[i] = KF_A(rows[i], kk);
        for (int j = 0; j < TN; j++) br[j] = KF_B(kk, cols[j]);
        for (int i = 0; i < TM; i++)
            for (int j = 0; j < TN; j++)
                acc[i][j] = fma(ar[i], br[j], acc[i][j]);
    }}
#endif
{store}{end_mma}}}
"#,
        end_mma = if mma { "#endif\n" } else { "" },
        entry = k.entry
    );
    k.source = s;
    k
}

#[cfg(test)]
mod tests {
    use super::offers_split_k;

    #[test]
    fn split_k_is_for_one_product_of_few_outputs_and_a_long_k() {
        // KernelBench level 1 problem 6; a Linear layer of a batch of 128.
        assert!(offers_split_k(1, 256, 256, 524_288));
        assert!(offers_split_k(1, 128, 4096, 4096));
        // Batched, many outputs, or a short k: one work-group a tile keeps a GPU busy enough.
        assert!(!offers_split_k(2, 256, 256, 524_288));
        assert!(!offers_split_k(1, 2048, 1024, 8192));
        assert!(!offers_split_k(1, 16, 16, 1024));
    }
}
