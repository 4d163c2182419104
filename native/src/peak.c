/* peak.c: peak floating-point throughput: kernel lookup, validation and the timed team job. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include "hpb.h"
#include "peak.h"
#include "team.h"

static const char *const op_names[HPB_PEAK_OP_COUNT] = {"fma", "fma+add", "mul+add"};
static const char *const precision_names[HPB_PRECISION_COUNT] = {"dp", "sp"};

const char *hpb_peak_op_name(int op)
{
    return (op >= 0 && op < HPB_PEAK_OP_COUNT) ? op_names[op] : NULL;
}

const char *hpb_precision_name(int precision)
{
    return (precision >= 0 && precision < HPB_PRECISION_COUNT) ? precision_names[precision] : NULL;
}

static const struct hpb_peak_kernel *lookup(int isa, int precision, int op)
{
    if (precision < 0 || precision >= HPB_PRECISION_COUNT || op < 0 || op >= HPB_PEAK_OP_COUNT)
        return NULL;
    const struct hpb_peak_kernel *k = NULL;
    switch (isa) {
    case HPB_ISA_SCALAR:
        k = &hpb_peak_scalar[precision][op];
        break;
#if defined(__x86_64__)
    case HPB_ISA_AVX2:
        k = &hpb_peak_avx2[precision][op];
        break;
    case HPB_ISA_AVX512:
        k = &hpb_peak_avx512[precision][op];
        break;
#endif
    default:
        return NULL;
    }
    return k->fn ? k : NULL;
}

uint64_t hpb_peak_max_iters(int precision)
{
    /* Chains count in floating point: k + iters must stay exact (24 or 53 significant bits). */
    const int chains = HPB_PEAK_MAX_VALUES / 16;
    return precision == HPB_SP ? (UINT64_C(1) << 24) - chains : (UINT64_C(1) << 53) - chains;
}

int hpb_peak_shape(int isa, int precision, int op, struct hpb_peak_shape *out)
{
    if (!out) return -EINVAL;
    const struct hpb_peak_kernel *k = lookup(isa, precision, op);
    if (!k) return -ENOTSUP;
    *out = k->shape;
    return 0;
}

/* Every lane of chain k must hold k + iters (FMA and add chains) or 1 (multiply chains). */
static int check(const struct hpb_peak_shape *s, uint64_t iters, const double *out)
{
    const int chains = s->fma_chains + s->mul_chains + s->add_chains;
    for (int k = 0; k < chains; k++) {
        /* the scalar kernels put their multiply chains first; vector kernels have none */
        const int counts = k >= s->mul_chains;
        const double want = counts ? (double)k + (double)iters : 1.0;
        for (int l = 0; l < s->lanes; l++)
            if (out[k * s->lanes + l] != want) return 0;
    }
    return 1;
}

int hpb_peak_run(int isa, int precision, int op, uint64_t iters, double *out, int *valid)
{
    if (!out || !valid || iters == 0 || iters > hpb_peak_max_iters(precision)) return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    const struct hpb_peak_kernel *k = lookup(isa, precision, op);
    if (!k) return -ENOTSUP;
    k->fn(iters, out);
    *valid = check(&k->shape, iters, out);
    return 0;
}

struct peak_arg {
    const struct hpb_peak_kernel *k;
    uint64_t iters, calls;
    int reps;
    double *times;
    int *migrated;
};

static int peak_job(struct hpb_thread *th, void *p)
{
    const struct peak_arg *a = p;
    const size_t nactive = (size_t)th->team->nactive;
    double out[HPB_PEAK_MAX_VALUES];
    for (int r = 0; r < a->reps; r++) {
        const size_t at = (size_t)r * nactive + (size_t)th->rank;
        hpb_team_barrier(th);
        const int c0 = sched_getcpu();
        const double t0 = hpb_now();
        for (uint64_t c = 0; c < a->calls; c++) a->k->fn(a->iters, out);
        const double t1 = hpb_now();
        const int c1 = sched_getcpu();
        a->times[at] = check(&a->k->shape, a->iters, out) ? t1 - t0 : -1.0;
        if (a->migrated) a->migrated[at] = c0 != th->cpu_req || c1 != th->cpu_req;
    }
    return 0;
}

int hpb_peak_measure(hpb_team *team, int isa, int precision, int op, uint64_t iters,
                     uint64_t calls, int reps, double *times, int *migrated)
{
    if (!team || iters == 0 || iters > hpb_peak_max_iters(precision) || calls == 0 || reps <= 0 ||
        !times)
        return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    const struct hpb_peak_kernel *k = lookup(isa, precision, op);
    if (!k) return -ENOTSUP;
    struct peak_arg a = {k, iters, calls, reps, times, migrated};
    return hpb_team_run(team, peak_job, &a);
}
