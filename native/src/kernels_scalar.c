/* kernels_scalar.c: the scalar variant of the streaming kernels (built with vectorisation off). */
#include "kernels.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#include <string.h>
#endif

static double copy_k(double *restrict dst, const double *restrict x, const double *restrict y,
                     size_t n, double s)
{
    (void)y; (void)s;
    for (size_t i = 0; i < n; i++) dst[i] = x[i];
    return 0.0;
}

static double scale_k(double *restrict dst, const double *restrict x, const double *restrict y,
                      size_t n, double s)
{
    (void)y;
    for (size_t i = 0; i < n; i++) dst[i] = s * x[i];
    return 0.0;
}

static double add_k(double *restrict dst, const double *restrict x, const double *restrict y,
                    size_t n, double s)
{
    (void)s;
    for (size_t i = 0; i < n; i++) dst[i] = x[i] + y[i];
    return 0.0;
}

static double triad_k(double *restrict dst, const double *restrict x, const double *restrict y,
                      size_t n, double s)
{
    for (size_t i = 0; i < n; i++) dst[i] = x[i] + s * y[i];
    return 0.0;
}

static double load_k(double *restrict dst, const double *restrict x, const double *restrict y,
                     size_t n, double s)
{
    (void)dst; (void)y; (void)s;
    /* loads only; the empty asm keeps each loaded value, so no load is optimised away */
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        __asm__ volatile("" : : "r"(v));
    }
    return 0.0;
}

static double sum_k(double *restrict dst, const double *restrict x, const double *restrict y,
                    size_t n, double s)
{
    (void)dst; (void)y; (void)s;
    /* four independent sums hide the add latency without vector registers */
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++) s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

static double store_k(double *restrict dst, const double *restrict x, const double *restrict y,
                      size_t n, double s)
{
    (void)x; (void)y;
    for (size_t i = 0; i < n; i++) dst[i] = s;
    return 0.0;
}

#if defined(__x86_64__)
/* Scalar non-temporal stores: SSE2's movnti is part of the x86-64 baseline. */
static inline void stream_double(double *p, double v)
{
    long long bits;
    memcpy(&bits, &v, sizeof bits);
    _mm_stream_si64((long long *)p, bits);
}

static double copy_nt(double *restrict dst, const double *restrict x, const double *restrict y,
                      size_t n, double s)
{
    (void)y; (void)s;
    for (size_t i = 0; i < n; i++) stream_double(&dst[i], x[i]);
    return 0.0;
}

static double scale_nt(double *restrict dst, const double *restrict x, const double *restrict y,
                       size_t n, double s)
{
    (void)y;
    for (size_t i = 0; i < n; i++) stream_double(&dst[i], s * x[i]);
    return 0.0;
}

static double add_nt(double *restrict dst, const double *restrict x, const double *restrict y,
                     size_t n, double s)
{
    (void)s;
    for (size_t i = 0; i < n; i++) stream_double(&dst[i], x[i] + y[i]);
    return 0.0;
}

static double triad_nt(double *restrict dst, const double *restrict x, const double *restrict y,
                       size_t n, double s)
{
    for (size_t i = 0; i < n; i++) stream_double(&dst[i], x[i] + s * y[i]);
    return 0.0;
}

static double store_nt(double *restrict dst, const double *restrict x, const double *restrict y,
                       size_t n, double s)
{
    (void)x; (void)y;
    for (size_t i = 0; i < n; i++) stream_double(&dst[i], s);
    return 0.0;
}
#define NT(f) f
#else
#define NT(f) NULL
#endif

const hpb_kernel_fn hpb_kernels_scalar[HPB_KERNEL_COUNT][2] = {
    [HPB_KERNEL_COPY] = {copy_k, NT(copy_nt)},
    [HPB_KERNEL_SCALE] = {scale_k, NT(scale_nt)},
    [HPB_KERNEL_ADD] = {add_k, NT(add_nt)},
    [HPB_KERNEL_TRIAD] = {triad_k, NT(triad_nt)},
    [HPB_KERNEL_LOAD] = {load_k, NULL},
    [HPB_KERNEL_STORE] = {store_k, NT(store_nt)},
    [HPB_KERNEL_SUM] = {sum_k, NULL},
};
