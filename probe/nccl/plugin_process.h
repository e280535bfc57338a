// plugin_process.h — what the NCCL profiler plugin keeps per process.
//
// Is: the settings read once from the environment (run directory, mask, pool sizes, the
// launcher's rank), the process.json written by the first communicator init (run.json's
// equivalent), and the heartbeat thread that keeps every live recorder's heartbeat fresh so
// hangdoctor can tell a frozen or dead process from a waiting one. The thread starts with the first
// communicator and is joined in the last finalize (NCCL dlcloses the plugin after it).
// Is not: per-communicator recording (comm_recorder.h).
#pragma once

#include "comm_recorder.h"
#include "nccl_profiler_abi.h"

namespace rankscope::nccl_plugin {

// Called from every version's init and finalize. Never fails: a context that could not create its
// recorder is returned as a dummy that ignores every event (NCCL 2.28 keeps calling a plugin whose
// init failed).
void* open_comm(int abi, uint64_t hash, const char* comm_name, int n_nodes, int nranks, int rank, int* mask,
                abi::Logger log);
void close_comm(void* context);
// The communicator of a context, or null for the dummy.
CommContext* comm_of(void* context);

}  // namespace rankscope::nccl_plugin
