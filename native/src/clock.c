/* clock.c: the core clock without privileges: timed chains of dependent one-cycle adds, alone or
 * with vector FMAs in flight (so the clock under an AVX2 or AVX-512 load shows). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "hpb.h"
#include "team.h"

/* 64 dependent adds per iteration: each needs the previous result, so on any core that retires
 * one integer add per cycle per dependency chain, an iteration takes 64 cycles (plus a loop
 * overhead that the caller removes by timing two chain lengths). The addend is a register, not
 * an immediate: recent x86 cores fold chains of immediate adds at rename, which would make the
 * chain run faster than the clock. */
#if defined(__x86_64__)
#define ADD8(one) "add " one ", %0\n\t" "add " one ", %0\n\t" "add " one ", %0\n\t"            \
                  "add " one ", %0\n\t" "add " one ", %0\n\t" "add " one ", %0\n\t"            \
                  "add " one ", %0\n\t" "add " one ", %0\n\t"
#elif defined(__aarch64__)
#define ADD8(one) "add %0, %0, " one "\n\t" "add %0, %0, " one "\n\t" "add %0, %0, " one "\n\t" \
                  "add %0, %0, " one "\n\t" "add %0, %0, " one "\n\t" "add %0, %0, " one "\n\t" \
                  "add %0, %0, " one "\n\t" "add %0, %0, " one "\n\t"
#endif
#define ADD64(one) ADD8(one) ADD8(one) ADD8(one) ADD8(one) ADD8(one) ADD8(one) ADD8(one) ADD8(one)

typedef uint64_t (*chain_fn)(uint64_t iters);

#ifdef ADD8
static uint64_t chain_scalar(uint64_t iters)
{
    uint64_t x = 0, one = 1;
    __asm__ volatile("" : "+r"(one)); /* opaque to the compiler: stays a register */
    for (uint64_t i = 0; i < iters; i++) __asm__ volatile(ADD64("%1") : "+r"(x) : "r"(one));
    return x;
}
#endif

#if defined(__x86_64__)
/* The same chain with two vector FMAs per eight adds (a quarter of one FMA pipe): enough to put
 * the core under its vector-load frequency rules, too few to delay the chain. The FMA results
 * are dead but the asm keeps them. */
#define FMA2 "vfmadd231pd %4, %4, %1\n\t" "vfmadd231pd %4, %4, %2\n\t"
#define ADD8_FMA2 ADD8("%3") FMA2
#define VECTOR_CHAIN(name, isa_target, VEC, ZERO, ONE)                                         \
    __attribute__((target(isa_target))) static uint64_t name(uint64_t iters)                     \
    {                                                                                          \
        uint64_t x = 0, one = 1;                                                               \
        VEC a = ZERO, b = ZERO, c = ONE; /* non-zero data: power follows data */               \
        __asm__ volatile("" : "+r"(one), "+v"(c));                                            \
        for (uint64_t i = 0; i < iters; i++)                                                   \
            __asm__ volatile(ADD8_FMA2 ADD8_FMA2 ADD8_FMA2 ADD8_FMA2 ADD8_FMA2 ADD8_FMA2     \
                             ADD8_FMA2 ADD8_FMA2                                               \
                             : "+r"(x), "+v"(a), "+v"(b) : "r"(one), "v"(c));                 \
        __asm__ volatile("" : : "v"(a), "v"(b));                                              \
        return x;                                                                              \
    }
VECTOR_CHAIN(chain_avx2, "avx2,fma", __m256d, _mm256_setzero_pd(), _mm256_set1_pd(1.0))
VECTOR_CHAIN(chain_avx512, "avx512f", __m512d, _mm512_setzero_pd(), _mm512_set1_pd(1.0))
#endif

static chain_fn chain_for(int load)
{
    switch (load) {
#ifdef ADD8
    case HPB_ISA_SCALAR:
        return chain_scalar;
#endif
#if defined(__x86_64__)
    case HPB_ISA_AVX2:
        return chain_avx2;
    case HPB_ISA_AVX512:
        return chain_avx512;
#endif
    default:
        return NULL;
    }
}

struct clock_arg {
    chain_fn fn;
    uint64_t iters;
    int reps;
    double *times;
    int *migrated;
};

static int clock_job(struct hpb_thread *th, void *p)
{
    const struct clock_arg *c = p;
    const size_t nactive = (size_t)th->team->nactive;
    for (int r = 0; r < c->reps; r++) {
        const size_t at = (size_t)r * nactive + (size_t)th->rank;
        hpb_team_barrier(th);
        const int c0 = sched_getcpu();
        const double t0 = hpb_now();
        const uint64_t x = c->fn(c->iters);
        const double t1 = hpb_now();
        const int c1 = sched_getcpu();
        c->times[at] = x == 64 * c->iters ? t1 - t0 : -1.0;
        if (c->migrated) c->migrated[at] = c0 != th->cpu_req || c1 != th->cpu_req;
    }
    return 0;
}

int hpb_clock_chain(hpb_team *team, int load, uint64_t iters, int reps, double *times,
                    int *migrated)
{
    if (!team || iters == 0 || reps <= 0 || !times) return -EINVAL;
    chain_fn fn = chain_for(load);
    if (!fn) return -ENOTSUP;
    if (!hpb_isa_supported(load)) return -ENOTSUP;
    struct clock_arg c = {fn, iters, reps, times, migrated};
    return hpb_team_run(team, clock_job, &c);
}
