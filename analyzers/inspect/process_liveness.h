// process_liveness.h — is the process that wrote a flight recorder still alive?
//
// Is: a check that only answers for processes on this host (kill(pid, 0) plus a /proc start-time
// sanity check would need more identity than we store, so a recycled pid reads as alive).
// Elsewhere the answer is "unknown" and callers fall back on heartbeat age; so is it on a host of the
// same name booted another time (a boot id the writer recorded that is not this machine's: the
// runs of one cloud image all say "vm"). Is not: a remote probe.
#pragma once

#include <string>

namespace rankscope::analyzers {

enum class Liveness { kAlive, kGone, kUnknown };

std::string this_host_name();
std::string this_boot_id();  // /proc/sys/kernel/random/boot_id; "" when unreadable
// `boot_id`: the writer's, "" when it recorded none.
Liveness process_liveness(const std::string& host, int pid, const std::string& boot_id = {});
const char* liveness_name(Liveness l);

}  // namespace rankscope::analyzers
