/* peak_avx2.c: the AVX2+FMA peak FLOP kernels (256-bit FMA), double and single precision. */
#include "peak.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("avx2,fma")))
#define OPAQUE(v) __asm__ volatile("" : "+x"(v))
/* 16 registers: 12 FMA chains and the constant; the mix has 8 FMA and 7 add chains. */
#define FMA_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define MIX_FMA(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define MIX_ADD(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14)

#define VEC __m256d
#define REAL double
#define LANES 4
#define NAME(op) dp_##op
#define V_SET1(x) _mm256_set1_pd(x)
#define V_FMA(a, b, c) _mm256_fmadd_pd((a), (b), (c))
#define V_ADD(a, b) _mm256_add_pd((a), (b))
#define V_OUT(p, v) _mm256_storeu_pd((p), (v))
#include "peak_simd.h"
#undef VEC
#undef REAL
#undef LANES
#undef NAME
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef V_OUT

TARGET static inline void out_ps(double *p, __m256 v)
{
    _mm256_storeu_pd(p, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    _mm256_storeu_pd(p + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

#define VEC __m256
#define REAL float
#define LANES 8
#define NAME(op) sp_##op
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_OUT(p, v) out_ps((p), (v))
#include "peak_simd.h"

const struct hpb_peak_kernel hpb_peak_avx2[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT] = {
    [HPB_DP] = {[HPB_PEAK_FMA] = {dp_fma, {12, 0, 0, 4}},
                [HPB_PEAK_FMA_ADD] = {dp_fma_add, {8, 0, 7, 4}}},
    [HPB_SP] = {[HPB_PEAK_FMA] = {sp_fma, {12, 0, 0, 8}},
                [HPB_PEAK_FMA_ADD] = {sp_fma_add, {8, 0, 7, 8}}},
};
#endif
