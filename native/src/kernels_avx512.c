/* kernels_avx512.c: the AVX-512F variant of the streaming kernels (512-bit vectors). */
#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define VEC __m512d
#define W 8
#define TARGET __attribute__((target("avx512f")))
#define TABLE hpb_kernels_avx512
#define V_SET1(v) _mm512_set1_pd(v)
#define V_ZERO() _mm512_setzero_pd()
#define V_LOAD(p) _mm512_load_pd(p)
#define V_STORE(p, v) _mm512_store_pd((p), (v))
#define V_STREAM(p, v) _mm512_stream_pd((p), (v))
#define V_ADD(a, b) _mm512_add_pd((a), (b))
#define V_MUL(a, b) _mm512_mul_pd((a), (b))
#define V_FMADD(a, b, c) _mm512_fmadd_pd((a), (b), (c))
#define V_REDUCE(v) _mm512_reduce_add_pd(v)

#include "kernels_simd.h"
#endif
