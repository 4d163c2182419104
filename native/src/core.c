/* core.c: build information, ISA detection and the kernel lookup shared by every variant. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "hpb.h"
#include "kernels.h"

#ifndef HPB_COMPILE_FLAGS
#define HPB_COMPILE_FLAGS "unknown"
#endif
#ifndef HPB_SOURCE_ID
#define HPB_SOURCE_ID "unknown"
#endif

static const char *const isa_names[HPB_ISA_COUNT] = {"scalar", "avx2", "avx512"};
static const hpb_kernel_shape kernel_shapes[HPB_KERNEL_COUNT] = {
    [HPB_KERNEL_COPY] = {"copy", "z = x", 1, 1, 0},
    [HPB_KERNEL_SCALE] = {"scale", "z = s*x", 1, 1, 1},
    [HPB_KERNEL_ADD] = {"add", "z = x + y", 2, 1, 1},
    [HPB_KERNEL_TRIAD] = {"triad", "z = x + s*y", 2, 1, 2},
    [HPB_KERNEL_LOAD] = {"load", "read x", 1, 0, 0},
    [HPB_KERNEL_STORE] = {"store", "z = s", 0, 1, 0},
    [HPB_KERNEL_SUM] = {"sum", "sum += x", 1, 0, 1},
};

const hpb_kernel_shape *hpb_kernel_shape_of(int kernel)
{
    return (kernel >= 0 && kernel < HPB_KERNEL_COUNT) ? &kernel_shapes[kernel] : NULL;
}

int hpb_api_version(void) { return HPB_API_VERSION; }

void hpb_build_info(char *buf, size_t len)
{
    if (!buf || len == 0) return;
#if defined(__clang__)
    snprintf(buf, len, "clang %s; flags: %s", __clang_version__, HPB_COMPILE_FLAGS);
#elif defined(__GNUC__)
    snprintf(buf, len, "gcc %s; flags: %s", __VERSION__, HPB_COMPILE_FLAGS);
#else
    snprintf(buf, len, "unknown compiler; flags: %s", HPB_COMPILE_FLAGS);
#endif
}

const char *hpb_source_id(void) { return HPB_SOURCE_ID; }

int hpb_isa_supported(int isa)
{
    switch (isa) {
    case HPB_ISA_SCALAR:
        return 1;
#if defined(__x86_64__)
    case HPB_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case HPB_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return 0;
    }
}

const char *hpb_isa_name(int isa)
{
    return (isa >= 0 && isa < HPB_ISA_COUNT) ? isa_names[isa] : NULL;
}

const char *hpb_kernel_name(int kernel)
{
    return (kernel >= 0 && kernel < HPB_KERNEL_COUNT) ? kernel_shapes[kernel].name : NULL;
}

hpb_kernel_fn hpb_kernel_lookup(int kernel, int isa, int stores)
{
    if (kernel < 0 || kernel >= HPB_KERNEL_COUNT || (stores != HPB_STORES_REGULAR && stores != HPB_STORES_NT))
        return NULL;
    switch (isa) {
    case HPB_ISA_SCALAR:
        return hpb_kernels_scalar[kernel][stores];
#if defined(__x86_64__)
    case HPB_ISA_AVX2:
        return hpb_kernels_avx2[kernel][stores];
    case HPB_ISA_AVX512:
        return hpb_kernels_avx512[kernel][stores];
#endif
    default:
        return NULL;
    }
}

void hpb_store_fence(void)
{
#if defined(__x86_64__)
    _mm_sfence();
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

int hpb_kernel_has_nt(int kernel, int isa)
{
    return hpb_kernel_lookup(kernel, isa, HPB_STORES_NT) != NULL;
}

int hpb_kernel_apply(int kernel, int isa, int stores, double *dst, const double *x, const double *y,
                     size_t n, double s, double *result)
{
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    hpb_kernel_fn fn = hpb_kernel_lookup(kernel, isa, stores);
    if (!fn) return -EINVAL;
    if (((uintptr_t)dst | (uintptr_t)x | (uintptr_t)y) % 64 != 0) return -EINVAL;
    double r = fn(dst, x, y, n, s);
    if (stores == HPB_STORES_NT) hpb_store_fence();
    if (result) *result = r;
    return 0;
}
