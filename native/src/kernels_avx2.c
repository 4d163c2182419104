/* kernels_avx2.c: the AVX2+FMA variant of the streaming kernels (256-bit vectors). */
#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define VEC __m256d
#define W 4
#define TARGET __attribute__((target("avx2,fma")))
#define TABLE hpb_kernels_avx2
#define V_SET1(v) _mm256_set1_pd(v)
#define V_ZERO() _mm256_setzero_pd()
#define V_LOAD(p) _mm256_load_pd(p)
#define V_STORE(p, v) _mm256_store_pd((p), (v))
#define V_STREAM(p, v) _mm256_stream_pd((p), (v))
#define V_ADD(a, b) _mm256_add_pd((a), (b))
#define V_MUL(a, b) _mm256_mul_pd((a), (b))
#define V_FMADD(a, b, c) _mm256_fmadd_pd((a), (b), (c))

TARGET static inline double reduce256(__m256d v)
{
    __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
    lo = _mm_add_pd(lo, hi);
    return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}
#define V_REDUCE(v) reduce256(v)

#include "kernels_simd.h"
#endif
