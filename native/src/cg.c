/* cg.c: an HPCG-shaped conjugate gradient on one rank: the 27-point stencil of an nx x ny x nz
 * grid (diagonal 26, -1 to each neighbour inside the grid, zero Dirichlet boundary) stored as
 * ELL rows of 27 (value, column) pairs, double precision, unpreconditioned CG. The team's
 * threads share the rows (z-planes in equal shares); dot products reduce through per-thread
 * partials summed in a fixed order, so every thread sees the same value. Times of each phase
 * (SpMV, dot products, vector updates) are taken by thread 0 between barriers. */
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
    double *val;     /* [n][27] */
    int32_t *col;    /* [n][27] */
    double *x, *b, *r, *p, *ap;
    double *partial; /* [threads * 8], a cache line each */
    int max_iters;
    double tol;
    double *history; /* ||r_k|| for k = 0 .. iterations */
    int iterations;
    double t_spmv, t_dot, t_axpy, t_total;
};

static void rows_of(const struct hpb_thread *th, size_t n, size_t *begin, size_t *end)
{
    const size_t t = (size_t)th->team->nactive, k = (size_t)th->rank;
    *begin = n * k / t;
    *end = n * (k + 1) / t;
}

/* The matrix rows of this thread's share, first touched here. */
static void build(const struct cg_job *j, size_t begin, size_t end)
{
    const int nx = j->nx, ny = j->ny, nz = j->nz;
    for (size_t i = begin; i < end; i++) {
        const int x = (int)(i % (size_t)nx), y = (int)(i / (size_t)nx % (size_t)ny);
        const int z = (int)(i / ((size_t)nx * (size_t)ny));
        int k = 0;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    const int X = x + dx, Y = y + dy, Z = z + dz;
                    const int inside = X >= 0 && X < nx && Y >= 0 && Y < ny && Z >= 0 && Z < nz;
                    const size_t c = inside ? ((size_t)Z * (size_t)ny + (size_t)Y) * (size_t)nx +
                                                  (size_t)X : i;
                    j->col[i * NNZ + (size_t)k] = (int32_t)c;
                    j->val[i * NNZ + (size_t)k] = !inside ? 0.0 : (c == i ? 26.0 : -1.0);
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

/* sum over threads of a . b, the same on every thread */
static double dot(struct hpb_thread *th, const struct cg_job *j, const double *a, const double *b,
                  size_t begin, size_t end)
{
    double s = 0.0;
    for (size_t i = begin; i < end; i++) s += a[i] * b[i];
    j->partial[(size_t)th->rank * 8] = s;
    hpb_team_barrier(th);
    double total = 0.0;
    for (int t = 0; t < th->team->nactive; t++) total += j->partial[(size_t)t * 8];
    hpb_team_barrier(th); /* every thread has read the partials before they are written again */
    return total;
}

static int cg_job(struct hpb_thread *th, void *arg)
{
    struct cg_job *j = arg;
    size_t begin, end;
    rows_of(th, j->n, &begin, &end);
    const int lead = th->rank == 0;
    build(j, begin, end);
    for (size_t i = begin; i < end; i++) {
        j->x[i] = 0.0;
        j->ap[i] = 0.0;
    }
    hpb_team_barrier(th);
    /* b = A 1: the exact solution is the vector of ones */
    for (size_t i = begin; i < end; i++) {
        double s = 0.0;
        for (int k = 0; k < NNZ; k++) s += j->val[i * NNZ + (size_t)k];
        j->b[i] = s;
        j->r[i] = s; /* x = 0: r = b */
        j->p[i] = s;
    }
    hpb_team_barrier(th);
    double rr = dot(th, j, j->r, j->r, begin, end);
    const double stop = j->tol * j->tol * rr;
    if (lead) j->history[0] = sqrt(rr);
    double t_spmv = 0, t_dot = 0, t_axpy = 0;
    const double t0 = hpb_now();
    int k = 0;
    while (k < j->max_iters && rr > stop) {
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

/* CG on the nx x ny x nz problem from x = 0 to ||r|| <= tol ||b|| or max_iters. x (n doubles)
 * gets the solution, history (max_iters + 1) the residual norms; out[0..4]: iterations, and the
 * seconds of SpMV, dot products, vector updates and the whole loop (thread 0's clock). */
int hpb_cg_solve(hpb_team *team, int nx, int ny, int nz, int max_iters, double tol, double *x,
                 double *history, double *out)
{
    if (!team || nx < 2 || ny < 2 || nz < 2 || max_iters < 1 || !(tol > 0) || !x || !history ||
        !out)
        return -EINVAL;
    const size_t n = (size_t)nx * (size_t)ny * (size_t)nz;
    if (n > (size_t)INT32_MAX) return -EINVAL;
    struct cg_job j = {nx, ny, nz, n, NULL, NULL, x, NULL, NULL, NULL, NULL, NULL, max_iters, tol,
                       history, 0, 0, 0, 0, 0};
    j.val = malloc(n * NNZ * sizeof(double));
    j.col = malloc(n * NNZ * sizeof(int32_t));
    j.b = malloc(n * sizeof(double));
    j.r = malloc(n * sizeof(double));
    j.p = malloc(n * sizeof(double));
    j.ap = malloc(n * sizeof(double));
    j.partial = calloc((size_t)team->n * 8, sizeof(double));
    int rc = -ENOMEM;
    if (j.val && j.col && j.b && j.r && j.p && j.ap && j.partial) {
        rc = hpb_team_run(team, cg_job, &j);
        out[0] = j.iterations;
        out[1] = j.t_spmv;
        out[2] = j.t_dot;
        out[3] = j.t_axpy;
        out[4] = j.t_total;
    }
    free(j.val);
    free(j.col);
    free(j.b);
    free(j.r);
    free(j.p);
    free(j.ap);
    free(j.partial);
    return rc;
}
