/*
 * conv_gn: the suite's fused Conv2d + bias + scale + sigmoid + GroupNorm (KernelBench level 2:
 * Conv2d 8 -> 32, 3 x 3, no padding, stride 1 on 128 x 8 x 256 x 256; + bias; * scale;
 * sigmoid; GroupNorm with 8 groups, affine).
 *
 *   v[s, o, y, x] = conv_bias[o] + sum_{ci, ky, kx} x[s, ci, y + ky, x + kx] * weight[o, ci, ky, kx]
 *   z = sigmoid((v + bias[o]) * scale[o])
 *   out[s, o, y, x] = (z - mu_{s,g}) / sqrt(var_{s,g} + eps) * gamma[o] + beta[o]
 * with g = o / (cout / groups), mu and var (biased) over the group's channels and pixels.
 *
 * One work-group per (sample, group), so the GroupNorm statistics need no second launch. Pass 1
 * computes z for the group's (cout / groups) x oh x ow outputs and sums z - 0.5 and (z - 0.5)^2
 * (sigmoid outputs lie in (0, 1); the shift keeps the variance from cancelling); a tree in
 * local memory gives the statistics; pass 2 normalises: either re-reading the z values this
 * item stored in pass 1 (RECOMPUTE = 0; an item reads only what it wrote, so no fence between
 * items is needed) or recomputing them (RECOMPUTE = 1: twice the FLOPs, a third of the
 * output traffic). The defaults are the reference.
 *
 *   WG         items per group (power of two)                  [64 .. 1024]   ref 256
 *   PX         output pixels along x per item (register tile)  [1, 2, 4, 8]   ref 1
 *   CB         output channels per item (register tile)        [1, 2, 4]      ref 1
 *   RECOMPUTE  pass 2 recomputes z instead of re-reading it    [0, 1]         ref 0
 *   WLOCAL     the group's weights are copied to local memory  [0, 1]         ref 0
 *   MMA        0: the portable path; 1: the convolution as an
 *              implicit GEMM on NVIDIA's tensor cores (3xTF32,
 *              FP32 accuracy; inline PTX, compute capability
 *              >= 8.0): see "The tensor-core path"            [0, 1]         ref 0
 *   RW         MMA = 1: output rows per warp                   [1, 2, 4, 8]   ref 1
 *   MW         MMA = 1: warps along x (tile width 16 * MW)     [1, 2, 4, 8]   ref 1
 *   SPLIT      MMA = 1: 0: inputs split into TF32 parts once,
 *              when staged; 1: at each fragment load, with the
 *              next input patch copied during this one's MMAs  [0, 1]         ref 0
 *
 * Launch (2-D): global = (WG * groups, n), local = (WG, 1). Requires h >= 3, w >= 3,
 * cout % groups == 0 and (cout / groups) % CB == 0. `wl` is a __local buffer of
 * max(1, WLOCAL * (cout / groups) * cin * 9) floats (allocated by the launcher).
 * The convolution sums in the same order (ci, ky, kx ascending, fma) in every portable
 * configuration; the tensor-core path sums in another, with FP32 accuracy.
 */

#ifndef WG
#define WG 256
#endif
#ifndef PX
#define PX 1
#endif
#ifndef CB
#define CB 1
#endif
#ifndef RECOMPUTE
#define RECOMPUTE 0
#endif
#ifndef WLOCAL
#define WLOCAL 0
#endif
#ifndef MMA
#define MMA 0
#endif
#ifndef RW
#define RW 1
#endif
#ifndef MW
#define MW 1
#endif
#ifndef SPLIT
#define SPLIT 0
#endif

#if (WG & (WG - 1)) != 0
#error "WG must be a power of two"
#endif

#if WLOCAL
#define KF_W(idx) wl[(idx)]
#else
#define KF_W(idx) wg_[(idx)]
#endif

/* Computes z for channels o0 .. o0 + CB - 1 (group-relative c0) at row oy, pixels x0 .. x0 + PX - 1
   into z[CB][PX]. Pixels past ow are computed from clamped inputs and never used. */
#define KF_CONV(z, c0, oy, x0)                                                          \
    {                                                                                   \
        float acc[CB][PX];                                                              \
        for (int cc = 0; cc < CB; ++cc)                                                 \
            for (int q = 0; q < PX; ++q)                                                \
                acc[cc][q] = 0.0f;                                                      \
        for (int ci = 0; ci < cin; ++ci) {                                              \
            for (int ky = 0; ky < 3; ++ky) {                                            \
                __global const float* row = xs + ((size_t)ci * h + (oy) + ky) * (size_t)w; \
                float win[PX + 2];                                                      \
                for (int q = 0; q < PX + 2; ++q)                                        \
                    win[q] = row[min((x0) + q, w - 1)];                                 \
                for (int kx = 0; kx < 3; ++kx)                                          \
                    for (int cc = 0; cc < CB; ++cc) {                                   \
                        const float wv = KF_W((((c0) + cc) * cin + ci) * 9 + ky * 3 + kx); \
                        for (int q = 0; q < PX; ++q)                                    \
                            acc[cc][q] = fma(win[q + kx], wv, acc[cc][q]);              \
                    }                                                                   \
            }                                                                           \
        }                                                                               \
        for (int cc = 0; cc < CB; ++cc) {                                               \
            const int o = o_base + (c0) + cc;                                           \
            for (int q = 0; q < PX; ++q) {                                              \
                const float v = ((acc[cc][q] + conv_bias[o]) + bias[o]) * scale[o];     \
                z[cc][q] = 1.0f / (1.0f + exp(-v));                                     \
            }                                                                           \
        }                                                                               \
    }

#if MMA
/* ---- The tensor-core path (MMA = 1): NVIDIA, compute capability 8.0 or later ----
 *
 * The convolution of a tile of output pixels as an implicit GEMM on the tensor cores, one
 * warp-wide mma.sync.m16n8k8 (TF32 operands, FP32 accumulators) per 16 pixels x 8 input
 * channels x one tap (ky, kx): A (16 x 8) holds the inputs x[ci][oy + ky][ox + kx] of 16
 * consecutive output pixels (rows) and 8 input channels (k; cin is cut in chunks of 8, zeros
 * past cin); B (8 x 8) holds the weights of 4 of the group's output channels (zeros past
 * cout / groups), column 2c the TF32 "big" part of channel c's weights and column 2c + 1 the
 * "small" part (w = big + small, both TF32). Two mma per tap, A's small parts then A's big
 * parts against that one B, give (a_big + a_small)(w_big + w_small) with no column wasted
 * ("3xTF32" of CUTLASS: the error of a split is about 2^-22 of the value, so the result keeps
 * FP32 accuracy); a lane's accumulators d[0], d[1] (d[2], d[3]) are columns 2t and 2t + 1 of
 * row g (g + 8): the big and small sums of channel t at pixel g (g + 8), added in the
 * epilogue, so every lane finishes two outputs. Each tap's pair starts from zero and is
 * added to the FP32 accumulators rounded to nearest (the tensor cores round their sums toward
 * zero: see gemm.cl). The split rounds to nearest with integer operations (KC_TF32, the
 * values of cvt.rna.tf32.f32 for finite inputs, without its conversion unit).
 *
 * Tiles: a work-group's WG / 32 warps form MW (along x) x WG / 32 / MW (along y) warps; a
 * warp computes RW output rows x 16 pixels, so a tile is KC_TH = RW * WG / 32 / MW rows x
 * KC_TW = 16 * MW pixels. The tile's input patch, 8 channels x (KC_TH + 2) rows x
 * (KC_TW + 4) columns (two more than it needs: whole 16-byte pieces), comes to local memory
 * through cp.async (16 bytes where the piece is inside the image and w % 4 == 0, else 4
 * bytes each with zeros outside the image or past cin), in planes of KC_PS = 8 (mod 32)
 * words so that a warp's fragment loads hit 32 distinct banks. SPLIT = 0: after it lands the
 * patch is split once in place (big parts; the small parts in a second buffer) and fragments
 * load both; SPLIT = 1: two patch buffers, the next patch in flight while this one is
 * computed, each value split at each of its fragment loads. A warp walks the RW + 2 input
 * rows of its strip: each input row and kx gives one A fragment, used for the up to 3 output
 * rows (ky) that read it.
 *
 * The whole kernel: pass 1 computes z on the tensor cores, sums its shifted moments and, with
 * RECOMPUTE = 0, stores it; after the statistics either pass 2 runs the tensor cores again
 * (RECOMPUTE = 1: no output re-read) or every item normalises a contiguous stride of the
 * group's stored block (RECOMPUTE = 0: read once, coalesced; the reduction's barriers carry
 * the global fence). Any cin, h, w >= 3 and cout / groups: partial tiles and chunks are
 * padded with zeros and never stored or counted.
 *
 * KM_EMULATE (a build option, never a tuned parameter) emulates the warp-wide instructions
 * (cp.async as plain copies, mma.sync through local memory, as in gemm.cl) so the layouts are
 * tested on any device (examples/tests/suite.rs). KM_MMA is gemm.cl's, the same text.
 */
#define KC_NW (WG / 32)
#define KC_TH (RW * (KC_NW / MW))
#define KC_TW (16 * MW)
#define KC_LDC (KC_TW + 4)
#define KC_NCH (KC_TW / 4 + 1) /* 16-byte pieces in a patch row */
#define KC_PS ((((KC_TH + 2) * KC_LDC + 23) / 32) * 32 + 8)
#define KC_BUF (8 * KC_PS)

#if (WG % 32) != 0 || (KC_NW % MW) != 0
#error "MMA = 1 needs whole warps and MW dividing them"
#endif

/* Round to TF32 (10 mantissa bits), to nearest, ties away: cvt.rna.tf32.f32's value. */
#define KC_TF32(u) (((u) + 0x1000u) & 0xffffe000u)
/* x = big + small, both TF32. */
#define KC_SPLIT(x, big, small)                             \
    {                                                       \
        const float x_ = (x);                               \
        (big) = KC_TF32(as_uint(x_));                       \
        (small) = KC_TF32(as_uint(x_ - as_float(big)));     \
    }

#ifdef KM_EMULATE
/* cp.async as plain copies (the barrier after each wait makes them visible). */
#define KC_CP16(dst, src) vstore4(vload4(0, (src)), 0, (dst))
#define KC_CP4(dst, src, bytes) (*(dst) = (bytes) ? *(src) : 0.0f)
#define KC_COMMIT()
#define KC_WAIT1()
#define KC_WAIT0()
#include <kfoundry/mma_emulated.cl>
#else
#define KC_CP16(dst, src) \
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint)(size_t)(dst)), "l"((size_t)(src)) : "memory")
/* 4 bytes, or (bytes = 0) zeros */
#define KC_CP4(dst, src, bytes) \
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(size_t)(dst)), "l"((size_t)(src)), "r"(bytes) : "memory")
#define KC_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define KC_WAIT1() asm volatile("cp.async.wait_group 1;" ::: "memory")
#define KC_WAIT0() asm volatile("cp.async.wait_group 0;" ::: "memory")
#include <kfoundry/mma_ptx.cl>
#endif

/* Issues the copies of patch p (tile and chunk of input channels, see the kernel) into
   buffer `dst`. */
#define KC_LOAD_PATCH(dst, p)                                                                    \
    {                                                                                            \
        const int tt_ = (ncc == 1) ? (p) : (p) / (nq * ncc), cc_ = (ncc == 1) ? 0 : (p) % ncc;   \
        const int px0_ = (tt_ % ntx) * KC_TW, py0_ = (tt_ / ntx) * KC_TH;                        \
        for (int e = tid; e < 8 * (KC_TH + 2) * KC_NCH; e += WG) {                               \
            const int ch = e % KC_NCH, rr = e / KC_NCH;                                          \
            const int row = rr % (KC_TH + 2), ci = rr / (KC_TH + 2);                             \
            const int gy = py0_ + row, gci = cc_ * 8 + ci, gx = px0_ + 4 * ch;                   \
            __local float* d_ = (dst) + ci * KC_PS + row * KC_LDC + 4 * ch;                      \
            const bool in_ = gci < cin && gy < h;                                                \
            __global const float* s_ = xs + ((size_t)(in_ ? gci : 0) * h + (in_ ? gy : 0)) * w; \
            if (in_ && w4 && gx + 3 < w) {                                                       \
                KC_CP16(d_, s_ + gx);                                                            \
            } else {                                                                             \
                for (int j = 0; j < 4; ++j) {                                                    \
                    const bool ok_ = in_ && gx + j < w;                                          \
                    KC_CP4(d_ + j, s_ + (ok_ ? gx + j : 0), ok_ ? 4 : 0);                        \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
#endif /* MMA */

__kernel void conv_gn(const int n, const int cin, const int h, const int w, const int cout, const int groups, const float eps, __global const float* x, __global const float* weight, __global const float* conv_bias, __global const float* bias, __global const float* scale, __global const float* gamma, __global const float* beta, __global float* out, __local float* wl)
{
    __local float red_a[WG];
    __local float red_b[WG];

    const int lid = (int)get_local_id(0);
    const int g = (int)get_group_id(0);
    const int s = (int)get_global_id(1);
    const int cpg = cout / groups;
    const int oh = h - 2, ow = w - 2;
    const int o_base = g * cpg;
#if MMA
    /* SPLIT = 0: the patch (big parts) and its small parts; SPLIT = 1: two patches */
    __local float kc_p[2 * KC_BUF] __attribute__((aligned(16)));
#ifdef KM_EMULATE
    __local uint scratch[KC_NW * 32 * 6];
#endif
    const int tid = lid;
    const int warp = tid / 32, lane = tid % 32, lg = lane >> 2, lt = lane & 3;
    const int wx = warp % MW, wy = warp / MW;
    const int ntx = (ow + KC_TW - 1) / KC_TW, nty = (oh + KC_TH - 1) / KC_TH;
    const int ncc = (cin + 7) / 8, nq = (cpg + 3) / 4;
    const bool w4 = (w % 4) == 0;
    __global const float* xs = x + (size_t)s * cin * (size_t)h * (size_t)w;
    __global float* os = out + ((size_t)s * cout + o_base) * (size_t)oh * (size_t)ow;
    /* The patches in order: one a tile when there is one chunk of input channels (it serves
       every q), else one a (tile, q, chunk). */
    const int npatch = (ncc == 1) ? ntx * nty : ntx * nty * nq * ncc;

    float s1 = 0.0f, s2 = 0.0f, mu = 0.0f, rstd = 0.0f;
    /* B of the 9 taps: b[r] is row k = t + 4r (input channel cc * 8 + t + 4r), column n = g:
       channel q * 4 + g / 2, its big (g even) or small part. Loaded once when there is one
       chunk of each. */
    uint bf[9][2];
    /* pass 0: z and its shifted sums (and z stored, RECOMPUTE = 0); pass 1 (RECOMPUTE = 1):
       z again, normalised */
    for (int pass = 0; pass <= RECOMPUTE; ++pass) {
#if SPLIT
        barrier(CLK_LOCAL_MEM_FENCE); /* pass 1: every warp has read the last patch */
        KC_LOAD_PATCH(kc_p, 0)
        KC_COMMIT();
#endif
        for (int tile = 0; tile < ntx * nty; ++tile) {
            const int tx0 = (tile % ntx) * KC_TW, ty0 = (tile / ntx) * KC_TH;
            for (int q = 0; q < nq; ++q) {
                float acc[RW][4];
#pragma unroll
                for (int i = 0; i < RW; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc[i][e] = 0.0f;
                for (int cc = 0; cc < ncc; ++cc) {
                    if (tile == 0 || nq > 1 || ncc > 1) {
                        const int c = q * 4 + (lg >> 1), ci0 = cc * 8 + lt;
#pragma unroll
                        for (int tap = 0; tap < 9; ++tap)
#pragma unroll
                            for (int r = 0; r < 2; ++r) {
                                const int ci = ci0 + 4 * r;
                                const float wv = (c < cpg && ci < cin) ? weight[((size_t)(o_base + c) * cin + ci) * 9 + tap] : 0.0f;
                                uint big, small;
                                KC_SPLIT(wv, big, small)
                                bf[tap][r] = (lg & 1) ? small : big;
                            }
                    }
                    const int p = (ncc == 1) ? tile : (tile * nq + q) * ncc + cc;
#if SPLIT
                    __local const float* pb = kc_p + (p % 2) * KC_BUF;
                    if (ncc > 1 || q == 0) {
                        /* The buffer refilled now held patch p - 1: every warp has read it. */
                        barrier(CLK_LOCAL_MEM_FENCE);
                        if (p + 1 < npatch)
                            KC_LOAD_PATCH(kc_p + ((p + 1) % 2) * KC_BUF, p + 1)
                        KC_COMMIT();
                        KC_WAIT1(); /* patch p has landed (this item's copies) */
                        barrier(CLK_LOCAL_MEM_FENCE);
                    }
#else
                    __local const float* pb = kc_p;
                    if (ncc > 1 || q == 0) {
                        barrier(CLK_LOCAL_MEM_FENCE); /* every warp has read the last patch */
                        KC_LOAD_PATCH(kc_p, p)
                        KC_COMMIT();
                        KC_WAIT0();
                        barrier(CLK_LOCAL_MEM_FENCE);
                        for (int e = 4 * tid; e < KC_BUF; e += 4 * WG) {
                            const uint4 u = as_uint4(vload4(0, kc_p + e));
                            const uint4 big = KC_TF32(u);
                            const uint4 small = KC_TF32(as_uint4(as_float4(u) - as_float4(big)));
                            vstore4(as_float4(big), 0, kc_p + e);
                            vstore4(as_float4(small), 0, kc_p + KC_BUF + e);
                        }
                        barrier(CLK_LOCAL_MEM_FENCE);
                    }
#endif
                    /* A of input row r of the strip and tap column kx: a[e] is row (pixel)
                       g + 8 * (e & 1), k (input channel) t + 4 * (e >> 1). */
                    const int fa = lt * KC_PS + (wy * RW) * KC_LDC + wx * 16 + lg;
#pragma unroll
                    for (int r = 0; r < RW + 2; ++r)
#pragma unroll
                        for (int kx = 0; kx < 3; ++kx) {
                            uint ab[4], asm_[4];
#pragma unroll
                            for (int e = 0; e < 4; ++e) {
                                const int at = fa + (4 * (e >> 1)) * KC_PS + r * KC_LDC + kx + 8 * (e & 1);
#if SPLIT
                                KC_SPLIT(pb[at], ab[e], asm_[e])
#else
                                ab[e] = as_uint(pb[at]);
                                asm_[e] = as_uint(pb[KC_BUF + at]);
#endif
                            }
#pragma unroll
                            for (int ky = 0; ky < 3; ++ky) {
                                const int i = r - ky; /* the output row of the strip that reads it */
                                if (i >= 0 && i < RW) {
                                    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                                    KM_MMA(part, asm_, bf[ky * 3 + kx]);
                                    KM_MMA(part, ab, bf[ky * 3 + kx]);
#pragma unroll
                                    for (int e = 0; e < 4; ++e)
                                        acc[i][e] += part[e];
                                }
                            }
                        }
                }
                /* Lane (g, t): channel q * 4 + t at pixels g and g + 8 of each of its rows. */
                const int c = q * 4 + lt;
                const int o = o_base + min(c, cpg - 1);
                const float cb = conv_bias[o], bi = bias[o], sc = scale[o];
                const float ga = gamma[o] * rstd, be = beta[o];
#pragma unroll
                for (int i = 0; i < RW; ++i)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) {
                        const int oy = ty0 + wy * RW + i, ox = tx0 + wx * 16 + lg + 8 * hh;
                        if (c < cpg && oy < oh && ox < ow) {
                            const float v = (((acc[i][2 * hh] + acc[i][2 * hh + 1]) + cb) + bi) * sc;
                            const float zz = 1.0f / (1.0f + exp(-v));
                            __global float* po = os + ((size_t)c * oh + oy) * ow + ox;
                            if (pass == 0) {
                                const float d = zz - 0.5f;
                                s1 += d;
                                s2 = fma(d, d, s2);
#if !RECOMPUTE
                                *po = zz;
#endif
                            } else {
                                *po = (zz - mu) * ga + be;
                            }
                        }
                    }
            }
        }
        if (pass == 0) {
            red_a[lid] = s1;
            red_b[lid] = s2;
            /* The global fence: pass 2 below reads z that other items stored. */
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            for (int hh = WG / 2; hh > 0; hh >>= 1) {
                if (lid < hh) {
                    red_a[lid] += red_a[lid + hh];
                    red_b[lid] += red_b[lid + hh];
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            const float cnt = (float)cpg * (float)oh * (float)ow;
            const float m1 = red_a[0] / cnt;
            mu = 0.5f + m1;
            const float var = fmax(red_b[0] / cnt - m1 * m1, 0.0f);
            rstd = 1.0f / sqrt(var + eps);
        }
    }
#if !RECOMPUTE
    /* pass 2: the group's block, channel by channel, four loads in flight an item */
    const int plane = oh * ow;
    for (int c = 0; c < cpg; ++c) {
        const float ga = gamma[o_base + c] * rstd, be = beta[o_base + c];
        __global float* pc = os + (size_t)c * plane;
        for (int p = lid; p < plane; p += 4 * WG) {
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (p + u * WG < plane)
                    v[u] = pc[p + u * WG];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (p + u * WG < plane)
                    pc[p + u * WG] = (v[u] - mu) * ga + be;
        }
    }
#endif
#else /* the portable path */
    const int xblocks = (ow + PX - 1) / PX;
    const int tasks = (cpg / CB) * oh * xblocks;

    __global const float* xs = x + (size_t)s * cin * (size_t)h * (size_t)w;
    __global const float* wg_ = weight + (size_t)o_base * cin * 9;
    __global float* os = out + ((size_t)s * cout + o_base) * (size_t)oh * (size_t)ow;
#if WLOCAL
    for (int i = lid; i < cpg * cin * 9; i += WG)
        wl[i] = wg_[i];
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    /* pass 1: z and its shifted sums */
    float s1 = 0.0f, s2 = 0.0f;
    for (int t = lid; t < tasks; t += WG) {
        const int xb = t % xblocks;
        const int oy = (t / xblocks) % oh;
        const int c0 = (t / (xblocks * oh)) * CB;
        const int x0 = xb * PX;
        float z[CB][PX];
        KF_CONV(z, c0, oy, x0)
        for (int cc = 0; cc < CB; ++cc)
            for (int q = 0; q < PX; ++q)
                if (x0 + q < ow) {
                    const float d = z[cc][q] - 0.5f;
                    s1 += d;
                    s2 = fma(d, d, s2);
#if !RECOMPUTE
                    os[((size_t)(c0 + cc) * oh + oy) * ow + x0 + q] = z[cc][q];
#endif
                }
    }
    red_a[lid] = s1;
    red_b[lid] = s2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int hh = WG / 2; hh > 0; hh >>= 1) {
        if (lid < hh) {
            red_a[lid] += red_a[lid + hh];
            red_b[lid] += red_b[lid + hh];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float cnt = (float)cpg * (float)oh * (float)ow;
    const float m1 = red_a[0] / cnt;
    const float mu = 0.5f + m1;
    const float var = fmax(red_b[0] / cnt - m1 * m1, 0.0f);
    const float rstd = 1.0f / sqrt(var + eps);

    /* pass 2: normalise */
    for (int t = lid; t < tasks; t += WG) {
        const int xb = t % xblocks;
        const int oy = (t / xblocks) % oh;
        const int c0 = (t / (xblocks * oh)) * CB;
        const int x0 = xb * PX;
        float z[CB][PX];
#if RECOMPUTE
        KF_CONV(z, c0, oy, x0)
#endif
        for (int cc = 0; cc < CB; ++cc) {
            const int o = o_base + c0 + cc;
            const float ga = gamma[o] * rstd, be = beta[o];
            for (int q = 0; q < PX; ++q)
                if (x0 + q < ow) {
                    __global float* po = os + ((size_t)(c0 + cc) * oh + oy) * ow + x0 + q;
#if RECOMPUTE
                    *po = (z[cc][q] - mu) * ga + be;
#else
                    *po = (*po - mu) * ga + be;
#endif
                }
        }
    }
#endif /* MMA */
}
