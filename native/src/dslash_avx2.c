/* dslash_avx2.c: the hopping term with AVX2 and FMA (8 slices of single precision a vector). */
#include "dslash.h"

#if defined(__x86_64__)
#define TARGET __attribute__((target("avx2,fma")))
#define NAME(x) avx2_##x
#include "dslash_simd.h"

void hpb_dslash_avx2(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    avx2_sites(a, begin, end);
}
#endif
