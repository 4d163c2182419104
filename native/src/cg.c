/* cg.c: an HPCG-shaped conjugate gradient: the 27-point stencil of a global grid (diagonal 26,
 * -1 to each neighbour inside the grid, zero Dirichlet boundary) stored as ELL rows of 27
 * (value, column) pairs, double precision, unpreconditioned CG. A rank holds one box of the
 * grid; a neighbour outside its box but inside the grid is a ghost entry after the n local
 * ones, grouped by the neighbouring box it lives in (HPCG's layout), filled by the caller's
 * exchange before each SpMV. The team's threads share the rows (z-planes in equal shares);
 * dot products reduce through per-thread partials summed in a fixed order, then over ranks by
 * the caller's sum, so every thread sees the same value. Times of each phase (SpMV, halo
 * exchange, dot products with their reduction, vector updates) are taken by thread 0 between
 * barriers. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpb.h"
#include "team.h"

#define NNZ 27

struct cg_job {
    int nx, ny, nz;
    size_t n;
    const struct hpb_cg_comm *comm; /* NULL: one rank */
    int gdims[3], offset[3];
    size_t ghost_base[27];          /* where each neighbouring box's ghosts start (after n) */
    double *val;     /* [n][27] */
    int32_t *col;    /* [n][27] */
    double *x, *b, *r, *p, *ap;
    double *partial; /* [threads * 8], a cache line each */
    int max_iters;
    double tol;
    double *history; /* ||r_k|| for k = 0 .. iterations */
    double reduced;  /* the lead thread's reduction, read by every thread */
    int iterations;
    double t_spmv, t_dot, t_axpy, t_total, t_halo;
};

static void rows_of(const struct hpb_thread *th, size_t n, size_t *begin, size_t *end)
{
    const size_t t = (size_t)th->team->nactive, k = (size_t)th->rank;
    *begin = n * k / t;
    *end = n * (k + 1) / t;
}

/* The ghost block of neighbouring box d (d = (dz + 1) * 9 + (dy + 1) * 3 + dx + 1): the range
 * of each axis it spans (a plane, edge or corner next to the box), and its point count, zero
 * where that box would lie outside the grid. */
static size_t block(const int dims[3], const int gdims[3], const int offset[3], int d, int lo[3],
                    int hi[3])
{
    const int step[3] = {d % 3 - 1, d / 3 % 3 - 1, d / 9 - 1};
    size_t count = 1;
    for (int a = 0; a < 3; a++) {
        lo[a] = step[a] < 0 ? -1 : step[a] > 0 ? dims[a] : 0;
        hi[a] = step[a] < 0 ? 0 : step[a] > 0 ? dims[a] + 1 : dims[a];
        if (offset[a] + lo[a] < 0 || offset[a] + hi[a] > gdims[a]) return 0;
        count *= (size_t)(hi[a] - lo[a]);
    }
    return d == 13 ? 0 : count;
}

int hpb_cg_halo(const int dims[3], const int gdims[3], const int offset[3], uint64_t *counts,
                int32_t *send)
{
    if (!dims || !gdims || !offset || !counts) return -EINVAL;
    size_t at = 0;
    for (int d = 0; d < 27; d++) {
        int lo[3], hi[3];
        counts[d] = block(dims, gdims, offset, d, lo, hi);
        if (!counts[d] || !send) continue;
        /* the points of this box next to box d, in (z, y, x) order: box d's ghosts from us */
        for (int a = 0; a < 3; a++) {
            if (lo[a] < 0) {
                lo[a] = 0;
                hi[a] = 1;
            } else if (lo[a] == dims[a]) {
                lo[a] = dims[a] - 1;
                hi[a] = dims[a];
            }
        }
        for (int z = lo[2]; z < hi[2]; z++)
            for (int y = lo[1]; y < hi[1]; y++)
                for (int x = lo[0]; x < hi[0]; x++)
                    send[at++] = (int32_t)(((size_t)z * (size_t)dims[1] + (size_t)y) *
                                               (size_t)dims[0] + (size_t)x);
    }
    return 0;
}

/* The column of local point (x, y, z) + step: a local row, a ghost, or -1 outside the grid. */
static int64_t column(const struct cg_job *j, int x, int y, int z)
{
    const int p[3] = {x, y, z}, dims[3] = {j->nx, j->ny, j->nz};
    int d = 0, w = 1;
    size_t at = 0, stride = 1;
    for (int a = 0; a < 3; a++, w *= 3) {
        if (j->offset[a] + p[a] < 0 || j->offset[a] + p[a] >= j->gdims[a]) return -1;
        const int side = p[a] < 0 ? 0 : p[a] >= dims[a] ? 2 : 1;
        d += side * w;
        if (side == 1) { /* free axis of the block: this point's place along it */
            at += (size_t)p[a] * stride;
            stride *= (size_t)dims[a];
        }
    }
    if (d == 13) return (int64_t)(((size_t)z * (size_t)j->ny + (size_t)y) * (size_t)j->nx +
                                  (size_t)x);
    return (int64_t)(j->n + j->ghost_base[d] + at);
}

/* The matrix rows of this thread's share, first touched here. */
static void build(const struct cg_job *j, size_t begin, size_t end)
{
    const int nx = j->nx, ny = j->ny;
    for (size_t i = begin; i < end; i++) {
        const int x = (int)(i % (size_t)nx), y = (int)(i / (size_t)nx % (size_t)ny);
        const int z = (int)(i / ((size_t)nx * (size_t)ny));
        int k = 0;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    const int64_t c = column(j, x + dx, y + dy, z + dz);
                    j->col[i * NNZ + (size_t)k] = (int32_t)(c < 0 ? (int64_t)i : c);
                    j->val[i * NNZ + (size_t)k] = c < 0 ? 0.0 : ((size_t)c == i ? 26.0 : -1.0);
                    k++;
                }
    }
}

static void spmv(const struct cg_job *j, const double *restrict in, double *restrict out,
                 size_t begin, size_t end)
{
    for (size_t i = begin; i < end; i++) {
        const double *v = j->val + i * NNZ;
        const int32_t *c = j->col + i * NNZ;
        double s = 0.0;
        for (int k = 0; k < NNZ; k++) s += v[k] * in[c[k]];
        out[i] = s;
    }
}

/* sum over threads (and ranks) of a . b, the same on every thread */
static double dot(struct hpb_thread *th, struct cg_job *j, const double *a, const double *b,
                  size_t begin, size_t end)
{
    double s = 0.0;
    for (size_t i = begin; i < end; i++) s += a[i] * b[i];
    j->partial[(size_t)th->rank * 8] = s;
    hpb_team_barrier(th);
    if (th->rank == 0) {
        double total = 0.0;
        for (int t = 0; t < th->team->nactive; t++) total += j->partial[(size_t)t * 8];
        if (j->comm) j->comm->sum(j->comm->ctx, &total);
        j->reduced = total;
    }
    hpb_team_barrier(th);
    const double total = j->reduced;
    hpb_team_barrier(th); /* every thread has read it before the next reduction writes it */
    return total;
}

/* p's ghosts from the neighbouring ranks (p complete on entry) */
static void exchange(struct hpb_thread *th, struct cg_job *j)
{
    if (!j->comm) return;
    if (th->rank == 0) {
        const double t0 = hpb_now();
        j->comm->exchange(j->comm->ctx, j->p);
        j->t_halo += hpb_now() - t0;
    }
    hpb_team_barrier(th);
}

/* The matrix and b = A 1 (the exact solution is the vector of ones), each thread's rows first
 * touched by it; the vectors too. */
static int build_job(struct hpb_thread *th, void *arg)
{
    struct cg_job *j = arg;
    size_t begin, end;
    rows_of(th, j->n, &begin, &end);
    build(j, begin, end);
    for (size_t i = begin; i < end; i++) {
        double s = 0.0; /* the ghosts' entries count: A 1 over the whole grid */
        for (int k = 0; k < NNZ; k++) s += j->val[i * NNZ + (size_t)k];
        j->b[i] = s;
        j->r[i] = 0.0;
        j->p[i] = 0.0;
        j->ap[i] = 0.0;
    }
    return 0;
}

static int cg_job(struct hpb_thread *th, void *arg)
{
    struct cg_job *j = arg;
    size_t begin, end;
    rows_of(th, j->n, &begin, &end);
    const int lead = th->rank == 0;
    for (size_t i = begin; i < end; i++) { /* x = 0: r = b */
        j->x[i] = 0.0;
        j->r[i] = j->b[i];
        j->p[i] = j->b[i];
    }
    hpb_team_barrier(th);
    double rr = dot(th, j, j->r, j->r, begin, end);
    const double stop = j->tol * j->tol * rr;
    if (lead) j->history[0] = sqrt(rr);
    double t_spmv = 0, t_dot = 0, t_axpy = 0;
    const double t0 = hpb_now();
    int k = 0;
    while (k < j->max_iters && rr > stop) {
        exchange(th, j);
        double a = hpb_now();
        spmv(j, j->p, j->ap, begin, end);
        hpb_team_barrier(th);
        double b = hpb_now();
        t_spmv += b - a;
        const double pap = dot(th, j, j->p, j->ap, begin, end);
        a = hpb_now();
        t_dot += a - b;
        const double alpha = rr / pap;
        for (size_t i = begin; i < end; i++) {
            j->x[i] += alpha * j->p[i];
            j->r[i] -= alpha * j->ap[i];
        }
        b = hpb_now();
        t_axpy += b - a;
        const double rr_new = dot(th, j, j->r, j->r, begin, end);
        a = hpb_now();
        t_dot += a - b;
        const double beta = rr_new / rr;
        for (size_t i = begin; i < end; i++) j->p[i] = j->r[i] + beta * j->p[i];
        hpb_team_barrier(th); /* p complete before the next SpMV reads any of it */
        t_axpy += hpb_now() - a;
        rr = rr_new;
        k++;
        if (lead) j->history[k] = sqrt(rr);
    }
    if (lead) {
        j->iterations = k;
        j->t_spmv = t_spmv;
        j->t_dot = t_dot;
        j->t_axpy = t_axpy;
        j->t_total = hpb_now() - t0;
    }
    return 0;
}

void hpb_cg_free(hpb_cg *j)
{
    if (!j) return;
    free(j->val);
    free(j->col);
    free(j->b);
    free(j->r);
    free(j->p);
    free(j->ap);
    free(j->partial);
    free(j);
}

hpb_cg *hpb_cg_create(hpb_team *team, const int dims[3], const struct hpb_cg_comm *comm)
{
    if (!team || !dims || dims[0] < 2 || dims[1] < 2 || dims[2] < 2 ||
        (comm && (!comm->exchange || !comm->sum)))
        return NULL;
    struct cg_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    const size_t n = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2];
    *j = (struct cg_job){.nx = dims[0], .ny = dims[1], .nz = dims[2], .n = n, .comm = comm};
    uint64_t counts[27];
    for (int a = 0; a < 3; a++) {
        j->gdims[a] = comm ? comm->gdims[a] : dims[a];
        j->offset[a] = comm ? comm->offset[a] : 0;
        if (j->offset[a] < 0 || j->offset[a] + dims[a] > j->gdims[a]) {
            free(j);
            return NULL;
        }
    }
    hpb_cg_halo(dims, j->gdims, j->offset, counts, NULL);
    size_t ghosts = 0;
    for (int d = 0; d < 27; d++) {
        j->ghost_base[d] = ghosts;
        ghosts += counts[d];
    }
    if (n + ghosts > (size_t)INT32_MAX) {
        free(j);
        return NULL;
    }
    j->val = malloc(n * NNZ * sizeof(double));
    j->col = malloc(n * NNZ * sizeof(int32_t));
    j->b = malloc(n * sizeof(double));
    j->r = malloc(n * sizeof(double));
    j->p = calloc(n + ghosts, sizeof(double));
    j->ap = malloc(n * sizeof(double));
    j->partial = calloc((size_t)team->n * 8, sizeof(double));
    if (!(j->val && j->col && j->b && j->r && j->p && j->ap && j->partial) ||
        hpb_team_run(team, build_job, j) != 0) {
        hpb_cg_free(j);
        return NULL;
    }
    return j;
}

int hpb_cg_run(hpb_team *team, hpb_cg *j, int max_iters, double tol, double *x,
               double *history, double *out)
{
    if (!team || !j || max_iters < 1 || !(tol > 0) || !x || !history || !out) return -EINVAL;
    j->x = x;
    j->max_iters = max_iters;
    j->tol = tol;
    j->history = history;
    j->t_halo = 0.0;
    const int rc = hpb_team_run(team, cg_job, j);
    out[0] = j->iterations;
    out[1] = j->t_spmv;
    out[2] = j->t_dot;
    out[3] = j->t_axpy;
    out[4] = j->t_total;
    out[5] = j->t_halo;
    return rc;
}

int hpb_cg_solve_domain(hpb_team *team, const int dims[3], const struct hpb_cg_comm *comm,
                        int max_iters, double tol, double *x, double *history, double *out)
{
    if (max_iters < 1 || !(tol > 0) || !x || !history || !out) return -EINVAL;
    hpb_cg *j = hpb_cg_create(team, dims, comm);
    if (!j) return -ENOMEM;
    const int rc = hpb_cg_run(team, j, max_iters, tol, x, history, out);
    hpb_cg_free(j);
    return rc;
}
