/*
 * saxpy: y = a * x + y  (single precision)
 *
 * Reference kernel for kfoundry. Tunable parameters arrive as preprocessor
 * definitions (-D NAME=value); the defaults below are the reference
 * configuration, so the file compiles as-is.
 *
 *   WG      work-group size                      [32, 64, 128, 256]   ref 64
 *   VEC     vector width (vloadN / vstoreN)      [1, 2, 4, 8]         ref 1
 *   ITEMS   vectors handled per work item        1..=8                ref 1
 *   STRIDED 0: an item's ITEMS vectors are contiguous (blocked)
 *           1: they are WG vectors apart, so neighbouring items touch
 *              neighbouring vectors at each step (coalesced)    [0, 1]  ref 0
 *
 * Launch (1-D): global = ceil_div(n, WG * VEC * ITEMS) * WG, local = WG.
 * Every configuration is correct for every n >= 0: the last vectors are
 * guarded and a partial vector is finished element by element.
 *
 * The update is fma(a, x, y), which is correctly rounded, so every
 * configuration produces bit-identical results.
 */

#ifndef WG
#define WG 64
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef ITEMS
#define ITEMS 1
#endif
#ifndef STRIDED
#define STRIDED 0
#endif

#define KF_CAT_(p, q) p##q
#define KF_CAT(p, q) KF_CAT_(p, q)

#if VEC == 1
#define KF_VTYPE float
#define KF_VLOAD(o, p) ((p)[(o)])
#define KF_VSTORE(v, o, p) ((p)[(o)] = (v))
#else
#define KF_VTYPE KF_CAT(float, VEC)
#define KF_VLOAD(o, p) KF_CAT(vload, VEC)((o), (p))
#define KF_VSTORE(v, o, p) KF_CAT(vstore, VEC)((v), (o), (p))
#endif

__kernel void saxpy(const int n, const float a, __global const float* x, __global float* y)
{
    const int lid = (int)get_local_id(0);
    const int grp = (int)get_group_id(0);
    const int nfull = n / VEC; /* vectors lying wholly inside [0, n) */

    for (int it = 0; it < ITEMS; ++it) {
#if STRIDED
        const int vi = grp * (WG * ITEMS) + it * WG + lid;
#else
        const int vi = (grp * WG + lid) * ITEMS + it;
#endif
        if (vi < nfull) {
            const KF_VTYPE xv = KF_VLOAD(vi, x);
            const KF_VTYPE yv = KF_VLOAD(vi, y);
            KF_VSTORE(fma((KF_VTYPE)(a), xv, yv), vi, y);
        } else if (vi == nfull) {
            /* the partial vector at the end (empty when VEC divides n) */
            for (int e = vi * VEC; e < n; ++e) {
                y[e] = fma(a, x[e], y[e]);
            }
        }
    }
}
