/* hpb_mpi.c: hpcprobe's MPI tests with OSU conventions (latency, bandwidth, bidirectional
 * bandwidth, multi-pair message rate, allreduce, bcast, alltoall, barrier) and a Grid-style 4-D
 * halo exchange. Built on first use with the user's mpicc, started by a launcher; rank 0 writes
 * JSON lines on stdout: the library, every rank's binding, a "begin" line before each test and
 * size (so a hang can be located), one "sample" line per timed repetition, and "done". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SMALL 8192 /* OSU: more iterations at and below 8 KiB */
#define MAX_WINDOW 1024
#define MAX_HALO_L 16

struct opts {
    char tests[512];
    size_t min_size, max_size, coll_max_size;
    int reps, min_reps, window, halo_ls, site_bytes; /* samples: up to reps, at least min_reps */
    double iter_scale;
    int halo_l[MAX_HALO_L], nhalo; /* the local lattice extents L of the halo exchange */
    char pairs[1024];                /* links: the file of node pairs, one round per line */
    size_t link_size;                /* links: the bandwidth message size */
    int link_window, link_parallel;  /* links: its window; pairs measured at once (0: all) */
};

static int rank, nranks;

/* The communicator the point-to-point and collective tests run on (the world, a pair of nodes
 * or the first n nodes), this rank in it, and the rank the ping-pong partner of rank 0 has. */
static MPI_Comm comm;
static int crank, csize, peer = 1;

static void use_comm(MPI_Comm c, int partner)
{
    comm = c;
    peer = partner;
    MPI_Comm_rank(c, &crank);
    MPI_Comm_size(c, &csize);
}

/* Sample lines: `extra` names the pair or node count they belong to. They collect here, never
 * printed between samples: a line a sample woke the launcher's output forwarding and its
 * reader between the timed loops, on CPUs the ranks need (on a node whose CPUs all run ranks
 * that tripled the 8 B latency). Each rank prints its own at the next begin() and at the end;
 * while `buffering`, rank 0 prints everyone's at flush_collected (several pairs measure at
 * once). */
static char extra[128];
static char *outbuf;
static int outlen, outcap, buffering;

static void emit(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "{\"type\":\"sample\",%s", extra);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    line[n] = 0;
    if (outlen + n + 1 > outcap) {
        outcap = 2 * (outlen + n + 1);
        outbuf = realloc(outbuf, (size_t)outcap);
        if (!outbuf) MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memcpy(outbuf + outlen, line, (size_t)n + 1);
    outlen += n;
}

/* This rank prints the lines it collected (outside `buffering`). */
static void print_collected(void)
{
    if (buffering || !outlen) return;
    fputs(outbuf, stdout);
    outlen = 0;
}

/* Rank 0 prints the lines every rank collected (a collective on the world). */
static void flush_collected(void)
{
    int *lens = rank == 0 ? malloc(sizeof(int) * (size_t)nranks) : NULL;
    int *offs = rank == 0 ? malloc(sizeof(int) * (size_t)nranks) : NULL;
    MPI_Gather(&outlen, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char *all = NULL;
    int total = 0;
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) {
            offs[r] = total;
            total += lens[r];
        }
        all = malloc((size_t)total + 1);
    }
    MPI_Gatherv(outbuf, outlen, MPI_CHAR, all, lens, offs, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        all[total] = 0;
        fputs(all, stdout);
        free(all);
        free(lens);
        free(offs);
    }
    outlen = 0;
}

static void die(const char *msg)
{
    if (rank == 0) fprintf(stderr, "hpb_mpi: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static int iterations(int osu_count, double scale)
{
    int n = (int)(osu_count * scale);
    return n < 1 ? 1 : n;
}

static void begin(const char *test, size_t size)
{
    print_collected();
    if (rank == 0) printf("{\"type\":\"begin\",\"test\":\"%s\",\"size\":%zu}\n", test, size);
}

/* OSU's buffers: one send and one receive buffer per rank, allocated once at the largest size
 * any test uses, page-aligned and touched before any timing; every test and size reuses them. */
static char *sbuf, *rbuf;

static void alloc_buffers(size_t bytes)
{
    void *s = NULL, *r = NULL;
    if (bytes < 64) bytes = 64;
    if (posix_memalign(&s, 4096, bytes) != 0 || posix_memalign(&r, 4096, bytes) != 0)
        die("out of memory for the message buffers");
    memset(s, 'a', bytes);
    memset(r, 'b', bytes);
    sbuf = s;
    rbuf = r;
}

/* How one test and size is sampled: OSU's count (scaled) split over the samples, so all the
 * samples together cost what one OSU run does. A count smaller than the samples asked for gives
 * fewer samples of one iteration each (never fewer than min_reps): many cheap samples where OSU
 * runs thousands of iterations, no extra time where it runs a handful. */
struct sampling {
    int reps, iters;
};

static struct sampling sampling_of(const struct opts *o, int osu_count)
{
    const int total = iterations(osu_count, o->iter_scale);
    int reps = total < o->reps ? total : o->reps;
    if (reps < o->min_reps) reps = o->min_reps;
    const int n = total / reps;
    return (struct sampling){reps, n < 1 ? 1 : n};
}

/* Every rank's CPUs (its affinity mask as a list), current CPU and host, printed by rank 0. */
static void report_binding(void)
{
    char line[1024], host[256];
    cpu_set_t mask;
    CPU_ZERO(&mask);
    sched_getaffinity(0, sizeof mask, &mask);
    gethostname(host, sizeof host);
    host[sizeof host - 1] = 0;
    int n = snprintf(line, sizeof line, "{\"type\":\"binding\",\"rank\":%d,\"host\":\"%s\","
                     "\"cpu\":%d,\"cpus\":[", rank, host, sched_getcpu());
    int first = 1;
    for (int c = 0; c < CPU_SETSIZE && n < (int)sizeof line - 16; c++)
        if (CPU_ISSET(c, &mask)) {
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%d", first ? "" : ",", c);
            first = 0;
        }
    snprintf(line + n, sizeof line - (size_t)n, "]}");
    char *all = rank == 0 ? malloc(sizeof line * (size_t)nranks) : NULL;
    MPI_Gather(line, sizeof line, MPI_CHAR, all, sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) printf("%s\n", all + (size_t)r * sizeof line);
        free(all);
    }
}

/* Ping-pong between ranks 0 and `peer` of the communicator: one-way latency in microseconds (half the round trip). */
static void latency(const struct opts *o, size_t size)
{
    const struct sampling s = sampling_of(o, size <= SMALL ? 10000 : 1000);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 100 : 10;
    /* One barrier, then back-to-back ping-pongs as OSU times them: the ping-pong synchronises
     * the two ranks, so each sample starts where the last ended; a barrier per sample would add
     * its exit skew to the first round trip of every sample. */
    MPI_Barrier(comm);
    for (int r = -1; r < s.reps; r++) { /* r = -1: the warm-up (OSU's skip) */
        const int n = r < 0 ? warm : iters;
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (crank == 0) {
                MPI_Send(sbuf, (int)size, MPI_CHAR, peer, 1, comm);
                MPI_Recv(rbuf, (int)size, MPI_CHAR, peer, 1, comm, MPI_STATUS_IGNORE);
            } else if (crank == peer) {
                MPI_Recv(rbuf, (int)size, MPI_CHAR, 0, 1, comm, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)size, MPI_CHAR, 0, 1, comm);
            }
        }
        double t = MPI_Wtime() - t0;
        if (crank == 0 && r >= 0)
            emit("\"test\":\"latency\",\"size\":%zu,\"value\":%.6g,\"iters\":%d}", size,
                 t * 1e6 / (2.0 * n), n);
    }
}

/* Windowed streaming from `from` to `to` (bidirectional: both ways at once). Returns the time.
 * As OSU's, every message of a window uses the same send and receive buffer: the figure is the
 * transport's, not that of a window of buffers too large for the caches. */
static double stream_window(const struct opts *o, size_t size, int n, int from, int to,
                            int bidir, MPI_Request *req)
{
    const int w = o->window;
    const int me_send = crank == from, me_recv = crank == to;
    char ack = 0;
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        int k = 0;
        if (bidir ? (me_send || me_recv) : me_recv)
            for (int j = 0; j < w; j++)
                MPI_Irecv(rbuf, (int)size, MPI_CHAR, me_send ? to : from, 2, comm,
                          &req[k++]);
        if (bidir ? (me_send || me_recv) : me_send)
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf, (int)size, MPI_CHAR, me_send ? to : from, 2, comm,
                          &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        if (!bidir) { /* OSU: the receiver acknowledges each window */
            if (me_recv) MPI_Send(&ack, 1, MPI_CHAR, from, 3, comm);
            if (me_send) MPI_Recv(&ack, 1, MPI_CHAR, to, 3, comm, MPI_STATUS_IGNORE);
        }
    }
    return MPI_Wtime() - t0;
}

/* Bandwidth (window of sends, then an ack) or bidirectional bandwidth between ranks `from` and
 * `to` of the communicator, MB/s, printed by `from`. */
static void bandwidth_between(const struct opts *o, size_t size, int bidir, int from, int to)
{
    const struct sampling s = sampling_of(o, size <= SMALL ? 100 : 20);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 10 : 2;
    MPI_Request req[2 * MAX_WINDOW];
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? warm : iters;
        double t = stream_window(o, size, n, from, to, bidir, req);
        if (crank == from && r >= 0)
            emit("\"test\":\"%s\",\"size\":%zu,\"value\":%.6g,\"iters\":%d}",
                 bidir ? "bibw" : "bandwidth", size,
                 (bidir ? 2.0 : 1.0) * (double)size * o->window * n / t / 1e6, n);
    }
}

static void bandwidth(const struct opts *o, size_t size, int bidir)
{
    bandwidth_between(o, size, bidir, 0, peer);
}

/* Multi-pair message rate (osu_mbw_mr): rank r < P sends windows to r + P; the rate is
 * pairs x window x iterations over the mean sender time. */
static void message_rate(const struct opts *o, size_t size)
{
    const int pairs = csize / 2;
    const struct sampling s = sampling_of(o, size <= SMALL ? 100 : 20);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 10 : 2;
    MPI_Request req[2 * MAX_WINDOW];
    const int from = crank < pairs ? crank : crank - pairs, to = from + pairs;
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? warm : iters;
        double t = 0.0;
        if (crank < 2 * pairs) {
            /* every pair streams at once: each rank is the sender or receiver of its pair */
            const int w = o->window;
            char ack = 0;
            MPI_Barrier(comm);
            double t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < w; j++) {
                    if (crank == from)
                        MPI_Isend(sbuf, (int)size, MPI_CHAR, to, 4, comm, &req[j]);
                    else
                        MPI_Irecv(rbuf, (int)size, MPI_CHAR, from, 4, comm, &req[j]);
                }
                MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
                if (crank == to) MPI_Send(&ack, 1, MPI_CHAR, from, 5, comm);
                else MPI_Recv(&ack, 1, MPI_CHAR, to, 5, comm, MPI_STATUS_IGNORE);
            }
            t = crank == from ? MPI_Wtime() - t0 : 0.0;
            MPI_Barrier(comm);
        } else {
            MPI_Barrier(comm);
            MPI_Barrier(comm);
        }
        double sum = 0.0;
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
        if (crank == 0 && r >= 0) {
            const double rate = (double)pairs * o->window * n / (sum / pairs);
            emit("\"test\":\"message_rate\",\"size\":%zu,\"value\":%.6g,\"mbs\":%.6g,"
                 "\"pairs\":%d,\"iters\":%d}", size, rate, rate * (double)size / 1e6, pairs, n);
        }
    }
}

enum coll { ALLREDUCE, BCAST, ALLTOALL, BARRIER };
static const char *const coll_names[] = {"allreduce", "bcast", "alltoall", "barrier"};

/* OSU collectives: each rank times its own calls (a barrier between them, not timed); reported:
 * the mean over ranks of each rank's mean, and the min and max over ranks, microseconds. */
static void collective(const struct opts *o, enum coll c, size_t size)
{
    const struct sampling s = sampling_of(o, size <= SMALL ? 1000 : 100);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 100 : 10;
    const int count = (int)(size / sizeof(float));
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? warm : iters;
        double total = 0.0;
        MPI_Barrier(comm);
        for (int i = 0; i < n; i++) {
            double t0 = MPI_Wtime();
            switch (c) {
            case ALLREDUCE:
                MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm);
                break;
            case BCAST:
                MPI_Bcast(sbuf, (int)size, MPI_CHAR, 0, comm);
                break;
            case ALLTOALL:
                MPI_Alltoall(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR,
                             comm);
                break;
            case BARRIER:
                MPI_Barrier(comm);
                break;
            }
            total += MPI_Wtime() - t0;
            MPI_Barrier(comm);
        }
        double mine = total * 1e6 / n, sum = 0, lo = 0, hi = 0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
        if (crank == 0 && r >= 0)
            emit("\"test\":\"%s\",\"size\":%zu,\"value\":%.6g,\"min\":%.6g,\"max\":%.6g,"
                 "\"ranks\":%d,\"iters\":%d}", coll_names[c], size, sum / csize, lo, hi, csize, n);
    }
}

/* One face of a local L^4 x Ls lattice: L^3 x Ls sites. */
static size_t face_bytes(const struct opts *o, int l)
{
    return (size_t)l * (size_t)l * (size_t)l * (size_t)o->halo_ls * (size_t)o->site_bytes;
}

/* Grid-style halo exchange: ranks on a periodic 4-D grid, each exchanging faces of its local
 * L^4 x Ls lattice (L^3 x Ls sites of site_bytes) with both neighbours in every distributed
 * dimension at once. Per-rank MB/s sent (unidirectional) and sent + received (bidirectional);
 * reported: the mean over ranks, and the slowest rank. */
static void halo(const struct opts *o, int l)
{
    int dims[4] = {0, 0, 0, 0}, periods[4] = {1, 1, 1, 1};
    MPI_Dims_create(nranks, 4, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 4, dims, periods, 0, &cart);
    const size_t face = face_bytes(o, l);
    int nb[8], faces = 0;
    for (int d = 0; d < 4; d++)
        if (dims[d] > 1) {
            MPI_Cart_shift(cart, d, 1, &nb[faces], &nb[faces + 1]);
            faces += 2;
        }
    const struct sampling s = sampling_of(o, face <= SMALL ? 1000 : 100);
    const int iters = s.iters;
    MPI_Request req[16];
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? 5 : iters;
        MPI_Barrier(cart);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            for (int f = 0; f < faces; f++) {
                /* the face sent towards neighbour f arrives there from the opposite side */
                MPI_Irecv(rbuf + (size_t)f * face, (int)face, MPI_CHAR, nb[f], f ^ 1, cart,
                          &req[2 * f]);
                MPI_Isend(sbuf + (size_t)f * face, (int)face, MPI_CHAR, nb[f], f, cart,
                          &req[2 * f + 1]);
            }
            MPI_Waitall(2 * faces, req, MPI_STATUSES_IGNORE);
        }
        const double t = MPI_Wtime() - t0;
        double uni = faces ? (double)face * faces * n / t / 1e6 : 0.0, sum = 0, lo = 0;
        MPI_Reduce(&uni, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, cart);
        MPI_Reduce(&uni, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, cart);
        if (rank == 0 && r >= 0)
            emit("\"test\":\"halo\",\"size\":%zu,\"value\":%.6g,\"bidir\":%.6g,\"min\":%.6g,"
                 "\"l\":%d,\"ls\":%d,\"faces\":%d,\"dims\":[%d,%d,%d,%d],\"ranks\":%d,"
                 "\"iters\":%d}", face, sum / nranks,
                 2 * sum / nranks, lo, l, o->halo_ls, faces, dims[0], dims[1], dims[2],
                 dims[3], nranks, n);
    }
    MPI_Comm_free(&cart);
}

/* The nodes: ranks on one host (by name) form a node, numbered in the order of their first
 * world rank; rank 0 prints one "node" line per node. Returns this rank's node, and sets the
 * node count and this rank's index among its node's ranks. Sorting keeps it O(n log n) for a
 * hundred thousand ranks. */
#define HOSTLEN 64
static char *hostnames;

static int by_host_then_rank(const void *x, const void *y)
{
    const int a = *(const int *)x, b = *(const int *)y;
    const int c = strncmp(hostnames + (size_t)a * HOSTLEN, hostnames + (size_t)b * HOSTLEN,
                          HOSTLEN);
    return c ? c : (a > b) - (a < b);
}

static int by_value(const void *x, const void *y)
{
    const int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

static int node_of(int *nnodes, int *local, char **names)
{
    char me[HOSTLEN] = {0};
    gethostname(me, sizeof me - 1);
    hostnames = malloc((size_t)HOSTLEN * (size_t)nranks);
    int *order = malloc(sizeof(int) * (size_t)nranks), *firsts = malloc(sizeof(int) * (size_t)nranks);
    int *first_of = malloc(sizeof(int) * (size_t)nranks), *count = calloc((size_t)nranks, sizeof(int));
    if (!hostnames || !order || !firsts || !first_of || !count) die("out of memory for the nodes");
    MPI_Allgather(me, HOSTLEN, MPI_CHAR, hostnames, HOSTLEN, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++) order[r] = r;
    qsort(order, (size_t)nranks, sizeof(int), by_host_then_rank);
    int n = 0, start = 0;
    for (int i = 0; i < nranks; i++) { /* runs of one host in `order`, lowest rank first */
        const int r = order[i];
        if (i == 0 || strncmp(hostnames + (size_t)order[i - 1] * HOSTLEN,
                              hostnames + (size_t)r * HOSTLEN, HOSTLEN)) {
            firsts[n++] = r;
            start = i;
        }
        first_of[r] = firsts[n - 1];
        if (r == rank) *local = i - start;
    }
    qsort(firsts, (size_t)n, sizeof(int), by_value);
    int mine = -1;
    for (int k = 0; k < n; k++)
        if (firsts[k] == first_of[rank]) mine = k;
    for (int r = 0; r < nranks && rank == 0; r++) {
        int lo = 0, hi = n - 1; /* the node whose first rank is first_of[r] */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (firsts[mid] < first_of[r]) lo = mid + 1;
            else hi = mid;
        }
        count[lo]++;
    }
    for (int k = 0; k < n && rank == 0; k++)
        printf("{\"type\":\"node\",\"index\":%d,\"host\":\"%.*s\",\"ranks\":%d}\n", k, HOSTLEN,
               hostnames + (size_t)firsts[k] * HOSTLEN, count[k]);
    if (names) { /* the nodes' host names, in node order */
        *names = malloc((size_t)HOSTLEN * (size_t)n);
        if (!*names) die("out of memory for the nodes");
        for (int k = 0; k < n; k++)
            memcpy(*names + (size_t)k * HOSTLEN, hostnames + (size_t)firsts[k] * HOSTLEN, HOSTLEN);
    }
    free(hostnames);
    free(order);
    free(firsts);
    free(first_of);
    free(count);
    *nnodes = n;
    return mine;
}

/* The node a name in --pairs means: its host name, or that name up to its first dot (Slurm's
 * short node name for a host that calls itself by its domain name). -1: none. */
static int node_named(const char *names, int n, const char *name)
{
    for (int k = 0; k < n; k++) {
        const char *h = names + (size_t)k * HOSTLEN;
        const size_t len = strcspn(h, ".");
        if (!strncmp(h, name, HOSTLEN) || (strlen(name) == len && !strncmp(h, name, len)))
            return k;
    }
    return -1;
}

/* Links between nodes, b_eff style: the pairs of each round (a line of host names read from
 * --pairs: a b a b ...) measure at once, --link-parallel of them at a time: the ping-pong
 * latency between the nodes' first ranks, the bandwidth each way, and the message rate of all
 * the ranks of the two nodes (rank k of one to rank k of the other, as osu_mbw_mr). */
static void links(const struct opts *o)
{
    int nnodes, local;
    char *names = NULL;
    const int mynode = node_of(&nnodes, &local, &names);
    int npairs = 0, *pa = NULL, *pb = NULL, *round = NULL;
    if (rank == 0) {
        FILE *f = fopen(o->pairs, "r");
        if (!f) die("cannot read the --pairs file");
        char line[1 << 20];
        int cap = 0, rounds = 0;
        while (fgets(line, sizeof line, f)) {
            int ab[2], k = 0;
            for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
                ab[k] = node_named(names, nnodes, tok);
                if (ab[k] < 0) {
                    fprintf(stderr, "hpb_mpi: --pairs names %s, which is not a node of this job\n",
                            tok);
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
                if (++k < 2) continue;
                k = 0;
                if (ab[0] == ab[1]) die("a pair of one node with itself");
                if (npairs == cap) {
                    cap = cap ? 2 * cap : 256;
                    pa = realloc(pa, sizeof(int) * (size_t)cap);
                    pb = realloc(pb, sizeof(int) * (size_t)cap);
                    round = realloc(round, sizeof(int) * (size_t)cap);
                    if (!pa || !pb || !round) die("out of memory for the pairs");
                }
                pa[npairs] = ab[0];
                pb[npairs] = ab[1];
                round[npairs++] = rounds;
            }
            rounds++;
        }
        fclose(f);
    }
    MPI_Bcast(&npairs, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank != 0) {
        pa = malloc(sizeof(int) * (size_t)(npairs + 1));
        pb = malloc(sizeof(int) * (size_t)(npairs + 1));
        round = malloc(sizeof(int) * (size_t)(npairs + 1));
    }
    MPI_Bcast(pa, npairs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(pb, npairs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(round, npairs, MPI_INT, 0, MPI_COMM_WORLD);
    struct opts ob = *o;
    ob.window = o->link_window;
    for (int i = 0; i < npairs;) {
        /* a group: pairs of one round, at most link_parallel of them */
        int j = i;
        while (j < npairs && round[j] == round[i] && (!o->link_parallel || j - i < o->link_parallel))
            j++;
        int color = MPI_UNDEFINED, a = -1, b = -1;
        for (int k = i; k < j; k++)
            if (pa[k] == mynode || pb[k] == mynode) {
                color = k - i;
                a = pa[k];
                b = pb[k];
            }
        begin("links", (size_t)round[i]);
        MPI_Comm pc;
        MPI_Comm_split(MPI_COMM_WORLD, color, (mynode == b) * nranks + local, &pc);
        if (pc != MPI_COMM_NULL) {
            int size, ranks_a = 0, in_a = mynode == a;
            MPI_Comm_size(pc, &size);
            MPI_Allreduce(&in_a, &ranks_a, 1, MPI_INT, MPI_SUM, pc);
            use_comm(pc, ranks_a);
            buffering = 1;
            snprintf(extra, sizeof extra, "\"a\":%d,\"b\":%d,", a, b);
            latency(o, 8);
            bandwidth_between(&ob, o->link_size, 0, 0, ranks_a);
            snprintf(extra, sizeof extra, "\"a\":%d,\"b\":%d,", b, a);
            bandwidth_between(&ob, o->link_size, 0, ranks_a, 0);
            if (2 * ranks_a == size) { /* the same number of ranks on both nodes */
                snprintf(extra, sizeof extra, "\"a\":%d,\"b\":%d,", a, b);
                message_rate(o, 8);
            }
            MPI_Comm_free(&pc);
        }
        use_comm(MPI_COMM_WORLD, 1);
        extra[0] = 0;
        flush_collected();
        buffering = 0;
        i = j;
    }
    free(pa);
    free(pb);
    free(round);
    free(names);
}

/* Collectives as nodes are added: allreduce, bcast (8 B and coll-max-size) and barrier over the
 * first rank of each of the first 2, 4, 8, ... nodes (and all of them). */
static void scaling(const struct opts *o)
{
    int nnodes, local;
    const int mynode = node_of(&nnodes, &local, NULL);
    for (int n = 2; n > 0; n = n == nnodes ? 0 : (2 * n < nnodes ? 2 * n : nnodes)) {
        if (n > nnodes) break;
        begin("scaling", (size_t)n);
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, local == 0 && mynode < n ? 0 : MPI_UNDEFINED, rank, &sub);
        if (sub != MPI_COMM_NULL) {
            use_comm(sub, 1);
            snprintf(extra, sizeof extra, "\"nodes\":%d,", n);
            const size_t sizes[2] = {8, o->coll_max_size};
            for (int k = 0; k < 2; k++) {
                collective(o, ALLREDUCE, sizes[k]);
                collective(o, BCAST, sizes[k]);
            }
            collective(o, BARRIER, 0);
            MPI_Comm_free(&sub);
        }
        use_comm(MPI_COMM_WORLD, 1);
        extra[0] = 0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

static int wanted(const struct opts *o, const char *test)
{
    char list[sizeof o->tests + 2];
    char key[64];
    snprintf(list, sizeof list, ",%s,", o->tests);
    snprintf(key, sizeof key, ",%s,", test);
    return strstr(list, key) != NULL;
}

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) die("a size must be a whole number of bytes");
    return (size_t)v;
}

static void parse_halo_l(struct opts *o, const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->nhalo = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->nhalo == MAX_HALO_L || atoi(tok) < 1) die("bad --halo-l list");
        o->halo_l[o->nhalo++] = atoi(tok);
    }
}

static void sizes_loop(const struct opts *o, const char *test, size_t max,
                       void (*fn)(const struct opts *, size_t))
{
    if (!wanted(o, test)) return;
    for (size_t s = o->min_size; s <= max; s = s ? 2 * s : 1) {
        begin(test, s);
        fn(o, s);
    }
}

static void bw_uni(const struct opts *o, size_t s) { bandwidth(o, s, 0); }
static void bw_bi(const struct opts *o, size_t s) { bandwidth(o, s, 1); }
static void mr(const struct opts *o, size_t s) { message_rate(o, s); }
static void allreduce(const struct opts *o, size_t s) { collective(o, ALLREDUCE, s); }
static void bcast(const struct opts *o, size_t s) { collective(o, BCAST, s); }
static void alltoall(const struct opts *o, size_t s) { collective(o, ALLTOALL, s); }

int main(int argc, char **argv)
{
    struct opts o = {.tests = "latency", .max_size = 4u << 20, .coll_max_size = 1u << 20,
                     .reps = 5, .window = 64, .halo_ls = 1, .site_bytes = 48, .iter_scale = 1.0,
                     .halo_l = {8, 12, 16, 24, 32}, .nhalo = 5, .link_size = 1u << 20,
                     .link_window = 8};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    use_comm(MPI_COMM_WORLD, 1);
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--tests")) snprintf(o.tests, sizeof o.tests, "%s", v);
        else if (!strcmp(k, "--min-size")) o.min_size = parse_size(v);
        else if (!strcmp(k, "--max-size")) o.max_size = parse_size(v);
        else if (!strcmp(k, "--coll-max-size")) o.coll_max_size = parse_size(v);
        else if (!strcmp(k, "--reps")) o.reps = atoi(v);
        else if (!strcmp(k, "--min-reps")) o.min_reps = atoi(v);
        else if (!strcmp(k, "--window")) o.window = atoi(v);
        else if (!strcmp(k, "--iter-scale")) o.iter_scale = atof(v);
        else if (!strcmp(k, "--halo-l")) parse_halo_l(&o, v);
        else if (!strcmp(k, "--halo-ls")) o.halo_ls = atoi(v);
        else if (!strcmp(k, "--site-bytes")) o.site_bytes = atoi(v);
        else if (!strcmp(k, "--pairs")) snprintf(o.pairs, sizeof o.pairs, "%s", v);
        else if (!strcmp(k, "--link-size")) o.link_size = parse_size(v);
        else if (!strcmp(k, "--link-window")) o.link_window = atoi(v);
        else if (!strcmp(k, "--link-parallel")) o.link_parallel = atoi(v);
        else die("unknown option");
    }
    if (o.min_reps < 1 || o.min_reps > o.reps) o.min_reps = o.reps;
    if (o.reps < 1 || o.window < 1 || o.window > MAX_WINDOW || o.iter_scale <= 0 ||
        o.halo_ls < 1 || o.site_bytes < 1 || o.link_window < 1 || o.link_window > MAX_WINDOW ||
        o.link_parallel < 0 || o.link_size < 1)
        die("bad option value");
    if (nranks < 2) die("the tests need at least 2 ranks");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, ver = 0, sub = 0;
    MPI_Get_library_version(lib, &len);
    MPI_Get_version(&ver, &sub);
    for (int i = 0; i < len; i++)
        if (lib[i] == '"' || lib[i] == '\\' || lib[i] == '\n' || lib[i] == '\t') lib[i] = ' ';
    if (rank == 0)
        printf("{\"type\":\"info\",\"library\":\"%.*s\",\"mpi_version\":\"%d.%d\",\"ranks\":%d}\n",
               len, lib, ver, sub, nranks);
    report_binding();
    /* the largest message of any wanted test: point-to-point, a whole alltoall, a halo's faces */
    size_t largest = o.max_size;
    if (wanted(&o, "links") && o.link_size > largest) largest = o.link_size;
    if (wanted(&o, "alltoall") && o.coll_max_size * (size_t)nranks > largest)
        largest = o.coll_max_size * (size_t)nranks;
    if (o.coll_max_size > largest) largest = o.coll_max_size;
    for (int i = 0; wanted(&o, "halo") && i < o.nhalo; i++) {
        const size_t faces = 8 * face_bytes(&o, o.halo_l[i]); /* both ways in 4 dimensions */
        if (faces > largest) largest = faces;
    }
    alloc_buffers(largest);
    sizes_loop(&o, "latency", o.max_size, latency);
    /* streaming tests from 1 byte, as OSU's: a window of empty messages moves nothing */
    struct opts o1 = o;
    o1.min_size = o.min_size < 1 ? 1 : o.min_size;
    sizes_loop(&o1, "bandwidth", o.max_size, bw_uni);
    sizes_loop(&o1, "bibw", o.max_size, bw_bi);
    sizes_loop(&o1, "message_rate", o.max_size, mr);
    /* collectives from the OSU default of 4 bytes (allreduce adds floats) */
    struct opts oc = o;
    oc.min_size = o.min_size < 4 ? 4 : o.min_size;
    sizes_loop(&oc, "allreduce", o.coll_max_size, allreduce);
    sizes_loop(&oc, "bcast", o.coll_max_size, bcast);
    sizes_loop(&oc, "alltoall", o.coll_max_size, alltoall);
    if (wanted(&o, "barrier")) {
        begin("barrier", 0);
        collective(&o, BARRIER, 0);
    }
    if (wanted(&o, "halo"))
        for (int i = 0; i < o.nhalo; i++) {
            begin("halo", (size_t)o.halo_l[i]);
            halo(&o, o.halo_l[i]);
        }
    if (wanted(&o, "links")) {
        if (!o.pairs[0]) die("the links test needs --pairs FILE");
        links(&o);
    }
    if (wanted(&o, "scaling")) scaling(&o);
    print_collected();
    if (rank == 0) printf("{\"type\":\"done\"}\n");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
