// two kernels, attributes, comments and directives
#define WG 64
#if VEC > 1
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
int helper(int kernel_x) { return kernel_x; }
/* kernel void fake(int x) {} */
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void first(const int n, __global const float* restrict x, __global float *y, __local float* tmp)
{ y[0] = x[0]; }
kernel void second(constant double* q, unsigned int m, global uchar * volatile p, const ulong z) {}
