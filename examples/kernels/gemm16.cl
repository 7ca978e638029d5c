/*
 * gemm16: C = A * B with 16-bit floating-point operands and output, FP32 accumulation
 * (row-major; A is m x k, B is k x n, C is m x n). Shared by `hgemm.cl` (IEEE half: `half*`
 * buffers) and `bgemm.cl` (bfloat16: `ushort*` buffers), which set KM_HALF (1 or 2), include
 * this file, and take their kernel's body from `gemm16_body.cl`.
 *
 * A product of two 16-bit values is exact in FP32, so the result differs from an exact sum only
 * by the FP32 accumulation and the final rounding to 16 bits: the reference and every variant
 * agree to about one unit in the output's last place.
 *
 *   WGX, WGY  work-group size along n and m             [8, 16, 32]     ref 16, 16
 *   TM, TN    rows and columns of C per work item        [1, 2, 4, 8]    ref 1, 1
 *   MMA       0: the portable path (each item sums its TM x TN outputs in k order, as the
 *             reference); 1: the template library's tensor-core path with m16n8k16 products
 *             (NVIDIA, compute capability >= 8.0)      [0, 1]          ref 0
 *   WM        MMA = 1: warps along m in a work-group      [1, 2, 4]       ref 1
 *   TK        MMA = 1: k-tile depth                       [16, 32, 64]    ref 16
 *   STAGES    MMA = 1: k-tiles in flight (cp.async)       [2, 3, 4]       ref 2
 *   FLUSH     MMA = 1: 16-deep steps summed in the tensor
 *             cores before the FP32 add                   [1, 2, 4]       ref 1
 *   RASTER    MMA = 1: work-groups walked in bands of
 *             RASTER tile rows (L2 reuse of B), 0: rows  [0, 4, 16]      ref 0
 *   LDSM      MMA = 1: B's fragments by ldmatrix.trans
 *             (needs WGX * TN % 64 == 0), 0: by lane     [0, 1]          ref 0
 *
 * Launch (2-D): global = (ceil_div(n, WGX * TN) * WGX, ceil_div(m, WGY * TM) * WGY),
 *               local  = (WGX, WGY).
 * The portable path handles any m, n, k; the tensor-core path needs full tiles and 16-byte
 * rows (n % 8 == 0, k % 8 == 0): the annotations' `require` says so.
 */
#ifndef WGX
#define WGX 16
#endif
#ifndef WGY
#define WGY 16
#endif
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#ifndef MMA
#define MMA 0
#endif
#ifndef WM
#define WM 1
#endif
#ifndef TK
#define TK 16
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef FLUSH
#define FLUSH 1
#endif
#ifndef RASTER
#define RASTER 0
#endif

/* Element i of a 16-bit buffer as a float, and a float stored to element i (rounded to
   nearest even). */
#if KM_HALF == 1
#define G16_LOAD(p, i) vload_half((i), (p))
#define G16_STORE(v, i, p) vstore_half_rte((v), (i), (p))
#else
#define G16_LOAD(p, i) as_float((uint)(p)[i] << 16)
#define G16_STORE(v, i, p) ((p)[i] = g16_bf16(v))
/* bfloat16 of x, rounded to nearest even; NaN stays NaN (quiet, its sign kept). */
inline ushort g16_bf16(const float x)
{
    const uint u = as_uint(x);
    if (isnan(x))
        return (ushort)((u >> 16) | 0x40u);
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif

#ifndef LDSM
#define LDSM 0
#endif

#if MMA
#define KM_B_KMAJOR 0
#define KM_LDSM LDSM
#include <kfoundry/tensor_core.cl>
#endif
