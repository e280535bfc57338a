// fake_nccl_driver.cpp — plays NCCL for the profiler plugin: loads librankscope-nccl.so with dlopen,
// resolves ncclProfiler_v5/_v4/_v3 and replays NCCL's call pattern across forked ranks.
//
// Is: a test program. RANKS processes (forked, each with RANK/WORLD_SIZE/LOCAL_RANK set as a
// launcher would) form a TPxDP layout: communicators world, tp{k} (consecutive ranks), dp{j}
// (strided). Each rank, per step: tp AllReduce, tp AllGather, a send/recv pair with its tp peer
// (an explicit group), dp AllReduce, world AllReduce, then a "stream synchronize". Per ABI version
// the events are what NCCL emits: init per communicator; v5 API events (GroupApi with states 23/24,
// CollApi, P2pApi, KernelLaunch) on the application thread; Coll/P2p start and stop on the
// application thread, or on a host-callback thread (--callback-thread); KernelCh start, KernelChStop
// and stop on a proxy thread that plays the GPU: one stream per rank, a kernel starts when the one
// before it finished and finishes when every member's kernel of that collective started (a
// collective needs everyone). With --reload every rank first runs --reload-after steps, finalizes
// every communicator (the plugin's last finalize), dlcloses the plugin, loads it again and makes new
// communicators (new hashes, same names).
// Faults: --hold-rank R --hold-step S makes rank R stop before its first call of step S and sleep
// (held back); --signal STOP|KILL then sends that signal to it once the others are stuck. The driver
// prints "READY <culprit pid>" and waits for SIGTERM or SIGINT, then kills every rank and exits.
// Without a hold, every rank runs --steps steps, finalizes and exits; exit status 0 when all did.
// --hold-in gpu|transport|group_end moves the hold: the rank's GPU stream stops before its first
// kernel of step S (its host goes on), every tp1 kernel of step S starts and none finishes, or the
// rank stays inside ncclGroupEnd of its send/recv group.
// --compute-ms M sleeps M ms of "host work" at the start of every step; --slow-rank R --slow-ms M
// makes rank R's work M ms longer (a straggler every step: the others wait for it, nothing hangs).
// --nvtx: the job's own NVTX ranges ("step", and "data/next_batch" where a rank holds), recorded
// when NVTX_INJECTION64_PATH names librankscope-nvtx.so.
// Is not: NCCL. It checks nothing itself: the tests run hangdoctor on the run directory.
#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "nccl_profiler_abi.h"

#if FAKE_DRIVER_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#define NVTX_PUSH(name) nvtxRangePushA(name)
#define NVTX_POP() nvtxRangePop()
#else
#define NVTX_PUSH(name) ((void)0)
#define NVTX_POP() ((void)0)
#endif

namespace abi = rankscope::nccl_plugin::abi;

namespace {

constexpr int kMaxRanks = 16;
constexpr int kMaxComms = 1 + 2 * kMaxRanks;
constexpr int kChannels = 2;

struct Options {
  std::string plugin;
  std::string run_dir;
  int abi = 5;
  int ranks = 4;
  int tp = 2;
  int steps = 4;
  int hold_rank = -1;
  int hold_step = -1;
  std::string signal;  // "", "STOP", "KILL"
  bool callback_thread = false;
  bool reload = false;
  bool nvtx = false;
  // Where the hold happens instead of before the step: "gpu" (the rank's GPU stream stops before
  // its first kernel of the step; the host goes on), "transport" (every tp1 kernel of the step starts
  // and none finishes), "group_end" (the rank stays inside ncclGroupEnd of its send/recv group).
  std::string hold_in;  // the job's own NVTX ranges: "step" per step, "data/next_batch" where it holds
  int reload_after = 2;
  uint64_t seed = 0x5eed;
  int compute_ms = 0;   // every rank's host work before its first call of each step
  int slow_rank = -1;   // this rank's step work takes slow_ms longer (a straggler, not a hang)
  int slow_ms = 0;
};

// Shared by every rank (MAP_SHARED before fork): how far each member's GPU got on each communicator.
struct Shared {
  std::atomic<uint64_t> kernel_started[2][kMaxComms][kMaxRanks];  // [generation][comm][member]
  std::atomic<uint64_t> p2p_started[2][kMaxComms][kMaxRanks];
  std::atomic<int> held;
  std::atomic<int> syncing[kMaxRanks];  // reached the blocking stream synchronize of the hold step
};
Shared* g_shared = nullptr;

struct Comm {
  int index = 0;         // 0 world, 1.. tp groups, then dp groups
  std::string name;
  std::vector<int> members;  // global ranks in comm-rank order
  int my_rank = -1;
  uint64_t hash = 0;
  void* ctx = nullptr;
  uint64_t colls = 0;    // collectives launched (the ring index every member agrees on)
  uint64_t p2ps = 0;
  uint64_t fseq[5] = {}; // NCCL's per-function seqNumber
};

// One GPU operation on the rank's single stream.
struct GpuOp {
  Comm* comm;
  void* handle;
  bool p2p;
  uint64_t index;
  int peer_member;  // p2p: the peer's comm rank
  bool never_finishes = false;  // its kernel starts and spins forever
};

void sleep_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Calls into the plugin for one ABI version, taking ABI-independent arguments.
class Plugin {
 public:
  bool load(const std::string& path, int version) {
    lib_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      std::fprintf(stderr, "fake_nccl_driver: dlopen %s: %s\n", path.c_str(), dlerror());
      return false;
    }
    v_ = version;
    for (const char* sym : {"ncclProfiler_v5", "ncclProfiler_v4", "ncclProfiler_v3"})
      if (!dlsym(lib_, sym)) {
        std::fprintf(stderr, "fake_nccl_driver: %s not exported\n", sym);
        return false;
      }
    v5_ = static_cast<abi::ProfilerV5*>(dlsym(lib_, "ncclProfiler_v5"));
    v4_ = static_cast<abi::ProfilerV4*>(dlsym(lib_, "ncclProfiler_v4"));
    v3_ = static_cast<abi::ProfilerV3*>(dlsym(lib_, "ncclProfiler_v3"));
    return true;
  }
  void unload() {
    dlclose(lib_);
    lib_ = nullptr;
  }
  int version() const { return v_; }

  void* init(const Comm& c, int n_nodes) {
    void* ctx = nullptr;
    int mask = 0;
    if (v_ == 5) v5_->init(&ctx, c.hash, &mask, c.name.c_str(), n_nodes, int(c.members.size()), c.my_rank, &log);
    else if (v_ == 4) v4_->init(&ctx, &mask, c.name.c_str(), c.hash, n_nodes, int(c.members.size()), c.my_rank, &log);
    else v3_->init(&ctx, &mask);
    mask_ = mask;
    return ctx;
  }
  void finalize(void* ctx) {
    if (v_ == 5) v5_->finalize(ctx);
    else if (v_ == 4) v4_->finalize(ctx);
    else v3_->finalize(ctx);
  }
  void stop(void* h) {
    if (!h) return;
    if (v_ == 5) v5_->stopEvent(h);
    else if (v_ == 4) v4_->stopEvent(h);
    else v3_->stopEvent(h);
  }
  void state(void* h, int s, uint64_t ptimer) {
    if (!h) return;
    if (v_ == 5) {
      abi::StateArgsV5 a{};
      a.kernelCh.pTimer = ptimer;
      v5_->recordEventState(h, s, &a);
    } else if (v_ == 4) {
      abi::StateArgsV5 a{};
      a.kernelCh.pTimer = ptimer;
      v4_->recordEventState(h, s, &a);
    } else {
      abi::StateArgsV3 a{};
      v3_->recordEventState(h, s, &a);
    }
  }

  // v5 API events (none before v5).
  void* api(const Comm& c, uint64_t type, const char* func, size_t count) {
    if (v_ != 5) return nullptr;
    abi::DescrV5 d{};
    d.type = type;
    d.rank = c.my_rank;
    if (type == abi::kCollApi) {
      d.collApi.func = func;
      d.collApi.count = count;
      d.collApi.datatype = "ncclFloat32";
    } else if (type == abi::kP2pApi) {
      d.p2pApi.func = func;
      d.p2pApi.count = count;
      d.p2pApi.datatype = "ncclFloat32";
    } else if (type == abi::kGroupApi) {
      d.groupApi.groupDepth = 1;
    }
    void* h = nullptr;
    v5_->startEvent(c.ctx, &h, &d);
    return h;
  }

  // One descriptor per version; the fields shared by name are filled once (generic lambdas).
  template <typename Fill>
  void* start(const Comm& c, uint64_t type, void* parent, Fill fill) {
    void* h = nullptr;
    auto common = [&](auto& d) {
      d.parentObj = parent;
      d.rank = c.my_rank;
      fill(d);
    };
    if (v_ == 5) {
      abi::DescrV5 d{};
      d.type = type;
      common(d);
      v5_->startEvent(c.ctx, &h, &d);
    } else if (v_ == 4) {
      abi::DescrV4 d{};
      d.type = uint8_t(type);
      common(d);
      v4_->startEvent(c.ctx, &h, &d);
    } else {
      abi::DescrV3 d{};
      d.type = uint8_t(type);
      common(d);
      v3_->startEvent(c.ctx, &h, &d);
    }
    return h;
  }

  void* coll(const Comm& c, void* parent, const char* func, uint64_t seq, size_t count) {
    return start(c, abi::kColl, parent, [&](auto& d) {
      d.coll.seqNumber = seq;
      d.coll.func = func;
      d.coll.count = count;
      d.coll.root = -1;
      d.coll.datatype = "ncclFloat32";
      if constexpr (std::is_same_v<std::decay_t<decltype(d)>, abi::DescrV3>) {
        d.coll.name = c.name.c_str();
        d.coll.commHash = c.hash;  // v3 only: the communicator's identity rides on the descriptor
        d.coll.nMaxChannels = kChannels;
      } else {
        d.coll.nChannels = kChannels;
      }
    });
  }

  void* p2p(const Comm& c, void* parent, const char* func, int peer, size_t count) {
    return start(c, abi::kP2p, parent, [&](auto& d) {
      d.p2p.func = func;
      d.p2p.count = count;
      d.p2p.datatype = "ncclFloat32";
      d.p2p.peer = peer;
      if constexpr (std::is_same_v<std::decay_t<decltype(d)>, abi::DescrV3>) {
        d.p2p.name = c.name.c_str();
        d.p2p.commHash = c.hash;
      } else {
        d.p2p.nChannels = kChannels;
      }
    });
  }

  void* kernel_channel(const Comm& c, void* parent, int channel, uint64_t ptimer) {
    return start(c, abi::kKernelCh, parent, [&](auto& d) {
      d.kernelCh.channelId = uint8_t(channel);
      if constexpr (!std::is_same_v<std::decay_t<decltype(d)>, abi::DescrV3>) d.kernelCh.pTimer = ptimer;
    });
  }

  int mask() const { return mask_; }

 private:
  static void log(int, unsigned long, const char*, int, const char*, ...) {}
  void* lib_ = nullptr;
  int v_ = 5;
  int mask_ = 0;
  abi::ProfilerV5* v5_ = nullptr;
  abi::ProfilerV4* v4_ = nullptr;
  abi::ProfilerV3* v3_ = nullptr;
};

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// A FIFO served by one thread.
class Worker {
 public:
  explicit Worker(std::function<void(GpuOp&)> serve) : serve_(std::move(serve)), thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(const GpuOp& op) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(op);
      ++queued_;
    }
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> l(mu_);
    done_cv_.wait(l, [&] { return done_ == queued_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      GpuOp op = q_.front();
      q_.pop_front();
      l.unlock();
      serve_(op);
      l.lock();
      ++done_;
      done_cv_.notify_all();
    }
  }
  std::function<void(GpuOp&)> serve_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<GpuOp> q_;
  uint64_t queued_ = 0, done_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

std::vector<Comm> make_comms(const Options& o, int rank, int generation) {
  std::vector<Comm> comms;
  const int dp = o.ranks / o.tp;
  Comm world{0, "world", {}, rank, 0, nullptr};
  for (int r = 0; r < o.ranks; ++r) world.members.push_back(r);
  comms.push_back(world);
  const int tpk = rank / o.tp, dpj = rank % o.tp;
  Comm tp{1 + tpk, "tp" + std::to_string(tpk), {}, rank % o.tp, 0, nullptr};
  for (int i = 0; i < o.tp; ++i) tp.members.push_back(tpk * o.tp + i);
  comms.push_back(tp);
  Comm dpc{1 + dp + dpj, "dp" + std::to_string(dpj), {}, rank / o.tp, 0, nullptr};
  for (int i = 0; i < dp; ++i) dpc.members.push_back(i * o.tp + dpj);
  comms.push_back(dpc);
  for (auto& c : comms) c.hash = (o.seed * 0x9E3779B97F4A7C15ull) ^ (uint64_t(generation * 64 + c.index + 1) * 0xBF58476D1CE4E5B9ull);
  return comms;
}

int func_index(const char* f) {
  static const char* names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};
  for (int i = 0; i < 5; ++i)
    if (std::strcmp(names[i], f) == 0) return i;
  return 0;
}

// One rank's life. Returns the exit status.
int rank_main(const Options& o, int rank) {
  Plugin plugin;
  if (!plugin.load(o.plugin, o.abi)) return 3;
  const int n_nodes = 1;
  int generation = 0;
  std::vector<Comm> comms = make_comms(o, rank, generation);
  for (auto& c : comms) c.ctx = plugin.init(c, n_nodes);

  std::atomic<bool> gpu_stalled{false};  // a kernel before the next one never ends
  auto gpu_serve = [&](GpuOp& op) {
    if (gpu_stalled.load()) sleep_forever();
    Comm& c = *op.comm;
    void* ch[kChannels];
    for (int i = 0; i < kChannels; ++i) ch[i] = plugin.kernel_channel(c, op.handle, i, now_ns());
    auto& started = op.p2p ? g_shared->p2p_started : g_shared->kernel_started;
    started[generation][c.index][c.my_rank].store(op.index + 1);
    auto ready = [&] {
      if (op.p2p) return started[generation][c.index][op.peer_member].load() >= op.index + 1;
      for (size_t m = 0; m < c.members.size(); ++m)
        if (started[generation][c.index][m].load() < op.index + 1) return false;
      return true;
    };
    while (!ready() || op.never_finishes) std::this_thread::sleep_for(std::chrono::microseconds(200));
    for (int i = 0; i < kChannels; ++i) {
      plugin.state(ch[i], abi::kStateKernelChStop, now_ns());
      plugin.stop(ch[i]);
    }
  };
  auto gpu = std::make_unique<Worker>(gpu_serve);
  // Coll/P2p start and stop: NCCL's hostStreamPlanTask, on the app thread or a host-callback thread.
  auto launch = [&](GpuOp op, const char* func, size_t count, void* parent) {
    Comm& c = *op.comm;
    if (op.p2p) op.handle = plugin.p2p(c, parent, func, op.peer_member, count);
    else op.handle = plugin.coll(c, parent, func, c.fseq[func_index(func)]++, count);
    gpu->push(op);
    plugin.stop(op.handle);
  };
  struct Pending {
    GpuOp op;
    const char* func;
    size_t count;
  };
  std::unique_ptr<Worker> callbacks;
  std::mutex pending_mu;
  std::deque<Pending> pending;
  if (o.callback_thread)
    callbacks = std::make_unique<Worker>([&](GpuOp&) {
      Pending p;
      {
        std::lock_guard<std::mutex> l(pending_mu);
        p = pending.front();
        pending.pop_front();
      }
      launch(p.op, p.func, p.count, nullptr);
    });
  auto plan = [&](GpuOp op, const char* func, size_t count, void* parent) {
    if (!callbacks) return launch(op, func, count, parent);
    {
      std::lock_guard<std::mutex> l(pending_mu);
      pending.push_back({op, func, count});
    }
    callbacks->push(op);
  };

  bool transport_stall = false;  // the next tp1 collective never finishes on any member
  auto collective = [&](Comm& c, const char* func, size_t count) {
    void* api = plugin.api(c, abi::kCollApi, func, count);
    void* launch_h = plugin.api(c, abi::kKernelLaunch, nullptr, 0);
    GpuOp op{&c, nullptr, false, c.colls++, -1};
    op.never_finishes = transport_stall && c.name == "tp1";
    if (op.never_finishes) transport_stall = false;
    plan(op, func, count, api);
    plugin.stop(launch_h);
    plugin.stop(api);
  };
  bool hold_in_group_end = false;
  auto exchange = [&](Comm& c) {
    // ncclGroupStart; ncclSend(peer); ncclRecv(peer); ncclGroupEnd — with the tp peer.
    const int peer = c.my_rank ^ 1;
    if (peer >= int(c.members.size())) return;
    void* group = plugin.api(c, abi::kGroupApi, nullptr, 0);
    plugin.state(group, abi::kStateGroupStartApiStop, 0);
    plugin.stop(plugin.api(c, abi::kP2pApi, "Send", 1024));
    plugin.stop(plugin.api(c, abi::kP2pApi, "Recv", 1024));
    plugin.state(group, abi::kStateGroupEndApiStart, 0);
    if (hold_in_group_end) {
      g_shared->held.store(1);
      sleep_forever();  // e.g. connecting to a peer that never answers
    }
    plan(GpuOp{&c, nullptr, true, c.p2ps++, peer}, "Send", 1024, group);
    plan(GpuOp{&c, nullptr, true, c.p2ps++, peer}, "Recv", 1024, group);
    plugin.stop(group);
  };
  auto sync = [&] {
    if (callbacks) callbacks->drain();
    gpu->drain();
  };

  for (int step = 0; step < o.steps; ++step) {
    if (o.reload && step == o.reload_after && generation == 0) {
      // Every communicator destroyed: NCCL finalizes the plugin for each and dlcloses it after the
      // last; new communicators load it again.
      sync();
      callbacks.reset();
      gpu.reset();
      for (auto& c : comms) plugin.finalize(c.ctx);
      plugin.unload();
      if (!plugin.load(o.plugin, o.abi)) return 3;
      generation = 1;
      comms = make_comms(o, rank, generation);
      for (auto& c : comms) c.ctx = plugin.init(c, n_nodes);
      gpu = std::make_unique<Worker>(gpu_serve);
      if (o.callback_thread)
        callbacks = std::make_unique<Worker>([&](GpuOp&) {
          Pending p;
          {
            std::lock_guard<std::mutex> l(pending_mu);
            p = pending.front();
            pending.pop_front();
          }
          launch(p.op, p.func, p.count, nullptr);
        });
    }
    if (o.nvtx) NVTX_PUSH("step");
    const bool hold_here = rank == o.hold_rank && step == o.hold_step;
    if (hold_here && o.hold_in == "gpu") gpu_stalled.store(true);
    if (step == o.hold_step && o.hold_in == "transport") transport_stall = true;
    if (hold_here && o.hold_in == "group_end") hold_in_group_end = true;
    if (hold_here && o.hold_in.empty()) {
      if (o.nvtx) NVTX_PUSH("data/next_batch");
      g_shared->held.store(1);
      for (;;) pause();  // held back: in its own code, never calling NCCL again
    }
    const int work_ms = o.compute_ms + (rank == o.slow_rank ? o.slow_ms : 0);
    if (work_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
    Comm& world = comms[0];
    Comm& tp = comms[1];
    Comm& dp = comms[2];
    collective(tp, "AllReduce", 4096);
    collective(tp, "AllGather", 2048);
    exchange(tp);
    collective(dp, "AllReduce", 8192);
    collective(world, "AllReduce", 1);
    if (hold_here) g_shared->held.store(1);  // gpu, transport: the host is done, its GPU is not
    if (o.hold_step >= 0 && step >= o.hold_step) g_shared->syncing[rank].store(1);
    sync();
    if (o.nvtx) NVTX_POP();
  }
  callbacks.reset();
  gpu.reset();
  for (auto& c : comms) plugin.finalize(c.ctx);
  plugin.unload();
  return 0;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--plugin") o.plugin = next();
    else if (a == "--run-dir") o.run_dir = next();
    else if (a == "--abi") o.abi = std::atoi(next());
    else if (a == "--ranks") o.ranks = std::atoi(next());
    else if (a == "--tp") o.tp = std::atoi(next());
    else if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--hold-rank") o.hold_rank = std::atoi(next());
    else if (a == "--hold-step") o.hold_step = std::atoi(next());
    else if (a == "--signal") o.signal = next();
    else if (a == "--callback-thread") o.callback_thread = true;
    else if (a == "--reload") o.reload = true;
    else if (a == "--nvtx") o.nvtx = true;
    else if (a == "--hold-in") o.hold_in = next();
    else if (a == "--reload-after") o.reload_after = std::atoi(next());
    else if (a == "--seed") o.seed = std::strtoull(next(), nullptr, 0);
    else if (a == "--compute-ms") o.compute_ms = std::atoi(next());
    else if (a == "--slow-rank") o.slow_rank = std::atoi(next());
    else if (a == "--slow-ms") o.slow_ms = std::atoi(next());
    else {
      std::fprintf(stderr, "fake_nccl_driver: unknown argument %s\n", a.c_str());
      return false;
    }
  }
  return !o.plugin.empty() && !o.run_dir.empty() && o.ranks > 0 && o.ranks <= kMaxRanks && o.tp > 0 &&
         o.ranks % o.tp == 0 && (o.abi >= 3 && o.abi <= 5);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: fake_nccl_driver --plugin SO --run-dir DIR [--abi 3|4|5] [--ranks N] [--tp N] [--steps N]\n"
                 "         [--hold-rank R --hold-step S [--signal STOP|KILL]] [--callback-thread] [--reload]\n"
                 "         [--compute-ms M] [--slow-rank R --slow-ms M]\n");
    return 2;
  }
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 2;
  g_shared = new (mem) Shared();
  // Block the signals the parent waits for before forking, so children inherit a clean mask.
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(o.ranks).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("RANKSCOPE_RUN_DIR", o.run_dir.c_str(), 1);
      std::fflush(nullptr);
      _exit(rank_main(o, r));
    }
    pids.push_back(pid);
  }
  if (o.hold_rank < 0) {
    int failed = 0;
    for (pid_t p : pids) {
      int st = 0;
      waitpid(p, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
    }
    return failed == 0 ? 0 : 1;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  // In place once the culprit holds and every other rank launched its step and waits for its GPU.
  auto in_place = [&] {
    if (g_shared->held.load() == 0) return false;
    for (int r = 0; r < o.ranks; ++r)
      if (r != o.hold_rank && g_shared->syncing[r].load() == 0) return false;
    return true;
  };
  for (int waited_ms = 0; !in_place() && waited_ms < 30000; waited_ms += 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // their GPUs start what they can
  const pid_t culprit = pids[size_t(o.hold_rank)];
  if (o.signal == "STOP") kill(culprit, SIGSTOP);
  if (o.signal == "KILL") {
    kill(culprit, SIGKILL);
    waitpid(culprit, nullptr, 0);
  }
  std::printf("READY %d\n", int(culprit));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  for (pid_t p : pids) {
    kill(p, SIGCONT);
    kill(p, SIGKILL);
  }
  for (pid_t p : pids) waitpid(p, nullptr, 0);
  return 0;
}
