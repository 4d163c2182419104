/* hpb_gpu.cu: hpcprobe's GPU measurements, one program built on first use with the nvcc found:
 *   info                      the devices as the CUDA runtime sees them
 * (BYTES and N: one size or a comma-separated list, measured in turn)
 *   stream D BYTES REPS       BabelStream's copy, mul, add, triad and dot, BabelStream's byte
 *                             counting, every array checked against host-computed values
 *   gemm D PREC N REPS        C = A B through cuBLAS (loaded at run time), sampled entries of C
 *                             checked against a host reference
 *   copy D DIR BYTES REPS NODE CPUS
 *                             pinned host memory <-> device (h2d, d2h, bidir), the host thread
 *                             bound to CPUS and the buffer to NUMA node NODE (-1, "": as they
 *                             are), both read back; the data checked after the timed copies
 *   p2p D PEER BYTES REPS     device D -> device PEER, checked
 * Each writes JSON lines on stdout: one "sample" line per timed repetition, then the check's
 * verdict, and beside each figure the SM and memory clocks, power, temperature, throttle
 * reasons and PCIe link that NVML (also loaded at run time) read while it ran. cuBLAS and NVML
 * are declared here by their documented C ABI, so the program compiles where only nvcc is
 * installed.
 * Exit codes: 0 done, 1 a check failed or CUDA failed, 2 bad arguments or no such device,
 * 3 out of memory, 4 no usable driver or device. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXIT_CHECK 1
#define EXIT_USAGE 2
#define EXIT_OOM 3
#define EXIT_NODEV 4

/* ---------------------------------------------------------------- output and failures */

static void line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* A JSON string's characters that need escaping, replaced (messages come from CUDA). */
static const char *clean(const char *s)
{
    static char buf[512];
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 1 < sizeof buf; i++)
        buf[j++] = (s[i] == '"' || s[i] == '\\' || (unsigned char)s[i] < 0x20) ? '\'' : s[i];
    buf[j] = 0;
    return buf;
}

static void fail(int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    line("{\"error\": \"%s\", \"code\": %d}", clean(msg), code);
    exit(code);
}

/* A CUDA error is out of memory (3), no driver or device (4), or a failure (1). */
static void cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    int code = EXIT_CHECK;
    if (e == cudaErrorMemoryAllocation)
        code = EXIT_OOM;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
             e == cudaErrorInvalidDevice || e == cudaErrorSystemDriverMismatch ||
             e == cudaErrorCompatNotSupportedOnDevice)
        code = EXIT_NODEV;
    else if (e == cudaErrorUnsupportedPtxVersion) /* a GPU newer than nvcc, a driver older */
        fail(EXIT_NODEV, "%s: the driver cannot compile this program's PTX for the GPU: use an "
             "nvcc that knows the GPU and is no newer than the driver", what);
    fail(code, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
#define CK(call) cuda_ok((call), #call)

/* ---------------------------------------------------------------- NVML, read while measuring */

/* NVML's C ABI as documented (nvml.h): handles are opaque pointers, results are int codes
 * (0 success), clock types NVML_CLOCK_SM 1 and NVML_CLOCK_MEM 2, sensor NVML_TEMPERATURE_GPU 0. */
typedef void *nvml_device;
static struct {
    int (*init)(void);
    int (*by_bus)(const char *, nvml_device *);
    int (*clock)(nvml_device, int, unsigned *);
    int (*power)(nvml_device, unsigned *);
    int (*reasons)(nvml_device, unsigned long long *);
    int (*temperature)(nvml_device, int, unsigned *);
    int (*pcie_gen)(nvml_device, unsigned *), (*pcie_width)(nvml_device, unsigned *);
    int (*pcie_gen_max)(nvml_device, unsigned *), (*pcie_width_max)(nvml_device, unsigned *);
    int (*replays)(nvml_device, unsigned *); /* the PCIe link's replays (retries) since reset */
    int (*energy)(nvml_device, unsigned long long *); /* the board's mJ since the driver loaded */
    nvml_device dev;
    int ok;
    char why[160];
} nvml;

static void nvml_open(int device)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(nvml.why, sizeof nvml.why, "libnvidia-ml.so.1 not loaded");
        return;
    }
    *(void **)&nvml.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml.by_bus = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.clock = dlsym(h, "nvmlDeviceGetClockInfo");
    *(void **)&nvml.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    /* renamed "clocks event reasons" in newer drivers; the old name stays exported */
    *(void **)&nvml.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!nvml.reasons)
        *(void **)&nvml.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&nvml.temperature = dlsym(h, "nvmlDeviceGetTemperature");
    /* the PCIe link as it runs, and the most the GPU and the system both allow */
    *(void **)&nvml.pcie_gen = dlsym(h, "nvmlDeviceGetCurrPcieLinkGeneration");
    *(void **)&nvml.pcie_width = dlsym(h, "nvmlDeviceGetCurrPcieLinkWidth");
    *(void **)&nvml.pcie_gen_max = dlsym(h, "nvmlDeviceGetMaxPcieLinkGeneration");
    *(void **)&nvml.pcie_width_max = dlsym(h, "nvmlDeviceGetMaxPcieLinkWidth");
    *(void **)&nvml.replays = dlsym(h, "nvmlDeviceGetPcieReplayCounter");
    *(void **)&nvml.energy = dlsym(h, "nvmlDeviceGetTotalEnergyConsumption"); /* Volta on */
    if (!nvml.init || !nvml.by_bus || !nvml.clock || nvml.init() != 0) {
        snprintf(nvml.why, sizeof nvml.why, "NVML did not initialise");
        return;
    }
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess ||
        nvml.by_bus(bus, &nvml.dev) != 0) {
        snprintf(nvml.why, sizeof nvml.why, "NVML does not know device %d", device);
        return;
    }
    nvml.ok = 1;
}

#define MAX_READINGS 4096
struct readings {
    unsigned sm[MAX_READINGS], mem[MAX_READINGS], mw[MAX_READINGS], temp[MAX_READINGS];
    unsigned long long reasons; /* every reason seen, ORed */
    unsigned gen, width;        /* the PCIe link's highest generation and width seen */
    unsigned replays0;          /* the link's replay counter at the start */
    int replays_read;
    unsigned long long energy0; /* the board's energy counter at the start (mJ) */
    int energy_read;
    struct timespec t0;         /* when the readings started */
    int n, stop;
    pthread_t thread;
};

static void *sampler(void *arg)
{
    struct readings *r = (struct readings *)arg;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        if (r->n < MAX_READINGS) {
            unsigned sm = 0, mem = 0, mw = 0, t = 0;
            unsigned long long why = 0;
            nvml.clock(nvml.dev, 1, &sm);
            nvml.clock(nvml.dev, 2, &mem);
            if (nvml.power)
                nvml.power(nvml.dev, &mw);
            if (nvml.temperature)
                nvml.temperature(nvml.dev, 0, &t);
            if (nvml.reasons && nvml.reasons(nvml.dev, &why) == 0)
                r->reasons |= why;
            unsigned gen = 0, width = 0;
            if (nvml.pcie_gen && nvml.pcie_gen(nvml.dev, &gen) == 0 && gen > r->gen)
                r->gen = gen;
            if (nvml.pcie_width && nvml.pcie_width(nvml.dev, &width) == 0 && width > r->width)
                r->width = width;
            r->sm[r->n] = sm, r->mem[r->n] = mem, r->mw[r->n] = mw, r->temp[r->n] = t;
            r->n++;
        }
        struct timespec ts = {0, 5000000}; /* every 5 ms */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void readings_start(struct readings *r)
{
    memset(r, 0, sizeof *r);
    if (nvml.ok && nvml.replays && nvml.replays(nvml.dev, &r->replays0) == 0)
        r->replays_read = 1;
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    if (nvml.ok && nvml.energy && nvml.energy(nvml.dev, &r->energy0) == 0)
        r->energy_read = 1;
    if (nvml.ok)
        pthread_create(&r->thread, NULL, sampler, r);
}

static int cmp_u(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

static unsigned median_u(unsigned *v, int n)
{
    qsort(v, n, sizeof *v, cmp_u);
    return v[n / 2];
}

/* Stop reading; the readings as a JSON object (null where NVML could not be read). */
static const char *readings_stop(struct readings *r)
{
    static char out[640];
    if (!nvml.ok) {
        snprintf(out, sizeof out, "{\"nvml\": \"%s\"}", clean(nvml.why));
        return out;
    }
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    pthread_join(r->thread, NULL);
    if (r->n == 0)
        return "{\"nvml\": \"no reading\"}";
    unsigned sm_min = r->sm[0], sm_max = r->sm[0], mw_max = 0, t_max = 0;
    double mw_sum = 0;
    for (int i = 0; i < r->n; i++) {
        sm_min = r->sm[i] < sm_min ? r->sm[i] : sm_min;
        sm_max = r->sm[i] > sm_max ? r->sm[i] : sm_max;
        mw_max = r->mw[i] > mw_max ? r->mw[i] : mw_max;
        t_max = r->temp[i] > t_max ? r->temp[i] : t_max;
        mw_sum += r->mw[i];
    }
    int len = snprintf(
        out, sizeof out,
        "{\"readings\": %d, \"sm_mhz\": %u, \"sm_mhz_min\": %u, \"sm_mhz_max\": %u, "
        "\"mem_mhz\": %u, \"power_w\": %.1f, \"power_w_max\": %.1f, \"temp_c_max\": %u, "
        "\"reasons\": %llu",
        r->n, median_u(r->sm, r->n), sm_min, sm_max, median_u(r->mem, r->n), mw_sum / r->n / 1e3,
        mw_max / 1e3, t_max, r->reasons);
    unsigned gen_max = 0, width_max = 0;
    if (r->gen && r->width && nvml.pcie_gen_max && nvml.pcie_width_max &&
        nvml.pcie_gen_max(nvml.dev, &gen_max) == 0 &&
        nvml.pcie_width_max(nvml.dev, &width_max) == 0)
        len += snprintf(out + len, sizeof out - len,
                        ", \"pcie_gen\": %u, \"pcie_width\": %u, \"pcie_gen_max\": %u, "
                        "\"pcie_width_max\": %u", r->gen, r->width, gen_max, width_max);
    unsigned replays = 0; /* link-level retries while it ran: errors on a marginal link */
    if (r->replays_read && nvml.replays(nvml.dev, &replays) == 0)
        len += snprintf(out + len, sizeof out - len, ", \"pcie_replays\": %u",
                        replays - r->replays0);
    /* the board's energy counter over the readings' time (it updates every 20-100 ms: the
     * caller decides whether that time is long enough for it to count) */
    unsigned long long energy1 = 0;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r->energy_read && nvml.energy(nvml.dev, &energy1) == 0 && energy1 >= r->energy0)
        len += snprintf(out + len, sizeof out - len, ", \"energy_j\": %.3f, \"energy_s\": %.4f",
                        (energy1 - r->energy0) / 1e3,
                        (t1.tv_sec - r->t0.tv_sec) + (t1.tv_nsec - r->t0.tv_nsec) / 1e9);
    snprintf(out + len, sizeof out - len, "}");
    return out;
}

/* Readings from now on only: those taken so far dropped. */
static void readings_restart(struct readings *r)
{
    readings_stop(r);
    readings_start(r);
}

/* A timed measurement: its CUDA events and the NVML readings taken while it runs. */
#define MAX_EVENTS 6
struct timed {
    cudaEvent_t ev[MAX_EVENTS];
    int n;
    struct readings rd;
};

static void timed_start(struct timed *t, int events)
{
    t->n = events;
    for (int k = 0; k < events; k++)
        CK(cudaEventCreate(&t->ev[k]));
    readings_start(&t->rd);
}

/* The readings as readings_stop gives them; the events released. */
static const char *timed_stop(struct timed *t)
{
    const char *env = readings_stop(&t->rd);
    for (int k = 0; k < t->n; k++)
        CK(cudaEventDestroy(t->ev[k]));
    return env;
}

/* Host memory for a check, or exit 3. */
static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p)
        fail(EXIT_OOM, "host memory for the check (%zu bytes)", bytes);
    return p;
}

/* ---------------------------------------------------------------- devices */

/* The number of CUDA devices; no driver, or one that cannot run this program's runtime, said
 * as such, before any other call. A driver older than the runtime but of the same major
 * release runs it (CUDA's minor version compatibility, as this program carries machine code
 * for the GPUs present), so only the runtime's own refusal counts, not the version numbers. */
static int check_driver(void)
{
    int drv = 0, rt = 0, n = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    if (drv == 0)
        fail(EXIT_NODEV, "no NVIDIA driver: libcuda.so.1 was not found or did not load");
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorCallRequiresNewerDriver)
        fail(EXIT_NODEV, "the driver runs CUDA up to %d.%d; this program was built with CUDA "
             "%d.%d, which it cannot run: use an nvcc of the driver's major release, no newer "
             "than it", drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    cuda_ok(e, "cudaGetDeviceCount");
    return n;
}

static void use_device(int device)
{
    int n = check_driver();
    if (device < 0 || device >= n)
        fail(EXIT_USAGE, "device %d does not exist: this node has %d CUDA device(s), 0..%d",
             device, n, n - 1);
    CK(cudaSetDevice(device));
    nvml_open(device);
}

static int attr(enum cudaDeviceAttr a, int device)
{
    int v = 0;
    CK(cudaDeviceGetAttribute(&v, a, device));
    return v;
}

/* Seconds between two recorded events, once the second has completed. */
static double elapsed_s(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    CK(cudaEventSynchronize(to));
    CK(cudaEventElapsedTime(&ms, from, to));
    return ms * 1e-3;
}

/* ---------------------------------------------------------------- BabelStream */

/* BabelStream's start values and scalar; its kernels in double. */
#define START_A 0.1
#define START_B 0.2
#define START_C 0.0
#define SCALAR 0.4
#define TBSIZE 1024

__global__ void k_init(double *a, double *b, double *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] = START_A, b[i] = START_B, c[i] = START_C;
}
__global__ void k_copy(const double *a, double *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i];
}
__global__ void k_mul(double *b, const double *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        b[i] = SCALAR * c[i];
}
__global__ void k_add(const double *a, const double *b, double *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}
__global__ void k_triad(double *a, const double *b, const double *c, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] = b[i] + SCALAR * c[i];
}
/* Each block's partial sum of a.b (a tree in shared memory); the host adds the partials. */
__global__ void k_dot(const double *a, const double *b, double *partial, size_t n)
{
    __shared__ double tb[TBSIZE];
    double s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += a[i] * b[i];
    tb[threadIdx.x] = s;
    for (int off = blockDim.x / 2; off > 0; off /= 2) {
        __syncthreads();
        if (threadIdx.x < off)
            tb[threadIdx.x] += tb[threadIdx.x + off];
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = tb[0];
}

/* Every element of one array against its expected value: the mean relative error. */
static double mean_error(const double *x, size_t n, double gold)
{
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e += fabs(x[i] - gold);
    return e / n / fabs(gold);
}

static int cmd_stream(int device, size_t bytes, int reps)
{
    use_device(device);
    size_t n = bytes / sizeof(double);
    if (n < TBSIZE)
        fail(EXIT_USAGE, "array of %zu bytes: at least %d doubles", bytes, TBSIZE);
    double *a, *b, *c, *partial, *hp;
    int sms = attr(cudaDevAttrMultiProcessorCount, device), blocks = 4 * sms;
    CK(cudaMalloc(&a, n * sizeof(double)));
    CK(cudaMalloc(&b, n * sizeof(double)));
    CK(cudaMalloc(&c, n * sizeof(double)));
    CK(cudaMalloc(&partial, blocks * sizeof(double)));
    CK(cudaMallocHost(&hp, blocks * sizeof(double)));
    k_init<<<blocks, TBSIZE>>>(a, b, c, n);
    CK(cudaDeviceSynchronize());
    const char *names[5] = {"copy", "mul", "add", "triad", "dot"};
    const int arrays[5] = {2, 2, 3, 3, 2}; /* BabelStream: arrays each kernel moves */
    struct timed tm;
    cudaEvent_t *ev = tm.ev;
    timed_start(&tm, 6);
    double sum = 0;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(ev[0]));
        k_copy<<<blocks, TBSIZE>>>(a, c, n);
        CK(cudaEventRecord(ev[1]));
        k_mul<<<blocks, TBSIZE>>>(b, c, n);
        CK(cudaEventRecord(ev[2]));
        k_add<<<blocks, TBSIZE>>>(a, b, c, n);
        CK(cudaEventRecord(ev[3]));
        k_triad<<<blocks, TBSIZE>>>(a, b, c, n);
        CK(cudaEventRecord(ev[4]));
        k_dot<<<blocks, TBSIZE>>>(a, b, partial, n);
        CK(cudaEventRecord(ev[5]));
        CK(cudaMemcpy(hp, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost));
        CK(cudaGetLastError());
        sum = 0;
        for (int i = 0; i < blocks; i++)
            sum += hp[i];
        for (int k = 0; k < 5; k++) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]));
            line("{\"test\": \"stream\", \"kernel\": \"%s\", \"rep\": %d, "
                 "\"array_bytes\": %zu, \"bytes\": %zu, \"seconds\": %.9g}",
                 names[k], r, n * sizeof(double), (size_t)arrays[k] * n * sizeof(double),
                 ms * 1e-3);
        }
    }
    const char *env = timed_stop(&tm);
    /* BabelStream's check: replay the kernels on one element of each array */
    double ga = START_A, gb = START_B, gc = START_C;
    for (int r = 0; r < reps; r++) {
        gc = ga;
        gb = SCALAR * gc;
        gc = ga + gb;
        ga = gb + SCALAR * gc;
    }
    double gsum = ga * gb * n;
    double *h = (double *)host_alloc(n * sizeof(double));
    double err[3];
    double *arr[3] = {a, b, c}, gold[3] = {ga, gb, gc};
    for (int k = 0; k < 3; k++) {
        CK(cudaMemcpy(h, arr[k], n * sizeof(double), cudaMemcpyDeviceToHost));
        err[k] = mean_error(h, n, gold[k]);
    }
    free(h);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(partial));
    CK(cudaFreeHost(hp));
    double derr = fabs((sum - gsum) / gsum);
    /* BabelStream's tolerances: 100 epsilon per element, 1e-8 for the dot product */
    int ok = err[0] <= 100 * 2.22e-16 && err[1] <= 100 * 2.22e-16 && err[2] <= 100 * 2.22e-16 &&
             derr <= 1e-8;
    line("{\"test\": \"stream\", \"check\": %s, \"error_a\": %.3g, \"error_b\": %.3g, "
         "\"error_c\": %.3g, \"error_dot\": %.3g, \"array_bytes\": %zu, \"blocks\": %d, "
         "\"threads\": %d, \"env\": %s}",
         ok ? "true" : "false", err[0], err[1], err[2], derr, n * sizeof(double), blocks, TBSIZE,
         env);
    return ok ? 0 : EXIT_CHECK;
}

/* ---------------------------------------------------------------- GEMM through cuBLAS */

/* cuBLAS's C ABI as documented (cublas_api.h, library_types.h): a handle is an opaque pointer,
 * status 0 is success; CUBLAS_OP_N 0, CUBLAS_OP_T 1, CUBLAS_GEMM_DEFAULT -1; compute types 64F
 * 70, 32F 68, 32F_FAST_TF32 77; data types from library_types.h (cudaDataType). */
typedef void *cublas_handle;
enum { OP_N = 0, OP_T = 1, GEMM_DEFAULT = -1, COMPUTE_64F = 70, COMPUTE_32F = 68,
       COMPUTE_TF32 = 77 };
static struct {
    int (*create)(cublas_handle *);
    int (*destroy)(cublas_handle);
    int (*version)(cublas_handle, int *);
    int (*gemm)(cublas_handle, int, int, int, int, int, const void *, const void *,
                cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                cudaDataType, int, int, int);
} cublas;

/* cuBLASLt's C ABI as documented (cublasLt.h), for FP8, which cublasGemmEx does not run:
 * descriptors, layouts and preferences are opaque pointers; an algorithm is 8 words and a
 * heuristic result that plus its workspace size, state, waves and 4 reserved ints; attributes
 * CUBLASLT_MATMUL_DESC_TRANSA 3 and TRANSB 4, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES 1. */
typedef void *lt_handle, *lt_desc, *lt_layout, *lt_pref;
typedef struct {
    uint64_t data[8];
} lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspace;
    int state;
    float waves;
    int reserved[4];
} lt_heuristic;
enum { LT_TRANSA = 3, LT_TRANSB = 4, LT_PREF_WORKSPACE = 1 };
#define LT_WORKSPACE (32u << 20) /* what cuBLASLt's guide gives Hopper's kernels */
static struct {
    int (*create)(lt_handle *);
    int (*destroy)(lt_handle);
    int (*desc_create)(lt_desc *, int, cudaDataType);
    int (*desc_destroy)(lt_desc);
    int (*desc_set)(lt_desc, int, const void *, size_t);
    int (*layout_create)(lt_layout *, cudaDataType, uint64_t, uint64_t, int64_t);
    int (*layout_destroy)(lt_layout);
    int (*pref_create)(lt_pref *);
    int (*pref_destroy)(lt_pref);
    int (*pref_set)(lt_pref, int, const void *, size_t);
    int (*heuristic)(lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout, lt_pref,
                     int, lt_heuristic *, int *);
    int (*matmul)(lt_handle, lt_desc, const void *, const void *, lt_layout, const void *,
                  lt_layout, const void *, const void *, lt_layout, void *, lt_layout,
                  const lt_algo *, void *, size_t, cudaStream_t);
} lt;

static void *sym(void *h, const char *name)
{
    return h ? dlsym(h, name) : NULL;
}

static void cublas_open(const char *path, int need_lt)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fail(EXIT_NODEV, "cuBLAS: %s", dlerror());
    *(void **)&cublas.create = dlsym(h, "cublasCreate_v2");
    *(void **)&cublas.destroy = dlsym(h, "cublasDestroy_v2");
    *(void **)&cublas.version = dlsym(h, "cublasGetVersion_v2");
    *(void **)&cublas.gemm = dlsym(h, "cublasGemmEx");
    if (!cublas.create || !cublas.destroy || !cublas.gemm)
        fail(EXIT_NODEV, "cuBLAS at %s lacks cublasCreate_v2/cublasGemmEx", path);
    if (!need_lt)
        return;
    /* cuBLASLt: libcublas depends on it, so its symbols resolve through cuBLAS's handle;
     * else the libcublasLt beside it */
    void *hl = dlsym(h, "cublasLtCreate") ? h : NULL;
    const char *base = strrchr(path, '/');
    char sibling[4096];
    if (!hl && base && !strncmp(base, "/libcublas.", 11)) {
        snprintf(sibling, sizeof sibling, "%.*s/libcublasLt.%s", (int)(base - path), path,
                 base + 11);
        hl = dlopen(sibling, RTLD_NOW | RTLD_LOCAL);
    }
    *(void **)&lt.create = sym(hl, "cublasLtCreate");
    *(void **)&lt.destroy = sym(hl, "cublasLtDestroy");
    *(void **)&lt.desc_create = sym(hl, "cublasLtMatmulDescCreate");
    *(void **)&lt.desc_destroy = sym(hl, "cublasLtMatmulDescDestroy");
    *(void **)&lt.desc_set = sym(hl, "cublasLtMatmulDescSetAttribute");
    *(void **)&lt.layout_create = sym(hl, "cublasLtMatrixLayoutCreate");
    *(void **)&lt.layout_destroy = sym(hl, "cublasLtMatrixLayoutDestroy");
    *(void **)&lt.pref_create = sym(hl, "cublasLtMatmulPreferenceCreate");
    *(void **)&lt.pref_destroy = sym(hl, "cublasLtMatmulPreferenceDestroy");
    *(void **)&lt.pref_set = sym(hl, "cublasLtMatmulPreferenceSetAttribute");
    *(void **)&lt.heuristic = sym(hl, "cublasLtMatmulAlgoGetHeuristic");
    *(void **)&lt.matmul = sym(hl, "cublasLtMatmul");
    void **all = (void **)&lt;
    for (size_t i = 0; i < sizeof lt / sizeof(void *); i++)
        if (!all[i])
            fail(EXIT_NODEV, "cuBLASLt (beside %s) was not found or lacks cublasLtMatmul", path);
}

/* The operands' values: uniform in [-1, 1) with a full double mantissa, rounded to the input
 * type on the device, as HPL's and PyTorch's random matrices are. A power-capped GPU's GEMM
 * rate depends on the bits its multipliers toggle: on an H100, operands of three significant
 * bits, timed one product at a time, ran 1.16 times as fast as PyTorch's random ones timed
 * alike, so only data as random as real data's gives the rate real work gets. The check below
 * therefore recomputes sampled entries from the inputs as the device holds them (gathered
 * back), not from these. */
__host__ __device__ static inline double operand(uint64_t i, uint64_t seed)
{
    /* splitmix64: element i of the stream `seed` */
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-52 - 1.0;
}

template <typename T> __device__ T from_double(double v);
template <> __device__ double from_double<double>(double v) { return v; }
template <> __device__ float from_double<float>(double v) { return (float)v; }
template <> __device__ __half from_double<__half>(double v) { return __double2half(v); }
template <> __device__ __nv_bfloat16 from_double<__nv_bfloat16>(double v)
{
    return __double2bfloat16(v);
}
template <> __device__ __nv_fp8_e4m3 from_double<__nv_fp8_e4m3>(double v)
{
    return __nv_fp8_e4m3(v);
}
template <typename T> __device__ double to_double(T v) { return (double)v; }
template <> __device__ double to_double<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ double to_double<__nv_bfloat16>(__nv_bfloat16 v)
{
    return (double)__bfloat162float(v);
}
template <> __device__ double to_double<__nv_fp8_e4m3>(__nv_fp8_e4m3 v)
{
    return (double)(float)v;
}

template <typename T> __global__ void k_fill(T *x, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = from_double<T>(operand(i, seed));
}

/* out[k n + l] = m[at[k] + l stride] for l < n, k the grid's row of blocks: entries of C (n 1),
 * or the rows of A and the columns of B that the checked entries of C are the products of. */
template <typename T>
__global__ void k_gather(const T *m, const size_t *at, size_t stride, double *out, int n)
{
    int k = blockIdx.y;
    for (int l = blockIdx.x * blockDim.x + threadIdx.x; l < n; l += gridDim.x * blockDim.x)
        out[(size_t)k * n + l] = to_double<T>(m[at[k] + (size_t)l * stride]);
}

#define CHECKED 256 /* entries of C checked against the host reference */

struct precision {
    const char *name;
    cudaDataType in, out;
    int compute, size_in, size_out;
    double u_out, u_acc; /* unit roundoff of the output and of the accumulation */
    double u_in;         /* the inputs' relative error inside the product: TF32 keeps 10 of
                          * FP32's 23 fraction bits (2^-10 bounds truncation and rounding) */
    int lt;              /* through cuBLASLt, A transposed (the FP8 kernels' "TN" layout) */
    int min_cc;          /* the oldest architecture that runs it (major*10 + minor) */
};
/* FP8: E4M3 inputs, BF16 output, FP32 accumulation with cuBLASLt's default promotion (no
 * CUBLASLT_MATMUL_DESC_FAST_ACCUM), so the FP32 accumulation bound holds. */
static const struct precision PRECISIONS[] = {
    {"fp64", CUDA_R_64F, CUDA_R_64F, COMPUTE_64F, 8, 8, 0x1p-53, 0x1p-53, 0, 0, 0},
    {"fp32", CUDA_R_32F, CUDA_R_32F, COMPUTE_32F, 4, 4, 0x1p-24, 0x1p-24, 0, 0, 0},
    {"tf32", CUDA_R_32F, CUDA_R_32F, COMPUTE_TF32, 4, 4, 0x1p-24, 0x1p-24, 0x1p-10, 0, 80},
    {"bf16", CUDA_R_16BF, CUDA_R_16BF, COMPUTE_32F, 2, 2, 0x1p-8, 0x1p-24, 0, 0, 0},
    {"fp16", CUDA_R_16F, CUDA_R_16F, COMPUTE_32F, 2, 2, 0x1p-11, 0x1p-24, 0, 0, 0},
    {"fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, COMPUTE_32F, 1, 2, 0x1p-8, 0x1p-24, 0, 1, 89},
};

template <typename T> struct Fill {
    static void run(void *x, size_t n, uint64_t seed, int blocks)
    {
        k_fill<T><<<blocks, 256>>>((T *)x, n, seed);
    }
};
template <typename T> struct Gather {
    static void run(const void *m, const size_t *at, size_t stride, double *out, int n,
                    int count)
    {
        k_gather<T><<<dim3((n + 255) / 256 < 64 ? (n + 255) / 256 : 64, count), 256>>>(
            (const T *)m, at, stride, out, n);
    }
};

/* Op<T>::run(args) for the element type T that a cuBLAS data type names. */
template <template <typename> class Op, typename... Args>
static void by_type(cudaDataType t, Args... args)
{
    if (t == CUDA_R_64F)
        Op<double>::run(args...);
    else if (t == CUDA_R_32F)
        Op<float>::run(args...);
    else if (t == CUDA_R_16BF)
        Op<__nv_bfloat16>::run(args...);
    else if (t == CUDA_R_8F_E4M3)
        Op<__nv_fp8_e4m3>::run(args...);
    else
        Op<__half>::run(args...);
}

/* One cuBLASLt matmul, D = op(A) B with A transposed, set up once per order N. */
struct lt_plan {
    lt_handle h;
    lt_desc desc;
    lt_layout a, b, d;
    lt_heuristic best;
    void *workspace;
};

static void lt_setup(struct lt_plan *q, const struct precision *p, int n)
{
    int op_a = OP_T, op_b = OP_N, got = 0;
    size_t ws = LT_WORKSPACE;
    lt_pref pref;
    CK(cudaMalloc(&q->workspace, ws));
    if (lt.create(&q->h) || lt.desc_create(&q->desc, p->compute, CUDA_R_32F) ||
        lt.desc_set(q->desc, LT_TRANSA, &op_a, sizeof op_a) ||
        lt.desc_set(q->desc, LT_TRANSB, &op_b, sizeof op_b) ||
        lt.layout_create(&q->a, p->in, n, n, n) || lt.layout_create(&q->b, p->in, n, n, n) ||
        lt.layout_create(&q->d, p->out, n, n, n) || lt.pref_create(&pref) ||
        lt.pref_set(pref, LT_PREF_WORKSPACE, &ws, sizeof ws))
        fail(EXIT_CHECK, "cuBLASLt set-up for %s n=%d failed", p->name, n);
    int st = lt.heuristic(q->h, q->desc, q->a, q->b, q->d, q->d, pref, 1, &q->best, &got);
    lt.pref_destroy(pref);
    if (st != 0 || got == 0)
        fail(EXIT_CHECK, "cuBLASLt has no %s kernel for n=%d on this device (status %d)",
             p->name, n, st);
}

static void lt_teardown(struct lt_plan *q)
{
    lt.layout_destroy(q->a);
    lt.layout_destroy(q->b);
    lt.layout_destroy(q->d);
    lt.desc_destroy(q->desc);
    lt.destroy(q->h);
    CK(cudaFree(q->workspace));
}

/* The GEMM's timing. Repetition 0, the warm-up that hpcprobe drops, runs products back to back
 * for at least WARM_S, in batches doubling from one; the later repetitions are batches of
 * back-to-back products lasting together at least TIMED_S, each at least SAMPLE_S. A GPU's
 * clocks and power settle under load within about a second, and NVML's power reading is an
 * average over about a second: single products of a millisecond would time a GPU that has not
 * yet met its power limit, and read its power as idle. At the limit the clock swings (on an
 * H100 at 700 W, with a period of about 0.8 s and 10 % deep, damping over seconds): batches
 * that together spanned 0.5 s gave a median 4 % above PyTorch's spanning 1 s; spanning 2 s on
 * both sides, 1 % (gpu_vs_torch). */
#define WARM_S 1.0
#define TIMED_S 2.0
#define SAMPLE_S 0.1

/* One product C = A B as a precision's library call takes it. */
struct gemm_call {
    const struct precision *p;
    cublas_handle h;
    struct lt_plan *plan;
    const void *A, *B, *alpha, *beta;
    void *C;
    int n;
    struct timed *tm; /* the events around a batch */
};

/* `count` products back to back; a failed call exits. */
static void gemm_batch(const struct gemm_call *g, int count)
{
    const struct precision *p = g->p;
    int n = g->n;
    for (int k = 0; k < count; k++) {
        int st = p->lt ? lt.matmul(g->plan->h, g->plan->desc, g->alpha, g->A, g->plan->a, g->B,
                                   g->plan->b, g->beta, g->C, g->plan->d, g->C, g->plan->d,
                                   &g->plan->best.algo, g->plan->workspace, LT_WORKSPACE, 0)
                       : cublas.gemm(g->h, OP_N, OP_N, n, n, n, g->alpha, g->A, p->in, n, g->B,
                                     p->in, n, g->beta, g->C, p->out, n, p->compute,
                                     GEMM_DEFAULT);
        if (st != 0)
            fail(st == 3 ? EXIT_OOM : EXIT_CHECK, "%s %s n=%d: status %d",
                 p->lt ? "cublasLtMatmul" : "cublasGemmEx", p->name, n, st);
    }
}

/* `count` products of the gemm_call `call` between its timer's two events: their seconds. */
static double timed_batch(void *call, int count)
{
    const struct gemm_call *g = (const struct gemm_call *)call;
    CK(cudaEventRecord(g->tm->ev[0]));
    gemm_batch(g, count);
    CK(cudaEventRecord(g->tm->ev[1]));
    return elapsed_s(g->tm->ev[0], g->tm->ev[1]);
}

/* A repetition's sample line: `count` products in `seconds`. */
static void gemm_line(const struct gemm_call *g, int rep, long count, double seconds)
{
    double n = g->n;
    line("{\"test\": \"gemm\", \"precision\": \"%s\", \"n\": %d, \"rep\": %d, "
         "\"products\": %ld, \"flops\": %.17g, \"seconds\": %.9g}",
         g->p->name, g->n, rep, count, 2.0 * n * n * n * count, seconds);
}

/* The products that fill `seconds`, one taking `one` seconds: at least 1. */
static int products_for(double seconds, double one)
{
    double k = one > 0 ? ceil(seconds / one) : 1;
    return k < 1 ? 1 : k > 1e6 ? 1000000 : (int)k;
}

/* The warm-up and the timed batches' size. */
struct schedule {
    long warm_products;
    double warm_s;
    int count; /* products in each timed batch */
};

/* Runs the warm-up through `batch` (which runs `count` products back to back and returns their
 * seconds) and sizes the timed batches of `reps` - 1 repetitions. A GPU idle before runs its
 * first products at its idle clock, so no single product can size the batches: the warm-up's
 * last batch, under load, sizes the timed ones. */
static struct schedule warm_up(double (*batch)(void *, int), void *ctx, int reps)
{
    struct schedule s = {0, 0, 1};
    double per = 0;
    for (int count = 1; s.warm_s < WARM_S; count = count < (1 << 20) ? 2 * count : count) {
        double t = batch(ctx, count);
        s.warm_s += t, s.warm_products += count, per = t / count;
    }
    double each = TIMED_S / (reps > 1 ? reps - 1 : 1);
    s.count = products_for(each > SAMPLE_S ? each : SAMPLE_S, per);
    return s;
}

static int cmd_gemm(int device, const char *prec, int n, int reps, const char *lib)
{
    const struct precision *p = NULL;
    for (size_t i = 0; i < sizeof PRECISIONS / sizeof *PRECISIONS; i++)
        if (!strcmp(PRECISIONS[i].name, prec))
            p = &PRECISIONS[i];
    if (!p)
        fail(EXIT_USAGE, "precision '%s' is unknown: fp64, fp32, tf32, bf16, fp16, fp8", prec);
    if (n < 16)
        fail(EXIT_USAGE, "matrix order %d: at least 16", n);
    use_device(device);
    int cc = 10 * attr(cudaDevAttrComputeCapabilityMajor, device) +
             attr(cudaDevAttrComputeCapabilityMinor, device);
    if (cc < p->min_cc)
        fail(EXIT_USAGE, "%s GEMM needs compute capability %d.%d; device %d has %d.%d",
             p->name, p->min_cc / 10, p->min_cc % 10, device, cc / 10, cc % 10);
    cublas_open(lib, p->lt);
    struct gemm_call g = {p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, n, NULL};
    if (cublas.create(&g.h) != 0)
        fail(EXIT_NODEV, "cublasCreate failed (status)");
    int ver = 0;
    if (cublas.version)
        cublas.version(g.h, &ver);
    size_t nn = (size_t)n * n;
    void *A, *B;
    CK(cudaMalloc(&A, nn * p->size_in));
    CK(cudaMalloc(&B, nn * p->size_in));
    CK(cudaMalloc(&g.C, nn * p->size_out));
    g.A = A, g.B = B;
    int blocks = 4 * attr(cudaDevAttrMultiProcessorCount, device);
    by_type<Fill>(p->in, A, nn, (uint64_t)1, blocks);
    by_type<Fill>(p->in, B, nn, (uint64_t)2, blocks);
    CK(cudaMemset(g.C, 0, nn * p->size_out));
    CK(cudaDeviceSynchronize());
    struct lt_plan plan;
    if (p->lt) {
        lt_setup(&plan, p, n);
        g.plan = &plan;
    }
    /* alpha and beta in the compute type's scalar type: double for 64F, float otherwise */
    double one_d = 1, zero_d = 0;
    float one_f = 1, zero_f = 0;
    g.alpha = p->compute == COMPUTE_64F ? (const void *)&one_d : (const void *)&one_f;
    g.beta = p->compute == COMPUTE_64F ? (const void *)&zero_d : (const void *)&zero_f;
    struct timed tm;
    timed_start(&tm, 2);
    g.tm = &tm;
    struct schedule s = warm_up(timed_batch, &g, reps);
    gemm_line(&g, 0, s.warm_products, s.warm_s);
    readings_restart(&tm.rd); /* NVML's readings of the timed batches alone */
    for (int r = 1; r < reps; r++)
        gemm_line(&g, r, s.count, timed_batch(&g, s.count));
    const char *env = timed_stop(&tm);
    /* The check: CHECKED entries of C (column-major, C(i,j) at i + j n) against the host's
     * sum, in double, of the products of A's row i and B's column j as the device holds them
     * (A(i,l) at i + l n, or at l + i n where A is transposed; B(l,j) at l + j n). */
    size_t at[3 * CHECKED], *d_at;
    for (int k = 0; k < CHECKED; k++) {
        size_t c = k == 0 ? 0 : k == 1 ? nn - 1 : ((uint64_t)k * 2654435761u + 12345u) % nn;
        size_t i = c % n, j = c / n;
        at[k] = c;
        at[CHECKED + k] = p->lt ? i * n : i;
        at[2 * CHECKED + k] = j * n;
    }
    size_t rows = (size_t)CHECKED * n;
    double *d_got, *got = (double *)host_alloc((CHECKED + 2 * rows) * sizeof(double));
    CK(cudaMalloc(&d_at, sizeof at));
    CK(cudaMalloc(&d_got, (CHECKED + 2 * rows) * sizeof(double)));
    CK(cudaMemcpy(d_at, at, sizeof at, cudaMemcpyHostToDevice));
    by_type<Gather>(p->out, (const void *)g.C, (const size_t *)d_at, (size_t)1, d_got, 1,
                    CHECKED);
    by_type<Gather>(p->in, (const void *)A, (const size_t *)d_at + CHECKED,
                    p->lt ? (size_t)1 : (size_t)n, d_got + CHECKED, n, CHECKED);
    by_type<Gather>(p->in, (const void *)B, (const size_t *)d_at + 2 * CHECKED, (size_t)1,
                    d_got + CHECKED + rows, n, CHECKED);
    CK(cudaGetLastError());
    CK(cudaMemcpy(got, d_got, (CHECKED + 2 * rows) * sizeof(double), cudaMemcpyDeviceToHost));
    double worst = 0;
    int bad = 0;
    for (int k = 0; k < CHECKED; k++) {
        const double *a = got + CHECKED + (size_t)k * n, *b = got + CHECKED + rows + (size_t)k * n;
        double ref = 0, mag = 0;
        for (int l = 0; l < n; l++) {
            ref += a[l] * b[l];
            mag += fabs(a[l] * b[l]);
        }
        /* Higham's bound for a sum of n products, plus the inputs' rounding inside the
         * product (TF32) and the output's rounding; the host's own sum in double is within
         * the accumulation term */
        double tol = fabs(ref) * p->u_out +
                     (2.0 * n * p->u_acc + 2.0 * p->u_in * (1 + p->u_in)) * mag + 1e-300;
        double e = fabs(got[k] - ref) / tol;
        worst = e > worst ? e : worst;
        bad += e > 1.0;
    }
    free(got);
    if (p->lt)
        lt_teardown(&plan);
    cublas.destroy(g.h);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(g.C));
    CK(cudaFree(d_at));
    CK(cudaFree(d_got));
    line("{\"test\": \"gemm\", \"precision\": \"%s\", \"n\": %d, \"check\": %s, "
         "\"checked\": %d, \"failed\": %d, \"worst_over_bound\": %.3g, "
         "\"cublas_version\": %d, \"env\": %s}",
         p->name, n, bad ? "false" : "true", CHECKED, bad, worst, ver, env);
    return bad ? EXIT_CHECK : 0;
}

/* ---------------------------------------------------------------- info */

static int cmd_info(void)
{
    int n = check_driver(), drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    line("{\"driver_cuda\": %d, \"runtime_cuda\": %d, \"devices\": %d}", drv, rt, n);
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        char bus[32];
        CK(cudaGetDeviceProperties(&p, d));
        CK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
        char precs[128] = "";
        for (size_t i = 0; i < sizeof PRECISIONS / sizeof *PRECISIONS; i++)
            if (10 * p.major + p.minor >= PRECISIONS[i].min_cc)
                snprintf(precs + strlen(precs), sizeof precs - strlen(precs), "%s\"%s\"",
                         *precs ? ", " : "", PRECISIONS[i].name);
        line("{\"device\": %d, \"name\": \"%s\", \"pci_bus_id\": \"%s\", \"memory_bytes\": %zu, "
             "\"sms\": %d, \"cc\": \"%d.%d\", \"sm_khz\": %d, \"mem_khz\": %d, "
             "\"bus_width_bits\": %d, \"l2_bytes\": %d, \"host_numa\": %d, "
             "\"gemm_precisions\": [%s]}",
             d, clean(p.name), bus, p.totalGlobalMem, p.multiProcessorCount, p.major, p.minor,
             attr(cudaDevAttrClockRate, d), attr(cudaDevAttrMemoryClockRate, d),
             attr(cudaDevAttrGlobalMemoryBusWidth, d), p.l2CacheSize,
             attr(cudaDevAttrHostNumaId, d), precs);
    }
    return 0;
}

/* ---------------------------------------------------------------- host <-> device */

#define MPOL_BIND_ 2
#define MAX_NODES 1024

/* The calling thread's future pages bound to one NUMA node (pinned buffers then come from
 * there): set_mempolicy, without libnuma. */
static void bind_memory(int node)
{
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    if (node < 0 || node >= MAX_NODES)
        fail(EXIT_USAGE, "NUMA node %d is out of range", node);
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_set_mempolicy, MPOL_BIND_, mask, (unsigned long)MAX_NODES) != 0)
        fail(EXIT_USAGE, "binding memory to NUMA node %d: %s", node, strerror(errno));
}

/* The NUMA node of a page of the buffer (move_pages with no target only reports), or -1. */
static int node_of(void *p)
{
    int status = -1;
    void *pages[1] = {p};
    if (syscall(SYS_move_pages, 0, 1ul, pages, NULL, &status, 0) != 0)
        return -1;
    return status;
}

/* The calling thread bound to a cpulist ("0-3,8"); empty: left as it is. */
static void bind_cpus(const char *list)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    if (!*list)
        return;
    for (const char *p = list; *p;) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p)
            fail(EXIT_USAGE, "cpulist '%s' is malformed", list);
        if (*end == '-')
            b = strtol(end + 1, &end, 10);
        for (long c = a; c <= b && c < CPU_SETSIZE; c++)
            CPU_SET(c, &s);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            fail(EXIT_USAGE, "cpulist '%s' is malformed", list);
    }
    if (sched_setaffinity(0, sizeof s, &s) != 0)
        fail(EXIT_USAGE, "binding to CPUs %s: %s", list, strerror(errno));
}

static void cpus_of(char *out, size_t len)
{
    cpu_set_t s;
    out[0] = 0;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return;
    size_t used = 0;
    for (int c = 0; c < CPU_SETSIZE && used + 8 < len; c++)
        if (CPU_ISSET(c, &s))
            used += snprintf(out + used, len - used, used ? ",%d" : "%d", c);
}

static void pattern(unsigned char *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (unsigned char)((i * 131 + seed) >> 3);
}

static int cmd_copy(int device, const char *dir, size_t bytes, int reps, int node,
                    const char *cpus_asked)
{
    int h2d = !strcmp(dir, "h2d"), d2h = !strcmp(dir, "d2h"), bidir = !strcmp(dir, "bidir");
    if (!h2d && !d2h && !bidir)
        fail(EXIT_USAGE, "direction '%s' is unknown: h2d, d2h, bidir", dir);
    bind_cpus(cpus_asked);
    if (node >= 0)
        bind_memory(node);
    use_device(device);
    unsigned char *host_in, *host_out, *dev_in, *dev_out;
    CK(cudaHostAlloc((void **)&host_in, bytes, cudaHostAllocDefault));
    CK(cudaHostAlloc((void **)&host_out, bytes, cudaHostAllocDefault));
    CK(cudaMalloc(&dev_in, bytes));
    CK(cudaMalloc(&dev_out, bytes));
    pattern(host_in, bytes, 17); /* first touch after the policy: the pages are on `node` */
    memset(host_out, 0, bytes);
    CK(cudaMemcpy(dev_out, host_in, bytes, cudaMemcpyHostToDevice));
    int got_node = node_of(host_in);
    char cpus[1024];
    cpus_of(cpus, sizeof cpus);
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    struct timed tm;
    timed_start(&tm, 3);
    cudaEvent_t e0 = tm.ev[0], e1 = tm.ev[1], e2 = tm.ev[2];
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, s1));
        if (h2d || bidir)
            CK(cudaMemcpyAsync(dev_in, host_in, bytes, cudaMemcpyHostToDevice, s1));
        if (bidir) { /* the other direction on its own stream, started with the first */
            CK(cudaStreamWaitEvent(s2, e0, 0));
            CK(cudaMemcpyAsync(host_out, dev_out, bytes, cudaMemcpyDeviceToHost, s2));
            CK(cudaEventRecord(e2, s2));
            CK(cudaStreamWaitEvent(s1, e2, 0));
        }
        if (d2h)
            CK(cudaMemcpyAsync(host_out, dev_out, bytes, cudaMemcpyDeviceToHost, s1));
        CK(cudaEventRecord(e1, s1));
        line("{\"test\": \"copy\", \"direction\": \"%s\", \"rep\": %d, \"size\": %zu, "
             "\"bytes\": %zu, \"seconds\": %.9g}",
             dir, r, bytes, bidir ? 2 * bytes : bytes, elapsed_s(e0, e1));
    }
    const char *env = timed_stop(&tm);
    /* the check: what arrived is what was sent, both ways */
    int ok = 1;
    unsigned char *back = (unsigned char *)host_alloc(bytes);
    if (h2d || bidir) {
        CK(cudaMemcpy(back, dev_in, bytes, cudaMemcpyDeviceToHost));
        ok &= !memcmp(back, host_in, bytes);
    }
    if (d2h || bidir)
        ok &= !memcmp(host_out, host_in, bytes);
    free(back);
    CK(cudaFreeHost(host_in));
    CK(cudaFreeHost(host_out));
    CK(cudaFree(dev_in));
    CK(cudaFree(dev_out));
    line("{\"test\": \"copy\", \"direction\": \"%s\", \"check\": %s, \"size\": %zu, "
         "\"node_asked\": %d, \"node\": %d, \"cpus\": \"%s\", \"env\": %s}",
         dir, ok ? "true" : "false", bytes, node, got_node, cpus, env);
    return ok ? 0 : EXIT_CHECK;
}

static int cmd_p2p(int device, int peer, size_t bytes, int reps)
{
    use_device(peer);
    use_device(device);
    if (peer == device)
        fail(EXIT_USAGE, "peer copy from device %d to itself", device);
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, device, peer));
    if (can) {
        cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled)
            CK(e);
    }
    unsigned char *src, *dst;
    unsigned char *host = (unsigned char *)host_alloc(bytes);
    unsigned char *back = (unsigned char *)host_alloc(bytes);
    CK(cudaMalloc(&src, bytes));
    CK(cudaSetDevice(peer));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaSetDevice(device));
    pattern(host, bytes, 29);
    CK(cudaMemcpy(src, host, bytes, cudaMemcpyHostToDevice));
    struct timed tm;
    timed_start(&tm, 2);
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(tm.ev[0]));
        CK(cudaMemcpyPeerAsync(dst, peer, src, device, bytes, 0));
        CK(cudaEventRecord(tm.ev[1]));
        line("{\"test\": \"p2p\", \"peer\": %d, \"rep\": %d, \"bytes\": %zu, \"seconds\": %.9g}",
             peer, r, bytes, elapsed_s(tm.ev[0], tm.ev[1]));
    }
    const char *env = timed_stop(&tm);
    CK(cudaMemcpyPeer(src, device, dst, peer, bytes)); /* round trip: what arrived, back */
    CK(cudaMemcpy(back, src, bytes, cudaMemcpyDeviceToHost));
    int ok = !memcmp(back, host, bytes);
    free(host);
    free(back);
    CK(cudaFree(src));
    CK(cudaSetDevice(peer));
    CK(cudaFree(dst));
    CK(cudaSetDevice(device));
    line("{\"test\": \"p2p\", \"peer\": %d, \"check\": %s, \"peer_access\": %s, \"env\": %s}",
         peer, ok ? "true" : "false", can ? "true" : "false", env);
    return ok ? 0 : EXIT_CHECK;
}

/* ---------------------------------------------------------------- arguments */

static long num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0)
        fail(EXIT_USAGE, "%s '%s' is not a non-negative integer", what, s);
    return v;
}

/* Each size of a comma-separated list in turn, `size` set to it; rc: the first failure's. */
#define EACH(list, what, call)                                                                \
    do {                                                                                      \
        char buf[1024], *save = NULL;                                                         \
        snprintf(buf, sizeof buf, "%s", list);                                                \
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {        \
            long size = num(t, what);                                                         \
            int r = (call);                                                                   \
            rc = rc ? rc : r;                                                                 \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    const char *usage = "usage: hpb_gpu info | stream D BYTES[,BYTES...] REPS | gemm D PREC "
                        "N[,N...] REPS LIBCUBLAS | copy D h2d|d2h|bidir BYTES[,BYTES...] REPS "
                        "NODE CPUS | p2p D PEER BYTES[,BYTES...] REPS";
    int rc = 0;
    if (argc < 2)
        fail(EXIT_USAGE, "%s", usage);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "info") && argc == 2)
        return cmd_info();
    if (!strcmp(cmd, "stream") && argc == 5)
        EACH(argv[3], "bytes", cmd_stream(num(argv[2], "device"), size, num(argv[4], "reps")));
    else if (!strcmp(cmd, "gemm") && argc == 7)
        EACH(argv[4], "n", cmd_gemm(num(argv[2], "device"), argv[3], size, num(argv[5], "reps"),
                                    argv[6]));
    else if (!strcmp(cmd, "copy") && argc == 8)
        EACH(argv[4], "bytes", cmd_copy(num(argv[2], "device"), argv[3], size,
                                        num(argv[5], "reps"), atoi(argv[6]), argv[7]));
    else if (!strcmp(cmd, "p2p") && argc == 6)
        EACH(argv[4], "bytes", cmd_p2p(num(argv[2], "device"), num(argv[3], "peer"), size,
                                       num(argv[5], "reps")));
    else
        fail(EXIT_USAGE, "%s", usage);
    return rc;
}
