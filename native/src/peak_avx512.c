/* peak_avx512.c: the AVX-512F peak FLOP kernels (512-bit FMA), double and single precision. */
#include "peak.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx512f")))
#define OPAQUE(v) __asm__ volatile("" : "+v"(v))
/* 16 FMA chains: latency 4 x 2 pipes needs 8 on current cores, the rest is margin (32 registers
 * hold them with room to spare); the mix has 12 of each. */
#define FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) \
    X(13) X(14) X(15)
#define MIX_FMA(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define MIX_ADD(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

#define VEC __m512d
#define REAL double
#define LANES 8
#define NAME(op) dp_##op
#define V_SET1(x) _mm512_set1_pd(x)
#define V_FMA(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define V_ADD(a, b) _mm512_add_pd((a), (b))
#define V_OUT(p, v) _mm512_storeu_pd((p), (v))
#include "peak_simd.h"
#undef VEC
#undef REAL
#undef LANES
#undef NAME
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef V_OUT

TARGET static inline void out_ps(double *p, __m512 v)
{
    _mm512_storeu_pd(p, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    _mm512_storeu_pd(p + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
        _mm512_castps_pd(v), 1))));
}

#define VEC __m512
#define REAL float
#define LANES 16
#define NAME(op) sp_##op
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_OUT(p, v) out_ps((p), (v))
#include "peak_simd.h"

const struct hpb_peak_kernel hpb_peak_avx512[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT] = {
    [HPB_DP] = {[HPB_PEAK_FMA] = {dp_fma, {16, 0, 0, 8}},
                [HPB_PEAK_FMA_ADD] = {dp_fma_add, {12, 0, 12, 8}}},
    [HPB_SP] = {[HPB_PEAK_FMA] = {sp_fma, {16, 0, 0, 16}},
                [HPB_PEAK_FMA_ADD] = {sp_fma_add, {12, 0, 12, 16}}},
};
#endif
