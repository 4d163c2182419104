/* core_test.c: drives the native core from C alone (no Python), as a C user of hpb.h would. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>

#include "hpb.h"

static int failed, passed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

int main(void)
{
    CHECK(hpb_api_version() == HPB_API_VERSION);
    CHECK(hpb_isa_supported(HPB_ISA_SCALAR) == 1);
    CHECK(hpb_isa_name(HPB_ISA_COUNT) == NULL);

    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    sched_getaffinity(0, sizeof allowed, &allowed);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &allowed)) cpu++;

    hpb_team *team = NULL;
    CHECK(hpb_team_create(&cpu, 1, &team) == 0);
    CHECK(hpb_team_size(team) == 1);
    int seen = -1, mask = -1;
    CHECK(hpb_team_placement(team, &seen, &mask) == 0);
    CHECK(seen == cpu && mask == 1);
    CHECK(hpb_stream_prepare(team, 4096, 0, -1) == 0);
    /* a ring bound to node 0 (every Linux machine has one), read back page by page */
    CHECK(hpb_chase_prepare(team, 1 << 20, 64, 0, 0, 0, HPB_CHASE_RING, 42) == 0);
    uintptr_t ring = 0;
    size_t ring_len = 0;
    int node = -1;
    CHECK(hpb_chase_buffer(team, 0, &ring, &ring_len) == 0);
    CHECK(ring_len == 1 << 20);
    CHECK(hpb_memory_node((const void *)ring, &node) == 0 && node == 0);
    CHECK(hpb_memory_node((const void *)(ring + ring_len - 64), &node) == 0 && node == 0);
    CHECK(hpb_chase_prepare(team, 1 << 20, 64, 0, 0, 4095, HPB_CHASE_RING, 42) == -EINVAL);
    CHECK(hpb_chase_prepare(team, 1 << 20, 64, 0, 0, 0, 7, 42) == -EINVAL);
    for (int k = 0; k < HPB_KERNEL_COUNT; k++) {
        for (int isa = 0; isa < HPB_ISA_COUNT; isa++) {
            if (!hpb_isa_supported(isa)) continue;
            double t[3], err = -1.0;
            int migrated = -1;
            CHECK(hpb_stream_begin(team, k, 4096) == 0);
            CHECK(hpb_stream_check(team, k, 4096, &err) == 0);
            /* before the kernel ran, an output that was reset must not validate */
            if (k != HPB_KERNEL_LOAD && k != HPB_KERNEL_SUM) CHECK(err > 0.0);
            CHECK(hpb_stream_measure(team, k, isa, HPB_STORES_REGULAR, 4096, 2, 3, t,
                                     &migrated) == 0);
            CHECK(t[0] > 0.0 && t[2] > 0.0 && migrated == 0);
            CHECK(hpb_stream_check(team, k, 4096, &err) == 0);
            CHECK(err == 0.0);
        }
    }
    double t;
    CHECK(hpb_stream_measure(team, 0, HPB_ISA_SCALAR, 0, 8192, 1, 1, &t, NULL) == -EINVAL);
    CHECK(hpb_stream_prepare(team, 100, 0, -1) == -EINVAL);
    /* every peak kernel built and supported ends its chains at their analytic values */
    for (int isa = 0; isa < HPB_ISA_COUNT; isa++) {
        for (int prec = 0; prec < HPB_PRECISION_COUNT; prec++) {
            for (int op = 0; op < HPB_PEAK_OP_COUNT; op++) {
                struct hpb_peak_shape shape;
                if (hpb_peak_shape(isa, prec, op, &shape) != 0 || !hpb_isa_supported(isa))
                    continue;
                double out[512], t[2];
                int valid = 0, migrated[2] = {-1, -1};
                CHECK(hpb_peak_run(isa, prec, op, 1000, out, &valid) == 0 && valid == 1);
                CHECK(out[shape.lanes * shape.mul_chains] == shape.mul_chains + 1000.0);
                CHECK(hpb_peak_measure(team, isa, prec, op, 1000, 2, 2, t, migrated) == 0);
                CHECK(t[0] > 0 && t[1] > 0 && migrated[0] == 0);
            }
        }
    }
    CHECK(hpb_peak_run(HPB_ISA_SCALAR, HPB_SP, HPB_PEAK_MUL_ADD, hpb_peak_max_iters(HPB_SP) + 1,
                       (double[512]){0}, &(int){0}) == -EINVAL);
    CHECK(hpb_peak_op_name(HPB_PEAK_OP_COUNT) == NULL && hpb_precision_name(-1) == NULL);
    {
        double t[2];
        int migrated[2] = {-1, -1};
        CHECK(hpb_clock_chain(team, HPB_ISA_SCALAR, 1000, 2, t, migrated) == 0);
        CHECK(t[0] > 0 && migrated[0] == 0);
        CHECK(hpb_clock_chain(team, HPB_ISA_COUNT, 1000, 2, t, NULL) == -ENOTSUP);
    }
    hpb_team_destroy(team);

    int bad = CPU_SETSIZE + 5;
    CHECK(hpb_team_create(&bad, 1, &team) == -EINVAL);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
