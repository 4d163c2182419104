/* dslash_avx512.c: the hopping term with AVX-512F (16 slices of single precision a vector;
 * Ls = 8 in vectors of 8 and Ls = 12 in vectors of 4, AVX2-encoded as AVX-512F implies). */
#include "dslash.h"

#if defined(__x86_64__)
#define TARGET __attribute__((target("avx512f,fma,prefer-vector-width=512")))
#define NAME(x) avx512_##x
#include "dslash_simd.h"
#define VBYTES 64
#include "dslash_vec.h"
#undef NAME
#define NAME(x) avx512y_##x
#define VBYTES 32
#include "dslash_vec.h"
#undef NAME
#define NAME(x) avx512x_##x
#define VBYTES 16
#include "dslash_vec.h"

void hpb_dslash_avx512(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    if (!avx512_vsites(a, begin, end) && !avx512y_vsites(a, begin, end) &&
        !avx512x_vsites(a, begin, end))
        avx512_sites(a, begin, end);
}
#endif
