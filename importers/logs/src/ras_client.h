// ras_client.h — asks a live NCCL job's RAS service (NCCL 2.24+) for its status report, the way
// NCCL's own `ncclras` client does, for `hangdoctor --nccl-ras [HOST:]PORT`.
//
// Is: the client side of RAS's line protocol (NCCL src/ras/client.cc and the server in
// client_support.cc, same in tags v2.24.3-1 .. v2.30.7-1), over POSIX sockets:
//   "CLIENT PROTOCOL 2"  -> "SERVER PROTOCOL 2"  (the server ignores our number; 2 in every tag)
//   "TIMEOUT <secs>"     -> "OK"                 (how long RAS waits for the other processes)
//   "SET FORMAT json"    -> "OK"                 (2.28.7+; older servers answer "ERROR: Unknown
//                                                 command ..." and we go on in text)
//   "STATUS" / "VERBOSE STATUS" -> the report, then the server closes the connection.
// Is not: the parser of the report (nccl_ras.h) nor RAS's MONITOR event stream (2.29+).
#pragma once

#include <string>
#include <string_view>

#include "rankscope/format/status.h"

namespace rankscope::logs {

// NCCL_RAS_CLIENT_PORT in every NCCL tag that has RAS; NCCL_RAS_ADDR overrides it in the job.
inline constexpr int kNcclRasDefaultPort = 28028;

// "[HOST:]PORT": "28028", "n2:28028", "[::1]:28028", "[fe80::1%eth0]:28028". HOST defaults to
// localhost (where RAS listens unless NCCL_RAS_ADDR says otherwise).
Status parse_ras_address(std::string_view address, std::string& host, int& port);

// Connects to the RAS service at host:port and returns its report (text, or JSON where `json` and
// the server is 2.28.7+; an older server's text report otherwise). `timeout_s` (> 0) bounds the
// connect and each handshake reply, and is sent to RAS as its TIMEOUT (whole seconds, at least 1);
// the report itself may take that plus RAS's extra 5 s and 1 s of slack, as ncclras allows.
// `verbose` asks for VERBOSE STATUS (RAS then lists more outlier ranks).
Result<std::string> query_nccl_ras(const std::string& host, int port, bool json, double timeout_s,
                                   bool verbose);

}  // namespace rankscope::logs
