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

struct apply_job {
    hpb_dslash_fn fn;
    struct hpb_dslash_args args;
    size_t begin, end;
};

static int apply_job(struct hpb_thread *th, void *p)
{
    const struct apply_job *j = p;
    const size_t n = (size_t)th->team->nactive, r = (size_t)th->rank, len = j->end - j->begin;
    j->fn(&j->args, j->begin + len * r / n, j->begin + len * (r + 1) / n);
    return 0;
}

/* One application to the output sites [begin, end) of a field of `sites` sites, shared
 * equally by the team's active threads (the unit a rank's halo-exchanging step is built of:
 * interior sites while the faces travel, then the boundary). */
int hpb_dslash_apply(hpb_team *team, int isa, const float *gauge_fwd, const float *gauge_bwd,
                     const float *in, float *out, const int32_t *nb, uint64_t begin,
                     uint64_t end, int ls)
{
    if (!team || !gauge_fwd || !gauge_bwd || !in || !out || !nb || begin > end || ls < 1 ||
        ls > HPB_DSLASH_MAX_LS)
        return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    const hpb_dslash_fn fn = variant(isa);
    if (!fn) return -ENOTSUP;
    struct apply_job j = {fn, {gauge_fwd, gauge_bwd, in, out, nb, (size_t)end, ls},
                          (size_t)begin, (size_t)end};
    return hpb_team_run(team, apply_job, &j);
}

struct project_job {
    const float *in;
    const int32_t *sites;
    size_t n;
    int ls, mu;
    float sg, *buf;
};

static int project_job(struct hpb_thread *th, void *p)
{
    const struct project_job *j = p;
    const size_t t = (size_t)th->team->nactive, r = (size_t)th->rank;
    const size_t ls = (size_t)j->ls, half = 12 * ls;
    for (size_t k = j->n * r / t; k < j->n * (r + 1) / t; k++) {
        const float *psi = j->in + (size_t)j->sites[k] * 2 * half;
        float *h = j->buf + k * half;
        for (int i = 0; i < 2; i++) {
            const int col = G_COL[j->mu][i], ph = G_PHASE[j->mu][i];
            /* (re, im) of phase * psi[col]: 1, i, -1, -i */
            const float cr = ph == 0 ? 1.0f : ph == 2 ? -1.0f : 0.0f;
            const float ci = ph == 1 ? 1.0f : ph == 3 ? -1.0f : 0.0f;
            for (int c = 0; c < 3; c++) {
                const float *ar = psi + ((size_t)(i * 3 + c) * 2) * ls, *ai = ar + ls;
                const float *br = psi + ((size_t)(col * 3 + c) * 2) * ls, *bi = br + ls;
                float *hr = h + ((size_t)(i * 3 + c) * 2) * ls, *hi = hr + ls;
                for (size_t s = 0; s < ls; s++) {
                    hr[s] = ar[s] + j->sg * (cr * br[s] - ci * bi[s]);
                    hi[s] = ai[s] + j->sg * (cr * bi[s] + ci * br[s]);
                }
            }
        }
    }
    return 0;
}

/* The halo's send buffer of one face: for each of the n sites (indices into `in`), spins 0
 * and 1 of (1 + sign g_mu) in(site), 12 ls floats a site, shared by the team's threads. */
int hpb_dslash_project(hpb_team *team, const float *in, int ls, const int32_t *sites, uint64_t n,
                       int mu, int sign, float *buf)
{
    if (!team || !in || !sites || !buf || ls < 1 || ls > HPB_DSLASH_MAX_LS || mu < 0 || mu > 3 ||
        (sign != 1 && sign != -1))
        return -EINVAL;
    struct project_job j = {in, sites, (size_t)n, ls, mu, (float)sign, buf};
    return hpb_team_run(team, project_job, &j);
}
