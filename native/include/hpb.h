/* hpb.h: the public C API of hpcprobe's native core (thread team, kernels, ISA dispatch). */
#ifndef HPB_H
#define HPB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ISA variants compiled into one portable build; the best supported one is picked at run time. */
enum hpb_isa { HPB_ISA_SCALAR = 0, HPB_ISA_AVX2 = 1, HPB_ISA_AVX512 = 2, HPB_ISA_COUNT = 3 };

/* Streaming kernels. Each is a row of the kernel table; bytes and flops per element are declared
 * in the Python registry, never computed here. Array roles: dst, x, y (see kernels_simd.h). */
enum hpb_kernel {
    HPB_KERNEL_COPY = 0,  /* dst = x         */
    HPB_KERNEL_SCALE = 1, /* dst = s*x       */
    HPB_KERNEL_ADD = 2,   /* dst = x + y     */
    HPB_KERNEL_TRIAD = 3, /* dst = x + s*y   */
    HPB_KERNEL_LOAD = 4,  /* read x (streaming loads, nothing computed) */
    HPB_KERNEL_STORE = 5, /* dst = s         */
    HPB_KERNEL_SUM = 6,   /* sum += x        */
    HPB_KERNEL_COUNT = 7
};

/* Store type: ordinary (write-allocate) stores or non-temporal (streaming) stores. */
enum hpb_stores { HPB_STORES_REGULAR = 0, HPB_STORES_NT = 1 };

/* Version of this C API; Python refuses a library whose version differs from the one it expects. */
#define HPB_API_VERSION 5

/* Returns HPB_API_VERSION of the loaded library. */
int hpb_api_version(void);

/* Writes a NUL-terminated description of the compiler and its flags into buf (at most len bytes). */
void hpb_build_info(char *buf, size_t len);

/* Returns a digest (12 hex digits) of the measurement sources this library was built from: the
 * core's, the MPI and GPU programs' and the build file's. Runs that differ in it were measured with
 * code built from other sources. */
const char *hpb_source_id(void);

/* Returns 1 if the variant is compiled into this build and the running CPU supports it, else 0. */
int hpb_isa_supported(int isa);

/* Returns the name of an ISA variant ("scalar", "avx2", "avx512") or NULL when out of range. */
const char *hpb_isa_name(int isa);

/* What a streaming kernel moves and computes per element: declared once, here in the core, and
 * read by Python, so the bytes and FLOPs of every figure come from the kernel's own table. */
typedef struct hpb_kernel_shape {
    const char *name;    /* "triad" */
    const char *formula; /* "z = x + s*y" */
    int loads;           /* arrays read per element: x, then y */
    int stores;          /* arrays written per element: dst */
    int flops;           /* floating-point operations per element */
} hpb_kernel_shape;

/* Returns the shape of a kernel, or NULL when out of range. */
const hpb_kernel_shape *hpb_kernel_shape_of(int kernel);

/* Returns the name of a kernel ("copy", ...) or NULL when out of range. */
const char *hpb_kernel_name(int kernel);

/* Returns 1 if the kernel has a non-temporal store variant for this ISA, else 0. */
int hpb_kernel_has_nt(int kernel, int isa);

/* Applies one kernel once to caller-owned arrays (all 64-byte aligned, n elements).
 * The returned sum (sum kernel) goes to *result when result is not NULL.
 * Returns 0, -EINVAL for a bad argument or misaligned pointer, -ENOTSUP for an unsupported ISA. */
int hpb_kernel_apply(int kernel, int isa, int stores, double *dst, const double *x, const double *y,
                     size_t n, double s, double *result);

/* A persistent team of pinned threads. */
typedef struct hpb_team hpb_team;

/* Creates nthreads threads, thread i pinned to OS CPU cpus[i]. Returns 0, -EINVAL when a CPU
 * cannot be bound (not online or not in the allowed cpuset), -ENOMEM, or another -errno. */
int hpb_team_create(const int *cpus, int nthreads, hpb_team **out);

/* Stops and frees the team and every buffer it owns. Accepts NULL. */
void hpb_team_destroy(hpb_team *team);

/* Number of threads in the team. */
int hpb_team_size(const hpb_team *team);

/* Chooses the threads that take part in the following jobs, by index, in the order given
 * (the order of per-thread results); the others idle. Threads keep their buffers, so memory
 * first touched for one thread count is reused by the next. Returns 0 or -EINVAL. */
int hpb_team_select(hpb_team *team, const int *threads, int n);


/* Reads back the placement that took effect: for each thread the CPU it ran on and the number
 * of CPUs in its affinity mask (1 when pinned as asked). Arrays hold nthreads entries. */
int hpb_team_placement(const hpb_team *team, int *cpu, int *mask_count);

/* Reserves (mmap) each thread's stream buffer, large enough for any kernel on arrays of up to n
 * elements (n a multiple of 64). Nothing is touched yet. Replaces any earlier buffer. huge != 0
 * asks for transparent huge pages (madvise MADV_HUGEPAGE); node >= 0 binds the buffers to that
 * NUMA node (mbind), -1 leaves them to first touch. */
int hpb_stream_prepare(hpb_team *team, size_t n, int huge, int node);

/* Starts a measurement of `kernel` on arrays of n elements: each active thread writes the
 * initial pattern wherever the kernel's arrays do not hold it, so pages are first touched by the
 * thread that uses them and the result can be validated afterwards. The arrays of all kernels
 * share one buffer per thread, so a kernel's working set is exactly what it touches. */
int hpb_stream_begin(hpb_team *team, int kernel, size_t n);

/* Runs `reps` timed samples of one kernel over each active thread's first n elements; each sample
 * starts on a barrier and runs the kernel `inner` times. times[r*nactive + k] receives the time
 * of the k-th selected thread
 * of sample r in seconds. *migrations (if not NULL) counts samples in which a thread was found on
 * a CPU other than its own. Returns 0, -EINVAL, -ENOTSUP. */
int hpb_stream_measure(hpb_team *team, int kernel, int isa, int stores, size_t n, size_t inner,
                       int reps, double *times, int *migrations);

/* Where thread `thread`'s stream buffer lies, as far as it has been touched (to read back the
 * NUMA node of its pages). */
int hpb_stream_buffer(const hpb_team *team, int thread, uintptr_t *addr, size_t *len);

/* Checks each thread's output after `kernel` ran on the first n elements (since
 * hpb_stream_begin) against values computed independently from the initial pattern. *max_rel_err receives the largest relative error over
 * all threads and elements (0 when exact). Returns 0 or -EINVAL. */
int hpb_stream_check(hpb_team *team, int kernel, size_t n, double *max_rel_err);

/* The orders of a pointer-chase ring (hpb_chase_order). */
#define HPB_CHASE_RING 0   /* buddies apart: the even lines of every group, then the odd ones */
#define HPB_CHASE_RANDOM 1 /* plain random within each group (multichase, lmbench) */

/* Writes into order[0..lines) a random order of the line indices 0..lines-1, each exactly once:
 * groups of group_lines consecutive lines in random order, and the lines of each group in random
 * order. HPB_CHASE_RING makes two passes over the groups: the even lines of each, then the odd
 * lines, so a line's 128-byte buddy (which the adjacent-line prefetcher fetches with it) comes
 * half a ring later; HPB_CHASE_RANDOM one pass, every line of a group in random order, as the
 * field's plain random chases walk (group_lines 0 or >= lines: one group, a fully random order,
 * for either). The pointer-chase ring follows this order and closes on itself, so it is a single
 * cycle through every line. Returns 0, -EINVAL (no lines, an unknown kind) or -ENOMEM. */
int hpb_chase_order(size_t lines, size_t group_lines, int kind, uint64_t seed, size_t *order);

/* Builds in each active thread's own memory a pointer-chase ring over bytes/stride lines of
 * `stride` bytes (a multiple of 8; 64, a cache line, in hpcprobe's rings), in the order `kind`
 * of hpb_chase_order with groups of group_bytes (so a walk stays within a TLB reach; 0 = no
 * groups). huge != 0 asks for transparent huge pages (madvise); whether they were granted is for
 * the caller to read (hpb_chase_buffer, /proc/self/smaps). node >= 0 binds the ring's memory to
 * that NUMA node (mbind, before the first touch); -1 leaves it to first touch. Replaces any
 * earlier ring. */
int hpb_chase_prepare(hpb_team *team, size_t bytes, size_t stride, size_t group_bytes, int huge,
                      int node, int kind, uint64_t seed);

/* Times `reps` samples of `loads` dependent loads (a multiple of 16) on each active thread's
 * ring, each sample starting on a barrier; times[r*nactive + k] in seconds. A walk continues
 * where the last one stopped. Returns 0 or -EINVAL (no ring, bad arguments). */
int hpb_chase_measure(hpb_team *team, size_t loads, int reps, double *times);

/* Validates each active thread's ring by walking it from where the last walk stopped: every
 * pointer must land on a line of the ring, and a ring of up to max_steps lines must close after
 * exactly its number of lines (larger rings: no early return within max_steps). *ok = 1 when all
 * threads' rings pass. */
int hpb_chase_check(hpb_team *team, size_t max_steps, int *ok);

/* Where thread `thread`'s ring lies (to find its mapping in /proc/self/smaps, or its node). */
int hpb_chase_buffer(const hpb_team *team, int thread, uintptr_t *addr, size_t *len);

/* Loaded latency: the first selected thread walks its ring (hpb_chase_prepare) for `loads`
 * dependent loads (a multiple of 16) while every other selected thread runs `kernel` with
 * ordinary stores over its stream arrays of n elements (hpb_stream_begin) until the walk ends.
 * *chase_seconds is the walk's time; seconds[k] and passes[k] (k >= 1, in selection order) are
 * each streaming thread's time and whole passes, from which the caller derives its bandwidth. */
int hpb_loaded_latency(hpb_team *team, size_t loads, int kernel, int isa, size_t n,
                       double *chase_seconds, double *seconds, uint64_t *passes);

/* Core-to-core latency: the two selected threads bounce one cache line `rounds` times per
 * sample (the first writes, the second answers); times[r] is the round-trip time of sample r in
 * seconds, so one handoff takes times[r] / (2 rounds). Needs exactly two selected threads. */
int hpb_c2c_measure(hpb_team *team, size_t rounds, int reps, double *times);

/* The NUMA node that holds the (touched) page at addr, read back with get_mempolicy. */
int hpb_memory_node(const void *addr, int *node);

/* Times `reps` samples of iters x 64 dependent one-cycle integer adds on each selected thread
 * (times[r*nactive + k], seconds; -1 when the chain's result is wrong). Timing two chain
 * lengths and dividing the extra adds by the extra time gives the core clock. `load` is an ISA
 * variant: HPB_ISA_SCALAR runs the chain alone, a vector ISA runs it with that ISA's widest FMAs
 * in flight (the clock under a vector load). migrated[r*nactive + k] (if not NULL) is set to 1
 * where the thread was found off its CPU. -ENOTSUP for a load this build or CPU lacks. */
int hpb_clock_chain(hpb_team *team, int load, uint64_t iters, int reps, double *times,
                    int *migrated);

/* Floating-point precisions of the peak kernels. */
enum hpb_precision { HPB_DP = 0, HPB_SP = 1, HPB_PRECISION_COUNT = 2 };

/* Peak kernels: independent FMA chains; FMA and add chains; multiply and add chains (the scalar
 * variant: the x86-64 baseline has no FMA). */
enum hpb_peak_op { HPB_PEAK_FMA = 0, HPB_PEAK_FMA_ADD = 1, HPB_PEAK_MUL_ADD = 2, HPB_PEAK_OP_COUNT = 3 };

/* What one iteration of a peak kernel does: so many FMA, multiply and add chains, each updated
 * once, on vectors of `lanes` elements. FLOPs are counted by the caller (an FMA is 2). */
struct hpb_peak_shape {
    int fma_chains, mul_chains, add_chains, lanes;
};

/* Name of a peak kernel ("fma", "fma+add", "mul+add") or of a precision ("dp", "sp"); NULL when
 * out of range. */
const char *hpb_peak_op_name(int op);
const char *hpb_precision_name(int precision);

/* The shape of the peak kernel (isa, precision, op); -ENOTSUP when this build lacks it. */
int hpb_peak_shape(int isa, int precision, int op, struct hpb_peak_shape *out);

/* Most iterations of one kernel call: chains count in floating point and must stay exact. */
uint64_t hpb_peak_max_iters(int precision);

/* Runs one call of a peak kernel in the calling thread: out receives every lane of every chain
 * (fma_chains + mul_chains + add_chains times lanes values, at most 512) and *valid is 1 when
 * each equals its analytic value. -ENOTSUP for a kernel or ISA not available here. */
int hpb_peak_run(int isa, int precision, int op, uint64_t iters, double *out, int *valid);

/* Times `reps` samples of `calls` kernel calls of `iters` iterations on each selected thread,
 * each sample starting on a barrier: times[r*nactive + k] in seconds, -1 where the chains did
 * not end at their analytic values; migrated[r*nactive + k] (if not NULL) as for the clock. */
int hpb_peak_measure(hpb_team *team, int isa, int precision, int op, uint64_t iters,
                     uint64_t calls, int reps, double *times, int *migrated);

/* The scalar the stream kernels use (STREAM's 3.0). */
double hpb_stream_scalar(void);

/* The Wilson / domain-wall hopping term's pieces for a rank that exchanges halos (layouts as
 * in native/src/dslash.h): one application to the output sites [begin, end) of a field, shared
 * by the team's active threads; and a face's send buffer, spins 0 and 1 of
 * (1 + sign g_mu) in(site) for each of n sites, 12 ls floats a site. -EINVAL, -ENOTSUP. */
int hpb_dslash_apply(hpb_team *team, int isa, const float *gauge_fwd, const float *gauge_bwd,
                     const float *in, float *out, const int32_t *nb, uint64_t begin,
                     uint64_t end, int ls);
int hpb_dslash_project(hpb_team *team, const float *in, int ls, const int32_t *sites, uint64_t n,
                       int mu, int sign, float *buf);

/* A rank's share of the CG problem and how it talks to the others: the global grid, the first
 * point of this rank's box, and two callbacks the team's first thread calls: exchange fills
 * the ghost entries x[n ..] from the neighbouring ranks (blocks as hpb_cg_halo lays out), sum
 * replaces *v by its sum over the ranks. */
struct hpb_cg_comm {
    int gdims[3], offset[3];
    void (*exchange)(void *ctx, double *x);
    void (*sum)(void *ctx, double *v);
    void *ctx;
};

/* The halo of a box of dims at offset in a grid of gdims: counts[d] points in the ghost block
 * of each of the 27 neighbouring boxes d = (dz + 1) * 9 + (dy + 1) * 3 + dx + 1 (0 for the box
 * itself and boxes outside the grid); blocks follow each other in d's order after the n local
 * entries, each in (z, y, x) order. send (NULL: not wanted; else sum of counts entries) gets,
 * block by block, the local indices box d needs from this one, in the order box d lays out
 * its ghosts from us. */
int hpb_cg_halo(const int dims[3], const int gdims[3], const int offset[3], uint64_t *counts,
                int32_t *send);

/* CG from x = 0 to ||r|| <= tol ||b|| or max_iters on this rank's box (comm NULL: the whole
 * grid, one rank), b = A 1. x (n doubles) gets the solution, history (max_iters + 1) the
 * residual norms; out[0..5]: iterations, the seconds of SpMV, dot products (with their sum
 * over ranks), vector updates, the whole loop, and halo exchange (thread 0's clock). */
int hpb_cg_solve_domain(hpb_team *team, const int dims[3], const struct hpb_cg_comm *comm,
                        int max_iters, double tol, double *x, double *history, double *out);

/* The same in parts, for solves that share one matrix: create builds the box's matrix and
 * b = A 1 on the team's threads (each first touching its rows; NULL: bad dims or out of
 * memory), run solves from x = 0 as hpb_cg_solve_domain does (on the same team), free frees. */
typedef struct cg_job hpb_cg;
hpb_cg *hpb_cg_create(hpb_team *team, const int dims[3], const struct hpb_cg_comm *comm);
int hpb_cg_run(hpb_team *team, hpb_cg *cg, int max_iters, double tol, double *x,
               double *history, double *out);
void hpb_cg_free(hpb_cg *cg);

#ifdef __cplusplus
}
#endif
#endif
