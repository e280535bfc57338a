// log_test_support.h — writes NCCL_DEBUG=INFO and PyTorch watchdog lines in the shapes their source
// prints (docs/log-formats/), for the log tests' own scenarios; and runs hangdoctor in-process.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "rankscope/cli/hangdoctor_app.h"

namespace rankscope::logs::testing {

// One process (one GPU) of a job, as NCCL prints it.
struct Proc {
  std::string host;
  int pid;
  int dev = 0;
  std::string prefix;  // a launcher's, e.g. "[rank3]:"

  Proc(std::string h, int p, int d, std::string pre = "") : host(std::move(h)), pid(p), dev(d), prefix(std::move(pre)) {}

  std::string line(std::string_view level, std::string_view msg, std::string_view where = "") const {
    return fmt::format("{}{}:{}:{} [{}] {}{}NCCL {} {}\n", prefix, host, pid, pid, dev, where, where.empty() ? "" : " ", level, msg);
  }
  // NCCL 2.23+ init lines.
  std::string init(std::string_view comm, int rank, int nranks, std::string_view comm_id, bool complete) const {
    std::string s = line("INFO", fmt::format("ncclCommInitRankConfig comm {} rank {} nranks {} cudaDev {} nvmlDev {} busId "
                                             "1b000 commId {} - Init START",
                                             comm, rank, nranks, dev, dev, comm_id));
    if (complete)
      s += line("INFO", fmt::format("ncclCommInitRankConfig comm {} rank {} nranks {} cudaDev {} nvmlDev {} busId 1b000 "
                                    "commId {} - Init COMPLETE",
                                    comm, rank, nranks, dev, dev, comm_id));
    return s;
  }
  // enqueue.cc's COLL line.
  std::string coll(std::string_view op, long count, int datatype, std::string_view comm, int nranks, int root = 0) const {
    return line("INFO", fmt::format("{}: opCount 0 sendbuff 0x7f0000000000 recvbuff 0x7f0000100000 count {} datatype {} "
                                    "op 0 root {} comm {} [nranks={}] stream 0x55d0c0",
                                    op, count, datatype, root, comm, nranks));
  }
};

inline std::filesystem::path write_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

struct Cli {
  int code = -1;
  std::string out, err;
};

inline Cli hangdoctor(std::vector<std::string> argv) {
  char* out_buf = nullptr;
  char* err_buf = nullptr;
  size_t out_len = 0, err_len = 0;
  std::FILE* out = open_memstream(&out_buf, &out_len);
  std::FILE* err = open_memstream(&err_buf, &err_len);
  rankscope::cli::HangdoctorEnv env;
  env.out = out;
  env.err = err;
  std::vector<std::string_view> args(argv.begin(), argv.end());
  Cli c;
  c.code = rankscope::cli::run_hangdoctor(args, env);
  std::fclose(out);
  std::fclose(err);
  c.out.assign(out_buf, out_len);
  c.err.assign(err_buf, err_len);
  std::free(out_buf);
  std::free(err_buf);
  return c;
}

}  // namespace rankscope::logs::testing
