/* The GPU program's host-side parts against stand-ins (test input), with no GPU or driver. The
 * program is included whole, its main renamed.
 *   readings [old]   its NVML sampler thread and the JSON it writes beside each figure, against
 *                    a stand-in NVML ("old": one without the PCIe queries)
 *   schedule REPS SLOW_PRODUCTS SLOW_S FAST_S
 *                    the GEMM's warm-up and timed batches against a simulated GPU whose first
 *                    SLOW_PRODUCTS products take SLOW_S seconds each (its idle clock), the
 *                    rest FAST_S (under load) */
#define main hpb_gpu_main
#include "../../native/cuda/hpb_gpu.cu"
#undef main

static unsigned calls;
static int f_clock(nvml_device, int type, unsigned *v) { return *v = type == 1 ? 1755 : 2619, 0; }
static int f_power(nvml_device, unsigned *mw) { return *mw = 650000, 0; }
static int f_temp(nvml_device, int, unsigned *c) { return *c = 61, 0; }
static int f_reasons(nvml_device, unsigned long long *r) { return *r = calls++ ? 0x4 : 0x1, 0; }
/* the link idles at gen1 and speeds up to gen4 under load; the GPU and slot allow gen5 x16 */
static int f_gen(nvml_device, unsigned *g) { return *g = calls > 1 ? 4 : 1, 0; }
static int f_width(nvml_device, unsigned *w) { return *w = 16, 0; }
static int f_gen_max(nvml_device, unsigned *g) { return *g = 5, 0; }
static int f_width_max(nvml_device, unsigned *w) { return *w = 16, 0; }
/* the link retried twice while it was read (its counter at 7, then 9) */
static unsigned replay_calls;
static int f_replays(nvml_device, unsigned *n) { return *n = 7 + 2 * replay_calls++, 0; }

static int readings(int old)
{
    nvml.clock = f_clock, nvml.power = f_power, nvml.temperature = f_temp;
    nvml.reasons = f_reasons;
    if (!old)
        nvml.pcie_gen = f_gen, nvml.pcie_width = f_width, nvml.pcie_gen_max = f_gen_max,
        nvml.pcie_width_max = f_width_max, nvml.replays = f_replays;
    nvml.ok = 1;
    struct readings r;
    readings_start(&r);
    struct timespec ts = {0, 1000000};
    while (__atomic_load_n(&r.n, __ATOMIC_ACQUIRE) < 3) /* three readings, 5 ms apart */
        nanosleep(&ts, NULL);
    puts(readings_stop(&r));
    return 0;
}

/* A simulated GPU: the products it has run, and how long they took. */
struct sim {
    long done, slow_products;
    double slow_s, fast_s;
};

static double sim_batch(void *ctx, int count)
{
    struct sim *g = (struct sim *)ctx;
    double t = 0;
    for (int k = 0; k < count; k++, g->done++)
        t += g->done < g->slow_products ? g->slow_s : g->fast_s;
    return t;
}

/* The schedule and the simulated seconds of each timed batch, as JSON. */
static int schedule(int reps, long slow_products, double slow_s, double fast_s)
{
    struct sim g = {0, slow_products, slow_s, fast_s};
    struct schedule s = warm_up(sim_batch, &g, reps);
    printf("{\"warm_products\": %ld, \"warm_s\": %.9g, \"count\": %d, \"batches_s\": [",
           s.warm_products, s.warm_s, s.count);
    for (int r = 1; r < reps; r++)
        printf("%s%.9g", r > 1 ? ", " : "", sim_batch(&g, s.count));
    puts("]}");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "readings"))
        return readings(argc > 2);
    if (argc == 6 && !strcmp(argv[1], "schedule"))
        return schedule(atoi(argv[2]), atol(argv[3]), atof(argv[4]), atof(argv[5]));
    fputs("usage: host_parts readings [old] | schedule REPS SLOW_PRODUCTS SLOW_S FAST_S\n",
          stderr);
    return 2;
}
