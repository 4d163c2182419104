/* kernels_simd.h: the SIMD streaming kernels, written once and instantiated per ISA by the
 * including file, which defines VEC, W (doubles per vector), TARGET and the V_* operations. */

/* Four vectors per iteration keep two load ports and the store port busy; the remainder that
 * does not fill a whole unrolled step runs as scalar code. */
#define U 4

#define STREAM_KERNEL(name, STORE, body_vec, body_scalar)                                  \
    TARGET static double name(double *restrict dst, const double *restrict x,                  \
                              const double *restrict y, size_t n, double s)                     \
    {                                                                                           \
        (void)x; (void)y;                                                                       \
        const VEC vs = V_SET1(s);                                                               \
        (void)vs;                                                                               \
        size_t i = 0;                                                                           \
        for (; i + U * W <= n; i += U * W) {                                                    \
            for (size_t u = 0; u < U; u++) {                                                    \
                const size_t j = i + u * W;                                                     \
                STORE(&dst[j], body_vec);                                                       \
            }                                                                                   \
        }                                                                                       \
        for (; i < n; i++) {                                                                    \
            const size_t j = i;                                                                 \
            dst[j] = body_scalar;                                                               \
        }                                                                                       \
        return 0.0;                                                                             \
    }

/* Non-temporal variants do not fence: the driver fences once after a sample's repetitions
 * (hpb_store_fence), as a fence per call would stall on small arrays. */
STREAM_KERNEL(copy_r, V_STORE, V_LOAD(&x[j]), x[j])
STREAM_KERNEL(copy_n, V_STREAM, V_LOAD(&x[j]), x[j])
STREAM_KERNEL(scale_r, V_STORE, V_MUL(vs, V_LOAD(&x[j])), s * x[j])
STREAM_KERNEL(scale_n, V_STREAM, V_MUL(vs, V_LOAD(&x[j])), s * x[j])
STREAM_KERNEL(add_r, V_STORE, V_ADD(V_LOAD(&x[j]), V_LOAD(&y[j])), x[j] + y[j])
STREAM_KERNEL(add_n, V_STREAM, V_ADD(V_LOAD(&x[j]), V_LOAD(&y[j])), x[j] + y[j])
STREAM_KERNEL(triad_r, V_STORE, V_FMADD(vs, V_LOAD(&y[j]), V_LOAD(&x[j])), x[j] + s * y[j])
STREAM_KERNEL(triad_n, V_STREAM, V_FMADD(vs, V_LOAD(&y[j]), V_LOAD(&x[j])), x[j] + s * y[j])
STREAM_KERNEL(store_r, V_STORE, vs, s)
STREAM_KERNEL(store_n, V_STREAM, vs, s)

/* Streaming loads and nothing else, as likwid-bench's load kernels: on some cores an
 * arithmetic operation per loaded vector already costs L1 bandwidth. The empty asm makes each
 * loaded vector live, so no load is optimised away. */
#define LD(k) do { VEC v_ = V_LOAD(&x[i + k * W]); __asm__ volatile("" : : "x"(v_)); } while (0)
TARGET static double load_r(double *restrict dst, const double *restrict x,
                            const double *restrict y, size_t n, double s)
{
    (void)dst; (void)y; (void)s;
    size_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        LD(0); LD(1); LD(2); LD(3); LD(4); LD(5); LD(6); LD(7);
    }
    for (; i < n; i++) {
        double v_ = x[i];
        __asm__ volatile("" : : "x"(v_));
    }
    return 0.0;
}
#undef LD

/* Eight accumulators: two loads per cycle against a four-cycle add latency. They are variables,
 * not an array, so they live in registers with no stack traffic per call. */
#define ACC(k) a##k = V_ADD(a##k, V_LOAD(&x[i + k * W]))
TARGET static double sum_r(double *restrict dst, const double *restrict x,
                           const double *restrict y, size_t n, double s)
{
    (void)dst; (void)y; (void)s;
    VEC a0 = V_ZERO(), a1 = V_ZERO(), a2 = V_ZERO(), a3 = V_ZERO();
    VEC a4 = V_ZERO(), a5 = V_ZERO(), a6 = V_ZERO(), a7 = V_ZERO();
    size_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        ACC(0); ACC(1); ACC(2); ACC(3); ACC(4); ACC(5); ACC(6); ACC(7);
    }
    a0 = V_ADD(V_ADD(V_ADD(a0, a1), V_ADD(a2, a3)), V_ADD(V_ADD(a4, a5), V_ADD(a6, a7)));
    double sum = V_REDUCE(a0);
    for (; i < n; i++) sum += x[i];
    return sum;
}
#undef ACC

const hpb_kernel_fn TABLE[HPB_KERNEL_COUNT][2] = {
    [HPB_KERNEL_COPY] = {copy_r, copy_n},
    [HPB_KERNEL_SCALE] = {scale_r, scale_n},
    [HPB_KERNEL_ADD] = {add_r, add_n},
    [HPB_KERNEL_TRIAD] = {triad_r, triad_n},
    [HPB_KERNEL_LOAD] = {load_r, NULL},
    [HPB_KERNEL_STORE] = {store_r, store_n},
    [HPB_KERNEL_SUM] = {sum_r, NULL},
};
