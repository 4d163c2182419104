/* hpb_mpi.c: hpcprobe's MPI tests with OSU conventions (latency, bandwidth, bidirectional
 * bandwidth, multi-pair message rate, allreduce, bcast, alltoall, barrier) and a Grid-style 4-D
 * halo exchange. Built on first use with the user's mpicc, started by a launcher; rank 0 writes
 * JSON lines on stdout: the library, every rank's binding, a "begin" line before each test and
 * size (so a hang can be located), one "sample" line per timed repetition, and "done". */
#define _GNU_SOURCE
#include <errno.h>
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
};

static int rank, nranks;

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

/* Ping-pong between ranks 0 and 1: one-way latency in microseconds (half the round trip). */
static void latency(const struct opts *o, size_t size)
{
    const struct sampling s = sampling_of(o, size <= SMALL ? 10000 : 1000);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 100 : 10;
    /* One barrier, then back-to-back ping-pongs as OSU times them: the ping-pong synchronises
     * the two ranks, so each sample starts where the last ended; a barrier per sample would add
     * its exit skew to the first round trip of every sample. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = -1; r < s.reps; r++) { /* r = -1: the warm-up (OSU's skip) */
        const int n = r < 0 ? warm : iters;
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(sbuf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0 && r >= 0)
            printf("{\"type\":\"sample\",\"test\":\"latency\",\"size\":%zu,\"value\":%.6g,"
                   "\"iters\":%d}\n", size, t * 1e6 / (2.0 * n), n);
    }
}

/* Windowed streaming from `from` to `to` (bidirectional: both ways at once). Returns the time.
 * As OSU's, every message of a window uses the same send and receive buffer: the figure is the
 * transport's, not that of a window of buffers too large for the caches. */
static double stream_window(const struct opts *o, size_t size, int n, int from, int to,
                            int bidir, MPI_Request *req)
{
    const int w = o->window;
    const int me_send = rank == from, me_recv = rank == to;
    char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        int k = 0;
        if (bidir ? (me_send || me_recv) : me_recv)
            for (int j = 0; j < w; j++)
                MPI_Irecv(rbuf, (int)size, MPI_CHAR, me_send ? to : from, 2, MPI_COMM_WORLD,
                          &req[k++]);
        if (bidir ? (me_send || me_recv) : me_send)
            for (int j = 0; j < w; j++)
                MPI_Isend(sbuf, (int)size, MPI_CHAR, me_send ? to : from, 2, MPI_COMM_WORLD,
                          &req[k++]);
        MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        if (!bidir) { /* OSU: the receiver acknowledges each window */
            if (me_recv) MPI_Send(&ack, 1, MPI_CHAR, from, 3, MPI_COMM_WORLD);
            if (me_send) MPI_Recv(&ack, 1, MPI_CHAR, to, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    return MPI_Wtime() - t0;
}

/* Bandwidth (window of sends, then an ack) or bidirectional bandwidth, ranks 0 and 1, MB/s. */
static void bandwidth(const struct opts *o, size_t size, int bidir)
{
    const struct sampling s = sampling_of(o, size <= SMALL ? 100 : 20);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 10 : 2;
    MPI_Request req[2 * MAX_WINDOW];
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? warm : iters;
        double t = stream_window(o, size, n, 0, 1, bidir, req);
        if (rank == 0 && r >= 0)
            printf("{\"type\":\"sample\",\"test\":\"%s\",\"size\":%zu,\"value\":%.6g,"
                   "\"iters\":%d}\n", bidir ? "bibw" : "bandwidth", size,
                   (bidir ? 2.0 : 1.0) * (double)size * o->window * n / t / 1e6, n);
    }
}

/* Multi-pair message rate (osu_mbw_mr): rank r < P sends windows to r + P; the rate is
 * pairs x window x iterations over the mean sender time. */
static void message_rate(const struct opts *o, size_t size)
{
    const int pairs = nranks / 2;
    const struct sampling s = sampling_of(o, size <= SMALL ? 100 : 20);
    const int iters = s.iters;
    const int warm = size <= SMALL ? 10 : 2;
    MPI_Request req[2 * MAX_WINDOW];
    const int from = rank < pairs ? rank : rank - pairs, to = from + pairs;
    for (int r = -1; r < s.reps; r++) {
        const int n = r < 0 ? warm : iters;
        double t = 0.0;
        if (rank < 2 * pairs) {
            /* every pair streams at once: each rank is the sender or receiver of its pair */
            const int w = o->window;
            char ack = 0;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < w; j++) {
                    if (rank == from)
                        MPI_Isend(sbuf, (int)size, MPI_CHAR, to, 4, MPI_COMM_WORLD, &req[j]);
                    else
                        MPI_Irecv(rbuf, (int)size, MPI_CHAR, from, 4, MPI_COMM_WORLD, &req[j]);
                }
                MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
                if (rank == to) MPI_Send(&ack, 1, MPI_CHAR, from, 5, MPI_COMM_WORLD);
                else MPI_Recv(&ack, 1, MPI_CHAR, to, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            t = rank == from ? MPI_Wtime() - t0 : 0.0;
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double sum = 0.0;
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0 && r >= 0) {
            const double rate = (double)pairs * o->window * n / (sum / pairs);
            printf("{\"type\":\"sample\",\"test\":\"message_rate\",\"size\":%zu,\"value\":%.6g,"
                   "\"mbs\":%.6g,\"pairs\":%d,\"iters\":%d}\n", size, rate,
                   rate * (double)size / 1e6, pairs, n);
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
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            double t0 = MPI_Wtime();
            switch (c) {
            case ALLREDUCE:
                MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                break;
            case BCAST:
                MPI_Bcast(sbuf, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
                break;
            case ALLTOALL:
                MPI_Alltoall(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR,
                             MPI_COMM_WORLD);
                break;
            case BARRIER:
                MPI_Barrier(MPI_COMM_WORLD);
                break;
            }
            total += MPI_Wtime() - t0;
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double mine = total * 1e6 / n, sum = 0, lo = 0, hi = 0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0 && r >= 0)
            printf("{\"type\":\"sample\",\"test\":\"%s\",\"size\":%zu,\"value\":%.6g,"
                   "\"min\":%.6g,\"max\":%.6g,\"ranks\":%d,\"iters\":%d}\n", coll_names[c], size,
                   sum / nranks, lo, hi, nranks, n);
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
            printf("{\"type\":\"sample\",\"test\":\"halo\",\"size\":%zu,\"value\":%.6g,"
                   "\"bidir\":%.6g,\"min\":%.6g,\"l\":%d,\"ls\":%d,\"faces\":%d,"
                   "\"dims\":[%d,%d,%d,%d],\"ranks\":%d,\"iters\":%d}\n", face, sum / nranks,
                   2 * sum / nranks, lo, l, o->halo_ls, faces, dims[0], dims[1], dims[2],
                   dims[3], nranks, n);
    }
    MPI_Comm_free(&cart);
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
                     .halo_l = {8, 12, 16, 24, 32}, .nhalo = 5};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
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
        else die("unknown option");
    }
    if (o.min_reps < 1 || o.min_reps > o.reps) o.min_reps = o.reps;
    if (o.reps < 1 || o.window < 1 || o.window > MAX_WINDOW || o.iter_scale <= 0 ||
        o.halo_ls < 1 || o.site_bytes < 1)
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
    if (rank == 0) printf("{\"type\":\"done\"}\n");
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
