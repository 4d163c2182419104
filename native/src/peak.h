/* peak.h: internal signature of the peak floating-point kernels and their per-ISA tables. */
#ifndef HPB_PEAK_H
#define HPB_PEAK_H

#include <stdint.h>

#include "hpb.h"

/* One call of a peak kernel: every chain runs `iters` dependent updates and leaves its lanes
 * in out[k * lanes ...] as doubles. An FMA chain starts at its index k and computes
 * a = a * 1 + 1, an add chain likewise a = a + 1 (both end at k + iters); a multiply chain
 * starts at 1 and squares it (ends at 1), and the scalar add chains add those 1s. Every 1 is
 * hidden from the compiler, so nothing folds. */
typedef void (*hpb_peak_fn)(uint64_t iters, double *out);

/* A kernel and the shape the caller validates it against. */
struct hpb_peak_kernel {
    hpb_peak_fn fn;
    struct hpb_peak_shape shape;
};

/* Tables indexed [precision][op]; fn == NULL means "not in this variant". */
extern const struct hpb_peak_kernel hpb_peak_scalar[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT];
#if defined(__x86_64__)
extern const struct hpb_peak_kernel hpb_peak_avx2[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT];
extern const struct hpb_peak_kernel hpb_peak_avx512[HPB_PRECISION_COUNT][HPB_PEAK_OP_COUNT];
#endif

/* Most chains of any kernel and most lanes of any vector: the size of an output buffer. */
#define HPB_PEAK_MAX_VALUES (32 * 16)

#endif
