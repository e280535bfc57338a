// plugin_process.cpp — process-wide state of the NCCL profiler plugin.
#include "plugin_process.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nccl_profiler_abi.h"
#include "rankscope/format/clock.h"
#include "rankscope/format/nccl_plugin_run.h"

extern char** environ;

namespace rankscope::nccl_plugin {
namespace {

// Default mask: Coll | P2p | KernelCh (progress) and the API events ("inside an NCCL call").
constexpr uint32_t kDefaultMask = abi::kColl | abi::kP2p | abi::kKernelCh | abi::kGroupApi | abi::kCollApi | abi::kP2pApi;

struct Dummy {
  char tag = 0;
} g_dummy;  // the context of a communicator whose recorder could not be created

const char* first_env(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return v;
  return nullptr;
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  const char* v = first_env(names);
  if (!v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 0);
  return end && *end == '\0' ? int(x) : fallback;
}

RecorderSettings read_settings() {
  RecorderSettings s;
  const char* dir = std::getenv("RANKSCOPE_RUN_DIR");
  s.run_dir = dir && *dir ? dir : fmt::format("/dev/shm/rankscope-{}", ::getuid());
  s.ring_entries = uint32_t(std::max(env_int({"RANKSCOPE_NCCL_RING"}, 256), 1));
  s.slots = uint32_t(std::max(env_int({"RANKSCOPE_NCCL_SLOTS"}, 256), 1));
  s.mask = uint32_t(env_int({"RANKSCOPE_NCCL_MASK"}, int(kDefaultMask)));
  s.launcher_rank = env_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, -1);
  s.launcher_world = env_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 0);
  s.launcher_local = env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  s.host = host;
  const char* run_id = first_env({"RANKSCOPE_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"});
  s.run_id = run_id ? run_id : "";
  return s;
}

std::vector<std::string> command_line() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

// run.json's equivalent for this process (docs/FORMAT.md): written once, atomically.
void write_process_json(const RecorderSettings& s, int abi) {
  nlohmann::json settings = nlohmann::json::object();
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view k = kv.substr(0, eq);
    if (k.rfind("NCCL_", 0) == 0 || k.rfind("TORCH_NCCL_", 0) == 0 || k.rfind("RANKSCOPE_", 0) == 0 ||
        k == "CUDA_VISIBLE_DEVICES" || k == "CUDA_LAUNCH_BLOCKING" || k == "NVTX_INJECTION64_PATH")
      settings[std::string(k)] = std::string(kv.substr(eq + 1));
  }
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  const nlohmann::json j = {
      {"schema_version", 1},
      {"kind", "rankscope.nccl_plugin.process"},
      {"host", s.host},
      {"pid", int(::getpid())},
      {"boot_id", boot_id},
      {"created_unix_ns", now_unix_ns()},
      {"run_id", s.run_id},
      {"launcher", {{"rank", s.launcher_rank}, {"world_size", s.launcher_world}, {"local_rank", s.launcher_local}}},
      {"command_line", command_line()},
      {"plugin", {{"version", RANKSCOPE_VERSION}, {"abi_version", abi}, {"event_mask", s.mask}}},
      {"settings", settings},
  };
  const auto dir = std::filesystem::path(s.run_dir) / format::kNcclPluginDir;
  const auto final_path = dir / fmt::format("{}.{}.process.json", s.host, ::getpid());
  const auto tmp = final_path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, final_path, ec);
}

// Live communicators and the heartbeat thread that beats for them. Guarded by `mu` (init, finalize
// and the heartbeat thread only; never an event path).
struct Process {
  std::mutex mu;
  std::condition_variable wake;
  std::vector<CommContext*> live;
  std::thread heartbeat;
  bool stopping = false;
  bool json_written = false;
  std::optional<RecorderSettings> settings;
  int heartbeat_ms = 100;

  void beat_loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      const int64_t now = now_unix_ns();
      for (CommContext* c : live) c->heartbeat(now);
      wake.wait_for(lock, std::chrono::milliseconds(heartbeat_ms));
    }
  }
};

Process& process() {
  // Never destroyed: a framework may finalize communicators from its own exit handlers, after ours
  // would have run. A thread still beating at exit (communicators never finalized) ends with the
  // process; after the last finalize it has been joined, and NCCL may dlclose us.
  static Process* p = new Process();
  return *p;
}

void after_fork_in_child() {
  // The child has no heartbeat thread and its parent's communicators are not its own.
  Process& p = process();
  new (&p.mu) std::mutex();
  new (&p.wake) std::condition_variable();
  p.live.clear();
  new (&p.heartbeat) std::thread();  // forget the parent's thread without touching it
  p.stopping = false;
  p.json_written = false;  // a new pid: its own process.json at its first communicator
}

}  // namespace

void* open_comm(int abi_version, uint64_t hash, const char* comm_name, int n_nodes, int nranks, int rank, int* mask,
                abi::Logger log) {
  Process& p = process();
  std::unique_lock<std::mutex> lock(p.mu);
  static std::once_flag atfork;
  std::call_once(atfork, [] { ::pthread_atfork(nullptr, nullptr, after_fork_in_child); });
  if (!p.settings) {
    p.settings = read_settings();
    p.heartbeat_ms = env_int({"RANKSCOPE_NCCL_HEARTBEAT_MS"}, 100);
  }
  const RecorderSettings& s = *p.settings;
  if (mask) *mask = int(s.mask);  // one process-wide int in NCCL: the last writer wins, all write the same
  std::string error;
  auto ctx = CommContext::create(s, abi_version, hash, comm_name, n_nodes, nranks, rank, error);
  if (!ctx) {
    if (log) log(abi::kLogWarn, abi::kLogInit, __FILE__, __LINE__, "rankscope: cannot record communicator %lx: %s", hash, error.c_str());
    else std::fprintf(stderr, "rankscope NCCL plugin: cannot record communicator %lx: %s\n", (unsigned long)hash, error.c_str());
    return &g_dummy;
  }
  if (!p.json_written) {
    write_process_json(s, abi_version);
    p.json_written = true;
  }
  if (log)
    log(abi::kLogInfo, abi::kLogInit, __FILE__, __LINE__, "rankscope: recording communicator %016lx rank %d/%d to %s",
        (unsigned long)hash, rank, nranks, ctx->file().c_str());
  CommContext* raw = ctx.release();
  p.live.push_back(raw);
  if (!p.heartbeat.joinable() && p.heartbeat_ms > 0) {
    p.stopping = false;
    p.heartbeat = std::thread([&p] { p.beat_loop(); });
  }
  return raw;
}

CommContext* comm_of(void* context) {
  return context == nullptr || context == &g_dummy ? nullptr : static_cast<CommContext*>(context);
}

void close_comm(void* context) {
  CommContext* c = comm_of(context);
  if (!c) return;
  Process& p = process();
  std::thread to_join;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    c->finalize();
    std::erase(p.live, c);
    if (p.live.empty() && p.heartbeat.joinable()) {
      // The last communicator: NCCL dlcloses the plugin next, so no thread of ours may outlive it.
      p.stopping = true;
      p.wake.notify_all();
      to_join = std::move(p.heartbeat);
      p.json_written = false;  // a reload writes it again (same content)
    }
  }
  if (to_join.joinable()) to_join.join();
  delete c;
}

}  // namespace rankscope::nccl_plugin
