/* The GPU program's NVML reader against a stand-in NVML (test input): its sampler thread and
 * the JSON it writes beside each figure, with no GPU or driver. The program is included whole,
 * its main renamed. */
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

int main(int argc, char **argv)
{
    nvml.clock = f_clock, nvml.power = f_power, nvml.temperature = f_temp;
    nvml.reasons = f_reasons;
    if (argc < 2) /* "old": an NVML without the PCIe queries */
        nvml.pcie_gen = f_gen, nvml.pcie_width = f_width, nvml.pcie_gen_max = f_gen_max,
        nvml.pcie_width_max = f_width_max, nvml.replays = f_replays;
    nvml.ok = 1;
    (void)argv;
    struct readings r;
    readings_start(&r);
    struct timespec ts = {0, 1000000};
    while (__atomic_load_n(&r.n, __ATOMIC_ACQUIRE) < 3) /* three readings, 5 ms apart */
        nanosleep(&ts, NULL);
    puts(readings_stop(&r));
    return 0;
}
