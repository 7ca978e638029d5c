/*
 * stencil3d: one Jacobi step of the 3-D 7-point heat stencil on an nx x ny x nz grid (x
 * fastest), the outermost layer copied unchanged:
 *   dst = c0 * src(x, y, z) + c1 * (src(x±1, y, z) + src(x, y±1, z) + src(x, y, z±1))
 *
 * Tunable parameters (-D NAME=value); the defaults are the reference configuration:
 *   BX        work-group size along x                                  [32, 64, 128, 256] ref 32
 *   BY        work-group size along y                                  [1, 2, 4, 8]       ref 4
 *   ZB        planes per work item: each item marches along z over ZB
 *             outputs (2.5-D blocking)                                 [1, 2, 4, 8, 16]   ref 1
 *   QUEUE     with ZB > 1: 1 keeps the column's three z values in
 *             registers as it marches; 0 reloads them                 [0, 1]             ref 0
 *   USE_LOCAL 1: each plane's (BX + 2) x (BY + 2) tile goes through
 *             local memory (x and y neighbours from there)             [0, 1]             ref 0
 *
 * Every configuration adds the same terms in the same order: results are bit-identical.
 * Launch: global = (ceil_div(nx, BX) * BX, ceil_div(ny, BY) * BY, ceil_div(nz, ZB)),
 *         local = (BX, BY, 1).
 */
#pragma OPENCL FP_CONTRACT OFF

#ifndef BX
#define BX 32
#endif
#ifndef BY
#define BY 4
#endif
#ifndef ZB
#define ZB 1
#endif
#ifndef QUEUE
#define QUEUE 0
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0
#endif

#define KF_AT(X, Y, Z) src[((size_t)(Z) * ny + (Y)) * nx + (X)]

__kernel void stencil3d(const int nx, const int ny, const int nz, __global const float* src,
                        __global const float* coef, __global float* dst)
{
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int x = get_global_id(0), y = get_global_id(1);
    const int z0 = get_global_id(2) * ZB;
    const float c0 = coef[0], c1 = coef[1];
    /* Whether (x, y) is an interior column; items outside the grid still take part in the
       barriers. */
    const int inside = x < nx && y < ny;
    const int interior = x > 0 && x < nx - 1 && y > 0 && y < ny - 1;
#if USE_LOCAL
    __local float plane[(BY + 2) * (BX + 2)];
#endif
#if QUEUE
    float below = 0.0f, here = 0.0f, above = 0.0f;
    if (inside && z0 < nz) {
        here = KF_AT(x, y, z0);
        below = z0 > 0 ? KF_AT(x, y, z0 - 1) : here;
    }
#endif
    for (int s = 0; s < ZB; s++) {
        const int z = z0 + s;
        const int zin = z < nz;
#if QUEUE
        if (inside && zin)
            above = z + 1 < nz ? KF_AT(x, y, z + 1) : here;
        const float centre = here;
#else
        const float centre = (inside && zin) ? KF_AT(x, y, z) : 0.0f;
#endif
#if USE_LOCAL
        barrier(CLK_LOCAL_MEM_FENCE);
        const int ox = get_group_id(0) * BX - 1, oy = get_group_id(1) * BY - 1;
        for (int e = ly * BX + lx; e < (BY + 2) * (BX + 2); e += BX * BY) {
            const int r = e / (BX + 2), q = e - r * (BX + 2);
            const int gx = clamp(ox + q, 0, nx - 1), gy = clamp(oy + r, 0, ny - 1);
            plane[e] = zin ? KF_AT(gx, gy, z) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#define KF_XY(DX, DY) plane[(ly + 1 + (DY)) * (BX + 2) + lx + 1 + (DX)]
#else
#define KF_XY(DX, DY) KF_AT(x + (DX), y + (DY), z)
#endif
        if (inside && zin) {
            float v = centre;
            if (interior && z > 0 && z < nz - 1) {
#if QUEUE
                const float zm = below, zp = above;
#else
                const float zm = KF_AT(x, y, z - 1), zp = KF_AT(x, y, z + 1);
#endif
                const float sum = ((((KF_XY(-1, 0) + KF_XY(1, 0)) + KF_XY(0, -1)) + KF_XY(0, 1)) + zm) + zp;
                v = fma(c1, sum, c0 * centre);
            }
            dst[((size_t)z * ny + y) * nx + x] = v;
        }
#if QUEUE
        below = here;
        here = above;
#endif
    }
}
