// debug_server_client.h — one HTTP GET to PyTorch's debug server on this machine (loopback only).
//
// Is: HTTP/1.0 GET over a POSIX socket with a bound on the connection and on every read (a stuck job
// must not make hangdoctor hang too), the status line checked, the body returned. Hosts other than
// localhost, 127.x.x.x and ::1 are refused: the server has no authentication
// (torch/distributed/debug/__init__.py: "only be used in trusted network environments").
// Is not: parsing the page (stack_import.cpp).
#pragma once

#include <string>
#include <string_view>

#include "rankscope/format/status.h"

namespace rankscope::stacks {

// "HOST:PORT" (or "[::1]:PORT") into its parts; an error naming what is wrong.
Status parse_loopback_address(std::string_view address, std::string& host, int& port);

// The body of http://host:port<path>; an error when nothing listens, the status is not 200, or
// `timeout_s` passed.
Result<std::string> http_get(const std::string& host, int port, const std::string& path, double timeout_s);

}  // namespace rankscope::stacks
