/* hgemm: C = A * B in IEEE half precision (FP32 accumulation): see gemm16.cl. */
#define KM_HALF 1
#include "gemm16.cl"

__kernel void hgemm(const int m, const int n, const int k, __global const half* a, __global const half* b, __global half* c)
{
#include "gemm16_body.cl"
}
