/* peak_scalar.c: the scalar peak FLOP kernels of the baseline ISA (x86-64 has no FMA there):
 * independent multiply chains beside independent add chains, one flop per operation. */
#include "peak.h"

#if defined(__x86_64__)
#define OPAQUE(v) __asm__ volatile("" : "+x"(v))
#elif defined(__aarch64__)
#define OPAQUE(v) __asm__ volatile("" : "+w"(v))
#else
#define OPAQUE(v) __asm__ volatile("" : "+m"(v))
#endif

/* 7 + 7 chains and the constant fill 15 of the 16 SSE registers. */
#define MUL_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6)
#define ADD_CHAINS(X) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

#define MUL_ADD_KERNEL(name)                                                             \
    static void name(uint64_t iters, double *out)                                             \
    {                                                                                          \
        REAL one = 1;                                                                          \
        OPAQUE(one);                                                                           \
        MUL_CHAINS(DECL)                                                                       \
        ADD_CHAINS(DECL)                                                                       \
        for (uint64_t i = 0; i < iters; i++) {                                                 \
            MUL_CHAINS(STEP_MUL)                                                               \
            ADD_CHAINS(STEP_ADD)                                                               \
        }                                                                                      \
        MUL_CHAINS(OUT)                                                                        \
        ADD_CHAINS(OUT)                                                                        \
    }

#define DECL(k) REAL a##k = (REAL)(k); OPAQUE(a##k);
#define STEP_MUL(k) a##k = a##k * one;
#define STEP_ADD(k) a##k = a##k + one;
#define OUT(k) out[k] = (double)a##k;

#define REAL double
MUL_ADD_KERNEL(dp_mul_add)
#undef REAL
#define REAL float
MUL_ADD_KERNEL(sp_mul_add)
#undef REAL

const struct hpb_peak_kernel hpb_peak_scalar[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT] = {
    [HPB_DP] = {[HPB_PEAK_MUL_ADD] = {dp_mul_add, {0, 7, 7, 1}}},
    [HPB_SP] = {[HPB_PEAK_MUL_ADD] = {sp_mul_add, {0, 7, 7, 1}}},
};
