/* clock.c: the core clock without privileges: timed chains of dependent one-cycle adds. */
#include <errno.h>
#include <stdint.h>

#include "hpb.h"
#include "team.h"

/* 64 dependent adds per iteration: each needs the previous result, so on any core that retires
 * one integer add per cycle per dependency chain, an iteration takes 64 cycles (plus a loop
 * overhead that the caller removes by timing two chain lengths). The addend is a register, not
 * an immediate: recent x86 cores fold chains of immediate adds at rename, which would make the
 * chain run faster than the clock. */
#if defined(__x86_64__)
#define ADD8 "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t" \
             "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
#elif defined(__aarch64__)
#define ADD8 "add %0, %0, %1\n\tadd %0, %0, %1\n\tadd %0, %0, %1\n\tadd %0, %0, %1\n\t" \
             "add %0, %0, %1\n\tadd %0, %0, %1\n\tadd %0, %0, %1\n\tadd %0, %0, %1\n\t"
#endif

struct clock_arg {
    uint64_t iters;
    int reps;
    double *times;
};

static int clock_job(struct hpb_thread *th, void *p)
{
#ifdef ADD8
    const struct clock_arg *c = p;
    const size_t nactive = (size_t)th->team->nactive;
    uint64_t one = 1;
    __asm__ volatile("" : "+r"(one)); /* opaque to the compiler: stays a register */
    for (int r = 0; r < c->reps; r++) {
        uint64_t x = 0;
        hpb_team_barrier(th);
        double t0 = hpb_now();
        for (uint64_t i = 0; i < c->iters; i++)
            __asm__ volatile(ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 : "+r"(x) : "r"(one));
        double t1 = hpb_now();
        c->times[(size_t)r * nactive + (size_t)th->rank] = x == 64 * c->iters ? t1 - t0 : -1.0;
    }
    return 0;
#else
    (void)th;
    (void)p;
    return -ENOTSUP;
#endif
}

int hpb_clock_chain(hpb_team *team, uint64_t iters, int reps, double *times)
{
    if (!team || iters == 0 || reps <= 0 || !times) return -EINVAL;
    struct clock_arg c = {iters, reps, times};
    return hpb_team_run(team, clock_job, &c);
}
