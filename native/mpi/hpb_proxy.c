/* hpb_proxy.c: the application proxies across ranks, with the native core's kernels (linked
 * from libhpcprobe_native) on a team of threads bound to each rank's CPUs:
 *   dslash: the Wilson / domain-wall hopping term on a 4-D lattice split over a 4-D grid of
 *           ranks, Grid's halo exchange of spin-projected half spinors (12 complex a site and
 *           slice) with the neighbours in every split direction; comms "sequential" (exchange,
 *           then every site) or "overlapped" (the interior sites while the faces travel, then
 *           the boundary sites);
 *   cg:     HPCG's problem shape, a box of the 3-D grid a rank, the 26 neighbouring boxes'
 *           ghosts exchanged before each SpMV and dot products summed over the ranks.
 * Built on first use with the user's mpicc, like hpb_mpi.c, whose output it follows: rank 0
 * writes JSON lines (info, every rank's binding with each thread's CPU, a "begin" line before
 * each point, "check" and "sample" lines, "done"). Checks: given a file of global fields and
 * the expected result (written by hpcprobe from its reference), each rank compares its sites
 * and the relative error over all ranks is printed; the CG check prints the residual history
 * and the distance of the solution from the exact one. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpb.h"

#define MAXLIST 16

static int rank, nranks, nodes;

static void die(const char *msg)
{
    fprintf(stderr, "hpb_proxy (rank %d): %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void *xalloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) die("out of memory");
    memset(p, 0, bytes);
    return p;
}

static int parse_list(const char *text, int *out, int max, char sep)
{
    int n = 0;
    const char *s = text;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n == max) die("bad list of numbers");
        out[n++] = (int)v;
        s = *end == sep ? end + 1 : end;
        if (*end && *end != sep) die("bad list of numbers");
    }
    return n;
}

/* extents a.b.c(.d): n of them, each at least 1 */
static void dims_of(const char *text, int *out, int n)
{
    if (parse_list(text, out, n, '.') != n) die("a grid of extents a.b.c(.d) has the wrong length");
    for (int i = 0; i < n; i++)
        if (out[i] < 1) die("a grid extent is below 1");
}

/* ---- the team on this rank's CPUs, and what each rank reports of its binding ---- */

static hpb_team *team;

static void start_team(int threads)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask)) die("cannot read the affinity mask");
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mask)) cpus[n++] = c;
    if (threads > 0 && threads < n) n = threads;
    const int rc = hpb_team_create(cpus, n, &team);
    if (rc) die("cannot start the thread team on this rank's CPUs");
    char line[2048], host[256];
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    int len = snprintf(line, sizeof line, "{\"type\":\"binding\",\"rank\":%d,\"host\":\"%s\","
                       "\"cpu\":%d,\"cpus\":[", rank, host, sched_getcpu());
    for (int c = 0, first = 1; c < CPU_SETSIZE && len < (int)sizeof line - 600; c++)
        if (CPU_ISSET(c, &mask)) {
            len += snprintf(line + len, sizeof line - (size_t)len, "%s%d", first ? "" : ",", c);
            first = 0;
        }
    /* where each thread of the team found itself after pinning, and its mask's size */
    int seen[CPU_SETSIZE], count[CPU_SETSIZE];
    hpb_team_placement(team, seen, count);
    len += snprintf(line + len, sizeof line - (size_t)len, "],\"threads\":[");
    for (int t = 0; t < n && len < (int)sizeof line - 40; t++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%s%d", t ? "," : "",
                        count[t] == 1 ? seen[t] : -1);
    snprintf(line + len, sizeof line - (size_t)len, "]}");
    char *all = rank == 0 ? malloc(sizeof line * (size_t)nranks) : NULL;
    MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) printf("%s\n", all + (size_t)r * sizeof line);
        free(all);
    }
}

static void begin(const char *what)
{
    if (rank == 0) printf("{\"type\":\"begin\",\"test\":\"%s\",\"size\":0}\n", what);
}

/* a value in [-1, 1) from a 64-bit state (xorshift*), for fields whose values do not matter */
static float noise(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((*s * 0x2545F4914F6CDD1DULL) >> 40) / (float)(1 << 23) - 1.0f;
}

/* ---- dslash ---- */

struct face {
    int mu, up;         /* the ghosts of x + mu (up) or x - mu on the neighbour `from` */
    int from, to;       /* the rank the ghosts come from; the rank our matching face goes to */
    size_t sites;       /* half a plane */
    size_t ghost;       /* index of its first ghost site in the input field */
    int32_t *send;      /* our plane's sites (input parity) the rank `to` needs */
    float *buf;         /* their projection, 12 ls floats a site */
};

struct lattice {
    int dims[4], grid[4], coord[4], ls;
    size_t half, interior, sites_in; /* output sites; interior ones first; input sites */
    float *gauge_fwd, *gauge_bwd, *in, *out;
    int32_t *nb, *order;             /* order[k]: the local site index of output site k */
    struct face faces[8];
    int nfaces;
    MPI_Comm cart;
    MPI_Datatype half_spinor;        /* a face's receive: 12 ls of every 24 ls floats */
};

static void coords_of(const int dims[4], size_t i, int c[4])
{
    for (int a = 0; a < 4; a++) {
        c[a] = (int)(i % (size_t)dims[a]);
        i /= (size_t)dims[a];
    }
}

static size_t index_of(const int dims[4], const int c[4])
{
    return (((size_t)c[3] * (size_t)dims[2] + (size_t)c[2]) * (size_t)dims[1] + (size_t)c[1]) *
               (size_t)dims[0] + (size_t)c[0];
}

/* The index of a site's coordinates other than mu, in local index order. */
static size_t others(const int dims[4], const int c[4], int mu)
{
    size_t at = 0, stride = 1;
    for (int a = 0; a < 4; a++)
        if (a != mu) {
            at += (size_t)c[a] * stride;
            stride *= (size_t)dims[a];
        }
    return at;
}

/* The input-parity sites of the plane c[mu] = at, in local index order: a face's sites. */
static size_t plane(const struct lattice *g, int mu, int at, int32_t *out)
{
    const size_t v = g->half * 2;
    size_t n = 0;
    for (size_t i = 0; i < v; i++) {
        int c[4];
        coords_of(g->dims, i, c);
        if (c[mu] == at && (c[0] + c[1] + c[2] + c[3]) % 2 == 1) out[n++] = (int32_t)(i / 2);
    }
    return n;
}

/* The output parity is even, the input odd; the offsets of the boxes are even, so local and
 * global parities agree. */
static void lattice_build(struct lattice *g, const int dims[4], const int grid[4], int ls)
{
    memset(g, 0, sizeof *g);
    memcpy(g->dims, dims, sizeof g->dims);
    memcpy(g->grid, grid, sizeof g->grid);
    g->ls = ls;
    int periods[4] = {1, 1, 1, 1};
    MPI_Cart_create(MPI_COMM_WORLD, 4, g->grid, periods, 0, &g->cart);
    MPI_Cart_coords(g->cart, rank, 4, g->coord);
    const size_t v = (size_t)dims[0] * dims[1] * dims[2] * dims[3];
    g->half = v / 2;
    size_t ghosts = 0;
    for (int mu = 0; mu < 4; mu++) {
        if (grid[mu] == 1) continue;
        int minus, plus;
        MPI_Cart_shift(g->cart, mu, 1, &minus, &plus);
        for (int up = 1; up >= 0; up--) {
            struct face *f = &g->faces[g->nfaces++];
            f->mu = mu;
            f->up = up;
            f->from = up ? plus : minus;
            f->to = up ? minus : plus;
            f->sites = g->half / (size_t)dims[mu];
            f->ghost = g->half + ghosts;
            ghosts += f->sites;
            f->send = xalloc(f->sites * sizeof(int32_t));
            /* the rank below needs our plane 0 as its x + mu, the rank above our last plane */
            if (plane(g, mu, up ? 0 : dims[mu] - 1, f->send) != f->sites) die("bad face");
            f->buf = xalloc(f->sites * 12 * (size_t)ls * sizeof(float));
        }
    }
    g->sites_in = g->half + ghosts;
    MPI_Type_vector(1, 12 * ls, 24 * ls, MPI_FLOAT, &g->half_spinor);
    MPI_Datatype resized;
    MPI_Type_create_resized(g->half_spinor, 0, (MPI_Aint)(24 * (size_t)ls * sizeof(float)),
                            &resized);
    MPI_Type_free(&g->half_spinor);
    g->half_spinor = resized;
    MPI_Type_commit(&g->half_spinor);
    /* output sites: interior (no split direction leaves the box) first, then the boundary */
    g->order = xalloc(g->half * sizeof(int32_t));
    g->nb = xalloc(g->half * 8 * sizeof(int32_t));
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < v; i++) {
            int c[4];
            coords_of(dims, i, c);
            if ((c[0] + c[1] + c[2] + c[3]) % 2) continue;
            int edge = 0;
            for (int mu = 0; mu < 4; mu++)
                edge |= grid[mu] > 1 && (c[mu] == 0 || c[mu] == dims[mu] - 1);
            if (edge != pass) continue;
            if (!pass) g->interior++;
            g->order[k++] = (int32_t)i;
        }
    /* the neighbours: a local input site, or the ghost at a face's place of the site (its
     * plane's sites in local index order, numbered by their other three coordinates) */
    int32_t *place[8];
    for (int i = 0; i < g->nfaces; i++) {
        const struct face *f = &g->faces[i];
        const int at = f->up ? 0 : dims[f->mu] - 1; /* the plane as the rank `from` has it */
        place[i] = xalloc(v / (size_t)dims[f->mu] * sizeof(int32_t));
        int32_t n = 0;
        for (size_t s = 0; s < v; s++) {
            int c[4];
            coords_of(dims, s, c);
            if (c[f->mu] == at && (c[0] + c[1] + c[2] + c[3]) % 2 == 1)
                place[i][others(dims, c, f->mu)] = n++;
        }
    }
    for (k = 0; k < g->half; k++) {
        int c[4];
        coords_of(dims, (size_t)g->order[k], c);
        for (int mu = 0; mu < 4; mu++)
            for (int up = 1; up >= 0; up--) {
                int n[4];
                memcpy(n, c, sizeof n);
                n[mu] += up ? 1 : -1;
                int32_t at;
                if ((n[mu] < 0 || n[mu] >= dims[mu]) && grid[mu] > 1) {
                    int i = 0;
                    while (g->faces[i].mu != mu || g->faces[i].up != up) i++;
                    at = (int32_t)g->faces[i].ghost + place[i][others(dims, c, mu)];
                } else {
                    n[mu] = (n[mu] + dims[mu]) % dims[mu];
                    at = (int32_t)(index_of(dims, n) / 2);
                }
                g->nb[k * 8 + (size_t)(up ? mu : 4 + mu)] = at;
            }
    }
    for (int i = 0; i < g->nfaces; i++) free(place[i]);
    const size_t link = 72, site = 24 * (size_t)ls;
    g->gauge_fwd = xalloc(g->half * link * sizeof(float));
    g->gauge_bwd = xalloc(g->sites_in * link * sizeof(float));
    g->in = xalloc(g->sites_in * site * sizeof(float));
    g->out = xalloc(g->half * site * sizeof(float));
}

static void lattice_free(struct lattice *g)
{
    for (int f = 0; f < g->nfaces; f++) {
        free(g->faces[f].send);
        free(g->faces[f].buf);
    }
    free(g->gauge_fwd);
    free(g->gauge_bwd);
    free(g->in);
    free(g->out);
    free(g->nb);
    free(g->order);
    MPI_Type_free(&g->half_spinor);
    MPI_Comm_free(&g->cart);
}

/* The links at the ghost sites of each face (U_mu(x - mu) lives on the rank below): once. */
static void exchange_links(struct lattice *g)
{
    MPI_Request req[16];
    int nreq = 0;
    float *bufs[8];
    for (int i = 0; i < g->nfaces; i++) {
        const struct face *f = &g->faces[i];
        bufs[i] = xalloc(f->sites * 72 * sizeof(float));
        for (size_t k = 0; k < f->sites; k++)
            memcpy(bufs[i] + k * 72, g->gauge_bwd + (size_t)f->send[k] * 72, 72 * sizeof(float));
        MPI_Irecv(g->gauge_bwd + f->ghost * 72, (int)(f->sites * 72), MPI_FLOAT, f->from, i,
                  g->cart, &req[nreq++]);
        MPI_Isend(bufs[i], (int)(f->sites * 72), MPI_FLOAT, f->to, i, g->cart, &req[nreq++]);
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    for (int i = 0; i < g->nfaces; i++) free(bufs[i]);
}

/* One application with the halo: the seconds spent projecting and communicating (not in the
 * kernel) go to *comm. */
static void step(struct lattice *g, int isa, int overlap, double *comm)
{
    MPI_Request req[16];
    int nreq = 0;
    const double t0 = MPI_Wtime();
    for (int i = 0; i < g->nfaces; i++) {
        const struct face *f = &g->faces[i];
        /* the rank `to` takes this as x + mu (projected with 1 - g_mu) or x - mu (1 + g_mu) */
        if (hpb_dslash_project(team, g->in, g->ls, f->send, f->sites, f->mu, f->up ? -1 : 1,
                               f->buf))
            die("projecting a face failed");
        MPI_Irecv(g->in + f->ghost * 24 * (size_t)g->ls, (int)f->sites, g->half_spinor, f->from,
                  i, g->cart, &req[nreq++]);
        MPI_Isend(f->buf, (int)(f->sites * 12 * (size_t)g->ls), MPI_FLOAT, f->to, i, g->cart,
                  &req[nreq++]);
    }
    double t1 = MPI_Wtime();
    size_t done = 0;
    if (overlap) {
        if (hpb_dslash_apply(team, isa, g->gauge_fwd, g->gauge_bwd, g->in, g->out, g->nb, 0,
                             g->interior, g->ls))
            die("the kernel failed");
        done = g->interior;
    }
    const double t2 = MPI_Wtime();
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    const double t3 = MPI_Wtime();
    if (hpb_dslash_apply(team, isa, g->gauge_fwd, g->gauge_bwd, g->in, g->out, g->nb, done,
                         g->half, g->ls))
        die("the kernel failed");
    *comm += (t1 - t0) + (t3 - t2);
}

static void fill_random(struct lattice *g)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)rank << 17) ^ (uint64_t)g->ls;
    for (size_t i = 0; i < g->half * 72; i++) g->gauge_fwd[i] = noise(&s);
    for (size_t i = 0; i < g->half * 72; i++) g->gauge_bwd[i] = noise(&s);
    for (size_t i = 0; i < g->half * 24 * (size_t)g->ls; i++) g->in[i] = noise(&s);
}

/* Fields from the check file: global (t, z, y, x) order, links [mu][3][3][re, im], spinors
 * [s][spin][colour][re, im]; the file also holds the expected output of the even sites. */
static float *check_fields(const char *path, const int gdims[4], int ls, size_t *count)
{
    const size_t gv = (size_t)gdims[0] * gdims[1] * gdims[2] * gdims[3];
    *count = gv * 72 + 2 * gv * 24 * (size_t)ls;
    float *all = xalloc(*count * sizeof(float));
    int ok = 1;
    if (rank == 0) {
        FILE *f = fopen(path, "rb");
        ok = f && fread(all, sizeof(float), *count, f) == *count;
        if (f) fclose(f);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) die("cannot read the check file on rank 0's host");
    MPI_Bcast(all, (int)*count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    return all;
}

static size_t global_site(const struct lattice *g, size_t local)
{
    int c[4], gd[4];
    coords_of(g->dims, local, c);
    for (int a = 0; a < 4; a++) {
        c[a] += g->coord[a] * g->dims[a];
        gd[a] = g->dims[a] * g->grid[a];
    }
    return index_of(gd, c);
}

static void load_check(struct lattice *g, const float *all)
{
    int gd[4];
    for (int a = 0; a < 4; a++) gd[a] = g->dims[a] * g->grid[a];
    const size_t gv = (size_t)gd[0] * gd[1] * gd[2] * gd[3], ls = (size_t)g->ls;
    const float *u = all, *psi = all + gv * 72;
    for (size_t k = 0; k < g->half; k++)
        memcpy(g->gauge_fwd + k * 72, u + global_site(g, (size_t)g->order[k]) * 72,
               72 * sizeof(float));
    for (size_t i = 0; i < 2 * g->half; i++) { /* the odd sites: input and its links */
        int c[4];
        coords_of(g->dims, i, c);
        if ((c[0] + c[1] + c[2] + c[3]) % 2 == 0) continue;
        const size_t gs = global_site(g, i);
        memcpy(g->gauge_bwd + i / 2 * 72, u + gs * 72, 72 * sizeof(float));
        float *dst = g->in + i / 2 * 24 * ls;
        for (size_t s = 0; s < ls; s++)
            for (size_t sc = 0; sc < 12; sc++)
                for (size_t ri = 0; ri < 2; ri++)
                    dst[(sc * 2 + ri) * ls + s] = psi[((gs * ls + s) * 12 + sc) * 2 + ri];
    }
}

static double check_error(const struct lattice *g, const float *all)
{
    int gd[4];
    for (int a = 0; a < 4; a++) gd[a] = g->dims[a] * g->grid[a];
    const size_t gv = (size_t)gd[0] * gd[1] * gd[2] * gd[3], ls = (size_t)g->ls;
    const float *want = all + gv * 72 + gv * 24 * ls;
    double d[2] = {0, 0}, sum[2];
    for (size_t k = 0; k < g->half; k++) {
        const size_t gs = global_site(g, (size_t)g->order[k]);
        const float *got = g->out + k * 24 * ls;
        for (size_t s = 0; s < ls; s++)
            for (size_t sc = 0; sc < 12; sc++)
                for (size_t ri = 0; ri < 2; ri++) {
                    const double w = want[((gs * ls + s) * 12 + sc) * 2 + ri];
                    const double x = got[(sc * 2 + ri) * ls + s];
                    d[0] += (x - w) * (x - w);
                    d[1] += w * w;
                }
    }
    MPI_Allreduce(d, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sqrt(sum[0]) / (sum[1] > 0 ? sqrt(sum[1]) : 1.0);
}

struct dslash_opts {
    int grid[4], dims[4], l[MAXLIST], nl, ls[MAXLIST], nls, isa[MAXLIST], nisa, reps, check_l;
    int policies; /* bit 0 sequential, bit 1 overlapped */
    double sample_s;
    char check[4096];
};

static const char *POLICY[2] = {"sequential", "overlapped"};

static void dslash_check(const struct dslash_opts *o)
{
    begin("dslash check");
    for (int j = 0; j < o->nls; j++) {
        int dims[4] = {o->check_l, o->check_l, o->check_l, o->check_l}, gd[4];
        for (int a = 0; a < 4; a++) gd[a] = dims[a] * o->grid[a];
        char path[4200];
        snprintf(path, sizeof path, "%s.ls%d", o->check, o->ls[j]);
        size_t count;
        float *all = check_fields(path, gd, o->ls[j], &count);
        struct lattice g;
        lattice_build(&g, dims, o->grid, o->ls[j]);
        load_check(&g, all);
        exchange_links(&g);
        for (int i = 0; i < o->nisa; i++)
            for (int p = 0; p < 2; p++) {
                if (!(o->policies >> p & 1)) continue;
                memset(g.out, 0, g.half * 24 * (size_t)g.ls * sizeof(float));
                double comm = 0;
                step(&g, o->isa[i], p, &comm);
                const double err = check_error(&g, all);
                if (rank == 0)
                    printf("{\"type\":\"check\",\"test\":\"dslash\",\"isa\":\"%s\",\"policy\":"
                           "\"%s\",\"ls\":%d,\"l\":%d,\"error\":%.6g}\n", hpb_isa_name(o->isa[i]),
                           POLICY[p], g.ls, o->check_l, err);
            }
        lattice_free(&g);
        free(all);
    }
}

static void dslash(const struct dslash_opts *o)
{
    if (o->check[0]) dslash_check(o);
    /* the local lattices: L^4 for each L, or the one of --dims */
    for (int li = 0; li < (o->dims[0] ? 1 : o->nl); li++)
        for (int j = 0; j < o->nls; j++) {
            const int l = o->dims[0] ? 0 : o->l[li];
            const int dims[4] = {l ? l : o->dims[0], l ? l : o->dims[1], l ? l : o->dims[2],
                                 l ? l : o->dims[3]};
            char what[96];
            snprintf(what, sizeof what, "dslash %dx%dx%dx%d Ls=%d", dims[0], dims[1], dims[2],
                     dims[3], o->ls[j]);
            begin(what);
            struct lattice g;
            lattice_build(&g, dims, o->grid, o->ls[j]);
            fill_random(&g);
            exchange_links(&g);
            const double flops = 1344.0 * (double)g.half * g.ls * nranks;
            for (int i = 0; i < o->nisa; i++)
                for (int p = 0; p < 2; p++) {
                    if (!(o->policies >> p & 1)) continue;
                    /* calls a sample: enough for sample_s on the slowest rank */
                    double comm = 0, t = MPI_Wtime(), slow;
                    step(&g, o->isa[i], p, &comm);
                    t = MPI_Wtime() - t;
                    MPI_Allreduce(&t, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    const int calls = (int)ceil(o->sample_s / (slow > 1e-9 ? slow : 1e-9));
                    for (int r = 0; r < o->reps; r++) {
                        comm = 0;
                        MPI_Barrier(MPI_COMM_WORLD);
                        t = MPI_Wtime();
                        for (int c = 0; c < calls; c++) step(&g, o->isa[i], p, &comm);
                        t = MPI_Wtime() - t;
                        double mine[2] = {t, comm}, most[2];
                        MPI_Reduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                        if (rank == 0)
                            printf("{\"type\":\"sample\",\"test\":\"dslash\",\"l\":%d,"
                                   "\"dims\":[%d,%d,%d,%d],\"ls\":%d,"
                                   "\"isa\":\"%s\",\"policy\":\"%s\",\"value\":%.6g,"
                                   "\"seconds\":%.6g,\"comm_s\":%.6g,\"calls\":%d,\"ranks\":%d,"
                                   "\"nodes\":%d,\"grid\":[%d,%d,%d,%d],\"interior\":%zu,"
                                   "\"sites\":%zu}\n", l, dims[0], dims[1], dims[2], dims[3], g.ls, hpb_isa_name(o->isa[i]),
                                   POLICY[p], flops * calls / most[0] / 1e6, most[0], most[1],
                                   calls, nranks, nodes, o->grid[0], o->grid[1], o->grid[2],
                                   o->grid[3], g.interior, g.half);
                    }
                }
            lattice_free(&g);
        }
}

/* ---- cg ---- */

struct cg_ctx {
    MPI_Comm cart;
    int n, peer[27];
    uint64_t counts[27];
    size_t base[27];
    int32_t *send;
    double *sbuf;
    size_t local;
};

static void cg_exchange(void *p, double *x)
{
    struct cg_ctx *c = p;
    MPI_Request req[54];
    int nreq = 0;
    size_t at = 0;
    for (int d = 0; d < 27; d++) {
        if (!c->counts[d]) continue;
        for (size_t k = 0; k < c->counts[d]; k++) c->sbuf[at + k] = x[c->send[at + k]];
        /* box d's ghosts from us are its block 26 - d; it tags them with its own d */
        MPI_Irecv(x + c->local + c->base[d], (int)c->counts[d], MPI_DOUBLE, c->peer[d], 26 - d,
                  c->cart, &req[nreq++]);
        MPI_Isend(c->sbuf + at, (int)c->counts[d], MPI_DOUBLE, c->peer[d], d, c->cart,
                  &req[nreq++]);
        at += c->counts[d];
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
}

static void cg_sum(void *p, double *v)
{
    const struct cg_ctx *c = p;
    MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_DOUBLE, MPI_SUM, c->cart);
}

struct cg_opts {
    int grid[3], box[3], check_box[3], iters, reps, min_reps, check;
    double seconds; /* the timed solves' budget (0: reps of them, however long they take) */
};

static void cg_setup(struct cg_ctx *c, struct hpb_cg_comm *comm, const int grid[3],
                     const int box[3])
{
    int periods[3] = {0, 0, 0}, coord[3];
    MPI_Cart_create(MPI_COMM_WORLD, 3, (int *)grid, periods, 0, &c->cart);
    MPI_Cart_coords(c->cart, rank, 3, coord);
    memset(comm, 0, sizeof *comm);
    for (int a = 0; a < 3; a++) {
        comm->gdims[a] = box[a] * grid[a];
        comm->offset[a] = box[a] * coord[a];
    }
    c->local = (size_t)box[0] * box[1] * box[2];
    hpb_cg_halo(box, comm->gdims, comm->offset, c->counts, NULL);
    size_t total = 0;
    for (int d = 0; d < 27; d++) {
        c->base[d] = total;
        total += c->counts[d];
        c->peer[d] = MPI_PROC_NULL;
        if (!c->counts[d]) continue;
        const int at[3] = {coord[0] + d % 3 - 1, coord[1] + d / 3 % 3 - 1, coord[2] + d / 9 - 1};
        MPI_Cart_rank(c->cart, (int *)at, &c->peer[d]);
    }
    c->send = xalloc(total * sizeof(int32_t) + 4);
    c->sbuf = xalloc(total * sizeof(double) + 8);
    hpb_cg_halo(box, comm->gdims, comm->offset, c->counts, c->send);
    comm->exchange = cg_exchange;
    comm->sum = cg_sum;
    comm->ctx = c;
}

static void cg_free(struct cg_ctx *c)
{
    free(c->send);
    free(c->sbuf);
    MPI_Comm_free(&c->cart);
}

static void cg(const struct cg_opts *o)
{
    struct cg_ctx c;
    struct hpb_cg_comm comm;
    double out[6];
    if (o->check) {
        begin("cg check");
        cg_setup(&c, &comm, o->grid, o->check_box);
        const int max = 1000;
        double *x = xalloc(c.local * sizeof(double)), *hist = xalloc((max + 1) * sizeof(double));
        if (hpb_cg_solve_domain(team, o->check_box, &comm, max, 1e-10, x, hist, out))
            die("the CG solve failed (out of memory?)");
        double err = 0, most;
        for (size_t i = 0; i < c.local; i++) err = fmax(err, fabs(x[i] - 1.0));
        MPI_Reduce(&err, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("{\"type\":\"check\",\"test\":\"cg\",\"iterations\":%d,\"x_error\":%.6g,"
                   "\"history\":[", (int)out[0], most);
            for (int k = 0; k <= (int)out[0]; k++) printf("%s%.17g", k ? "," : "", hist[k]);
            printf("]}\n");
        }
        free(x);
        free(hist);
        cg_free(&c);
    }
    begin("cg");
    cg_setup(&c, &comm, o->grid, o->box);
    double *x = xalloc(c.local * sizeof(double)), *hist = xalloc((o->iters + 1) * sizeof(double));
    double spent = 0; /* the timed solves so far, the slowest rank's */
    hpb_cg *prob = hpb_cg_create(team, o->box, &comm); /* one matrix for every solve */
    if (!prob) die("the CG matrix cannot be built (out of memory?)");
    for (int r = -1; r < o->reps; r++) { /* r = -1: a warm-up solve, not reported */
        MPI_Barrier(MPI_COMM_WORLD);
        if (hpb_cg_run(team, prob, o->iters, 1e-300, x, hist, out))
            die("the CG solve failed");
        /* the slowest rank's solve: its time and its phases */
        double *all = rank == 0 ? xalloc(6 * sizeof(double) * (size_t)nranks) : NULL;
        MPI_Gather(out, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        double most[6];
        if (rank == 0) {
            int slow = 0;
            for (int k = 1; k < nranks; k++)
                if (all[6 * k + 4] > all[6 * slow + 4]) slow = k;
            memcpy(most, all + 6 * slow, sizeof most);
            free(all);
        }
        if (rank == 0 && r >= 0)
            printf("{\"type\":\"sample\",\"test\":\"cg\",\"iterations\":%d,\"seconds\":%.6g,"
                   "\"spmv_s\":%.6g,\"dot_s\":%.6g,\"update_s\":%.6g,\"halo_s\":%.6g,"
                   "\"ranks\":%d,\"nodes\":%d,\"grid\":[%d,%d,%d],\"box\":[%d,%d,%d]}\n",
                   (int)most[0], most[4], most[1], most[2], most[3], most[5], nranks, nodes,
                   o->grid[0], o->grid[1], o->grid[2], o->box[0], o->box[1], o->box[2]);
        /* Another solve while the budget lasts, judged by the last one's time: ranks that
         * share their CPUs (or a slow link) make a solve many times slower than any guess
         * made before the launch, and the job must still end in its time. Rank 0 decides for
         * all. */
        int more = 1;
        if (rank == 0) {
            if (r >= 0) spent += most[4];
            more = r + 1 < o->min_reps || !(o->seconds > 0) || spent + most[4] <= o->seconds;
        }
        MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!more) break;
    }
    hpb_cg_free(prob);
    free(x);
    free(hist);
    cg_free(&c);
}

/* ---- main ---- */

static int count_nodes(void)
{
    MPI_Comm node;
    int local, leaders, one;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    one = local == 0;
    MPI_Allreduce(&one, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&node);
    return leaders;
}

static int product(const int *v, int n)
{
    int p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (provided < MPI_THREAD_SERIALIZED)
        die("this MPI gives no MPI_THREAD_SERIALIZED: the team's first thread cannot call it");
    if (argc < 2) die("usage: hpb_proxy dslash|cg [--key value ...]");
    const int is_cg = !strcmp(argv[1], "cg");
    if (!is_cg && strcmp(argv[1], "dslash")) die("the proxy is dslash or cg");
    struct dslash_opts d = {.grid = {1, 1, 1, 1}, .l = {8}, .nl = 1, .ls = {1}, .nls = 1,
                            .isa = {HPB_ISA_SCALAR}, .nisa = 1, .reps = 5, .policies = 3,
                            .sample_s = 0.02, .check_l = 4};
    struct cg_opts c = {.grid = {1, 1, 1}, .box = {32, 32, 32}, .check_box = {8, 8, 8},
                        .iters = 50, .reps = 5, .min_reps = 1};
    int threads = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--threads")) threads = atoi(v);
        else if (!strcmp(k, "--reps")) d.reps = c.reps = atoi(v);
        else if (!strcmp(k, "--grid") && is_cg) dims_of(v, c.grid, 3);
        else if (!strcmp(k, "--grid")) dims_of(v, d.grid, 4);
        else if (!strcmp(k, "--box")) dims_of(v, c.box, 3);
        else if (!strcmp(k, "--dims")) dims_of(v, d.dims, 4);
        else if (!strcmp(k, "--check-box")) dims_of(v, c.check_box, 3);
        else if (!strcmp(k, "--iters")) c.iters = atoi(v);
        else if (!strcmp(k, "--min-reps")) c.min_reps = atoi(v);
        else if (!strcmp(k, "--seconds")) c.seconds = atof(v);
        else if (!strcmp(k, "--check") && is_cg) c.check = atoi(v);
        else if (!strcmp(k, "--check")) snprintf(d.check, sizeof d.check, "%s", v);
        else if (!strcmp(k, "--check-l")) d.check_l = atoi(v);
        else if (!strcmp(k, "--l")) d.nl = parse_list(v, d.l, MAXLIST, ',');
        else if (!strcmp(k, "--ls")) d.nls = parse_list(v, d.ls, MAXLIST, ',');
        else if (!strcmp(k, "--isa")) d.nisa = parse_list(v, d.isa, MAXLIST, ',');
        else if (!strcmp(k, "--policies")) d.policies = atoi(v);
        else if (!strcmp(k, "--sample-s")) d.sample_s = atof(v);
        else die("unknown option");
    }
    if (d.reps < 1 || c.iters < 1 || c.min_reps < 1 || c.seconds < 0 || d.policies < 1 ||
        d.policies > 3 || d.sample_s <= 0)
        die("bad option value");
    if (product(is_cg ? c.grid : d.grid, is_cg ? 3 : 4) != nranks)
        die("the rank grid does not match the number of ranks");
    for (int i = 0; i < d.nl; i++)
        if (d.l[i] < 2 || d.l[i] % 2) die("L must be even");
    for (int i = 0; d.dims[0] && i < 4; i++)
        if (d.dims[i] < 2 || d.dims[i] % 2) die("every local extent must be even");
    for (int i = 0; i < d.nls; i++)
        if (d.ls[i] < 1 || d.ls[i] > 32) die("Ls must be 1 to 32");
    for (int i = 0; i < d.nisa; i++)
        if (!hpb_isa_supported(d.isa[i])) die("a kernel variant this CPU cannot run");
    nodes = count_nodes();
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    for (int i = 0; i < len; i++)
        if (lib[i] == '"' || lib[i] == '\\' || lib[i] == '\n' || lib[i] == '\t') lib[i] = ' ';
    if (rank == 0)
        printf("{\"type\":\"info\",\"library\":\"%.*s\",\"ranks\":%d,\"nodes\":%d}\n", len, lib,
               nranks, nodes);
    start_team(threads);
    if (is_cg) cg(&c);
    else dslash(&d);
    if (rank == 0) printf("{\"type\":\"done\"}\n");
    hpb_team_destroy(team);
    MPI_Finalize();
    return 0;
}
