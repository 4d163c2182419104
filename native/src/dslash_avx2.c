/* dslash_avx2.c: the hopping term with AVX2 and FMA (8 slices of single precision a vector;
 * Ls = 12 in vectors of 4). */
#include "dslash.h"

#if defined(__x86_64__)
#define TARGET __attribute__((target("avx2,fma")))
#define NAME(x) avx2_##x
#include "dslash_simd.h"
#define VBYTES 32
#include "dslash_vec.h"
#undef NAME
#define NAME(x) avx2x_##x
#define VBYTES 16
#include "dslash_vec.h"

void hpb_dslash_avx2(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    if (!avx2_vsites(a, begin, end) && !avx2x_vsites(a, begin, end)) avx2_sites(a, begin, end);
}
#endif
