/* mma.sync.m16n8k16 with 16-bit operands (KM_HALF 1: half, 2: bfloat16) and FP32 accumulators;
   each operand register holds two elements, the lower k in the low half. */
#if KM_HALF == 1
#define KM_MMA_TYPES "f16.f16"
#else
#define KM_MMA_TYPES "bf16.bf16"
#endif
#define KM_MMA(D, A, B)                                                                              \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." KM_MMA_TYPES ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
                 : "+f"((D)[0]), "+f"((D)[1]), "+f"((D)[2]), "+f"((D)[3])                           \
                 : "r"((A)[0]), "r"((A)[1]), "r"((A)[2]), "r"((A)[3]), "r"((B)[0]), "r"((B)[1]))
