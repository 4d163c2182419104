/* kernels_simd.h: the SIMD streaming kernels, written once and instantiated per ISA by the
 * including file, which defines VEC, W (doubles per vector), TARGET and the V_* operations. */

/* Four vectors per iteration keep two load ports and the store port busy; the remainder that
 * does not fill a whole unrolled step runs as scalar code. */
#define U 4

#define STREAM_KERNEL(name, STORE, body_vec, body_scalar, FENCE)                                  \
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
        FENCE;                                                                                  \
        return 0.0;                                                                             \
    }

#define NOFENCE ((void)0)
#define SFENCE _mm_sfence()

STREAM_KERNEL(copy_r, V_STORE, V_LOAD(&x[j]), x[j], NOFENCE)
STREAM_KERNEL(copy_n, V_STREAM, V_LOAD(&x[j]), x[j], SFENCE)
STREAM_KERNEL(scale_r, V_STORE, V_MUL(vs, V_LOAD(&x[j])), s * x[j], NOFENCE)
STREAM_KERNEL(scale_n, V_STREAM, V_MUL(vs, V_LOAD(&x[j])), s * x[j], SFENCE)
STREAM_KERNEL(add_r, V_STORE, V_ADD(V_LOAD(&x[j]), V_LOAD(&y[j])), x[j] + y[j], NOFENCE)
STREAM_KERNEL(add_n, V_STREAM, V_ADD(V_LOAD(&x[j]), V_LOAD(&y[j])), x[j] + y[j], SFENCE)
STREAM_KERNEL(triad_r, V_STORE, V_FMADD(vs, V_LOAD(&y[j]), V_LOAD(&x[j])), x[j] + s * y[j], NOFENCE)
STREAM_KERNEL(triad_n, V_STREAM, V_FMADD(vs, V_LOAD(&y[j]), V_LOAD(&x[j])), x[j] + s * y[j], SFENCE)
STREAM_KERNEL(store_r, V_STORE, vs, s, NOFENCE)
STREAM_KERNEL(store_n, V_STREAM, vs, s, SFENCE)

/* Eight accumulators: two loads per cycle against a four-cycle add latency. */
TARGET static double load_r(double *restrict dst, const double *restrict x,
                            const double *restrict y, size_t n, double s)
{
    (void)dst; (void)y; (void)s;
    VEC acc[8];
    for (int k = 0; k < 8; k++) acc[k] = V_ZERO();
    size_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W)
        for (int k = 0; k < 8; k++) acc[k] = V_ADD(acc[k], V_LOAD(&x[i + (size_t)k * W]));
    for (int k = 1; k < 8; k++) acc[0] = V_ADD(acc[0], acc[k]);
    double sum = V_REDUCE(acc[0]);
    for (; i < n; i++) sum += x[i];
    return sum;
}

const hpb_kernel_fn TABLE[HPB_KERNEL_COUNT][2] = {
    [HPB_KERNEL_COPY] = {copy_r, copy_n},
    [HPB_KERNEL_SCALE] = {scale_r, scale_n},
    [HPB_KERNEL_ADD] = {add_r, add_n},
    [HPB_KERNEL_TRIAD] = {triad_r, triad_n},
    [HPB_KERNEL_LOAD] = {load_r, NULL},
    [HPB_KERNEL_STORE] = {store_r, store_n},
};
