// flight_identity.cpp — the recorder's identity from one pread of its header.
#include "rankscope/format/flight_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "rankscope/format/flight_recorder_layout.h"

namespace rankscope::format {
namespace {

// Fixed-size NUL-padded field -> printable string (as the full reader does).
std::string text_field(const char* p, size_t n) {
  std::string s(p, strnlen(p, n));
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

}  // namespace

Result<HeaderIdentity> read_flight_identity(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? not_found(fmt::format("{}: missing", file.string()))
                           : io_error(fmt::format("{}: cannot open: {}", file.string(), std::strerror(errno)));
  FlightHeader h;
  const ssize_t n = ::pread(fd, &h, sizeof(h), 0);
  ::close(fd);
  if (n != ssize_t(sizeof(h))) return corrupt(fmt::format("{}: shorter than a flight recorder header", file.string()));
  if (std::memcmp(h.magic, kFlightMagic, sizeof(kFlightMagic)) != 0) return corrupt(fmt::format("{}: bad magic", file.string()));
  if (h.schema_version != kFlightSchemaVersion)
    return unsupported(fmt::format("{}: schema version {}", file.string(), h.schema_version));
  if (h.ready != 1) return corrupt(fmt::format("{}: identity not written yet", file.string()));
  HeaderIdentity id;
  id.rank = h.rank;
  id.world_size = h.world_size;
  id.pid = h.pid;
  id.host = text_field(h.host, sizeof(h.host));
  id.run_id = text_field(h.run_id, sizeof(h.run_id));
  id.nccl_plugin = std::memcmp(h.nccl.magic, kNcclInfoMagic, sizeof(kNcclInfoMagic)) == 0;
  return id;
}

}  // namespace rankscope::format
