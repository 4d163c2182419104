/* stream.c: per-thread stream buffers (first touch), timed kernel samples and their validation. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "chase.h"
#include "kernels.h"
#include "team.h"

#define HUGE_PAGE (2u << 20)
/* Consecutive arrays of a kernel are separated by this many doubles (1088 B): element i of two
 * arrays then differs in its address bits below 4 KiB (4K aliasing stalls loads behind unrelated
 * stores on x86) and in its cache set, and, since n is a multiple of 64, the arrays start at
 * pattern phases 8 apart, so no two arrays hold the same sequence. */
#define SKEW 136u
/* The pattern repeats every PERIOD elements, and so does every kernel's expected result. */
#define PERIOD 16
/* Array sizes are multiples of this many elements (whole cache lines and SIMD steps). */
#define QUANTUM 64
/* Each thread's buffer starts this many cache lines (times its index in the team, modulo a
 * 4 KiB page) past a 2 MiB boundary. Starting every thread's arrays at the same offset put
 * hyperthreads that share an L1 or L2 at identical set indices, so two working sets that fit
 * the shared cache together evicted each other's lines; likwid-bench's threads, slices of one
 * array, start apart by their slice. 17 lines is odd, so consecutive indices never coincide. */
#define COLOUR_LINES 17u
#define LINES_PER_PAGE 64u

double hpb_stream_scalar(void) { return 3.0; }

/* The initial value of buffer element r: dyadic rationals with few significant bits, so every
 * kernel result and every partial sum up to 2^40 elements is exact in double and validation can
 * demand exact equality; none equals the scalar 3, so a store that did not happen shows. */
static inline double pattern(size_t r) { return 1.0 + 0.125 * (double)(r % PERIOD); }

#define MAX_DIRTY 8

/* The stream buffer a thread owns (first touched), and what it holds. */
struct stream_state {
    void *map; /* the mapping (a huge page of slack for alignment) */
    size_t map_len;
    double *buf;
    size_t n;       /* elements per array it was prepared for, 0 when not prepared */
    size_t touched; /* elements [0, touched) were written at least once */
    struct { size_t lo, hi; } dirty[MAX_DIRTY]; /* intervals not holding the pattern */
    int ndirty;
    double last_sum; /* the sum kernel's last result (keeps it live; validated) */
};

static void release_stream(void *state)
{
    struct stream_state *s = state;
    if (s->map) munmap(s->map, s->map_len);
}

static const struct hpb_state_kind stream_kind = {"stream buffer", sizeof(struct stream_state),
                                                  release_stream};

/* Where a kernel's arrays of n elements start in the thread's buffer (in elements, -1 = none),
 * and where its last array ends. One buffer serves every kernel: the working set of each kernel
 * is what it touches, and memory first touched for one kernel is reused by the next. */
struct layout {
    ptrdiff_t x, y, dst;
    size_t end;
};

static struct layout layout_of(int kernel, size_t n)
{
    /* the arrays in buffer order: x, then y (the loads), then dst (the store) */
    const hpb_kernel_shape *k = hpb_kernel_shape_of(kernel);
    struct layout l = {-1, -1, -1, 0};
    size_t slot = 0;
    if (k->loads >= 1) l.x = (ptrdiff_t)(slot++ * (n + SKEW));
    if (k->loads >= 2) l.y = (ptrdiff_t)(slot++ * (n + SKEW));
    if (k->stores >= 1) l.dst = (ptrdiff_t)(slot++ * (n + SKEW));
    l.end = slot * (n + SKEW) - SKEW;
    return l;
}

static size_t buffer_elems(size_t n) { return 3 * (n + SKEW); }

static void fill_pattern(double *buf, size_t from, size_t to)
{
    double tab[PERIOD];
    for (size_t j = 0; j < PERIOD; j++) tab[j] = pattern(j);
    size_t i = from;
    for (; i < to && i % PERIOD != 0; i++) buf[i] = tab[i % PERIOD];
    for (; i + PERIOD <= to; i += PERIOD)
        for (size_t j = 0; j < PERIOD; j++) buf[i + j] = tab[j];
    for (; i < to; i++) buf[i] = tab[i % PERIOD];
}

/* Restores the pattern on the dirty intervals that meet [0, end). */
static void clean_upto(struct stream_state *s, size_t end)
{
    int keep = 0;
    for (int k = 0; k < s->ndirty; k++) {
        size_t lo = s->dirty[k].lo, hi = s->dirty[k].hi;
        if (lo < end) {
            fill_pattern(s->buf, lo, hi < end ? hi : end);
            if (hi <= end) continue;
            lo = end;
        }
        s->dirty[keep].lo = lo;
        s->dirty[keep].hi = hi;
        keep++;
    }
    s->ndirty = keep;
}

static void mark_dirty(struct stream_state *s, size_t lo, size_t hi)
{
    if (s->ndirty == MAX_DIRTY) { /* too many: one interval covering them all */
        for (int k = 0; k < s->ndirty; k++) {
            if (s->dirty[k].lo < lo) lo = s->dirty[k].lo;
            if (s->dirty[k].hi > hi) hi = s->dirty[k].hi;
        }
        s->ndirty = 0;
    }
    s->dirty[s->ndirty].lo = lo;
    s->dirty[s->ndirty].hi = hi;
    s->ndirty++;
}

struct prepare_arg {
    size_t n;
    int huge, node;
};

static int prepare_job(struct hpb_thread *th, void *p)
{
    const struct prepare_arg *arg = p;
    struct stream_state *s = hpb_thread_state(th, &stream_kind);
    if (!s) return -ENOMEM;
    release_stream(s);
    *s = (struct stream_state){0};
    const size_t colour = (size_t)th->idx * COLOUR_LINES % LINES_PER_PAGE * (64 / sizeof(double));
    size_t len = (buffer_elems(arg->n) + colour) * sizeof(double) + HUGE_PAGE;
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return -ENOMEM;
    s->map = map;
    s->map_len = len;
    uintptr_t base = ((uintptr_t)map + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (arg->huge) madvise((void *)base, len - (base - (uintptr_t)map), MADV_HUGEPAGE);
    /* before the first touch, so every page lands on the node asked for */
    int rc = arg->node >= 0 ? hpb_bind_memory(map, len, arg->node) : 0;
    if (rc != 0) return rc;
    s->buf = (double *)base + colour;
    s->n = arg->n;
    return 0;
}

int hpb_stream_prepare(hpb_team *team, size_t n, int huge, int node)
{
    if (!team || n == 0 || n % QUANTUM != 0 || n > SIZE_MAX / 64) return -EINVAL;
    struct prepare_arg arg = {n, huge, node};
    int rc = hpb_team_run(team, prepare_job, &arg);
    if (rc != 0) /* every thread's buffer or none */
        for (int i = 0; i < team->n; i++) {
            struct stream_state *s = hpb_thread_state_find(&team->th[i], &stream_kind);
            if (s) s->n = 0;
        }
    return rc;
}

struct begin_arg {
    int kernel;
    size_t n;
};

/* The owner thread writes the pattern, so new pages are first touched by the thread that uses
 * them; the output array is restored too, so a store that did not happen cannot pass. */
static int begin_job(struct hpb_thread *th, void *p)
{
    const struct begin_arg *b = p;
    struct stream_state *s = hpb_thread_state_find(th, &stream_kind);
    struct layout l = layout_of(b->kernel, b->n);
    clean_upto(s, l.end < s->touched ? l.end : s->touched);
    if (s->touched < l.end) {
        fill_pattern(s->buf, s->touched, l.end);
        s->touched = l.end;
    }
    if (l.dst >= 0) mark_dirty(s, (size_t)l.dst, (size_t)l.dst + b->n);
    return 0;
}

/* Whether the buffers of the active threads of rank >= from_rank were prepared for at least n
 * elements per array. */
static int check_n_from(const hpb_team *team, int kernel, size_t n, int from_rank)
{
    if (!team || kernel < 0 || kernel >= HPB_KERNEL_COUNT || n == 0 || n % QUANTUM != 0)
        return 0;
    for (int i = 0; i < team->n; i++) {
        if (team->th[i].rank < from_rank) continue;
        const struct stream_state *s = hpb_thread_state_find(&team->th[i], &stream_kind);
        if (!s || n > s->n) return 0;
    }
    return 1;
}

static int check_n(const hpb_team *team, int kernel, size_t n)
{
    return check_n_from(team, kernel, n, 0);
}

int hpb_stream_begin(hpb_team *team, int kernel, size_t n)
{
    if (!check_n(team, kernel, n)) return -EINVAL;
    struct begin_arg arg = {kernel, n};
    return hpb_team_run(team, begin_job, &arg);
}

struct measure_arg {
    int kernel, stores;
    hpb_kernel_fn fn;
    size_t n, inner;
    int reps;
    double *times;
};

static double *at(struct stream_state *s, ptrdiff_t off) { return off < 0 ? NULL : s->buf + off; }

static int measure_job(struct hpb_thread *th, void *p)
{
    const struct measure_arg *m = p;
    struct stream_state *st = hpb_thread_state_find(th, &stream_kind);
    struct layout l = layout_of(m->kernel, m->n);
    double *dst = at(st, l.dst);
    const double *x = at(st, l.x);
    const double *y = at(st, l.y);
    const double s = hpb_stream_scalar();
    const size_t nactive = (size_t)th->team->nactive;
    double sum = 0.0;
    for (int r = 0; r < m->reps; r++) {
        hpb_team_barrier(th);
        int c0 = sched_getcpu();
        double t0 = hpb_now();
        for (size_t it = 0; it < m->inner; it++) sum = m->fn(dst, x, y, m->n, s);
        if (m->stores == HPB_STORES_NT) hpb_store_fence();
        double t1 = hpb_now();
        int c1 = sched_getcpu();
        m->times[(size_t)r * nactive + (size_t)th->rank] = t1 - t0;
        if (c0 != th->cpu_req || c1 != th->cpu_req) th->migrated++;
    }
    st->last_sum = sum;
    return 0;
}

int hpb_stream_measure(hpb_team *team, int kernel, int isa, int stores, size_t n, size_t inner,
                       int reps, double *times, int *migrations)
{
    if (!check_n(team, kernel, n) || !times || reps <= 0 || inner == 0) return -EINVAL;
    if (!hpb_isa_supported(isa)) return -ENOTSUP;
    hpb_kernel_fn fn = hpb_kernel_lookup(kernel, isa, stores);
    if (!fn) return -ENOTSUP;
    for (int i = 0; i < team->n; i++) team->th[i].migrated = 0;
    struct measure_arg arg = {kernel, stores, fn, n, inner, reps, times};
    int rc = hpb_team_run(team, measure_job, &arg);
    if (migrations) {
        *migrations = 0;
        for (int i = 0; i < team->n; i++) *migrations += team->th[i].migrated;
    }
    return rc;
}

int hpb_stream_buffer(const hpb_team *team, int thread, uintptr_t *addr, size_t *len)
{
    if (!team || thread < 0 || thread >= team->n || !addr || !len) return -EINVAL;
    const struct stream_state *s = hpb_thread_state_find(&team->th[thread], &stream_kind);
    if (!s || !s->buf || s->touched == 0) return -EINVAL;
    *addr = (uintptr_t)s->buf;
    *len = s->touched * sizeof(double);
    return 0;
}

struct loaded_arg {
    int kernel;
    hpb_kernel_fn fn;
    size_t n, loads;
    atomic_int stop;
    double *chase_seconds;
    double *seconds;   /* per active thread; index 0 unused */
    uint64_t *passes;  /* per active thread; index 0 unused */
};

/* The first selected thread chases its ring while the others stream until it is done. */
static int loaded_job(struct hpb_thread *th, void *p)
{
    struct loaded_arg *a = p;
    struct hpb_chase_ring *ring = th->rank == 0 ? hpb_chase_ring_of(th) : NULL;
    if (th->rank == 0 && (!ring || !ring->start)) return -EINVAL;
    hpb_team_barrier(th);
    double t0 = hpb_now();
    if (th->rank == 0) {
        ring->start = hpb_chase_walk(ring->start, a->loads);
        *a->chase_seconds = hpb_now() - t0;
        atomic_store_explicit(&a->stop, 1, memory_order_release);
        return 0;
    }
    struct stream_state *s = hpb_thread_state_find(th, &stream_kind);
    struct layout l = layout_of(a->kernel, a->n);
    uint64_t passes = 0;
    double sum = 0.0;
    while (!atomic_load_explicit(&a->stop, memory_order_acquire)) {
        sum = a->fn(at(s, l.dst), at(s, l.x), at(s, l.y), a->n, hpb_stream_scalar());
        passes++;
    }
    s->last_sum = sum;
    a->seconds[th->rank] = hpb_now() - t0;
    a->passes[th->rank] = passes;
    return 0;
}

int hpb_loaded_latency(hpb_team *team, size_t loads, int kernel, int isa, size_t n,
                       double *chase_seconds, double *seconds, uint64_t *passes)
{
    if (!team || loads == 0 || loads % 16 != 0 || !chase_seconds || !seconds || !passes ||
        (team->nactive > 1 && !check_n_from(team, kernel, n, 1)))
        return -EINVAL;
    hpb_kernel_fn fn = hpb_kernel_lookup(kernel, isa, HPB_STORES_REGULAR);
    if (!fn || !hpb_isa_supported(isa)) return -ENOTSUP;
    struct loaded_arg a = {kernel, fn, n, loads, 0, chase_seconds, seconds, passes};
    atomic_init(&a.stop, 0);
    for (int i = 0; i < team->nactive; i++) {
        seconds[i] = 0.0;
        passes[i] = 0;
    }
    return hpb_team_run(team, loaded_job, &a);
}

struct check_arg {
    int kernel;
    size_t n;
    double *err; /* one per active thread */
};

/* The larger of two errors; a NaN anywhere stays NaN, so a broken result cannot hide. */
static double worse(double w, double e) { return (isnan(w) || isnan(e)) ? NAN : fmax(w, e); }

static double rel_err(double got, double want)
{
    double d = fabs(got - want);
    return want != 0.0 ? d / fabs(want) : d;
}

/* The expected output element i (mod PERIOD) of `kernel`, computed from the closed-form
 * pattern at the input arrays' offsets, not from the arrays themselves. */
static double expected(int kernel, const struct layout *l, size_t i)
{
    const double s = hpb_stream_scalar();
    const double x = l->x >= 0 ? pattern((size_t)l->x + i) : 0.0;
    const double y = l->y >= 0 ? pattern((size_t)l->y + i) : 0.0;
    switch (kernel) {
    case HPB_KERNEL_COPY: return x;
    case HPB_KERNEL_SCALE: return s * x;
    case HPB_KERNEL_ADD: return x + y;
    case HPB_KERNEL_TRIAD: return x + s * y;
    case HPB_KERNEL_STORE: return s;
    default: return NAN;
    }
}

/* Counts elements of arr[0, n) that differ from tab[i % PERIOD]; vectorises, so validation
 * runs at memory speed. */
static size_t count_mismatches(const double *arr, const double *tab, size_t n)
{
    size_t bad = 0, i = 0;
    for (; i + PERIOD <= n; i += PERIOD)
        for (size_t j = 0; j < PERIOD; j++) bad += arr[i + j] != tab[j];
    for (; i < n; i++) bad += arr[i] != tab[i % PERIOD];
    return bad;
}

static int check_job(struct hpb_thread *th, void *p)
{
    const struct check_arg *c = p;
    const struct stream_state *s = hpb_thread_state_find(th, &stream_kind);
    struct layout l = layout_of(c->kernel, c->n);
    double worst = 0.0;
    if (l.dst >= 0 || c->kernel == HPB_KERNEL_LOAD) {
        /* the output, or for the load kernel the array it read, which must be intact */
        const ptrdiff_t off = l.dst >= 0 ? l.dst : l.x;
        const double *arr = s->buf + off;
        double tab[PERIOD];
        for (size_t j = 0; j < PERIOD; j++)
            tab[j] = l.dst >= 0 ? expected(c->kernel, &l, j) : pattern((size_t)off + j);
        /* the patterns are exact, so any difference at all is an error; find its size */
        if (count_mismatches(arr, tab, c->n) != 0)
            for (size_t i = 0; i < c->n; i++)
                if (arr[i] != tab[i % PERIOD])
                    worst = worse(worst, rel_err(arr[i], tab[i % PERIOD]));
    }
    if (c->kernel == HPB_KERNEL_SUM) {
        /* the sum kernel's result, in closed form: whole periods of the pattern, then the rest */
        double period_sum = 0.0, want = 0.0;
        for (size_t j = 0; j < PERIOD; j++) period_sum += pattern((size_t)l.x + j);
        for (size_t i = c->n - c->n % PERIOD; i < c->n; i++) want += pattern((size_t)l.x + i);
        want += (double)(c->n / PERIOD) * period_sum;
        worst = worse(worst, rel_err(s->last_sum, want));
    }
    c->err[th->rank] = worst;
    return 0;
}

int hpb_stream_check(hpb_team *team, int kernel, size_t n, double *max_rel_err)
{
    if (!check_n(team, kernel, n) || !max_rel_err) return -EINVAL;
    double err[team->nactive];
    struct check_arg arg = {kernel, n, err};
    int rc = hpb_team_run(team, check_job, &arg);
    if (rc != 0) return rc;
    double worst = 0.0;
    for (int i = 0; i < team->nactive; i++) worst = worse(worst, err[i]);
    *max_rel_err = worst;
    return 0;
}
