// event_visitor.h — an event-stream visitor for the fuzz targets that reads every field it is handed.
//
// Is: an EventStreamVisitor that folds every value of every record into a checksum, so ASan sees
// each span the reader hands out read to its end (an over-long span is a finding, not a quiet
// success). Is not: a model of the stream (format::read_event_stream keeps one).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "rankscope/format/event_stream.h"

namespace rankscope::fuzz {

class TouchingVisitor : public format::EventStreamVisitor {
 public:
  uint64_t sum = 0;
  void on_name(uint32_t id, format::NameKind kind, std::string_view name) override {
    sum += id + static_cast<uint64_t>(kind);
    for (char c : name) sum += static_cast<unsigned char>(c);
  }
  void on_clock(const format::ClockRecord& clock) override { sum += static_cast<uint64_t>(clock.offset_ns) + clock.samples; }
  void on_step(const format::StepRecord& step) override {
    sum += static_cast<uint64_t>(step.step) + step.ranges.size() + step.collectives.size() + step.counters.size();
  }
  void on_trace_ranges(int64_t step, std::span<const format::TraceRange> ranges) override {
    for (const auto& r : ranges) sum += r.name_id + static_cast<uint64_t>(r.begin_ns) + static_cast<uint64_t>(r.end_ns) + r.depth;
  }
  void on_trace_kernels(int64_t step, std::span<const format::TraceKernel> kernels) override {
    for (const auto& k : kernels) sum += k.name_id + k.range_id + static_cast<uint64_t>(k.begin_ns) + static_cast<uint64_t>(k.end_ns);
  }
  void on_grad_arrivals(int64_t step, std::span<const format::GradArrival> arrivals) override {
    for (const auto& a : arrivals) sum += a.param_id + static_cast<uint64_t>(a.arrived_ns);
  }
  void on_end(int64_t end_ns) override { sum += static_cast<uint64_t>(end_ns); }
};

}  // namespace rankscope::fuzz
