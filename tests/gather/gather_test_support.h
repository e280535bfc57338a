// gather_test_support.h — fake nodes for the gathering tests: a synthetic run split over per-host
// folders, and a launcher script that plays a node (runs the snapshot in that host's folder, or
// sleeps past the deadline, or fails like ssh, or sends a canned stream).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rankscope/format/run_directory_layout.h"
#include "rankscope/synth/synth.h"

namespace rankscope::gather::testing {

namespace fs = std::filesystem;

inline fs::path scratch(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = fs::temp_directory_path() /
             ("rs_gather_" + tag + "_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::string rankscope_binary() { return std::string(RANKSCOPE_BINARY_DIR) + "/bin/rankscope"; }

inline void write_file(const fs::path& p, const std::string& text, bool executable = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  if (executable) ::chmod(p.c_str(), 0755);
}

// A fake node: `sh ROOT/node.sh HOST CMD...` runs CMD in ROOT/HOST, unless ROOT/HOST holds `sleep`
// (never answers), `fail` (an ssh that cannot connect) or `stream` (sent instead of a snapshot).
inline std::string write_fake_node(const fs::path& root) {
  write_file(root / "node.sh",
             "#!/bin/sh\n"
             "root=$(dirname \"$0\"); host=$1; shift\n"
             "[ -f \"$root/$host/sleep\" ] && sleep 120\n"
             "[ -f \"$root/$host/fail\" ] && { echo \"ssh: connect to host $host port 22: Connection refused\" >&2; exit 255; }\n"
             "[ -f \"$root/$host/stream\" ] && exec cat \"$root/$host/stream\"\n"
             "cd \"$root/$host\" && exec \"$@\"\n",
             true);
  return "sh " + (root / "node.sh").string() + " {host}";
}

// A synthetic run on this machine's host name, written to ROOT/local/run, then split: node k of
// `hosts` holds ranks [k*per, (k+1)*per) in ROOT/<host>/run; run.json only on the first node.
inline synth::SynthSummary make_split_run(const fs::path& root, const std::vector<std::string>& hosts, int ranks,
                                          const std::string& fault, synth::SynthOptions o = {}) {
  o.ranks = ranks;
  o.steps = 6;
  o.tp = 2;
  o.local_host = true;
  o.start_ns = 0;
  if (!fault.empty()) {
    auto f = synth::parse_fault(fault);
    EXPECT_TRUE(f.ok());
    if (f.ok()) o.fault = *f;
  }
  const fs::path local = root / "local" / "run";
  auto s = synth::write_synthetic_run(local, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  const int per = ranks / int(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) {
    const fs::path dir = root / hosts[h] / "run";
    fs::create_directories(dir);
    if (h == 0) fs::copy_file(local / "run.json", dir / "run.json");
    for (int r = int(h) * per; r < int(h + 1) * per; ++r)
      fs::copy_file(format::flight_recorder_path(local, r), format::flight_recorder_path(dir, r));
  }
  return s.ok() ? *s : synth::SynthSummary{};
}

}  // namespace rankscope::gather::testing
