// log_import.cpp — streams a job's log files line by line into a LogJob, then maps it (log_run.cpp)
// and finds what only a log says (log_findings.cpp).
#include "rankscope/logs/log_import.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "log_run.h"
#include "nccl_ras.h"
#include "ras_client.h"

namespace rankscope::logs {
namespace {

namespace fs = std::filesystem;

constexpr size_t kChunk = 4 << 20;
constexpr size_t kMaxLine = 64 << 10;  // longer lines are read up to here (a binary blob, a giant dump)

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f && f != stdin) std::fclose(f);
  }
};

bool is_log_name(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".log" || ext == ".out" || ext == ".err" || ext == ".txt" || ext.empty();
}

// A reader's buffer: one a thread, kept from file to file and never zeroed (a buffer made for each
// of 2048 files had the kernel clear 8 GB of fresh pages).
struct ReadBuffer {
  std::unique_ptr<char[]> bytes = std::make_unique_for_overwrite<char[]>(kChunk + kMaxLine);
  char* data() { return bytes.get(); }
};

Status read_stream(std::FILE* f, const std::string& name, LogJob& job, uint64_t& done, uint64_t total,
                   void (*progress)(uint64_t, uint64_t), uint64_t& next_report, ReadBuffer& buf) {
  size_t kept = 0;  // bytes of an unfinished line at the front of buf
  uint64_t line_no = 0;
  bool skipping = false;  // inside a line longer than kMaxLine: drop the rest of it
  for (;;) {
    const size_t n = std::fread(buf.data() + kept, 1, kChunk, f);
    if (n == 0) break;
    done += n;
    if (progress && done >= next_report) {
      progress(done, total);
      next_report = done + (256ull << 20);
    }
    const char* p = buf.data();
    const char* end = buf.data() + kept + n;
    for (;;) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
      if (!nl) break;
      ++line_no;
      if (!skipping) read_line(job, split_log_line(std::string_view(p, size_t(nl - p))), name, line_no);
      skipping = false;
      p = nl + 1;
    }
    kept = size_t(end - p);
    if (kept > kMaxLine) {  // read what fits, skip the rest of the line
      ++line_no;
      if (!skipping) read_line(job, split_log_line(std::string_view(p, kMaxLine)), name, line_no);
      skipping = true;
      kept = 0;
    } else if (kept > 0) {
      std::memmove(buf.data(), p, kept);
    }
  }
  if (kept > 0 && !skipping) read_line(job, split_log_line(std::string_view(buf.data(), kept)), name, ++line_no);
  if (std::ferror(f)) return io_error(fmt::format("{}: read error after {} lines", name, line_no));
  return {};
}

// A RAS report's first lines (after a raw capture's "SERVER PROTOCOL 2" / "OK"): "NCCL version
// ... compiled with CUDA" then "Job summary", or a JSON object.
bool looks_like_ras(std::string_view head) {
  size_t at = head.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return false;
  if (head[at] == '{') return head.find("\"nccl_version\"") != std::string_view::npos || head.find("\"communicators\"") != std::string_view::npos;
  return head.find("Job summary\n") != std::string_view::npos && head.find("NCCL version") != std::string_view::npos &&
         head.find("host:") == std::string_view::npos;
}

std::string read_head(const fs::path& p, size_t n) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(p.c_str(), "rb"));
  std::string head(n, '\0');
  head.resize(f ? std::fread(head.data(), 1, head.size(), f.get()) : 0);
  return head;
}

LogImport from_ras(const RasReport& report, const std::string& source) {
  LogImport out;
  out.findings = ras_findings(report);
  out.versions = report.nccl_versions;
  int world = std::max(report.gpus, 0);
  for (const auto& f : out.findings)
    for (int r : f.ranks) world = std::max(world, r + 1);
  out.world_size = world;
  out.run.dir = source;
  std::string versions;
  for (const auto& v : report.nccl_versions) versions += (versions.empty() ? "" : ", ") + v;
  out.summary = fmt::format("read NCCL's RAS report {} ({}{} GPUs on {} nodes, {} communicators{}){}", source,
                            report.json ? "JSON, " : "", report.gpus, report.nodes, report.communicators.size(),
                            versions.empty() ? "" : ", NCCL " + versions,
                            report.complete ? "" : " — cut before its end: what follows is partial");
  out.cannot_tell.push_back("RAS compares how many collectives each rank has started and finished: a collective every "
                            "rank started and none finishes looks healthy to it");
  return out;
}

}  // namespace

Result<LogImport> import_nccl_ras(std::string_view report, const std::string& source) {
  auto r = parse_nccl_ras(report);
  if (!r.ok()) {
    Status s = r.status();
    s.prefix(source);
    return s;
  }
  return from_ras(*r, source);
}

Result<LogImport> query_and_import_nccl_ras(std::string_view address, double timeout_s) {
  std::string host;
  int port = 0;
  if (Status s = parse_ras_address(address, host, port); !s.ok()) return s;
  auto text = query_nccl_ras(host, port, /*json=*/true, timeout_s, /*verbose=*/true);
  if (!text.ok()) return text.status();
  return import_nccl_ras(*text, fmt::format("from {}:{}", host, port));
}

bool looks_like_log(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return false;
  std::string head(64 << 10, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f.get()));
  size_t at = 0;
  while (at < head.size()) {
    size_t nl = head.find('\n', at);
    if (nl == std::string::npos) nl = head.size();
    const std::string_view line(head.data() + at, nl - at);
    if (split_log_line(line).producer != Producer::kOther || line.find("Watchdog caught collective") != std::string_view::npos)
      return true;
    at = nl + 1;
  }
  return false;
}

namespace {

// The files the paths name ("-" is standard input): a directory's log files in name order.
Status list_log_files(const std::vector<fs::path>& paths, std::vector<fs::path>& files, bool& from_stdin) {
  for (const auto& p : paths) {
    std::error_code ec;
    if (p == "-") {
      from_stdin = true;
    } else if (fs::is_directory(p, ec)) {
      std::vector<fs::path> inside;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file(ec) && is_log_name(e.path())) inside.push_back(e.path());
      std::sort(inside.begin(), inside.end());
      if (inside.empty()) return not_found(fmt::format("{}: no log files in it (*.log, *.out, *.err, *.txt)", p.string()));
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      return not_found(fmt::format("{}: no such file or directory", p.string()));
    }
  }
  return Status::ok_status();
}

// RAS reports among the files are read whole, as reports, and taken out of the list.
Status take_ras_reports(std::vector<fs::path>& files, std::vector<LogImport>& ras) {
  for (auto it = files.begin(); it != files.end();) {
    if (!looks_like_ras(read_head(*it, 64 << 10))) {
      ++it;
      continue;
    }
    std::ifstream in(*it, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = import_nccl_ras(text, it->string());
    if (!r.ok()) return r.status();
    ras.push_back(std::move(*r));
    it = files.erase(it);
  }
  return Status::ok_status();
}

// Files are read on every core, each into its own job, then merged in file order; standard input
// last. Progress is counted across the workers.
Result<LogJob> read_log_files(const std::vector<fs::path>& files, bool from_stdin,
                              void (*progress)(uint64_t, uint64_t)) {
  uint64_t total = 0;
  for (const auto& f : files) {
    std::error_code ec;
    total += fs::file_size(f, ec);
  }
  std::vector<LogJob> jobs(files.size());
  std::vector<Status> statuses(files.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done_all{0};
  std::mutex progress_mutex;
  uint64_t next_report = 256ull << 20;
  auto work = [&] {
    ReadBuffer buffer;
    for (size_t i = next++; i < files.size(); i = next++) {
      std::unique_ptr<std::FILE, FileCloser> in(std::fopen(files[i].c_str(), "rb"));
      if (!in) {
        statuses[i] = io_error(fmt::format("{}: cannot open: {}", files[i].string(), std::strerror(errno)));
        continue;
      }
      jobs[i].files.push_back(files[i].string());
      uint64_t mine = 0, unused = ~0ull;
      statuses[i] = read_stream(in.get(), files[i].string(), jobs[i], mine, total, nullptr, unused, buffer);
      const uint64_t now = done_all += mine;
      if (progress) {
        std::lock_guard lock(progress_mutex);
        if (now >= next_report) {
          progress(now, total);
          next_report = now + (256ull << 20);
        }
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    const size_t n = std::min<size_t>({files.size(), std::max(1u, std::thread::hardware_concurrency()), 16});
    for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
    work();
  }
  for (const Status& s : statuses)
    if (!s.ok()) return s;
  LogJob job;
  for (auto& j : jobs) merge_job(job, std::move(j));
  if (from_stdin) {
    job.files.push_back("-");
    uint64_t done = done_all;
    ReadBuffer buffer;
    if (Status s = read_stream(stdin, "stdin", job, done, 0, progress, next_report, buffer); !s.ok()) return s;
  }
  return job;
}

std::string log_summary(const LogJob& job, const RankMap& ranks, const LogImport& out) {
  std::string versions;
  for (const auto& v : out.versions) versions += (versions.empty() ? "" : ", ") + v;
  return fmt::format("read {} ({} lines: {} NCCL, {} PyTorch{}): {} rank{} seen{}{}",
                     job.files.size() == 1 ? job.files.front() : fmt::format("{} log files", job.files.size()),
                     job.lines, job.nccl_lines, job.torch_lines,
                     job.coll_lines ? fmt::format(", {} NCCL calls", job.coll_lines) : "", ranks.seen.size(),
                     ranks.seen.size() == 1 ? "" : "s",
                     ranks.world > int(ranks.seen.size()) ? fmt::format(" of {}", ranks.world) : "",
                     versions.empty() ? "" : ", NCCL " + versions);
}

}  // namespace

Result<LogImport> import_logs(const std::vector<fs::path>& paths, void (*progress)(uint64_t, uint64_t)) {
  std::vector<fs::path> files;
  bool from_stdin = false;
  if (Status s = list_log_files(paths, files, from_stdin); !s.ok()) return s;
  std::vector<LogImport> ras;
  if (Status s = take_ras_reports(files, ras); !s.ok()) return s;
  if (files.empty() && !from_stdin && !ras.empty()) {
    LogImport out = std::move(ras.front());
    for (size_t i = 1; i < ras.size(); ++i)
      for (auto& f : ras[i].findings) out.findings.push_back(std::move(f));
    return out;
  }
  Result<LogJob> read = read_log_files(files, from_stdin, progress);
  if (!read.ok()) return read.status();
  LogJob& job = *read;
  LogImport out;
  out.lines = job.lines;
  out.nccl_lines = job.nccl_lines;
  out.torch_lines = job.torch_lines;
  out.coll_lines = job.coll_lines;
  if (job.nccl_lines == 0 && job.torch.empty() && job.other_errors.empty() && job.torch_lines == 0 &&
      job.failures.empty() && job.local_exits.empty() && job.tagged_ranks.empty() && ras.empty())
    return invalid_argument(fmt::format("{}: {} lines, none of them NCCL's ('host:pid:tid [dev] NCCL INFO ...') or "
                                        "PyTorch's ('[E... ProcessGroupNCCL.cpp:...]'): nothing to judge",
                                        job.files.size() == 1 ? job.files.front() : fmt::format("{} files", job.files.size()),
                                        job.lines));
  const RankMap ranks = map_ranks(job);
  build_run(job, ranks, out);
  for (auto& r : ras) {
    for (auto& f : r.findings) out.findings.push_back(std::move(f));
    out.world_size = std::max(out.world_size, r.world_size);
  }
  out.host_of_rank = ranks.host_of_rank;
  for (const auto& [d, r] : ranks.rank_of_device) out.pid_of_rank[r] = std::get<1>(d);
  add_findings(job, ranks, out);
  if (job.coll_lines == 0)
    out.cannot_tell.push_back("no NCCL COLL lines (NCCL_DEBUG_SUBSYS=COLL was not set): how many calls each rank made "
                              "on each communicator is not in the log");
  out.summary = log_summary(job, ranks, out);
  return out;
}

}  // namespace rankscope::logs
