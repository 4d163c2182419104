/* dslash_scalar.c: the hopping term without vector instructions (built with the vectoriser off). */
#include "dslash.h"

#define TARGET
#define NAME(x) scalar_##x
#include "dslash_simd.h"

void hpb_dslash_scalar(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    scalar_sites(a, begin, end);
}
