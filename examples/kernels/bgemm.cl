/* bgemm: C = A * B in bfloat16 (FP32 accumulation; the buffers hold bfloat16 bits): see
   gemm16.cl. */
#define KM_HALF 2
#include "gemm16.cl"

__kernel void bgemm(const int m, const int n, const int k, __global const ushort* a, __global const ushort* b, __global ushort* c)
{
#include "gemm16_body.cl"
}
