/* dslash_avx512.c: the hopping term with AVX-512F (16 slices of single precision a vector). */
#include "dslash.h"

#if defined(__x86_64__)
#define TARGET __attribute__((target("avx512f,fma,prefer-vector-width=512")))
#define NAME(x) avx512_##x
#include "dslash_simd.h"

void hpb_dslash_avx512(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    avx512_sites(a, begin, end);
}
#endif
