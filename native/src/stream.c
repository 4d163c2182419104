/* stream.c: per-thread stream arrays (first touch), timed kernel samples and their validation. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels.h"
#include "team.h"

#define HUGE_PAGE (2u << 20)
/* The arrays of one thread are offset from each other by a little more than a kilobyte, so that
 * element i of the three arrays does not share its address bits below 4 KiB (4K aliasing stalls
 * loads behind unrelated stores on x86) nor its cache set. */
#define ARRAY_SKEW 1088u

double hpb_stream_scalar(void) { return 3.0; }

/* Dyadic rationals with few significant bits: every kernel result and every partial sum up to
 * 2^40 elements is exact in double, so validation can demand exact equality. */
static inline double init_value(int array, size_t i)
{
    switch (array) {
    case 0: return 1.0 + 0.125 * (double)(i & 7);
    case 1: return 2.0 + 0.25 * (double)(i & 3);
    default: return 0.5 + 0.0625 * (double)(i & 15);
    }
}

double hpb_stream_init_value(int array, size_t i) { return init_value(array, i); }

/* STREAM's array roles: copy c=a, scale b=s*c, add c=a+b, triad a=b+s*c; load reads a,
 * store writes a. Index -1 means unused. */
static const int roles[HPB_KERNEL_COUNT][3] = {
    /*             dst  x   y */
    [HPB_KERNEL_COPY] = {2, 0, -1},
    [HPB_KERNEL_SCALE] = {1, 2, -1},
    [HPB_KERNEL_ADD] = {2, 0, 1},
    [HPB_KERNEL_TRIAD] = {0, 1, 2},
    [HPB_KERNEL_LOAD] = {-1, 0, -1},
    [HPB_KERNEL_STORE] = {0, -1, -1},
};

static double *role_array(struct hpb_thread *th, int kernel, int role)
{
    int a = roles[kernel][role];
    return a < 0 ? NULL : th->arr[a];
}

static size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

struct prepare_arg {
    size_t n;
    int huge;
};

/* Writes the initial pattern into elements [from, to) of one array; the array index is a
 * constant in each loop so the compiler vectorises it. */
static void init_range(double *arr, int a, size_t from, size_t to)
{
    switch (a) {
    case 0:
        for (size_t i = from; i < to; i++) arr[i] = init_value(0, i);
        break;
    case 1:
        for (size_t i = from; i < to; i++) arr[i] = init_value(1, i);
        break;
    default:
        for (size_t i = from; i < to; i++) arr[i] = init_value(2, i);
        break;
    }
}

static int prepare_job(struct hpb_thread *th, void *p)
{
    const struct prepare_arg *arg = p;
    hpb_thread_free_buffers(th);
    size_t bytes = round_up(arg->n * sizeof(double), 64);
    size_t len = 3 * (bytes + ARRAY_SKEW) + HUGE_PAGE;
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return -ENOMEM;
    th->map = map;
    th->map_len = len;
    uintptr_t base = round_up((uintptr_t)map, HUGE_PAGE);
    if (arg->huge) madvise((void *)base, len - (base - (uintptr_t)map), MADV_HUGEPAGE);
    for (int a = 0; a < 3; a++) {
        th->arr[a] = (double *)(base + (size_t)a * (bytes + ARRAY_SKEW));
        th->clean[a] = 0;
    }
    return 0;
}

int hpb_stream_prepare(hpb_team *team, size_t n, int huge)
{
    if (!team || n == 0 || n > SIZE_MAX / 32) return -EINVAL;
    struct prepare_arg arg = {n, huge};
    int rc = hpb_team_run(team, prepare_job, &arg);
    team->stream_n = rc == 0 ? n : 0;
    return rc;
}

struct begin_arg {
    int kernel;
    size_t n;
};

/* Restores the initial pattern on the arrays the kernel uses, up to n elements; [0, clean) is
 * known to hold it already. The owner thread writes, so new pages are first touched by it. */
static int begin_job(struct hpb_thread *th, void *p)
{
    const struct begin_arg *b = p;
    for (int r = 0; r < 3; r++) {
        int a = roles[b->kernel][r];
        if (a >= 0 && th->clean[a] < b->n) {
            init_range(th->arr[a], a, th->clean[a], b->n);
            th->clean[a] = b->n;
        }
    }
    int dst = roles[b->kernel][0];
    if (dst >= 0) th->clean[dst] = 0; /* the kernel is about to overwrite it */
    return 0;
}

int hpb_stream_begin(hpb_team *team, int kernel, size_t n)
{
    if (!team || kernel < 0 || kernel >= HPB_KERNEL_COUNT || n == 0 || n > team->stream_n)
        return -EINVAL;
    struct begin_arg arg = {kernel, n};
    return hpb_team_run(team, begin_job, &arg);
}

struct measure_arg {
    int kernel;
    hpb_kernel_fn fn;
    size_t n, inner;
    int reps;
    double *times;
};

static int measure_job(struct hpb_thread *th, void *p)
{
    const struct measure_arg *m = p;
    double *dst = role_array(th, m->kernel, 0);
    const double *x = role_array(th, m->kernel, 1);
    const double *y = role_array(th, m->kernel, 2);
    const double s = hpb_stream_scalar();
    const int nthreads = th->team->n;
    double sum = 0.0;
    for (int r = 0; r < m->reps; r++) {
        hpb_team_barrier(th);
        int c0 = sched_getcpu();
        double t0 = hpb_now();
        for (size_t it = 0; it < m->inner; it++) sum = m->fn(dst, x, y, m->n, s);
        double t1 = hpb_now();
        int c1 = sched_getcpu();
        m->times[(size_t)r * (size_t)nthreads + (size_t)th->idx] = t1 - t0;
        if (c0 != th->cpu_req || c1 != th->cpu_req) th->migrated++;
    }
    th->last_sum = sum;
    return 0;
}

int hpb_stream_measure(hpb_team *team, int kernel, int isa, int stores, size_t n, size_t inner,
                       int reps, double *times, int *migrations)
{
    if (!team || !times || reps <= 0 || inner == 0 || n == 0 || n > team->stream_n) return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    hpb_kernel_fn fn = hpb_kernel_lookup(kernel, isa, stores);
    if (!fn) return -ENOTSUP;
    for (int i = 0; i < team->n; i++) team->th[i].migrated = 0;
    struct measure_arg arg = {kernel, fn, n, inner, reps, times};
    int rc = hpb_team_run(team, measure_job, &arg);
    if (migrations) {
        *migrations = 0;
        for (int i = 0; i < team->n; i++) *migrations += team->th[i].migrated;
    }
    return rc;
}

struct check_arg {
    int kernel;
    size_t n;
    double *err; /* one per thread */
};

/* The larger of two errors; a NaN anywhere stays NaN, so a broken result cannot hide. */
static double worse(double w, double e) { return (isnan(w) || isnan(e)) ? NAN : fmax(w, e); }

static double rel_err(double got, double want)
{
    double d = fabs(got - want);
    return want != 0.0 ? d / fabs(want) : d;
}

/* The expected value of element i of array a after `kernel` ran on freshly initialised arrays,
 * computed from the closed-form initial pattern, not from the arrays themselves. */
static double expected(int kernel, int a, size_t i)
{
    const double s = hpb_stream_scalar();
    if (a != roles[kernel][0]) return hpb_stream_init_value(a, i);
    const int x = roles[kernel][1], y = roles[kernel][2];
    switch (kernel) {
    case HPB_KERNEL_COPY: return hpb_stream_init_value(x, i);
    case HPB_KERNEL_SCALE: return s * hpb_stream_init_value(x, i);
    case HPB_KERNEL_ADD: return hpb_stream_init_value(x, i) + hpb_stream_init_value(y, i);
    case HPB_KERNEL_TRIAD: return hpb_stream_init_value(x, i) + s * hpb_stream_init_value(y, i);
    case HPB_KERNEL_STORE: return s;
    default: return NAN;
    }
}

static int check_job(struct hpb_thread *th, void *p)
{
    const struct check_arg *c = p;
    double worst = 0.0;
    const int dst = roles[c->kernel][0];
    if (dst >= 0) {
        const double *arr = th->arr[dst];
        for (size_t i = 0; i < c->n; i++) {
            const double want = expected(c->kernel, dst, i);
            /* the patterns are exact, so equality is the common case and costs one compare */
            if (arr[i] != want) worst = worse(worst, rel_err(arr[i], want));
        }
    }
    if (c->kernel == HPB_KERNEL_LOAD) {
        double want = 0.0;
        for (size_t i = 0; i < c->n; i++) want += init_value(0, i);
        worst = worse(worst, rel_err(th->last_sum, want));
    }
    c->err[th->idx] = worst;
    return 0;
}

int hpb_stream_check(hpb_team *team, int kernel, size_t n, double *max_rel_err)
{
    if (!team || !max_rel_err || kernel < 0 || kernel >= HPB_KERNEL_COUNT || n == 0 ||
        n > team->stream_n)
        return -EINVAL;
    double err[team->n];
    struct check_arg arg = {kernel, n, err};
    int rc = hpb_team_run(team, check_job, &arg);
    if (rc != 0) return rc;
    double worst = 0.0;
    for (int i = 0; i < team->n; i++) worst = worse(worst, err[i]);
    *max_rel_err = worst;
    return 0;
}
