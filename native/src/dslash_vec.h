/* dslash_vec.h: the hopping term for slice counts that fill whole vectors (Ls a multiple of the
 * vector's lanes), written with explicit vectors of VBYTES bytes: each spin-colour component of
 * a site is nv vectors of slices, and each link entry, shared by the slices, is broadcast. The
 * spin structure folds at compile time (mu and the sign are constants in each direction), so a
 * direction is loads, adds and fused multiply-adds on whole vectors. Included by the AVX2 and
 * AVX-512 variants after dslash_simd.h, with TARGET, NAME and VBYTES defined; a variant may
 * include it again with another NAME and a narrower VBYTES for slice counts that fill only
 * narrower vectors (Ls = 8 or 12 on AVX-512). */

#define VL (VBYTES / 4)
typedef float NAME(vf) __attribute__((vector_size(VBYTES), aligned(4)));
#define VF NAME(vf)
/* component (spin, colour, re/im) of a site, vector v */
#define VAT(p, spin, c, ri, v) (*(const VF *)((p) + (((spin) * 3 + (c)) * 2 + (ri)) * ls + (v) * VL))

/* (re, im) of phase * (zr, zi), phase 0 = 1, 1 = i, 2 = -1, 3 = -i */
#define PHASE_RE(ph, zr, zi) ((ph) == 0 ? (zr) : (ph) == 1 ? -(zi) : (ph) == 2 ? -(zr) : (zi))
#define PHASE_IM(ph, zr, zi) ((ph) == 0 ? (zi) : (ph) == 1 ? (zr) : (ph) == 2 ? -(zi) : -(zr))

/* acc += (1 + sg g_mu) U psi (dagger: U^+), for every vector of slices */
TARGET static inline __attribute__((always_inline)) void NAME(vdir)(
    const float *restrict psi, const float *restrict u, const int dagger, const int mu,
    const float sg, VF *restrict acc, const int nv)
{
    const int ls = nv * VL;
    for (int v = 0; v < nv; v++) {
        VF h[2][3][2], uh[2][3][2];
        for (int i = 0; i < 2; i++) {
            const int col = G_COL[mu][i], ph = G_PHASE[mu][i];
            for (int c = 0; c < 3; c++) {
                const VF br = VAT(psi, col, c, 0, v), bi = VAT(psi, col, c, 1, v);
                h[i][c][0] = VAT(psi, i, c, 0, v) + sg * PHASE_RE(ph, br, bi);
                h[i][c][1] = VAT(psi, i, c, 1, v) + sg * PHASE_IM(ph, br, bi);
            }
        }
        for (int i = 0; i < 2; i++)
            for (int a = 0; a < 3; a++) {
                VF yr = {0}, yi = {0};
                for (int b = 0; b < 3; b++) {
                    const int at = dagger ? (b * 3 + a) * 2 : (a * 3 + b) * 2;
                    const float ur = u[at], ui = dagger ? -u[at + 1] : u[at + 1];
                    yr += ur * h[i][b][0] - ui * h[i][b][1];
                    yi += ur * h[i][b][1] + ui * h[i][b][0];
                }
                uh[i][a][0] = yr;
                uh[i][a][1] = yi;
            }
        for (int i = 0; i < 2; i++)
            for (int c = 0; c < 3; c++)
                for (int ri = 0; ri < 2; ri++) acc[((i * 3 + c) * 2 + ri) * nv + v] += uh[i][c][ri];
        for (int i = 2; i < 4; i++) {
            const int col = G_COL[mu][i], ph = G_PHASE[mu][i];
            for (int c = 0; c < 3; c++) {
                const VF zr = uh[col][c][0], zi = uh[col][c][1];
                acc[((i * 3 + c) * 2) * nv + v] += sg * PHASE_RE(ph, zr, zi);
                acc[((i * 3 + c) * 2 + 1) * nv + v] += sg * PHASE_IM(ph, zr, zi);
            }
        }
    }
}

#define VDIRECTION(mu)                                                                 \
    do {                                                                               \
        const int32_t yf = a->nb[x * 8 + (mu)], yb = a->nb[x * 8 + 4 + (mu)];          \
        NAME(vdir)(a->in + (size_t)yf * site, a->gauge_fwd + (x * 4 + (mu)) * 18, 0, (mu), \
                   -1.0f, acc, nv);                                                    \
        NAME(vdir)(a->in + (size_t)yb * site, a->gauge_bwd + ((size_t)yb * 4 + (mu)) * 18, \
                   1, (mu), 1.0f, acc, nv);                                            \
    } while (0)

TARGET static inline __attribute__((always_inline)) void NAME(vbody)(
    const struct hpb_dslash_args *a, size_t begin, size_t end, const int nv)
{
    const int ls = nv * VL;
    const size_t site = (size_t)24 * (size_t)ls;
    for (size_t x = begin; x < end; x++) {
        VF acc[24 * 4];
        for (int k = 0; k < 24 * nv; k++) acc[k] = (VF){0};
        VDIRECTION(0);
        VDIRECTION(1);
        VDIRECTION(2);
        VDIRECTION(3);
        float *o = a->out + x * site;
        for (int k = 0; k < 24; k++)
            for (int v = 0; v < nv; v++) *(VF *)(o + k * ls + v * VL) = acc[k * nv + v];
    }
}

/* Ls of 1 to 4 whole vectors: the explicit-vector body; 0 where Ls does not fill them. */
TARGET static int NAME(vsites)(const struct hpb_dslash_args *a, size_t begin, size_t end)
{
    if (a->ls % VL) return 0;
    switch (a->ls / VL) {
    case 1: NAME(vbody)(a, begin, end, 1); return 1;
    case 2: NAME(vbody)(a, begin, end, 2); return 1;
    case 3: NAME(vbody)(a, begin, end, 3); return 1;
    case 4: NAME(vbody)(a, begin, end, 4); return 1;
    default: return 0;
    }
}

#undef VBYTES
#undef VL
#undef VF
#undef VAT
#undef PHASE_RE
#undef PHASE_IM
#undef VDIRECTION
