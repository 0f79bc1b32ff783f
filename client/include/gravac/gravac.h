/* gravac C API: the worker side of gravac. A worker (one per GPU or CPU slot) connects to its
 * node's daemon (gravacd) over a Unix socket, places tensors in a shared-memory staging segment
 * that the daemon has mapped, and posts allreduce / allgather / broadcast requests that complete
 * asynchronously.
 *
 * Handles and ownership:
 *   - gravac_context holds all state of one worker's connection (there are no globals; a process
 *     may hold several contexts, e.g. tests running several workers as threads). It is created
 *     by gravac_init / gravac_init_with_config and freed by gravac_shutdown.
 *   - gravac_request is created by a *_async call and owned by the caller, who frees it with
 *     gravac_request_free (before or after gravac_shutdown; freeing an unfinished request is
 *     allowed: its result is discarded). Buffers passed to *_async (in, out, data) are read at
 *     the call (inputs are copied into the staging segment before the call returns) and `out` /
 *     `data` are written by the library before the request reports done; they must stay valid
 *     until then (or until the request is freed). In-place requests on a gravac_buffer are the
 *     exception: the daemon reads and writes the buffer itself (see gravac_buffer_alloc).
 *
 * Blocking: *_async calls do not wait for the other ranks (they copy the input into the staging
 *   segment and send one small message; when the segment is full they register a larger one).
 *   gravac_wait blocks until the request completes; it is bounded by the daemon, which fails
 *   every request of a job with a mismatch, a dead worker, node or peer, or a timeout
 *   (GRAVAC_OP_TIMEOUT_S of the daemon); a dead daemon fails every pending request at once.
 *   gravac_poll never blocks. gravac_barrier blocks until every rank reached it.
 *
 * Thread-safety: the functions taking a gravac_context may be called from several threads at
 *   once, except gravac_shutdown, which must be the last call on the context. A gravac_request
 *   is used by one thread at a time. Results are copied out by the library's background thread,
 *   so `out` holds the result as soon as gravac_poll reports done.
 *
 * Errors: every function returns a gravac_status; the message of the last failed call on a
 *   context is gravac_last_error (per context, overwritten by the next failure), and a failed
 *   request's message (from the daemon: it names the rank, tensor and field) is
 *   gravac_request_error. Strings returned stay valid until the next call on the same handle.
 *
 * Tensor names identify a collective across ranks: every rank must post the same name with the
 * same kind, dtype, shape (allgather: shape[1..]), op and root; a name may be in flight only
 * once per worker at a time.
 */
#ifndef GRAVAC_GRAVAC_H_
#define GRAVAC_GRAVAC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gravac_context gravac_context;
typedef struct gravac_request gravac_request;

typedef enum {
  GRAVAC_OK = 0,
  GRAVAC_ERR_INVALID = 1,      /* bad argument (NULL handle, bad shape, unknown dtype ...) */
  GRAVAC_ERR_UNAVAILABLE = 2,  /* daemon unreachable or gone, worker/peer failure */
  GRAVAC_ERR_TIMEOUT = 3,      /* an operation exceeded its time bound */
  GRAVAC_ERR_MISMATCH = 4,     /* ranks disagree on a tensor's name, kind, dtype, shape, op... */
  GRAVAC_ERR_INTERNAL = 5,     /* anything else (the message says what) */
  GRAVAC_ERR_SHUTDOWN = 6,     /* the context is shutting down or the daemon stopped */
  GRAVAC_ERR_PENDING = 7,      /* the request has not completed yet (gravac_result_info_get) */
  GRAVAC_ERR_REFUSED = 8       /* the daemon or controller refused this worker's job: a job the
                                * daemon does not serve (--jobs), no free worker slots, a group
                                * claiming slots the job already holds, a run id that already
                                * ended, an exhausted data-port range, a socket the user may not
                                * use; the message names the job and the node. Retrying the same
                                * job unchanged does not help (a new run id, another node or
                                * free slots do). */
} gravac_status;

typedef enum {
  GRAVAC_FLOAT32 = 0,
  GRAVAC_FLOAT64 = 1,
  GRAVAC_FLOAT16 = 2,
  GRAVAC_BFLOAT16 = 3,
  GRAVAC_INT32 = 4,
  GRAVAC_INT64 = 5,
  GRAVAC_UINT8 = 6
} gravac_dtype;

typedef enum { GRAVAC_SUM = 0, GRAVAC_AVERAGE = 1 } gravac_op;

/* Horovod's process set: the global ranks a collective runs on, ascending and distinct, the
 * calling rank among them; only they post it, and it completes when they all did (an average
 * divides by their number). size 0 (ranks may be NULL) = every rank of the job. A rank outside
 * the set, a rank named twice or outside the job, a broadcast root outside the set, or
 * compression on a set smaller than the job is GRAVAC_ERR_INVALID naming the rank and field;
 * ranks that disagree on a tensor's set get GRAVAC_ERR_MISMATCH. */
typedef struct {
  const int32_t* ranks;
  int size;
} gravac_process_set;

/* Per-tensor options of an allreduce; NULL means {step = -1, samples = 0, compress = 0} on every
 * rank. Zero-initialise it (= {0} in C, {} in C++) before setting fields.
 * step: the training step the tensor belongs to (-1: not part of a step); samples: samples this
 * rank processed in the step (for throughput); compress: nonzero for fp32 gradients that GraVAC
 * may compress (the daemon applies the job's agreed compression factor). */
typedef struct {
  int64_t step;
  int64_t samples;
  int compress;
  gravac_process_set process_set; /* zero-initialised: every rank */
} gravac_tensor_options;

/* What the daemon did with a completed request. */
typedef struct {
  double theta;            /* compression factor used; 1 = uncompressed */
  char collective[32];     /* "dense_allreduce", "sparse_allgather", "allgather", "broadcast" */
  int64_t decision_epoch;  /* decision epoch in force for the tensor's step */
} gravac_result_info;

/* Explicit configuration (gravac_init reads the same values from the environment). */
typedef struct {
  int rank;                  /* GRAVAC_RANK: global rank */
  int size;                  /* GRAVAC_SIZE: world size */
  int local_rank;            /* GRAVAC_LOCAL_RANK: rank on this node */
  int local_size;            /* GRAVAC_LOCAL_SIZE: workers on this node */
  const char* daemon_socket; /* GRAVAC_DAEMON_SOCKET: Unix socket path of the node's daemon */
  double connect_timeout_s;  /* GRAVAC_CONNECT_TIMEOUT_S (30): retry connecting this long */
  int64_t staging_bytes;     /* GRAVAC_STAGING_BYTES (16 MiB): first staging segment's size */
  int no_zero_copy;          /* GRAVAC_ZERO_COPY=0: nonzero stages shared buffers' requests too */
} gravac_config;

/* Creates a context from the GRAVAC_* environment (GRAVAC_RANK, GRAVAC_SIZE,
 * GRAVAC_LOCAL_RANK, GRAVAC_LOCAL_SIZE, GRAVAC_DAEMON_SOCKET, optional
 * GRAVAC_CONNECT_TIMEOUT_S, GRAVAC_STAGING_BYTES and GRAVAC_ZERO_COPY), connects to the daemon
 * and says hello. Blocks up to the connect timeout. On failure *ctx is NULL (a failed init has
 * no context to carry its message: use gravac_init_verbose to get it). */
gravac_status gravac_init(gravac_context** ctx);
/* As gravac_init; on failure also writes the message into error (NUL-terminated, truncated to
 * error_size; error may be NULL). */
gravac_status gravac_init_verbose(gravac_context** ctx, char* error, size_t error_size);
/* As gravac_init_verbose with an explicit configuration (no environment is read). */
gravac_status gravac_init_with_config(const gravac_config* config, gravac_context** ctx,
                                      char* error, size_t error_size);

/* Elastic jobs (issue 22): this worker's place in its job's next membership, after the one it
 * was in broke or changed. */
typedef struct {
  int64_t version;     /* the membership's version (grows by one per change) */
  char run_id[136];    /* the run to initialize with (GRAVAC_RUN_ID) */
  int rank, size, local_rank, local_size, node_rank, nodes;
  char lost_nodes[1024];   /* nodes of the previous membership not in this one, comma-separated */
  char added_nodes[1024];  /* nodes new in this one */
} gravac_placement;

/* Asks this node's daemon (a gravacd --serve_jobs) for the place of this worker in the next
 * membership of its job, reading GRAVAC_DAEMON_SOCKET, GRAVAC_JOB_NAME, GRAVAC_LOCAL_RANK,
 * GRAVAC_LOCAL_SIZE and GRAVAC_CONNECT_TIMEOUT_S from the environment; `first_run_id` names the
 * job's first run (membership 0), `from_version` the membership this worker was in (-1: a worker
 * of a node that joins), `min_size`/`max_size` the job's bounds in ranks (0: none),
 * `expect_nodes` (NULL or "": none) after a host update the comma-separated node names the next
 * membership should hold (the controller waits for the new ones, not for members missing from
 * it). Blocks until
 * the controller published the membership (at most timeout_s; <= 0: 300 s). Every worker of the
 * node's old membership calls it (the daemon gathers them). Errors: GRAVAC_ERR_INVALID /
 * GRAVAC_ERR_UNAVAILABLE / GRAVAC_ERR_TIMEOUT as for gravac_init; a membership below min_size
 * (the message names the lost nodes) or a stale from_version fail with the controller's
 * message. */
gravac_status gravac_regroup(const char* first_run_id, int64_t from_version, int min_size,
                             int max_size, const char* expect_nodes, double timeout_s,
                             gravac_placement* out, char* error, size_t error_size);

int gravac_rank(const gravac_context* ctx);
int gravac_size(const gravac_context* ctx);
int gravac_local_rank(const gravac_context* ctx);
int gravac_local_size(const gravac_context* ctx);

/* Sum or average of `in` over all ranks into `out` (both shape[0..ndim) elements of dtype; they
 * may be the same buffer). ndim = 0 is a scalar. Host memory: once the context has posted a
 * CUDA tensor (gravac_allreduce_device_async), a CUDA device buffer passed here is refused with
 * GRAVAC_ERR_INVALID naming the field (a CPU-only job makes no CUDA call). */
gravac_status gravac_allreduce_async(gravac_context* ctx, const char* name, const void* in,
                                     void* out, const int64_t* shape, int ndim, gravac_dtype dtype,
                                     gravac_op op, const gravac_tensor_options* options,
                                     gravac_request** req);

/* Where the buffers of a *_device_async call live: CUDA device `device` (the ordinal in this
 * process), produced and consumed by `stream` (a cudaStream_t; NULL = the legacy default
 * stream). */
typedef struct {
  int device;
  void* stream;
} gravac_device;

/* gravac_allreduce_async on CUDA device memory: `in` and `out` must be device memory of
 * dev->device, else GRAVAC_ERR_INVALID naming the rank, tensor and field. When the node's
 * gravacd maps CUDA IPC handles, the tensor is handed over without a host copy: `in` is copied to
 * `out` on dev->stream when they differ, gravacd maps `out`'s allocation once, reads it after the
 * work queued on dev->stream (an IPC event; the call does not block for it) and writes the
 * result into `out`; the gravac_wait / gravac_poll call that first sees the request done makes
 * dev->stream wait for that write (another IPC event), so work queued on dev->stream afterwards
 * sees the result. `out` must stay allocated until then. When gravacd cannot map it (built
 * without CUDA, no usable device, a handle it cannot open), the tensor is staged through host
 * memory instead, which the library says once per context on stderr: `in` is read after the work
 * queued on dev->stream (the call blocks until then), and `out` is written in dev->stream's
 * order by that wait / poll call before it returns. Without CUDA (a CPU-only build or no device)
 * the call fails with GRAVAC_ERR_INVALID, the message says why. Every rank must post `name` the
 * same way: a name posted as device memory on some ranks and with gravac_allreduce_async on
 * others fails on every rank with GRAVAC_ERR_MISMATCH naming the ranks and the field memory. */
gravac_status gravac_allreduce_device_async(gravac_context* ctx, const char* name, const void* in,
                                            void* out, const int64_t* shape, int ndim,
                                            gravac_dtype dtype, gravac_op op,
                                            const gravac_tensor_options* options,
                                            const gravac_device* dev, gravac_request** req);

/* Concatenation of every rank's `in` along the first dimension, in global rank order; the first
 * dimension may differ per rank (ndim >= 1). The result is fetched after completion with
 * gravac_allgather_result. */
gravac_status gravac_allgather_async(gravac_context* ctx, const char* name, const void* in,
                                     const int64_t* shape, int ndim, gravac_dtype dtype,
                                     gravac_request** req);
/* gravac_allgather_async on the ranks of `set` (NULL: every rank); the result holds their
 * blocks in global rank order. */
gravac_status gravac_allgather_async_on(gravac_context* ctx, const char* name, const void* in,
                                        const int64_t* shape, int ndim, gravac_dtype dtype,
                                        const gravac_process_set* set, gravac_request** req);
/* After a successful wait: *first_dim_total (may be NULL) = the sum of the first dimensions;
 * when out is not NULL, copies the result (out_bytes must be at least its size, else
 * GRAVAC_ERR_INVALID). Call with out = NULL to learn the size (first_dim_total * row bytes). */
gravac_status gravac_allgather_result(gravac_request* req, int64_t* first_dim_total, void* out,
                                      size_t out_bytes);
/* Size in bytes of a completed allgather's result. */
gravac_status gravac_allgather_result_bytes(const gravac_request* req, size_t* bytes);

/* Copies root_rank's `data` into `data` on every rank (in place). */
gravac_status gravac_broadcast_async(gravac_context* ctx, const char* name, void* data,
                                     const int64_t* shape, int ndim, gravac_dtype dtype,
                                     int root_rank, gravac_request** req);

/* gravac_broadcast_async on the ranks of `set` (NULL: every rank); root_rank is a global rank
 * of the set. */
gravac_status gravac_broadcast_async_on(gravac_context* ctx, const char* name, void* data,
                                        const int64_t* shape, int ndim, gravac_dtype dtype,
                                        int root_rank, const gravac_process_set* set,
                                        gravac_request** req);

/* Blocks until the request completes; returns its status (the message: gravac_request_error). */
gravac_status gravac_wait(gravac_request* req);
/* Sets *done to 1 when the request completed (then gravac_wait returns at once), else 0. */
gravac_status gravac_poll(gravac_request* req, int* done);
/* Fills *info for a completed successful request (GRAVAC_ERR_PENDING while not complete). */
gravac_status gravac_result_info_get(const gravac_request* req, gravac_result_info* info);
/* Message of a failed request ("" while pending or after success). */
const char* gravac_request_error(const gravac_request* req);
void gravac_request_free(gravac_request* req);

/* Shared buffers: host memory that the daemon maps, for tensors that take part in collectives.
 * An allreduce or broadcast whose buffer lies inside one and runs in place (out == in), and an
 * allgather whose input lies inside one, use that memory directly: the daemon reads the input
 * and writes the result there, and neither is copied through the staging segment (unless
 * GRAVAC_ZERO_COPY=0). Other requests on a shared buffer are staged as usual. Such a request
 * must not be freed before it completes: the daemon may still write its result. A buffer is
 * 64-byte aligned; its initial contents are unspecified.
 *
 * gravac_buffer_free may be called before or after gravac_shutdown; the memory stays valid
 * until then. Freeing a buffer that a request still uses defers its reuse until the request
 * completes. */
typedef struct gravac_buffer gravac_buffer;
gravac_status gravac_buffer_alloc(gravac_context* ctx, size_t bytes, gravac_buffer** buf);
void* gravac_buffer_data(const gravac_buffer* buf);
size_t gravac_buffer_size(const gravac_buffer* buf);
void gravac_buffer_free(gravac_buffer* buf);

/* Blocks until every rank of the job called gravac_barrier (an allreduce of one element). */
gravac_status gravac_barrier(gravac_context* ctx);

/* Horovod's join: this rank has no more data. Blocks until every rank of the job has called
 * gravac_join; meanwhile the daemon contributes zeros for this rank to the allreduces the other
 * ranks post (only names this rank posted before: others fail on the posting ranks with
 * GRAVAC_ERR_MISMATCH naming the joined ranks; an allgather or broadcast fails likewise).
 * Average still divides by the job's size, as Horovod. *last_joined_rank (may be NULL) receives
 * the global rank that joined last. */
gravac_status gravac_join(gravac_context* ctx, int* last_joined_rank);

/* Horovod's timeline: the daemon of rank 0 writes a Chrome trace (chrome://tracing, Perfetto)
 * of every tensor's phases to `path` (a path on that daemon's machine) from now on; NULL or ""
 * stops it. Called on rank 0 (on other ranks the call reaches their daemon, which writes
 * nothing unless it also holds rank 0). GRAVAC_ERR_INVALID when the file cannot be opened. */
gravac_status gravac_timeline(gravac_context* ctx, const char* path);

/* Message of the last failed call on ctx ("" when none). */
const char* gravac_last_error(const gravac_context* ctx);

/* Tells the daemon this worker is done (waits up to 5 s for its acknowledgement), fails the
 * requests still pending with GRAVAC_ERR_SHUTDOWN, closes the connection and frees ctx.
 * Returns GRAVAC_OK, or the error met while saying goodbye (ctx is freed in every case). */
gravac_status gravac_shutdown(gravac_context* ctx);

/* 1 when this libgravac was built with CUDA (gravac_allreduce_device_async can hand CUDA
 * tensors to gravacd; whether a device is usable is decided per call), else 0. */
int gravac_cuda_built(void);

/* 1 when the gravacd serving ctx was built with NCCL device collectives (it exchanges CUDA
 * tensors between nodes over NCCL when started with --device_collectives nccl, or auto and every
 * node can; else in host memory), 0 when it was not, -1 for a NULL ctx. As gravacd said when
 * ctx connected. */
int gravac_nccl_built(const gravac_context* ctx);

/* Static name of a status, e.g. "GRAVAC_ERR_MISMATCH". */
const char* gravac_status_string(gravac_status status);
/* Static name of a dtype ("float32", ...) and its element size in bytes (0 if unknown). */
const char* gravac_dtype_name(gravac_dtype dtype);
size_t gravac_dtype_size(gravac_dtype dtype);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  /* GRAVAC_GRAVAC_H_ */
