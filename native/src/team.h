/* team.h: internals of the pinned thread team shared by the team and the jobs that run on it. */
#ifndef HPB_TEAM_H
#define HPB_TEAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "hpb.h"

#define HPB_MAX_DIRTY 8

struct hpb_thread {
    pthread_t tid;
    struct hpb_team *team;
    int idx;
    int rank;          /* position among the active threads, -1 when not active */
    int cpu_req;       /* CPU asked for */
    int cpu_seen;      /* CPU the thread found itself on after pinning */
    int mask_count;    /* CPUs in its affinity mask after pinning */
    /* the stream buffer owned (first touched) by this thread */
    void *map;
    size_t map_len;
    double *buf;
    size_t touched; /* elements [0, touched) were written at least once */
    struct { size_t lo, hi; } dirty[HPB_MAX_DIRTY]; /* intervals not holding the pattern */
    int ndirty;
    /* the pointer-chase ring owned (built, first touched) by this thread */
    void *chase_map;
    size_t chase_len;
    void **chase_start;
    char *chase_base;
    size_t chase_lines, chase_stride;
    int chase_huge;
    int chase_node; /* NUMA node the ring is bound to, -1: first touch */
    double last_sum;
    int migrated;
};

typedef int (*hpb_job_fn)(struct hpb_thread *th, void *arg);

struct hpb_team {
    int n;
    struct hpb_thread *th;
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    unsigned long generation;
    int started, done, quit;
    hpb_job_fn job;
    void *job_arg;
    int job_status;
    int nactive;       /* threads taking part in jobs, in hpb_team_select's order */
    atomic_int bar_count;
    atomic_int bar_gen;
    size_t stream_n; /* elements per array per thread, 0 when not prepared */
};

/* Runs job on every thread of the team and waits for all; returns the first non-zero status. */
int hpb_team_run(struct hpb_team *team, hpb_job_fn job, void *arg);

/* Spin barrier across the active threads of the team; every timed sample starts here. */
void hpb_team_barrier(struct hpb_thread *th);

/* Unmaps the stream buffer and the pointer-chase ring of one thread. */
void hpb_thread_free_buffers(struct hpb_thread *th);

/* Follows a pointer-chase ring for `loads` (a multiple of 16) dependent loads; returns where the
 * walk ended, which keeps every load live. */
void **hpb_chase_walk(void **p, size_t loads);

/* Binds [addr, addr+len) to NUMA node `node` (mbind MPOL_BIND, no libnuma needed); 0 or
 * -errno (-EINVAL for a node that does not exist). */
int hpb_bind_memory(void *addr, size_t len, int node);

/* Monotonic wall clock in seconds. */
double hpb_now(void);

#endif
