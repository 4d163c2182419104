/* chase.c: pointer-chase rings (random cyclic permutations of cache lines) and their timing. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "chase.h"
#include "hpb.h"
#include "team.h"

#define HUGE_PAGE (2u << 20)

static void release_ring(void *state)
{
    struct hpb_chase_ring *r = state;
    if (r->map) munmap(r->map, r->len);
}

static const struct hpb_state_kind ring_kind = {"chase ring", sizeof(struct hpb_chase_ring),
                                                release_ring};

struct hpb_chase_ring *hpb_chase_ring_of(const struct hpb_thread *th)
{
    return hpb_thread_state_find(th, &ring_kind);
}

/* xoshiro-style 64-bit generator: fast, seedable, good enough to shuffle. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without modulo bias worth speaking of for n < 2^40. */
static size_t below(uint64_t *s, size_t n) { return (size_t)((splitmix(s) >> 24) % n); }

/* Arrays longer than this are shuffled by buckets (Rao-Sandelius) of about BUCKET elements. */
#define SHUFFLE_BIG ((size_t)1 << 20)
#define BUCKET ((size_t)1 << 16)

static void shuffle(size_t *a, size_t n, uint64_t *s);

/* Rao-Sandelius: each element to a uniformly random bucket (in its order), each bucket
 * shuffled, the buckets one after the other: a uniform permutation, made of sequential passes
 * and cache-sized shuffles, where Fisher-Yates over a large array misses the cache at every
 * swap (0.9 s for 16 Mi lines, a 1 GiB ring, on a Zen 3 guest; 0.3 s so). Returns 0 without
 * the memory for it (the caller shuffles in place). */
static int shuffle_buckets(size_t *a, size_t n, uint64_t *s)
{
    int bits = 0;
    while (bits < 12 && n >> bits > BUCKET) bits++;
    const size_t nb = (size_t)1 << bits;
    size_t *tmp = malloc(n * sizeof *tmp), *at = calloc(nb + 1, sizeof *at),
           *next = malloc(nb * sizeof *next);
    uint16_t *bucket = malloc(n * sizeof *bucket);
    const int ok = tmp && at && next && bucket;
    if (ok) {
        for (size_t i = 0; i < n; i++) {
            bucket[i] = (uint16_t)(splitmix(s) >> (64 - bits));
            at[bucket[i] + 1]++;
        }
        for (size_t b = 0; b < nb; b++) {
            at[b + 1] += at[b];
            next[b] = at[b];
        }
        for (size_t i = 0; i < n; i++) tmp[next[bucket[i]]++] = a[i];
        for (size_t b = 0; b < nb; b++) shuffle(tmp + at[b], at[b + 1] - at[b], s);
        memcpy(a, tmp, n * sizeof *a);
    }
    free(tmp);
    free(at);
    free(next);
    free(bucket);
    return ok;
}

static void shuffle(size_t *a, size_t n, uint64_t *s)
{
    if (n > SHUFFLE_BIG && shuffle_buckets(a, n, s)) return;
    for (size_t i = n; i > 1; i--) {
        size_t j = below(s, i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Appends to order, from *k on, the lines lo..hi-1 of one parity (0: even, 1: odd), shuffled. */
static void visit(size_t *order, size_t *k, size_t lo, size_t hi, size_t parity, uint64_t *s)
{
    size_t first = *k;
    for (size_t i = lo + ((lo & 1) != parity); i < hi; i += 2) order[(*k)++] = i;
    shuffle(order + first, *k - first, s);
}

int hpb_chase_order(size_t lines, size_t group_lines, int kind, uint64_t seed, size_t *order)
{
    if (lines == 0 || !order || (kind != HPB_CHASE_RING && kind != HPB_CHASE_RANDOM))
        return -EINVAL;
    if (group_lines == 0 || group_lines > lines) group_lines = lines;
    size_t groups = (lines + group_lines - 1) / group_lines;
    size_t *gorder = malloc(groups * sizeof *gorder);
    if (!gorder) return -ENOMEM;
    uint64_t s = seed;
    size_t k = 0;
    if (groups == 1) { /* one group: every line in random order */
        for (size_t i = 0; i < lines; i++) order[i] = i;
        shuffle(order, lines, &s);
    } else if (kind == HPB_CHASE_RANDOM) { /* groups in random order, each group's lines too */
        for (size_t g = 0; g < groups; g++) gorder[g] = g;
        shuffle(gorder, groups, &s);
        for (size_t g = 0; g < groups; g++) {
            size_t lo = gorder[g] * group_lines, first = k;
            for (size_t i = lo; i < lines && i < lo + group_lines; i++) order[k++] = i;
            shuffle(order + first, k - first, &s);
        }
    } else {
        /* Groups in random order, the lines of each in random order; the even lines of every
         * group first, then the odd ones (each pass over the groups in its own order). A walk
         * that took a line's 128-byte buddy soon after it would find the buddy in the L2, as
         * the adjacent-line prefetcher fetches it with the line: half the loads of a ring in
         * L3 would be L2 hits. Apart, the buddy is a whole half-ring away, as in a fully random
         * walk. */
        for (size_t parity = 0; parity < 2; parity++) {
            for (size_t g = 0; g < groups; g++) gorder[g] = g;
            shuffle(gorder, groups, &s);
            for (size_t g = 0; g < groups; g++) {
                size_t lo = gorder[g] * group_lines;
                visit(order, &k, lo, lo + group_lines < lines ? lo + group_lines : lines,
                      parity, &s);
            }
        }
    }
    free(gorder);
    return 0;
}

struct chase_arg {
    size_t lines, stride, group_lines;
    int huge, node, kind;
    uint64_t seed;
};

static int chase_prepare_job(struct hpb_thread *th, void *p)
{
    const struct chase_arg *a = p;
    struct hpb_chase_ring *ring = hpb_thread_state(th, &ring_kind);
    if (!ring) return -ENOMEM;
    size_t bytes = a->lines * a->stride;
    size_t len = bytes + HUGE_PAGE;
    /* a smaller ring of the same page kind reuses the mapping: no new first touch */
    if (ring->map && (ring->len < len || ring->huge != a->huge || ring->node != a->node)) {
        munmap(ring->map, ring->len);
        *ring = (struct hpb_chase_ring){0};
    }
    const int fresh = !ring->map;
    if (fresh) {
        void *map = mmap(NULL, len, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED) return -ENOMEM;
        ring->map = map;
        ring->len = len;
        ring->huge = a->huge;
        ring->node = a->node;
        if (a->huge) madvise(map, len, MADV_HUGEPAGE);
        /* before the first touch, so every page lands on the node asked for */
        int rc = a->node >= 0 ? hpb_bind_memory(map, len, a->node) : 0;
        if (rc != 0) return rc;
    }
    char *base = (char *)(((uintptr_t)ring->map + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (fresh) /* first touch in address order: the ring's random writes would fault at random */
        for (size_t at = 0; at < bytes; at += 4096) base[at] = 0;
    size_t *order = malloc(a->lines * sizeof *order);
    if (!order) return -ENOMEM;
    int rc = hpb_chase_order(a->lines, a->group_lines, a->kind, a->seed + (uint64_t)th->rank,
                             order);
    if (rc == 0) {
        /* each line holds the address of the next line of the cycle; the owner writes it */
        for (size_t k = 0; k < a->lines; k++) {
            size_t next = order[(k + 1) % a->lines];
            *(void **)(base + order[k] * a->stride) = base + next * a->stride;
        }
        ring->start = (void **)(base + order[0] * a->stride);
        ring->base = base;
        ring->lines = a->lines;
        ring->stride = a->stride;
    }
    free(order);
    return rc;
}

int hpb_chase_prepare(hpb_team *team, size_t bytes, size_t stride, size_t group_bytes, int huge,
                      int node, int kind, uint64_t seed)
{
    if (!team || stride < sizeof(void *) || stride % sizeof(void *) != 0 || bytes < stride ||
        (kind != HPB_CHASE_RING && kind != HPB_CHASE_RANDOM))
        return -EINVAL;
    struct chase_arg a = {bytes / stride, stride, group_bytes / stride, huge, node, kind, seed};
    return hpb_team_run(team, chase_prepare_job, &a);
}

struct chase_measure_arg {
    size_t loads;
    int reps;
    double *times;
};

/* Sixteen dependent loads per iteration: the loop overhead hides behind the load latency. */
#define STEP p = (void **)*p
void **hpb_chase_walk(void **p, size_t loads)
{
    for (size_t i = 0; i < loads / 16; i++) {
        STEP; STEP; STEP; STEP; STEP; STEP; STEP; STEP;
        STEP; STEP; STEP; STEP; STEP; STEP; STEP; STEP;
    }
    return p;
}
#undef STEP

static int chase_measure_job(struct hpb_thread *th, void *p_)
{
    const struct chase_measure_arg *m = p_;
    struct hpb_chase_ring *ring = hpb_chase_ring_of(th);
    if (!ring || !ring->start) return -EINVAL;
    const size_t nactive = (size_t)th->team->nactive;
    for (int r = 0; r < m->reps; r++) {
        hpb_team_barrier(th);
        double t0 = hpb_now();
        /* each walk continues where the last one ended */
        ring->start = hpb_chase_walk(ring->start, m->loads);
        double t1 = hpb_now();
        m->times[(size_t)r * nactive + (size_t)th->rank] = t1 - t0;
    }
    return 0;
}

int hpb_chase_measure(hpb_team *team, size_t loads, int reps, double *times)
{
    if (!team || loads == 0 || loads % 16 != 0 || reps <= 0 || !times) return -EINVAL;
    struct chase_measure_arg m = {loads, reps, times};
    return hpb_team_run(team, chase_measure_job, &m);
}

struct chase_check_arg {
    size_t max_steps;
    int *ok; /* one per active thread */
};

/* Walks the ring from where the last walk stopped: every pointer must land on a line of this
 * ring, and the walk must come back to its start after exactly `lines` steps, not before. */
static int chase_check_job(struct hpb_thread *th, void *p_)
{
    const struct chase_check_arg *c = p_;
    const struct hpb_chase_ring *ring = hpb_chase_ring_of(th);
    if (!ring || !ring->start) {
        c->ok[th->rank] = 0;
        return 0;
    }
    int ok = 1;
    void **start = ring->start, **p = start;
    const size_t steps = ring->lines < c->max_steps ? ring->lines : c->max_steps;
    for (size_t k = 1; ok && k <= steps; k++) {
        p = (void **)*p;
        uintptr_t off = (uintptr_t)((char *)p - ring->base);
        if ((char *)p < ring->base || off % ring->stride != 0 || off / ring->stride >= ring->lines)
            ok = 0;
        else if (p == start && k != ring->lines)
            ok = 0; /* a shorter cycle: some lines are never visited */
        else if (k == ring->lines && p != start)
            ok = 0;
    }
    c->ok[th->rank] = ok;
    return 0;
}

int hpb_chase_check(hpb_team *team, size_t max_steps, int *ok)
{
    if (!team || max_steps == 0 || !ok) return -EINVAL;
    int each[team->nactive];
    struct chase_check_arg c = {max_steps, each};
    int rc = hpb_team_run(team, chase_check_job, &c);
    if (rc != 0) return rc;
    *ok = 1;
    for (int i = 0; i < team->nactive; i++) *ok = *ok && each[i];
    return 0;
}

int hpb_chase_buffer(const hpb_team *team, int thread, uintptr_t *addr, size_t *len)
{
    if (!team || thread < 0 || thread >= team->n || !addr || !len) return -EINVAL;
    const struct hpb_chase_ring *ring = hpb_chase_ring_of(&team->th[thread]);
    if (!ring || !ring->base) return -EINVAL;
    *addr = (uintptr_t)ring->base;
    *len = ring->lines * ring->stride;
    return 0;
}
