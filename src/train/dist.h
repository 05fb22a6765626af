/* dist: the processes of one training job, i.e. MPI ranks, or just this process.
 *
 * Built with QKV_MPI (make MPI=1, the default where mpicc is found) this wraps the few
 * MPI calls training makes; built without, it is a job of one process and every call
 * is a no-op. MPI is initialised only when an MPI launcher started this process (its
 * environment says so), so a plain `qkv train` never touches MPI.
 *
 * Every collective here returns 0, or -1 with the error set when the library reports a
 * fault (errors are returned, not fatal). Ranks must call the collectives in the same
 * order; the training loop makes every decision that leads to one from data all ranks
 * share. Knows nothing of models: it moves bytes and floats. */
#ifndef QKV_DIST_H
#define QKV_DIST_H

#include <stddef.h>
#include <stdint.h>

/* The number of processes an MPI launcher says it started (its environment), 0 when
 * none did. Read without MPI, so a build without MPI can refuse to run under mpirun. */
int dist_launched_size(void);
/* This process' rank as the launcher's environment gives it (0 when none does). */
int dist_launched_rank(void);

/* Joins the job when launched by an MPI launcher (MPI_Init with threads funnelled
 * through the calling thread). -1 with the error set when launched with more than one
 * process by a build without MPI, or when MPI cannot start. */
int dist_start(void);
/* Leaves the job (MPI_Finalize); a no-op when not started. */
void dist_end(void);
int dist_rank(void); /* 0 .. dist_size()-1; 0 outside MPI */
int dist_size(void); /* 1 outside MPI */

/* The job's verdict on a phase every rank ran: the status of the lowest-numbered rank
 * whose rc is not 0 (0 when none). *speak is set on that rank alone, so one rank
 * reports a fault that every rank may share. -1 (error set) if the ranks cannot talk. */
int dist_verdict(int rc, int *speak, int *status);

/* Every rank's value, in rank order, into all[dist_size()]. */
int dist_allgather_u64(uint64_t mine, uint64_t *all);
/* Each rank's n doubles, in rank order, into all[n * dist_size()]. */
int dist_allgather_doubles(const double *mine, double *all, int n);
/* len bytes from rank 0 into buf on every rank. */
int dist_bcast(void *buf, size_t len);
/* A heap block from rank 0: on rank 0 *bytes / *len are sent; elsewhere they are set
 * to a malloc'd copy (NUL-terminated, so text can be parsed in place). */
int dist_bcast_blob(char **bytes, size_t *len);

/* buf[displs[r] .. displs[r]+counts[r]) of rank r ends up on every rank (in place). */
int dist_allgatherv_floats(float *buf, const int *counts, const int *displs);
/* The same, to rank 0 only. */
int dist_gatherv_floats(float *buf, const int *counts, const int *displs);

/* A fixed set of point-to-point transfers set up once and run every step (persistent
 * requests): a step then allocates nothing and sends the same bytes the same way. */
typedef struct DistPlan DistPlan;
DistPlan *dist_plan_new(int max_transfers);
/* Adds a send of n floats at buf to rank peer (tag), or a receive into buf from it. */
int dist_plan_send(DistPlan *p, const float *buf, size_t n, int peer, int tag);
int dist_plan_recv(DistPlan *p, float *buf, size_t n, int peer, int tag);
/* Starts every transfer and waits for all of them. */
int dist_plan_run(DistPlan *p);
void dist_plan_free(DistPlan *p);

#endif
