/* kernels.h: internal signature of the streaming kernels and the per-ISA kernel tables. */
#ifndef HPB_KERNELS_H
#define HPB_KERNELS_H

#include <stddef.h>

#include "hpb.h"

/* One kernel over n elements: dst, x, y are 64-byte aligned; unused arrays may be NULL.
 * Returns the sum for the sum kernel, 0 otherwise. */
typedef double (*hpb_kernel_fn)(double *restrict dst, const double *restrict x,
                                const double *restrict y, size_t n, double s);

/* Tables indexed [kernel][stores]; a NULL entry means "not available in this variant".
 * These tables are the core's only global state. */
extern const hpb_kernel_fn hpb_kernels_scalar[HPB_KERNEL_COUNT][2];
#if defined(__x86_64__)
extern const hpb_kernel_fn hpb_kernels_avx2[HPB_KERNEL_COUNT][2];
extern const hpb_kernel_fn hpb_kernels_avx512[HPB_KERNEL_COUNT][2];
#endif

/* Orders non-temporal stores before what follows (sfence on x86); kernels leave it to callers. */
void hpb_store_fence(void);

/* Returns the kernel for (kernel, isa, stores), or NULL when not built or out of range. */
hpb_kernel_fn hpb_kernel_lookup(int kernel, int isa, int stores);

#endif
