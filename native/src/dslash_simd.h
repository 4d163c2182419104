/* dslash_simd.h: the hopping term, written once over the slice index s (the innermost, unit
 * stride dimension, which the vectoriser maps to lanes) and instantiated per ISA by the
 * including file, which defines TARGET and NAME. The spin structure is fixed at compile time:
 * for direction mu and sign sg, (1 + sg g_mu) has rows 0 and 1 as its independent rows (the
 * half spinor h), and rows 2 and 3 are sg g_mu[i] h[col(i)] (g_mu squares to one). */

#include <string.h>

#define IDX(spin, c, ri) ((((spin) * 3 + (c)) * 2 + (ri)) * ls)

/* out += sg * phase * (zr, zi), lane by lane */
#define PHASE_ACC(ph, sg, outr, outi, zr, zi)                                      \
    do {                                                                           \
        for (int s = 0; s < ls; s++) {                                             \
            const float r_ = (zr)[s], i_ = (zi)[s];                                \
            switch (ph) {                                                          \
            case 0: (outr)[s] += (sg) * r_; (outi)[s] += (sg) * i_; break;         \
            case 1: (outr)[s] -= (sg) * i_; (outi)[s] += (sg) * r_; break;         \
            case 2: (outr)[s] -= (sg) * r_; (outi)[s] -= (sg) * i_; break;         \
            default: (outr)[s] += (sg) * i_; (outi)[s] -= (sg) * r_; break;        \
            }                                                                      \
        }                                                                          \
    } while (0)

/* h = rows 0 and 1 of (1 + sg g_mu) psi */
TARGET static inline __attribute__((always_inline)) void NAME(project)(
    int mu, float sg, const float *restrict psi, float *restrict h, int ls)
{
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 3; c++) {
            float *hr = h + IDX(i, c, 0), *hi = h + IDX(i, c, 1);
            memcpy(hr, psi + IDX(i, c, 0), sizeof(float) * (size_t)ls);
            memcpy(hi, psi + IDX(i, c, 1), sizeof(float) * (size_t)ls);
            const int j = G_COL[mu][i];
            PHASE_ACC(G_PHASE[mu][i], sg, hr, hi, psi + IDX(j, c, 0), psi + IDX(j, c, 1));
        }
}

/* uh[i][a] = sum_b U[a][b] h[i][b] (dagger: conj(U[b][a])) for the two spin rows */
TARGET static inline __attribute__((always_inline)) void NAME(mul)(
    const float *restrict u, int dagger, const float *restrict h, float *restrict uh, int ls)
{
    for (int i = 0; i < 2; i++)
        for (int a = 0; a < 3; a++) {
            float *yr = uh + IDX(i, a, 0), *yi = uh + IDX(i, a, 1);
            for (int s = 0; s < ls; s++) yr[s] = yi[s] = 0.0f;
            for (int b = 0; b < 3; b++) {
                const int at = dagger ? (b * 3 + a) * 2 : (a * 3 + b) * 2;
                const float ur = u[at], ui = dagger ? -u[at + 1] : u[at + 1];
                const float *xr = h + IDX(i, b, 0), *xi = h + IDX(i, b, 1);
                for (int s = 0; s < ls; s++) {
                    yr[s] += ur * xr[s] - ui * xi[s];
                    yi[s] += ur * xi[s] + ui * xr[s];
                }
            }
        }
}

/* acc += (1 + sg g_mu) reconstructed from uh: rows 0, 1 as they are, rows 2, 3 by phase */
TARGET static inline __attribute__((always_inline)) void NAME(accumulate)(
    int mu, float sg, const float *restrict uh, float *restrict acc, int ls)
{
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 3; c++)
            for (int ri = 0; ri < 2; ri++) {
                float *o = acc + IDX(i, c, ri);
                const float *y = uh + IDX(i, c, ri);
                for (int s = 0; s < ls; s++) o[s] += y[s];
            }
    for (int i = 2; i < 4; i++)
        for (int c = 0; c < 3; c++) {
            const int j = G_COL[mu][i];
            PHASE_ACC(G_PHASE[mu][i], sg, acc + IDX(i, c, 0), acc + IDX(i, c, 1),
                      uh + IDX(j, c, 0), uh + IDX(j, c, 1));
        }
}

#define DIRECTION(mu)                                                                  \
    do {                                                                               \
        const int32_t yf = a->nb[x * 8 + (mu)], yb = a->nb[x * 8 + 4 + (mu)];          \
        NAME(project)((mu), -1.0f, a->in + (size_t)yf * site, h, ls);                  \
        NAME(mul)(a->gauge_fwd + (x * 4 + (mu)) * 18, 0, h, uh, ls);                   \
        NAME(accumulate)((mu), -1.0f, uh, acc, ls);                                    \
        NAME(project)((mu), 1.0f, a->in + (size_t)yb * site, h, ls);                   \
        NAME(mul)(a->gauge_bwd + ((size_t)yb * 4 + (mu)) * 18, 1, h, uh, ls);          \
        NAME(accumulate)((mu), 1.0f, uh, acc, ls);                                     \
    } while (0)

TARGET static inline __attribute__((always_inline)) void NAME(body)(
    const struct hpb_dslash_args *a, size_t begin, size_t end, const int ls)
{
    const size_t site = (size_t)24 * (size_t)ls;
    float h[12 * HPB_DSLASH_MAX_LS] __attribute__((aligned(64)));
    float uh[12 * HPB_DSLASH_MAX_LS] __attribute__((aligned(64)));
    float acc[24 * HPB_DSLASH_MAX_LS] __attribute__((aligned(64)));
    for (size_t x = begin; x < end; x++) {
        memset(acc, 0, sizeof(float) * site);
        DIRECTION(0);
        DIRECTION(1);
        DIRECTION(2);
        DIRECTION(3);
        memcpy(a->out + x * site, acc, sizeof(float) * site);
    }
}

/* The slice counts in use (Wilson, and Grid's domain-wall Ls) get a body with their count
 * known at compile time: whole vectors, no remainder loops; any other count the generic one. */
TARGET void NAME(sites)(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    switch (a->ls) {
    case 1: NAME(body)(a, begin, end, 1); break;
    case 8: NAME(body)(a, begin, end, 8); break;
    case 12: NAME(body)(a, begin, end, 12); break;
    case 16: NAME(body)(a, begin, end, 16); break;
    default: NAME(body)(a, begin, end, a->ls); break;
    }
}

#undef IDX
#undef PHASE_ACC
#undef DIRECTION
