/* peak_simd.h: the peak FLOP kernels, written once and instantiated per ISA and precision by the
 * including file, which defines VEC, REAL, LANES, TARGET, V_SET1, V_FMA, V_ADD, V_OUT, OPAQUE,
 * the chain lists FMA_CHAINS, MIX_FMA, MIX_ADD (X-macros over chain indices) and NAME(op). */

#define DECL(k) VEC a##k = V_SET1((REAL)(k)); OPAQUE(a##k);
#define STEP_FMA(k) a##k = V_FMA(a##k, one, one);
#define STEP_ADD(k) a##k = V_ADD(a##k, one);
#define OUT(k) V_OUT(&out[(k) * LANES], a##k);

/* Independent FMA chains only: at least latency x pipes of them keep every FMA pipe busy. */
TARGET static void NAME(fma)(uint64_t iters, double *out)
{
    VEC one = V_SET1((REAL)1);
    OPAQUE(one);
    FMA_CHAINS(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        FMA_CHAINS(STEP_FMA)
    }
    FMA_CHAINS(OUT)
}

/* FMA chains and add chains in equal numbers (as the registers allow): cores with add pipes
 * beside their FMA pipes run both at once. */
TARGET static void NAME(fma_add)(uint64_t iters, double *out)
{
    VEC one = V_SET1((REAL)1);
    OPAQUE(one);
    MIX_FMA(DECL)
    MIX_ADD(DECL)
    for (uint64_t i = 0; i < iters; i++) {
        MIX_FMA(STEP_FMA)
        MIX_ADD(STEP_ADD)
    }
    MIX_FMA(OUT)
    MIX_ADD(OUT)
}

#undef DECL
#undef STEP_FMA
#undef STEP_ADD
#undef OUT
