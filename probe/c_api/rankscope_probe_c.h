/* rankscope_probe_c.h — the probe for programs that are not C++: a C ABI over probe.h, built as
 * librankscope-probe.so (probe/c_api). A Python trainer loads it with ctypes
 * (scripts/rankscope_probe.py wraps it); any language with a C FFI can.
 *
 * Is: open/close, steps, ranges, collectives the program makes itself (a Gloo or NCCL call it
 * times on the host), counters and run.json, with the probe's run directory, flight recorder,
 * watchdog and learned bounds as a C++ program gets them. Rank and world size come from the
 * launcher's environment (torchrun's RANK/WORLD_SIZE, Open MPI's, PMI's, Slurm's) unless given.
 * Is not: a GPU timer (no CUPTI, no CUDA events through this ABI) nor clock alignment: ranks of one
 * host share the clock; across hosts the run's clocks are as good as NTP (docs/FORMAT.md).
 *
 * Errors: calls that can fail return 0 on success and -1 on failure, with one line of why in the
 * caller's buffer (err, err_size; may be NULL). A NULL probe makes every other call a no-op, so a
 * program can keep its calls when opening failed. Not thread-safe across one probe except
 * push/pop_range, which any thread may call (each thread has its own range stack). */
#ifndef RANKSCOPE_PROBE_C_H_
#define RANKSCOPE_PROBE_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RANKSCOPE_PROBE_C_ABI_VERSION 1

/* The library is built with hidden symbols (nothing of the probe's C++ leaks into the program);
 * these are its exports. */
#if defined(__GNUC__)
#define RANKSCOPE_PROBE_C_API __attribute__((visibility("default")))
#else
#define RANKSCOPE_PROBE_C_API
#endif

typedef struct rankscope_probe rankscope_probe;

/* RANKSCOPE_PROBE_C_ABI_VERSION of the loaded library: check it before any other call. */
RANKSCOPE_PROBE_C_API int rankscope_probe_abi_version(void);

/* run_dir NULL or "": $RANKSCOPE_RUN_DIR. rank < 0: from the launcher's environment (and
 * world_size with it); else both as given, except rank 0 of a world of 1, the probe's default,
 * which a launcher's environment still overrides (probe.h Options::apply_environment). The
 * RANKSCOPE_* environment applies either way (watchdog, learned bounds, RANKSCOPE_DISABLE). NULL
 * on failure, with why in err. */
RANKSCOPE_PROBE_C_API rankscope_probe* rankscope_probe_open(const char* run_dir, int rank, int world_size, char* err, size_t err_size);
/* Marks the rank finished and flushes; the probe is freed. */
RANKSCOPE_PROBE_C_API void rankscope_probe_close(rankscope_probe* p);
/* Before exiting on an error: the rank's state says aborted rather than finished. */
RANKSCOPE_PROBE_C_API void rankscope_probe_mark_aborted(rankscope_probe* p);
RANKSCOPE_PROBE_C_API int rankscope_probe_rank(const rankscope_probe* p);
RANKSCOPE_PROBE_C_API int rankscope_probe_world_size(const rankscope_probe* p);

/* run.json (docs/FORMAT.md) from a JSON object: program, model, training, versions, groups, tp,
 * dp...; schema_version, run_id, created_unix_ns and world_size are filled in where absent. Only
 * rank 0's is written; other ranks' calls check the text and return 0. */
RANKSCOPE_PROBE_C_API int rankscope_probe_write_run_json(rankscope_probe* p, const char* json_object, char* err, size_t err_size);

RANKSCOPE_PROBE_C_API void rankscope_probe_begin_step(rankscope_probe* p, int64_t step);
RANKSCOPE_PROBE_C_API void rankscope_probe_end_step(rankscope_probe* p);
RANKSCOPE_PROBE_C_API void rankscope_probe_push_range(rankscope_probe* p, const char* name);
RANKSCOPE_PROBE_C_API void rankscope_probe_pop_range(rankscope_probe* p);

/* A communicator of `size` ranks in which this rank is `rank_in_comm`, named as run.json's groups
 * are ("world", "tp0", "dp1"). Returns its handle (>= 0), or -1 with why. */
RANKSCOPE_PROBE_C_API int rankscope_probe_register_comm(rankscope_probe* p, const char* name, int size, int rank_in_comm, char* err,
                                  size_t err_size);
/* One collective on a registered communicator, timed by the caller on the host: begin when the
 * rank calls it, end when it returned complete (failed != 0: it raised). op: the format's names
 * ("allreduce_sum", "allgather", "broadcast", "barrier", ...); dtype: "fp32", "bf16", ... or NULL.
 * Returns a token for end (>= 0), or -1 with why (an unknown op, an unregistered comm). Nested
 * collectives of one thread end in reverse order. */
RANKSCOPE_PROBE_C_API int64_t rankscope_probe_collective_begin(rankscope_probe* p, int comm, const char* op, const char* dtype, uint64_t count,
                                         uint64_t bytes, char* err, size_t err_size);
RANKSCOPE_PROBE_C_API void rankscope_probe_collective_end(rankscope_probe* p, int64_t token, int failed);

/* A named value for the current step (last write wins), and one added to it. */
RANKSCOPE_PROBE_C_API void rankscope_probe_counter(rankscope_probe* p, const char* name, double value);
RANKSCOPE_PROBE_C_API void rankscope_probe_counter_add(rankscope_probe* p, const char* name, double delta);

#ifdef __cplusplus
}
#endif

#endif /* RANKSCOPE_PROBE_C_H_ */
