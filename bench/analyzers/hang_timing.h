// hang_timing.h — times what `hangdoctor RUN_DIR --json FILE` does on a run directory, for the
// hang benchmarks: open the run directory (every recorder), classify, render text and JSON; five
// repetitions, sorted.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "rankscope/analyzers/hang/classifier.h"
#include "rankscope/analyzers/hang/report.h"
#include "rankscope/format/run_directory.h"

namespace rankscope::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct HangTiming {
  std::vector<double> open_s, diagnose_s, render_s, total_s;  // sorted, 5 each
  analyzers::hang::Diagnosis diagnosis;                       // of the last repetition
  bool ok = false;
  double median() const { return total_s[2]; }
};

inline HangTiming time_hangdoctor(const std::filesystem::path& dir) {
  HangTiming t;
  analyzers::hang::SystemProcessTable procs;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    auto run = format::open_run_directory(dir);
    if (!run.ok()) return t;
    t.open_s.push_back(seconds_since(t0));
    const auto t1 = std::chrono::steady_clock::now();
    t.diagnosis = analyzers::hang::diagnose(*run, procs);
    t.diagnose_s.push_back(seconds_since(t1));
    const auto t2 = std::chrono::steady_clock::now();
    const std::string text = analyzers::hang::render_text(t.diagnosis);
    const std::string json = analyzers::hang::render_json_text(t.diagnosis);
    t.render_s.push_back(seconds_since(t2));
    t.total_s.push_back(seconds_since(t0));
    if (text.empty() || json.empty()) return t;
  }
  std::sort(t.open_s.begin(), t.open_s.end());
  std::sort(t.diagnose_s.begin(), t.diagnose_s.end());
  std::sort(t.render_s.begin(), t.render_s.end());
  std::sort(t.total_s.begin(), t.total_s.end());
  t.ok = true;
  return t;
}

}  // namespace rankscope::bench
