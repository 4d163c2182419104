/* team.h: internals of the pinned thread team shared by the team and the jobs that run on it. */
#ifndef HPB_TEAM_H
#define HPB_TEAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "hpb.h"

struct hpb_thread {
    pthread_t tid;
    struct hpb_team *team;
    int idx;
    int cpu_req;       /* CPU asked for */
    int cpu_seen;      /* CPU the thread found itself on after pinning */
    int mask_count;    /* CPUs in its affinity mask after pinning */
    int sense;         /* barrier sense, private to the thread */
    /* stream buffers owned (first touched) by this thread */
    void *map;
    size_t map_len;
    double *arr[3];
    size_t clean[3]; /* leading elements of each array known to hold the initial pattern */
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
    atomic_int bar_count;
    atomic_int bar_sense;
    size_t stream_n; /* elements per array per thread, 0 when not prepared */
};

/* Runs job on every thread of the team and waits for all; returns the first non-zero status. */
int hpb_team_run(struct hpb_team *team, hpb_job_fn job, void *arg);

/* Spin barrier across the team; every timed sample starts here. */
void hpb_team_barrier(struct hpb_thread *th);

/* Unmaps the stream buffers of one thread. */
void hpb_thread_free_buffers(struct hpb_thread *th);

/* Monotonic wall clock in seconds. */
double hpb_now(void);

#endif
