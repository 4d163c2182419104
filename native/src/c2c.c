/* c2c.c: core-to-core latency: two pinned threads bounce one cache line between them. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "hpb.h"
#include "team.h"

struct c2c_arg {
    _Alignas(64) atomic_long line; /* the bounced line, alone in its cache line */
    char pad[64 - sizeof(atomic_long)];
    size_t rounds;
    int reps;
    double *times;
};

/* No pause in the spin loops: on some cores a pause costs over 100 cycles and would be
 * measured as latency. The two threads are pinned to distinct CPUs, so spinning is fair. */
static int c2c_job(struct hpb_thread *th, void *p)
{
    struct c2c_arg *c = p;
    const long n = (long)c->rounds;
    for (int r = 0; r < c->reps; r++) {
        if (th->rank == 0) atomic_store_explicit(&c->line, -1, memory_order_release);
        hpb_team_barrier(th);
        if (th->rank == 0) {
            double t0 = hpb_now();
            for (long i = 0; i < n; i++) {
                atomic_store_explicit(&c->line, 2 * i, memory_order_release);
                while (atomic_load_explicit(&c->line, memory_order_acquire) != 2 * i + 1) {
                }
            }
            c->times[r] = hpb_now() - t0;
        } else {
            for (long i = 0; i < n; i++) {
                while (atomic_load_explicit(&c->line, memory_order_acquire) != 2 * i) {
                }
                atomic_store_explicit(&c->line, 2 * i + 1, memory_order_release);
            }
        }
        hpb_team_barrier(th);
    }
    return 0;
}

int hpb_c2c_measure(hpb_team *team, size_t rounds, int reps, double *times)
{
    if (!team || team->nactive != 2 || rounds == 0 || reps <= 0 || !times) return -EINVAL;
    struct c2c_arg *arg = aligned_alloc(64, sizeof *arg);
    if (!arg) return -ENOMEM;
    atomic_init(&arg->line, -1);
    arg->rounds = rounds;
    arg->reps = reps;
    arg->times = times;
    int rc = hpb_team_run(team, c2c_job, arg);
    free(arg);
    return rc;
}
