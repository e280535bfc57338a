// unique_id_exchange.cpp — ncclUniqueId bytes over MPI or through a file (see unique_id_exchange.h).
//
// File format (text, one field per line): "rankscope nccl unique id v1", the job key, and the 128
// bytes as 256 lower-case hex digits.
#include "comm/nccl/unique_id_exchange.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

namespace gpt2 {
namespace {

constexpr std::string_view kMagic = "rankscope nccl unique id v1";

std::string to_hex(const UniqueIdBytes& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * id.size());
  for (char c : id) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The id when `file` holds a complete record for `job_key`; nullopt otherwise (absent, other job).
std::optional<UniqueIdBytes> read_record(const std::filesystem::path& file, std::string_view job_key) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string magic, key, hex;
  if (!std::getline(in, magic) || !std::getline(in, key) || !std::getline(in, hex)) return std::nullopt;
  if (magic != kMagic || key != job_key || hex.size() != 2 * kNcclUniqueIdBytes) return std::nullopt;
  UniqueIdBytes id{};
  for (size_t i = 0; i < id.size(); i++) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id[i] = static_cast<char>(hi * 16 + lo);
  }
  return id;
}

}  // namespace

std::filesystem::path unique_id_file(const std::filesystem::path& dir, std::string_view comm_name) {
  return dir / fmt::format("nccl_unique_id.{}", comm_name);
}

rankscope::Status publish_unique_id_file(const std::filesystem::path& file, std::string_view job_key,
                                         const UniqueIdBytes& id) {
  if (job_key.find('\n') != std::string_view::npos) {
    return rankscope::invalid_argument("NCCL id job key must be one line");
  }
  const std::string body = fmt::format("{}\n{}\n{}\n", kMagic, job_key, to_hex(id));
  const std::filesystem::path tmp = file.string() + fmt::format(".tmp.{}", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return rankscope::io_error(fmt::format("cannot create {}: {}; hint: the run directory must exist and be "
                                           "writable by rank 0",
                                           tmp.string(), std::strerror(errno)));
  }
  size_t done = 0;
  while (done < body.size()) {
    const ssize_t n = ::write(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return rankscope::io_error(fmt::format("write {}: {}", tmp.string(), std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  // Durable before visible: a reader that sees the name sees all the bytes.
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return rankscope::io_error(fmt::format("rename {} -> {}: {}", tmp.string(), file.string(), std::strerror(err)));
  }
  return rankscope::Status::ok_status();
}

rankscope::Result<UniqueIdBytes> wait_for_unique_id_file(const std::filesystem::path& file,
                                                         std::string_view job_key,
                                                         std::chrono::milliseconds timeout,
                                                         std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto id = read_record(file, job_key)) return *id;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(poll);
  }
  return rankscope::not_found(fmt::format(
      "no NCCL unique id for job '{}' in {} after {} ms; hint: rank 0 writes it — is rank 0 alive, and do "
      "all ranks share this run directory (a shared filesystem across hosts)?",
      job_key, file.string(), timeout.count()));
}

rankscope::Status broadcast_unique_id(Communicator& bootstrap, UniqueIdBytes& id) {
  RS_RETURN_IF_ERROR(bootstrap.broadcast(id.data(), id.size(), rankscope::format::DataType::kUInt8, 0));
  return rankscope::Status::ok_status();
}

}  // namespace gpt2
