/* team.h: internals of the pinned thread team shared by the team and the jobs that run on it. */
#ifndef HPB_TEAM_H
#define HPB_TEAM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "hpb.h"

/* Per-thread state owned by one module (the stream buffer, the pointer-chase ring, ...): a
 * module declares its kind once, in its own file, and finds its state on a thread through it;
 * the team frees every state with its kind's release function. No module's fields live in the
 * shared structs, so a new module adds a file, not a field. */
struct hpb_state_kind {
    const char *name;
    size_t size;                  /* bytes of the module's state struct, zeroed when created */
    void (*release)(void *state); /* frees what the state holds (not the state itself) */
};

struct hpb_state_node {
    const struct hpb_state_kind *kind;
    struct hpb_state_node *next;
    _Alignas(64) unsigned char data[];
};

struct hpb_thread {
    pthread_t tid;
    struct hpb_team *team;
    int idx;
    int rank;          /* position among the active threads, -1 when not active */
    int cpu_req;       /* CPU asked for */
    int cpu_seen;      /* CPU the thread found itself on after pinning */
    int mask_count;    /* CPUs in its affinity mask after pinning */
    int migrated;      /* timed samples during which the thread left its CPU (last job) */
    struct hpb_state_node *states; /* the modules' state on this thread, see hpb_thread_state */
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
};

/* Runs job on every thread of the team and waits for all; returns the first non-zero status. */
int hpb_team_run(struct hpb_team *team, hpb_job_fn job, void *arg);

/* Spin barrier across the active threads of the team; every timed sample starts here. */
void hpb_team_barrier(struct hpb_thread *th);

/* The state of `kind` on this thread, created (zeroed) on first use; NULL when out of memory.
 * Only the thread itself (in a job) or the caller between jobs may touch it. */
void *hpb_thread_state(struct hpb_thread *th, const struct hpb_state_kind *kind);

/* The state of `kind` on this thread, or NULL when it has none. */
void *hpb_thread_state_find(const struct hpb_thread *th, const struct hpb_state_kind *kind);

/* Releases and frees every module's state of one thread. */
void hpb_thread_free_states(struct hpb_thread *th);

/* Follows a pointer-chase ring for `loads` (a multiple of 16) dependent loads; returns where the
 * walk ended, which keeps every load live. */
void **hpb_chase_walk(void **p, size_t loads);

/* Binds [addr, addr+len) to NUMA node `node` (mbind MPOL_BIND, no libnuma needed); 0 or
 * -errno (-EINVAL for a node that does not exist). */
int hpb_bind_memory(void *addr, size_t len, int node);

/* Monotonic wall clock in seconds. */
double hpb_now(void);

#endif
