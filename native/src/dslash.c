/* dslash.c: the hopping term as a timed team job: each active thread takes an equal share of
 * the sites; a sample is `calls` applications, timed per thread between barriers. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "dslash.h"
#include "hpb.h"
#include "team.h"

static hpb_dslash_fn variant(int isa)
{
    switch (isa) {
    case HPB_ISA_SCALAR:
        return hpb_dslash_scalar;
#if defined(__x86_64__)
    case HPB_ISA_AVX2:
        return hpb_dslash_avx2;
    case HPB_ISA_AVX512:
        return hpb_dslash_avx512;
#endif
    default:
        return NULL;
    }
}

struct dslash_job {
    hpb_dslash_fn fn;
    struct hpb_dslash_args args;
    int calls, reps;
    double *times;
    int *migrated;
};

static int dslash_job(struct hpb_thread *th, void *p)
{
    const struct dslash_job *j = p;
    const size_t n = (size_t)th->team->nactive, r = (size_t)th->rank;
    const size_t begin = j->args.sites * r / n, end = j->args.sites * (r + 1) / n;
    for (int k = 0; k < j->reps; k++) {
        const size_t at = (size_t)k * n + r;
        hpb_team_barrier(th);
        const int c0 = sched_getcpu();
        const double t0 = hpb_now();
        for (int c = 0; c < j->calls; c++) j->fn(&j->args, begin, end);
        const double t1 = hpb_now();
        const int c1 = sched_getcpu();
        j->times[at] = t1 - t0;
        if (j->migrated) j->migrated[at] = c0 != th->cpu_req || c1 != th->cpu_req;
    }
    return 0;
}

int hpb_dslash_measure(hpb_team *team, int isa, const float *gauge_fwd, const float *gauge_bwd,
                       const float *in, float *out, const int32_t *nb, uint64_t sites, int ls,
                       int calls, int reps, double *times, int *migrated)
{
    if (!team || !gauge_fwd || !gauge_bwd || !in || !out || !nb || !times || sites == 0 ||
        ls < 1 || ls > HPB_DSLASH_MAX_LS || calls < 1 || reps < 1)
        return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    const hpb_dslash_fn fn = variant(isa);
    if (!fn) return -ENOTSUP;
    struct dslash_job j = {fn, {gauge_fwd, gauge_bwd, in, out, nb, (size_t)sites, ls}, calls, reps,
                           times, migrated};
    return hpb_team_run(team, dslash_job, &j);
}

struct place_job {
    unsigned char *buf;
    size_t sites, site_bytes;
};

static int place_job(struct hpb_thread *th, void *p)
{
    const struct place_job *j = p;
    const size_t n = (size_t)th->team->nactive, r = (size_t)th->rank;
    const size_t begin = j->sites * r / n, end = j->sites * (r + 1) / n;
    memset(j->buf + begin * j->site_bytes, 0, (end - begin) * j->site_bytes);
    return 0;
}

/* First touch of a field's pages by the threads that will apply the operator to those sites
 * (the same equal shares), so each share lies in its thread's NUMA domain. */
int hpb_dslash_place(hpb_team *team, void *buf, uint64_t sites, uint64_t site_bytes)
{
    if (!team || !buf || sites == 0 || site_bytes == 0) return -EINVAL;
    struct place_job j = {buf, (size_t)sites, (size_t)site_bytes};
    return hpb_team_run(team, place_job, &j);
}
