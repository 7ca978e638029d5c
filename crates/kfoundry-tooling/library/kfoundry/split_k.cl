/* ---- Split-K: one output tile summed over k by KS_SLICES work-groups ----
 *
 * For products whose output has too few tiles to keep a device busy (a 256 x 256 output is 16
 * tiles of 64 x 64; an H200 has 132 units): the k range is cut into KS_SLICES slices, each
 * computed by a work-group of its own (a kernel's launch dimension 2), and the output tile is
 * their sum. No second launch and no atomics on floats: a work-group stores its partial sums in
 * its slice of a scratch buffer `ws` (KS_SLICES slices of m * n, the output's layout), then
 * counts itself in at its tile (`arrivals`, one counter per tile, scratch too); the last to
 * arrive adds the slices in slice order, so the result does not depend on which one that is,
 * and clears them and the counter. Both buffers are the kernel's `scratch(...)`: all zero when
 * a launch starts, and left all zero (the tuner's proof checks it).
 *
 * A kernel allows KS_SLICES > 1 only where KS_FENCE below is a device-scope fence: NVIDIA's
 * GPUs and CPU devices (`require(SPLITK == 1 || device_nvidia || device_cpu)`).
 *
 * Use, every item of the work-group:
 *     ks_put(ws, slice_len, slice, at, v);      for each of its outputs (at: index in m x n)
 *     if (ks_last(arrivals, tile, &flag, tid))  flag: a __local int of the work-group
 *         ... c[at] = ks_take(ws, slice_len, at) for each of its outputs ...
 * The items must own the same outputs in every slice's work-group (the same tile mapping).
 */
#ifndef KS_SLICES
#error "split_k.cl needs KS_SLICES (the number of k slices)"
#endif

#if defined(cl_nv_pragma_unroll) && !defined(KM_EMULATE)
/* NVIDIA: a fence at device scope (membar.gl, every compute capability; fence.sc.gpu from 7.0),
   so that the partial sums are seen by the last work-group (on another multiprocessor) once it
   has seen the counter. */
#define KS_FENCE() asm volatile("membar.gl;" ::: "memory")
#else
/* Elsewhere OpenCL 1.2's global fence, which orders a work-item's own accesses only: enough on a
   CPU device, whose memory is coherent, but not a promise across a GPU's work-groups. Kernels
   allow SPLITK > 1 on NVIDIA's GPUs and on CPUs only (their `require`). */
#define KS_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

/* Stores the partial sum `v` of output `at` in slice `slice` of `ws`. */
inline void ks_put(__global float* ws, const size_t slice_len, const int slice, const size_t at, const float v)
{
    ws[(size_t)slice * slice_len + at] = v;
}

/* Whether this work-group is the last of its tile's KS_SLICES to arrive (then its items may
   take the sums). Every item calls it, after storing all its partial sums; the last clears the
   tile's counter. */
inline int ks_last(volatile __global uint* arrivals, const int tile, volatile __local int* flag, const int tid)
{
    /* Release: every item's stores fenced, all of them past the barrier, then the counting
       item fences again before it counts (the semaphore pattern of CUTLASS's serial split-K). */
    KS_FENCE();
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (tid == 0) {
        KS_FENCE();
        const int last = atomic_inc(arrivals + tile) == KS_SLICES - 1;
        if (last)
            atomic_xchg(arrivals + tile, 0u);
        /* Acquire: the counting item fences after it has seen the count, before the barrier
           that lets the others read; each of them fences again below. */
        KS_FENCE();
        *flag = last;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    const int last = *flag;
    if (last)
        KS_FENCE();
    return last;
}

/* The sum of output `at` over the slices, in slice order; each slice's element cleared. */
inline float ks_take(volatile __global float* ws, const size_t slice_len, const size_t at)
{
    float sum = 0.0f;
    for (int s = 0; s < KS_SLICES; ++s) {
        const size_t p = (size_t)s * slice_len + at;
        sum += ws[p];
        ws[p] = 0.0f;
    }
    return sum;
}
