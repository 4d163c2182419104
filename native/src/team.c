/* team.c: the persistent team of pinned threads, its barrier and its job dispatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "team.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

double hpb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hpb_team_barrier(struct hpb_thread *th)
{
    struct hpb_team *t = th->team;
    /* A generation counter rather than a sense flag: threads that sat out earlier jobs (see
     * hpb_team_select) carry no stale state into this one. */
    const int gen = atomic_load_explicit(&t->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&t->bar_count, 1, memory_order_acq_rel) == t->nactive - 1) {
        atomic_store_explicit(&t->bar_count, 0, memory_order_relaxed);
        atomic_store_explicit(&t->bar_gen, gen + 1, memory_order_release);
        return;
    }
    /* Spin for the precise start of a timed region; yield after a while so an oversubscribed
     * team still makes progress. */
    unsigned spins = 0;
    while (atomic_load_explicit(&t->bar_gen, memory_order_acquire) == gen) {
        if (++spins < 100000u) CPU_RELAX();
        else sched_yield();
    }
}

static void *worker(void *p)
{
    struct hpb_thread *th = p;
    struct hpb_team *t = th->team;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    th->cpu_seen = sched_getcpu();
    th->mask_count = pthread_getaffinity_np(pthread_self(), sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : -1;

    unsigned long seen = 0;
    pthread_mutex_lock(&t->mu);
    t->started++;
    pthread_cond_broadcast(&t->cv_done);
    for (;;) {
        while (t->generation == seen && !t->quit) pthread_cond_wait(&t->cv_go, &t->mu);
        if (t->quit) break;
        seen = t->generation;
        hpb_job_fn job = t->job;
        void *arg = t->job_arg;
        pthread_mutex_unlock(&t->mu);
        int rc = th->rank >= 0 ? job(th, arg) : 0;
        pthread_mutex_lock(&t->mu);
        if (rc != 0 && t->job_status == 0) t->job_status = rc;
        if (++t->done == t->n) pthread_cond_broadcast(&t->cv_done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

void *hpb_thread_state(struct hpb_thread *th, const struct hpb_state_kind *kind)
{
    void *found = hpb_thread_state_find(th, kind);
    if (found) return found;
    struct hpb_state_node *node = aligned_alloc(64, (sizeof *node + kind->size + 63) / 64 * 64);
    if (!node) return NULL;
    memset(node, 0, sizeof *node + kind->size);
    node->kind = kind;
    node->next = th->states;
    th->states = node;
    return node->data;
}

void *hpb_thread_state_find(const struct hpb_thread *th, const struct hpb_state_kind *kind)
{
    for (struct hpb_state_node *n = th->states; n; n = n->next)
        if (n->kind == kind) return n->data;
    return NULL;
}

void hpb_thread_free_states(struct hpb_thread *th)
{
    while (th->states) {
        struct hpb_state_node *n = th->states;
        th->states = n->next;
        if (n->kind->release) n->kind->release(n->data);
        free(n);
    }
}

int hpb_team_create(const int *cpus, int nthreads, hpb_team **out)
{
    if (!cpus || nthreads <= 0 || !out) return -EINVAL;
    *out = NULL;
    struct hpb_team *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->th = calloc((size_t)nthreads, sizeof *t->th);
    if (!t->th) {
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv_go, NULL);
    pthread_cond_init(&t->cv_done, NULL);
    atomic_init(&t->bar_count, 0);
    atomic_init(&t->bar_gen, 0);

    int rc = 0;
    int created = 0;
    for (int i = 0; i < nthreads; i++) {
        struct hpb_thread *th = &t->th[i];
        th->team = t;
        th->idx = i;
        th->rank = i;
        th->cpu_req = cpus[i];
        if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE) {
            rc = -EINVAL;
            break;
        }
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        cpu_set_t mask;
        CPU_ZERO(&mask);
        CPU_SET(cpus[i], &mask);
        /* Pinned from birth, so nothing the thread allocates is touched from another CPU. */
        pthread_attr_setaffinity_np(&attr, sizeof mask, &mask);
        int e = pthread_create(&th->tid, &attr, worker, th);
        pthread_attr_destroy(&attr);
        if (e != 0) {
            rc = -e;
            break;
        }
        created++;
    }
    t->n = created;
    t->nactive = created;
    pthread_mutex_lock(&t->mu);
    while (t->started < created) pthread_cond_wait(&t->cv_done, &t->mu);
    pthread_mutex_unlock(&t->mu);
    if (rc != 0) {
        hpb_team_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

void hpb_team_destroy(hpb_team *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->quit = 1;
    pthread_cond_broadcast(&t->cv_go);
    pthread_mutex_unlock(&t->mu);
    for (int i = 0; i < t->n; i++) {
        pthread_join(t->th[i].tid, NULL);
        hpb_thread_free_states(&t->th[i]);
    }
    pthread_cond_destroy(&t->cv_go);
    pthread_cond_destroy(&t->cv_done);
    pthread_mutex_destroy(&t->mu);
    free(t->th);
    free(t);
}

int hpb_team_size(const hpb_team *t) { return t ? t->n : 0; }

int hpb_team_select(hpb_team *t, const int *threads, int n)
{
    if (!t || !threads || n <= 0 || n > t->n) return -EINVAL;
    int rank[t->n];
    for (int i = 0; i < t->n; i++) rank[i] = -1;
    for (int k = 0; k < n; k++) {
        if (threads[k] < 0 || threads[k] >= t->n || rank[threads[k]] >= 0) return -EINVAL;
        rank[threads[k]] = k;
    }
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < t->n; i++) t->th[i].rank = rank[i];
    t->nactive = n;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

int hpb_team_placement(const hpb_team *t, int *cpu, int *mask_count)
{
    if (!t || !cpu || !mask_count) return -EINVAL;
    for (int i = 0; i < t->n; i++) {
        cpu[i] = t->th[i].cpu_seen;
        mask_count[i] = t->th[i].mask_count;
    }
    return 0;
}

int hpb_team_run(struct hpb_team *t, hpb_job_fn job, void *arg)
{
    pthread_mutex_lock(&t->mu);
    t->job = job;
    t->job_arg = arg;
    t->job_status = 0;
    t->done = 0;
    t->generation++;
    pthread_cond_broadcast(&t->cv_go);
    while (t->done < t->n) pthread_cond_wait(&t->cv_done, &t->mu);
    int rc = t->job_status;
    pthread_mutex_unlock(&t->mu);
    return rc;
}
