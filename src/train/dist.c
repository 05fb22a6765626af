/* dist: see dist.h. One file, two builds: the MPI one, and one process without MPI. */
#define _POSIX_C_SOURCE 200809L
#include "train/dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/mem.h"

/* The variables the common launchers set in each process they start: Open MPI's
 * mpirun, then PMI/PMIx-based ones (MPICH's hydra, Slurm's srun). */
int dist_launched_size(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            long n = strtol(v, NULL, 10);
            if (n > 0 && n < INT_MAX) return (int)n;
        }
    }
    return 0;
}

int dist_launched_rank(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return (int)strtol(v, NULL, 10);
    }
    return 0;
}

#ifdef QKV_MPI
#include <mpi.h>

static int started, rank, size = 1;

/* The library's message for code as the error: "<what>: <MPI's words>". */
static int mpi_fail(const char *what, int code) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", code);
    return err_set("rank %d: %s: %s", rank, what, s);
}
#define MPI_CHECK(what, call)                               \
    do {                                                    \
        int rc_ = (call);                                   \
        if (rc_ != MPI_SUCCESS) return mpi_fail(what, rc_); \
    } while (0)

int dist_start(void) {
    if (dist_launched_size() == 0 || started) return 0;
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return err_set("cannot start MPI");
    started = 1;
    /* faults come back as return codes, so qkv says what failed in its own words */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_FUNNELED) return err_set("MPI gives no thread support; qkv's training threads need it");
    return 0;
}

void dist_end(void) {
    if (started) MPI_Finalize();
    started = 0, rank = 0, size = 1;
}

int dist_rank(void) { return rank; }
int dist_size(void) { return size; }

int dist_verdict(int rc, int *speak, int *status) {
    *speak = rc != 0, *status = rc;
    if (size == 1) return 0;
    int *all = xmalloc(sizeof(int) * (size_t)size);
    int mrc = MPI_Allgather(&rc, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    if (mrc == MPI_SUCCESS) {
        int first = 0;
        while (first < size && all[first] == 0) first++;
        *status = first < size ? all[first] : 0;
        *speak = first == rank;
    }
    free(all);
    return mrc == MPI_SUCCESS ? 0 : mpi_fail("agreeing on a result", mrc);
}

int dist_allgather_u64(uint64_t mine, uint64_t *all) {
    if (size == 1) return all[0] = mine, 0;
    MPI_CHECK("gathering values", MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
    return 0;
}

int dist_allgather_doubles(const double *mine, double *all, int n) {
    if (size == 1) return memcpy(all, mine, sizeof(double) * (size_t)n), 0;
    MPI_CHECK("exchanging gradient norms", MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD));
    return 0;
}

int dist_bcast(void *buf, size_t len) {
    if (size == 1) return 0;
    for (size_t off = 0; off < len; off += INT_MAX / 2) {
        size_t n = len - off < INT_MAX / 2 ? len - off : INT_MAX / 2;
        MPI_CHECK("receiving from rank 0", MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    return 0;
}

int dist_bcast_blob(char **bytes, size_t *len) {
    if (size == 1) return 0;
    uint64_t n = rank == 0 ? (uint64_t)*len : 0;
    if (dist_bcast(&n, sizeof n) != 0) return -1;
    if (rank != 0) {
        *bytes = xmalloc((size_t)n + 1);
        (*bytes)[n] = '\0';
        *len = (size_t)n;
    }
    return dist_bcast(*bytes, (size_t)n);
}

int dist_allgatherv_floats(float *buf, const int *counts, const int *displs) {
    if (size == 1) return 0;
    MPI_CHECK("sharing updated weights",
              MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD));
    return 0;
}

int dist_gatherv_floats(float *buf, const int *counts, const int *displs) {
    if (size == 1) return 0;
    if (rank == 0)
        MPI_CHECK("gathering optimizer state",
                  MPI_Gatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD));
    else
        MPI_CHECK("sending optimizer state", MPI_Gatherv(buf + displs[rank], counts[rank], MPI_FLOAT, NULL, NULL, NULL,
                                                         MPI_FLOAT, 0, MPI_COMM_WORLD));
    return 0;
}

struct DistPlan {
    int n, max;
    MPI_Request *req;
};

DistPlan *dist_plan_new(int max_transfers) {
    DistPlan *p = xcalloc(1, sizeof *p);
    p->max = max_transfers;
    p->req = xcalloc((size_t)(max_transfers > 0 ? max_transfers : 1), sizeof *p->req);
    return p;
}

static int plan_add(DistPlan *p, float *buf, size_t n, int peer, int tag, int send) {
    if (p->n == p->max) return err_set("internal: transfer plan is full");
    if (n > INT_MAX) return err_set("a gradient slice of %zu floats is more than one MPI message can carry", n);
    int rc = send ? MPI_Send_init(buf, (int)n, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &p->req[p->n])
                  : MPI_Recv_init(buf, (int)n, MPI_FLOAT, peer, tag, MPI_COMM_WORLD, &p->req[p->n]);
    if (rc != MPI_SUCCESS) return mpi_fail("setting up gradient transfers", rc);
    p->n++;
    return 0;
}

int dist_plan_send(DistPlan *p, const float *buf, size_t n, int peer, int tag) {
    return plan_add(p, (float *)buf, n, peer, tag, 1);
}
int dist_plan_recv(DistPlan *p, float *buf, size_t n, int peer, int tag) { return plan_add(p, buf, n, peer, tag, 0); }

int dist_plan_run(DistPlan *p) {
    if (p->n == 0) return 0;
    MPI_CHECK("exchanging gradients", MPI_Startall(p->n, p->req));
    MPI_CHECK("exchanging gradients", MPI_Waitall(p->n, p->req, MPI_STATUSES_IGNORE));
    return 0;
}

void dist_plan_free(DistPlan *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) MPI_Request_free(&p->req[i]);
    free(p->req);
    free(p);
}

#else /* one process, no MPI */

int dist_start(void) {
    int n = dist_launched_size();
    if (n > 1)
        return err_set("started as one of %d MPI processes, but this qkv was built without MPI "
                       "(install libopenmpi-dev and rebuild: make MPI=1)",
                       n);
    return 0;
}
void dist_end(void) {}
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
int dist_verdict(int rc, int *speak, int *status) { return *speak = rc != 0, *status = rc, 0; }
int dist_allgather_u64(uint64_t mine, uint64_t *all) { return all[0] = mine, 0; }
int dist_allgather_doubles(const double *mine, double *all, int n) {
    return memcpy(all, mine, sizeof(double) * (size_t)n), 0;
}
int dist_bcast(void *buf, size_t len) { return (void)buf, (void)len, 0; }
int dist_bcast_blob(char **bytes, size_t *len) { return (void)bytes, (void)len, 0; }
int dist_allgatherv_floats(float *buf, const int *counts, const int *displs) {
    return (void)buf, (void)counts, (void)displs, 0;
}
int dist_gatherv_floats(float *buf, const int *counts, const int *displs) {
    return (void)buf, (void)counts, (void)displs, 0;
}
struct DistPlan {
    int unused;
};
DistPlan *dist_plan_new(int max_transfers) { return (void)max_transfers, xcalloc(1, sizeof(DistPlan)); }
int dist_plan_send(DistPlan *p, const float *buf, size_t n, int peer, int tag) {
    return (void)p, (void)buf, (void)n, (void)peer, (void)tag, err_set("internal: no MPI in this build");
}
int dist_plan_recv(DistPlan *p, float *buf, size_t n, int peer, int tag) {
    return (void)p, (void)buf, (void)n, (void)peer, (void)tag, err_set("internal: no MPI in this build");
}
int dist_plan_run(DistPlan *p) { return (void)p, 0; }
void dist_plan_free(DistPlan *p) { free(p); }

#endif
