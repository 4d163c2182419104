/* dslash.h: the Wilson / domain-wall hopping term on one checkerboard, per ISA variant. */
#ifndef HPB_DSLASH_H
#define HPB_DSLASH_H

#include <stddef.h>
#include <stdint.h>

/* Most fifth-dimension slices (Ls) of a domain-wall field; Wilson is Ls = 1. */
#define HPB_DSLASH_MAX_LS 32

/* Grid's chiral gamma matrices, as the column and the phase of each row's one non-zero entry
 * (phase: 0 = 1, 1 = i, 2 = -1, 3 = -i); directions x, y, z, t. Rows 0 and 1 always take
 * their entry from spins 2 and 3, so a spinor (h0, h1, 0, 0) projects to (h0, h1): a halo site
 * received as a projected half spinor needs no reconstruction. */
static const int G_COL[4][4] = {{3, 2, 1, 0}, {3, 2, 1, 0}, {2, 3, 0, 1}, {2, 3, 0, 1}};
static const int G_PHASE[4][4] = {{1, 1, 3, 3}, {2, 0, 0, 2}, {1, 3, 3, 1}, {0, 0, 0, 0}};

/* One application: out(x) = sum over mu of (1 - g_mu) U_mu(x) in(x + mu)
 *                                        + (1 + g_mu) U_mu(x - mu)^dagger in(x - mu)
 * for the `sites` sites x of one parity, every slice s of Ls sharing the links.
 *   in, out:   [site][spin 4][colour 3][re, im][s]  (single precision, s innermost: the lanes)
 *   gauge_fwd: [site][mu 4][row 3][col 3][re, im]   links at the output parity's sites
 *   gauge_bwd: the same at the other parity's sites (U_mu(x - mu) lives there)
 *   nb:        [site][8] the other parity's index of x + mu (0..3) and x - mu (4..7)
 * The gamma matrices are Grid's chiral basis; the nominal count is 1344 flops per site and
 * slice (projection 12, two SU(3) products 132, accumulation 24, eight directions). */
struct hpb_dslash_args {
    const float *gauge_fwd, *gauge_bwd, *in;
    float *out;
    const int32_t *nb;
    size_t sites;
    int ls;
};

typedef void (*hpb_dslash_fn)(const struct hpb_dslash_args *a, size_t begin, size_t end);

void hpb_dslash_scalar(const struct hpb_dslash_args *a, size_t begin, size_t end);
#if defined(__x86_64__)
void hpb_dslash_avx2(const struct hpb_dslash_args *a, size_t begin, size_t end);
void hpb_dslash_avx512(const struct hpb_dslash_args *a, size_t begin, size_t end);
#endif

#endif
