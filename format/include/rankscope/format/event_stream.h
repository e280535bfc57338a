// event_stream.h — a rank's append-only stream of per-step performance data (rankNNNNN.events).
//
// Is: the record types and their binary encoding, a buffered writer (the probe flushes it at every
// step end, so a crash loses at most the step in progress) and a streaming reader that stops
// cleanly at a truncated or corrupt tail. Always-on data is one StepRecord per step (aggregated
// ranges, every collective's arrival and finish, counters); full detail (every range instance,
// every kernel) only inside a capture window. Is not: analysis; see analyzers/.
//
// Encoding (docs/FORMAT.md has the byte tables): a 64-byte file header, then records
//   [u32 type][u32 payload_bytes][payload][u32 crc32(type, payload_bytes, payload)]
// Names (ranges, communicators, counters, kernels, params) are interned: a NAME record assigns an
// id (from 1; 0 means "no name") before its first use. Unknown record types are skipped, so adding types does not break readers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rankscope/format/kernel_class.h"
#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"

namespace rankscope::format {

inline constexpr char kEventsMagic[8] = {'R', 'S', 'E', 'V', 'E', 'N', 'T', 'S'};
inline constexpr uint32_t kEventsSchemaVersion = 1;
inline constexpr uint32_t kEventsSchemaMinReadable = 1;
inline constexpr uint32_t kEventsSchemaMaxReadable = 1;

enum class RecordType : uint32_t {
  kName = 1,
  kClock = 2,
  kStep = 3,
  kTraceRanges = 4,
  kTraceKernels = 5,
  kGradArrivals = 6,
  kEnd = 7,
  kTraceLaunches = 8,  // added after version 1 without a bump: older readers skip it
};

// kApi (a CUDA runtime or driver call, e.g. cudaLaunchKernel) came with TRACE_LAUNCHES.
enum class NameKind : uint8_t { kRange = 1, kComm = 2, kCounter = 3, kKernel = 4, kParam = 5, kApi = 6 };

// Fixed-size elements of a STEP record. Times are the rank's own clock (ns since epoch).
struct RangeAggregate {
  uint32_t name_id;
  uint32_t count;          // instances of this range in the step
  int64_t total_ns;        // inclusive wall time, summed over instances
  int64_t kernel_ns;       // GPU kernel time launched under this range (CUPTI), 0 on CPU
};
static_assert(sizeof(RangeAggregate) == 24);

struct CollectiveEvent {
  uint32_t comm_id;        // name id of the communicator
  uint8_t op;              // CollectiveOp
  uint8_t dtype;           // DataType
  uint8_t state;           // CollectiveState at the time the step was written
  uint8_t reserved0;
  uint32_t range_id;       // innermost open range at enqueue (name id)
  uint32_t reserved1;
  uint64_t seq;            // per-communicator sequence number: (comm, seq) matches across ranks
  uint64_t bytes;
  int64_t enqueue_ns;      // arrival: the rank called the collective
  int64_t start_ns;        // data movement began (GPU); = enqueue_ns for blocking CPU collectives
  int64_t end_ns;          // completion; 0 if not completed when the step was written
};
static_assert(sizeof(CollectiveEvent) == 56);

struct CounterValue {
  uint32_t name_id;
  uint32_t reserved;
  double value;
};
static_assert(sizeof(CounterValue) == 16);

struct StepRecord {
  int64_t step = 0;
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::vector<RangeAggregate> ranges;
  std::vector<CollectiveEvent> collectives;
  std::vector<CounterValue> counters;
};

struct ClockRecord {
  int64_t offset_ns;        // add to this rank's times to get rank 0's clock
  int64_t uncertainty_ns;   // half the best round trip
  int64_t measured_at_ns;
  uint32_t samples;
  uint32_t reserved;
};
static_assert(sizeof(ClockRecord) == 32);

// Capture-window detail.
struct TraceRange {
  uint32_t name_id;
  uint32_t tid;
  int64_t begin_ns;
  int64_t end_ns;
  uint32_t depth;           // 0 = outermost
  uint32_t reserved;
};
static_assert(sizeof(TraceRange) == 32);

struct TraceKernel {
  uint32_t name_id;         // kernel (demangled) name
  uint32_t range_id;        // range open on the launching thread at launch; 0 if none
  uint32_t stream;
  uint32_t device;
  int64_t begin_ns;         // on this rank's clock (CUPTI timestamps converted)
  int64_t end_ns;
};
static_assert(sizeof(TraceKernel) == 32);

// One GPU op (kernel, memcpy, memset) of the capture window with the host call that launched it, so
// that launch costs, launch delays, queue lengths and host-starved GPU gaps can be read from the
// run directory. Self-contained: it repeats the op's name, stream and device times, so a reader
// needs no join with TRACE_KERNELS (whose record of the same op has the same stream, begin and end).
// A launch that put several ops on the GPU (a CUDA graph) gives one TraceLaunch per op, each with
// the same host times. GPU ops whose launch was not seen have none.
struct TraceLaunch {
  uint32_t api_id;          // name id (kind kApi) of the runtime/driver call; 0 when not known
  uint32_t kernel_id;       // name id (kind kKernel) of the GPU op, as in TRACE_KERNELS
  uint32_t tid;             // launching thread (the TraceRange tid of that thread)
  uint32_t stream;
  uint32_t device;
  uint32_t correlation;     // the producer's correlation id (CUPTI, Kineto); 0 when none
  int64_t launch_begin_ns;  // the host call, on this rank's clock
  int64_t launch_end_ns;
  int64_t gpu_begin_ns;     // the op on the device, on this rank's clock
  int64_t gpu_end_ns;
};
static_assert(sizeof(TraceLaunch) == 56);

// What a TRACE_KERNELS record's GPU time is (compute, communication, memory) and which rule said so:
// rankscope/format/kernel_class.h (KernelClassifier, classify_kernel, is_memory_operation).

struct GradArrival {
  uint32_t param_id;        // name id of the parameter
  int32_t bucket;
  int64_t arrived_ns;
};
static_assert(sizeof(GradArrival) == 16);

struct EventStreamHeader {
  uint32_t schema_version = kEventsSchemaVersion;
  int32_t rank = 0;
  int32_t world_size = 1;
  int64_t created_ns = 0;
  std::string run_id;       // at most 31 bytes are stored
};

class EventStreamWriter {
 public:
  // kKeepOpen: one descriptor for the writer's life (the probe: one file per process).
  // kOpenPerFlush: the file is opened for each flush and closed again, so one process can write
  // any number of streams (rankscope synth at 16K ranks) within its descriptor limit.
  enum class FdPolicy { kKeepOpen, kOpenPerFlush };
  static Result<std::unique_ptr<EventStreamWriter>> create(const std::filesystem::path& file,
                                                           const EventStreamHeader& header,
                                                           FdPolicy policy = FdPolicy::kKeepOpen);
  // No file: records accumulate in memory until take_bytes() (streams rebuilt by a reader, e.g. from
  // the NCCL plugin's recorders, for analyzers that read event streams).
  static std::unique_ptr<EventStreamWriter> create_in_memory(const EventStreamHeader& header);
  // The whole stream so far (file header included) and an empty buffer; in-memory writers only.
  std::vector<uint8_t> take_bytes();
  ~EventStreamWriter();  // flushes
  EventStreamWriter(const EventStreamWriter&) = delete;
  EventStreamWriter& operator=(const EventStreamWriter&) = delete;

  // Returns the id of `name`, appending a NAME record the first time it is seen.
  uint32_t intern(NameKind kind, std::string_view name);

  void write_clock(const ClockRecord& clock);
  void write_step(const StepRecord& step);
  void write_trace_ranges(int64_t step, std::span<const TraceRange> ranges);
  void write_trace_kernels(int64_t step, std::span<const TraceKernel> kernels);
  void write_grad_arrivals(int64_t step, std::span<const GradArrival> arrivals);
  void write_trace_launches(int64_t step, std::span<const TraceLaunch> launches);
  void write_end(int64_t end_ns);

  // Hands buffered records to the OS (write(2)); readable by others and survives a SIGKILL.
  Status flush();
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  EventStreamWriter() = default;
  void append_record(RecordType type, std::span<const uint8_t> payload);

  int fd_ = -1;
  bool in_memory_ = false;
  std::string path_;
  std::vector<uint8_t> buffer_;
  std::vector<uint8_t> scratch_;
  std::unordered_map<std::string, uint32_t> ids_;
  uint64_t bytes_written_ = 0;
};

// Callbacks for the streaming reader. Each default does nothing.
class EventStreamVisitor {
 public:
  virtual ~EventStreamVisitor() = default;
  virtual void on_name(uint32_t id, NameKind kind, std::string_view name) {}
  virtual void on_clock(const ClockRecord& clock) {}
  virtual void on_step(const StepRecord& step) {}
  virtual void on_trace_ranges(int64_t step, std::span<const TraceRange> ranges) {}
  virtual void on_trace_kernels(int64_t step, std::span<const TraceKernel> kernels) {}
  virtual void on_grad_arrivals(int64_t step, std::span<const GradArrival> arrivals) {}
  virtual void on_trace_launches(int64_t step, std::span<const TraceLaunch> launches) {}
  virtual void on_end(int64_t end_ns) {}
};

struct EventStreamScan {
  EventStreamHeader header;
  uint64_t records = 0;
  bool ended = false;            // an END record was seen (clean shutdown)
  bool truncated_tail = false;   // the file ended inside a record (crash mid-write): tolerated
  std::vector<std::string> warnings;
};

// Streams `file` through `visitor`. Fails only when nothing can be read (missing file, bad magic,
// unsupported version); a bad record stops the scan with a warning, keeping what came before.
Result<EventStreamScan> scan_event_stream(const std::filesystem::path& file,
                                          EventStreamVisitor& visitor);
Result<EventStreamScan> scan_event_stream_bytes(std::span<const uint8_t> bytes,
                                                std::string_view display_name,
                                                EventStreamVisitor& visitor);

// Everything in memory: convenient for small runs and tests.
struct EventStream {
  EventStreamScan scan;
  std::vector<std::string> names;   // by id ("" for unused ids)
  std::vector<NameKind> name_kinds;
  std::optional<ClockRecord> clock;
  std::vector<StepRecord> steps;
  struct Trace {
    int64_t step;
    std::vector<TraceRange> ranges;
    std::vector<TraceKernel> kernels;
    std::vector<TraceLaunch> launches;  // TRACE_LAUNCHES of this step (imports; empty in probe runs)
  };
  std::vector<Trace> traces;        // capture-window detail, one per traced step
  struct Grads {
    int64_t step;
    std::vector<GradArrival> arrivals;
  };
  std::vector<Grads> grads;
  std::optional<int64_t> end_ns;

  std::string_view name(uint32_t id) const;
  std::optional<uint32_t> find_name(std::string_view name) const;
};
Result<EventStream> read_event_stream(const std::filesystem::path& file);

}  // namespace rankscope::format
