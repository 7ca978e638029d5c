/* mma.sync.m16n8k16 with 16-bit operands (KM_HALF 1: half, 2: bfloat16) and FP32 accumulators;
   each operand register holds two elements, the lower k in the low half. KM_MMA0 starts from
   zero accumulators. */
#if KM_HALF == 1
#define KM_MMA_TYPES "f16.f16"
#else
#define KM_MMA_TYPES "bf16.bf16"
#endif
#define KM_MMA(D, A, B)                                                                              \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KM_MMA_TYPES ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                 : "+f"((D)[0]), "+f"((D)[1]), "+f"((D)[2]), "+f"((D)[3])                           \
                 : "r"((A)[0]), "r"((A)[1]), "r"((A)[2]), "r"((A)[3]), "r"((B)[0]), "r"((B)[1]))
#define KM_MMA0(D, A, B)                                                                             \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KM_MMA_TYPES ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};" \
                 : "=f"((D)[0]), "=f"((D)[1]), "=f"((D)[2]), "=f"((D)[3])                           \
                 : "r"((A)[0]), "r"((A)[1]), "r"((A)[2]), "r"((A)[3]), "r"((B)[0]), "r"((B)[1]), "f"(0.0f))
/* ldmatrix.trans: four (X4) or two (X2) 8 x 8 matrices of 16-bit elements from local memory at
   base + at (elements), transposed: lanes 8q to 8q + 7 name the rows of matrix q, and lane
   (g, t) gets column g of its rows 2t (low half) and 2t + 1 in register q. */
#define KM_LDSM_X4T(d, base, at)                                                                     \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"                 \
                 : "=r"((d)[0]), "=r"((d)[1]), "=r"((d)[2]), "=r"((d)[3])                             \
                 : "r"((uint)(size_t)((base) + (at))) : "memory")
#define KM_LDSM_X2T(d, base, at)                                                                     \
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"                       \
                 : "=r"((d)[0]), "=r"((d)[1]) : "r"((uint)(size_t)((base) + (at))) : "memory")
