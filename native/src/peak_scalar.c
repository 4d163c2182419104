/* peak_scalar.c: the scalar peak FLOP kernels of the baseline ISA (x86-64 has no FMA there):
 * multiply chains beside add chains, one flop per operation. */
#include "peak.h"

#if defined(__x86_64__)
#define OPAQUE(v) __asm__ volatile("" : "+x"(v))
#elif defined(__aarch64__)
#define OPAQUE(v) __asm__ volatile("" : "+w"(v))
#else
#define OPAQUE(v) __asm__ volatile("" : "+m"(v))
#endif

/* 8 + 8 chains fill the 16 SSE registers. A multiply chain squares its 1 (a = a * a) and an
 * add chain adds its multiply chain's 1 (d = d + a), so no register holds a constant. Seven of
 * each beside a constant left a fifth of Zen 5's pipes idle: there a chain advances only about
 * every 4.3 cycles when multiplies and adds run together (measured with 7 to 12 chains of
 * each), so 2 pipes of each kind need about 9 chains; 8 reach 90-97 % of the model. */
#define MUL_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
/* add chain k and the multiply chain it adds */
#define ADD_CHAINS(X) X(8, 0) X(9, 1) X(10, 2) X(11, 3) X(12, 4) X(13, 5) X(14, 6) X(15, 7)

#define MUL_ADD_KERNEL(name)                                                             \
    static void name(uint64_t iters, double *out)                                             \
    {                                                                                          \
        MUL_CHAINS(DECL_MUL)                                                                   \
        ADD_CHAINS(DECL_ADD)                                                                   \
        for (uint64_t i = 0; i < iters; i++) {                                                 \
            MUL_CHAINS(STEP_MUL)                                                               \
            ADD_CHAINS(STEP_ADD)                                                               \
        }                                                                                      \
        MUL_CHAINS(OUT)                                                                        \
        ADD_CHAINS(OUT_ADD)                                                                    \
    }

#define DECL_MUL(k) REAL a##k = 1; OPAQUE(a##k);
#define DECL_ADD(k, m) REAL a##k = (REAL)(k); OPAQUE(a##k);
#define STEP_MUL(k) a##k = a##k * a##k;
#define STEP_ADD(k, m) a##k = a##k + a##m;
#define OUT(k) out[k] = (double)a##k;
#define OUT_ADD(k, m) OUT(k)

#define REAL double
MUL_ADD_KERNEL(dp_mul_add)
#undef REAL
#define REAL float
MUL_ADD_KERNEL(sp_mul_add)
#undef REAL

const struct hpb_peak_kernel hpb_peak_scalar[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT] = {
    [HPB_DP] = {[HPB_PEAK_MUL_ADD] = {dp_mul_add, {0, 8, 8, 1}}},
    [HPB_SP] = {[HPB_PEAK_MUL_ADD] = {sp_mul_add, {0, 8, 8, 1}}},
};
