// trainer.cpp — the training loop and everything it is wired to.
#include "trainer.h"

#include <sys/resource.h>
#include <unistd.h>  // environ

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "bootstrap.h"
#include "checkpoint.h"
#include "cpu_threads.h"
#include "comm/host_staging_communicator.h"
#include "comm/probed_communicator.h"
#include "comm/process_groups.h"
#include "data/data_loader.h"
#include "device_plan.h"
#include "evaluation.h"
#include "faults/fault_injector.h"
#include "lr_schedule.h"
#include "metrics_log.h"
#include "model/adamw.h"
#include "model/gpt2.h"
#include "model/memory_estimate.h"
#include "ops/cpu/cpu_moe_ops.h"
#include "ops/cuda/cuda_moe_backend.h"
#include "ops/cpu/cpu_ops.h"
#include "ops/cuda/cuda_backend.h"
#include "parallel/ddp_reducer.h"
#include "rankscope/format/clock.h"
#include "rankscope/probe/plugins.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "seq_len_sweep.h"
#include "startup_facts.h"
#include "train_options.h"
#if GPT2_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif

namespace gpt2 {
namespace {

// The process's peak resident memory so far, in bytes (ru_maxrss is in KiB on Linux).
double peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

using rankscope::probe::Probe;
using rankscope::probe::ScopedRange;
using Clock = std::chrono::steady_clock;

// Device memory the up-front check leaves unclaimed: the caching of cudaMalloc's own pools,
// NCCL's buffers and cuBLASLt's algorithm workspaces, which the estimate does not count.
constexpr size_t kDeviceMemoryHeadroomBytes = size_t{768} << 20;
constexpr const char* kDefaultTrainShard = "tinyshakespeare/tiny_shakespeare_train.bin";
constexpr const char* kDefaultValShard = "tinyshakespeare/tiny_shakespeare_val.bin";

rankscope::Result<ModelConfig> model_config(const TrainOptions& o, int tp) {
  RS_ASSIGN_OR_RETURN(ModelConfig c, ModelConfig::preset(o.model));
  if (o.layers) c.num_layers = *o.layers;
  if (o.heads) c.num_heads = *o.heads;
  if (o.channels) c.channels = *o.channels;
  if (o.vocab_size) c.vocab_size = *o.vocab_size;
  if (o.seq_len > c.max_seq_len) c.max_seq_len = o.seq_len;
  RS_RETURN_IF_ERROR(c.validate(tp));
  return c;
}

// "" -> the shipped shard when it exists, else synthetic:zipf.
std::string resolve_train_data(const std::string& spec) {
  if (!spec.empty()) return spec;
  const auto shipped = std::filesystem::path(default_data_dir()) / kDefaultTrainShard;
  return std::filesystem::exists(shipped) ? shipped.string() : "synthetic:zipf";
}

rankscope::Result<std::string> resolve_val_data(const std::string& val_spec, const std::string& train_spec) {
  if (!val_spec.empty()) return val_spec;
  if (train_spec.starts_with("synthetic:")) return train_spec;  // a different seed is used
  const auto shipped_train = std::filesystem::path(default_data_dir()) / kDefaultTrainShard;
  if (train_spec == shipped_train.string())
    return (std::filesystem::path(default_data_dir()) / kDefaultValShard).string();
  if (auto at = train_spec.rfind("_train"); at != std::string::npos) {
    std::string guess = train_spec;
    guess.replace(at, 6, "_val");
    if (std::filesystem::exists(guess)) return guess;
  }
  return rankscope::invalid_argument(fmt::format(
      "--val-every needs validation data for --data {} (hint: pass --val-data)", train_spec));
}

// MoE faults that cannot act on this run are command-line mistakes: say so before training.
Status check_moe_fault(const FaultSpec& f, const MoeConfig& moe, const GroupLayout& L) {
  if (f.kind != FaultKind::kRouteSkew && f.kind != FaultKind::kA2aMiscount) return {};
  if (!moe.enabled())
    return rankscope::invalid_argument(fmt::format("--inject {}: needs an MoE model (hint: --moe-experts E)", f.text));
  if (f.kind == FaultKind::kRouteSkew && f.expert >= moe.experts)
    return rankscope::invalid_argument(fmt::format("--inject {}: expert {} does not exist (--moe-experts {})",
                                                   f.text, f.expert, moe.experts));
  if (f.kind == FaultKind::kA2aMiscount && L.ep < 2)
    return rankscope::invalid_argument(fmt::format(
        "--inject {}: with --ep 1 no all_to_all_v runs (hint: --ep 2 or more)", f.text));
  return {};
}

class Trainer {
 public:
  Trainer(TrainOptions options, Bootstrap& boot) : o_(std::move(options)), boot_(boot) {}
  ~Trainer() {
    reducer_.reset();  // joins the DDP thread before the communicators go
  }

  Status setup();
  Status run();
  Probe* probe() { return probe_.get(); }

 private:
  bool leader() const { return groups_.rank == 0; }
  // Where the activations live: the GPU backend's high-water mark of its allocations plus its scratch
  // on cuda (what grows with T), the process's peak resident memory on the CPU.
  double peak_memory_bytes() {
    if (plan_.cuda) {
      if (auto m = cuda_ops_memory(*ops_); m.ok())
        return static_cast<double>(m->peak_allocated_bytes + m->scratch_bytes);
    }
    return peak_resident_bytes();
  }
  Status setup_probe(const std::vector<std::string>& hosts);
  Status setup_device(const std::vector<std::string>& hosts);
  rankscope::Result<std::unique_ptr<Communicator>> make_world();
  Status check_device_memory(const GPT2::Options& mo);
  Status setup_model();
  Status setup_data();
  Status write_run_metadata(const std::vector<std::string>& hosts, const std::vector<std::string>& settings);
  Status train_step(int step, StepMetrics& m);
  void add_moe_counters(const ForwardStats& stats);
  Status finish();

  TrainOptions o_;
  Bootstrap& boot_;
  std::string run_dir_;
  std::unique_ptr<Probe> probe_;
  std::unique_ptr<FaultInjector> faults_;
  ProcessGroups groups_;
  ModelConfig config_;
  DevicePlan plan_;
  int omp_threads_ = 1;
  // run.json's "config": settings the same on every rank, those that differ by rank, and the
  // trainer's own behaviour-changing choices.
  nlohmann::json configuration_block(const std::vector<std::string>& per_rank_settings) const;
  std::pair<int64_t, int64_t> profile_steps_{-1, -1};
  std::unique_ptr<Communicator> host_world_;  // NCCL's id transport (MPI world), kept for its life
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<MoeOps> moe_ops_;
  std::unique_ptr<GPT2> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<DdpReducer> reducer_;
  std::unique_ptr<DataLoader> loader_, val_loader_;
  std::unique_ptr<MetricsLog> metrics_;
  std::vector<int> inputs_, targets_;
  LrSchedule schedule_;
  int start_step_ = 0;
  std::vector<std::string> expert_counter_names_;  // moe.expert{e}.routed
};

Status Trainer::setup() {
  RS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, boot_.gather_hosts());
  RS_ASSIGN_OR_RETURN(run_dir_, boot_.agree_run_dir(o_.run_dir));
  // The probe creates it too, but metrics and checkpoints need it also under --no-probe.
  std::error_code ec;
  std::filesystem::create_directories(run_dir_, ec);
  if (ec)
    return rankscope::io_error(fmt::format("--run-dir {}: cannot create: {}", run_dir_, ec.message()));
  RS_ASSIGN_OR_RETURN(plan_, plan_device({o_.device, o_.comm, o_.precision, o_.attention}, probe_cuda_device(0),
                                          placement_from_hosts(hosts, boot_.rank(), boot_.uses_mpi())));
  RS_RETURN_IF_ERROR(setup_probe(hosts));
  // Step 0 is start-up (docs/FORMAT.md): the init/* ranges land in its record, and a rank stuck
  // here shows its phase in the flight recorder like any range.
  probe_->begin_step(0);
  faults_->set_step(0);
  if (const int64_t launched = process_start_unix_ns(); launched > 0 && launched <= boot_.started_ns()) {
    probe_->record_range("init/launch", launched, boot_.started_ns());
    probe_->counter("init.launch_at_ns", static_cast<double>(launched));  // rankscope startup's time zero
  }
  probe_->record_range("init/comm", boot_.started_ns(), rankscope::now_unix_ns());  // MPI start, hosts, run dir
  {
    ScopedRange r(probe_.get(), "init/device");  // ops before communicators: host staging needs them
    RS_RETURN_IF_ERROR(setup_device(hosts));
  }
  std::vector<std::string> settings;
  {
    ScopedRange r(probe_.get(), "init/comm");
    // The probe sees every collective from here on: the world is wrapped before it is split.
    RS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> world, make_world());
    RS_ASSIGN_OR_RETURN(groups_, make_process_groups(std::move(world), o_.tp, o_.ep));
    RS_ASSIGN_OR_RETURN(settings, gather_strings(*groups_.world, behaviour_settings(environ, omp_threads_).dump()));
  }
  if (auto exchange = boot_.clock_exchange(); exchange && groups_.layout.world_size > 1) {
    ScopedRange r(probe_.get(), "init/clock_align");
    RS_RETURN_IF_ERROR(probe_->align_clocks(*exchange));
  }

  // One line: where this job computes and how its ranks talk (rank 0 speaks for the job).
  if (leader()) fmt::print("{} | {}\n", plan_.device_line, plan_.comm_line);
  {
    ScopedRange r(probe_.get(), "init/model");
    RS_RETURN_IF_ERROR(setup_model());
  }
  {
    ScopedRange r(probe_.get(), "init/data");
    RS_RETURN_IF_ERROR(setup_data());
    RS_RETURN_IF_ERROR(write_run_metadata(hosts, settings));
    if (leader()) {
      RS_ASSIGN_OR_RETURN(metrics_, MetricsLog::open(run_dir_));
    }
  }
  probe_->end_step();
  return {};
}

nlohmann::json Trainer::configuration_block(const std::vector<std::string>& per_rank_settings) const {
  std::vector<nlohmann::json> ranks;
  for (const auto& s : per_rank_settings) ranks.push_back(nlohmann::json::parse(s, nullptr, false));
  nlohmann::json common = nlohmann::json::object(), by_rank = nlohmann::json::object();
  std::set<std::string> keys;
  for (const auto& r : ranks)
    if (r.is_object())
      for (const auto& [k, v] : r.items()) keys.insert(k);
  for (const auto& k : keys) {
    const bool same = !ranks.empty() && std::all_of(ranks.begin(), ranks.end(), [&](const nlohmann::json& r) {
      return r.is_object() && r.contains(k) && r[k] == ranks.front()[k];
    });
    if (same) {
      common[k] = ranks.front()[k];
      continue;
    }
    for (size_t i = 0; i < ranks.size(); ++i)
      by_rank[std::to_string(i)][k] = ranks[i].is_object() && ranks[i].contains(k) ? ranks[i][k] : nlohmann::json(nullptr);
  }
  return {{"settings", common}, {"settings_by_rank", by_rank},
          {"recompute", static_cast<int>(o_.recompute)},
          {"precision", std::string(cuda_precision_name(plan_.precision))},
          {"attention", attention_kind_name(plan_.attention)},
          {"device", plan_.cuda ? "cuda" : "cpu"},
          {"comm", std::string(comm_backend_name(plan_.comm))}};
}

Status Trainer::setup_probe(const std::vector<std::string>& hosts) {
  (void)hosts;
  if (o_.no_probe) {
    probe_ = Probe::disabled();
  } else {
    rankscope::probe::Options po;
    RS_RETURN_IF_ERROR(po.apply_environment());
    po.run_dir = run_dir_;
    po.rank = boot_.rank();
    po.world_size = boot_.world_size();
    if (o_.watchdog_timeout_s > 0) po.watchdog_timeout_s = o_.watchdog_timeout_s;
    if (!o_.trace_steps.empty()) {
      RS_ASSIGN_OR_RETURN(auto window, rankscope::probe::parse_step_window(o_.trace_steps));
      po.trace_step_begin = window.first;
      po.trace_step_end = window.second;
    }
    RS_ASSIGN_OR_RETURN(probe_, Probe::create(po));
    // NVTX ranges, and CUPTI kernel timing when this rank computes on a GPU.
    rankscope::probe::attach_default_plugins(*probe_, plan_.cuda);
  }
  faults_ = std::make_unique<FaultInjector>(o_.inject, boot_.rank(), probe_.get());
  if (!faults_->empty()) probe_->add_range_sink(faults_->range_sink());
  return {};
}

Status Trainer::setup_device(const std::vector<std::string>& hosts) {
  (void)hosts;
  omp_threads_ = configure_cpu_threads();
  if (!plan_.cuda) {
    if (faults_->wants_gpu())
      return rankscope::invalid_argument("--inject gpu-stall needs --device cuda (it spins a GPU kernel)");
    if (!o_.profile_steps.empty())
      return rankscope::invalid_argument(
          "--profile-steps needs --device cuda (it brackets CUDA activity for nsys -c cudaProfilerApi)");
    ops_ = make_cpu_ops();
    moe_ops_ = make_cpu_moe_ops();
    return {};
  }
  CudaOpsOptions co;
  co.device = plan_.device_index;
  co.precision = plan_.precision;
  RS_ASSIGN_OR_RETURN(ops_, make_cuda_ops(co));
  // MoE element loops on the ops' stream (checked against the CPU oracle: tests/gpu/cuda_moe_test.cpp).
  if (o_.moe.enabled()) {
    RS_ASSIGN_OR_RETURN(moe_ops_, make_cuda_moe_ops(*ops_));
  }
  if (faults_->wants_gpu())
    faults_->set_gpu_stall_hook([this](double seconds) { return cuda_ops_enqueue_spin(*ops_, seconds); });
  if (!o_.profile_steps.empty()) {
    RS_ASSIGN_OR_RETURN(profile_steps_, rankscope::probe::parse_step_window(o_.profile_steps));
  }
  if (plan_.comm == CommBackend::kNccl) {
    // Payload faults rewrite buffers on the host; NCCL's buffers live on the device.
    for (const FaultSpec& f : o_.inject)
      if (f.kind == FaultKind::kResize || f.kind == FaultKind::kLossy)
        return rankscope::invalid_argument(fmt::format(
            "--inject {}: {} rewrites payloads on the host and cannot act on NCCL's device buffers "
            "(hint: --comm mpi stages through host memory, where it works)", f.text, fault_kind_name(f.kind)));
  }
  return {};
}

rankscope::Result<std::unique_ptr<Communicator>> Trainer::make_world() {
  if (!plan_.cuda)
    return std::unique_ptr<Communicator>(
        std::make_unique<ProbedCommunicator>(boot_.take_world(), probe_.get(), faults_.get()));
  if (plan_.comm == CommBackend::kMpi) {
    // Staging outside the probe: the probe times the host transfer and faults see host buffers.
    auto probed = std::make_unique<ProbedCommunicator>(boot_.take_world(), probe_.get(), faults_.get());
    return std::unique_ptr<Communicator>(
        std::make_unique<HostStagingCommunicator>(std::move(probed), *ops_, is_cuda_device_pointer,
                                                  probe_.get()));
  }
#if GPT2_HAVE_NCCL
  host_world_ = boot_.take_world();
  NcclOptions no;
  no.name = "world";
  no.rank = boot_.rank();
  no.size = boot_.world_size();
  no.device = plan_.device_index;
  no.bootstrap = boot_.uses_mpi() ? host_world_.get() : nullptr;
  no.id_dir = run_dir_;
  no.job_key = run_dir_;  // agreed by every rank (Bootstrap::agree_run_dir)
  no.compute_stream = cuda_ops_stream(*ops_);
  no.host_synchronous = false;  // completion through CUDA events the probe's watchdog polls
  RS_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl, make_nccl_communicator(no));
  return std::unique_ptr<Communicator>(
      std::make_unique<ProbedCommunicator>(std::move(nccl), probe_.get(), faults_.get()));
#else
  return rankscope::unsupported("--comm nccl: this build has no NCCL (hint: --comm mpi)");
#endif
}

// Memory up front: on a GPU, the run's buffers are counted before any is allocated and
// compared with what the device has free, so a batch that cannot fit stops here with both numbers
// and what to change instead of failing in the middle of GPT2::create.
Status Trainer::check_device_memory(const GPT2::Options& mo) {
  RS_ASSIGN_OR_RETURN(MemoryEstimate estimate, estimate_training_memory(mo, *ops_));
  if (!plan_.cuda) return {};
  RS_ASSIGN_OR_RETURN(CudaMemoryStats device, cuda_ops_memory(*ops_));
  if (leader())
    fmt::print("memory: needs {:.2f} GiB of {:.2f} GiB free\n", estimate.total() / double(1 << 30),
               device.device_free_bytes / double(1 << 30));
  return check_memory_fits(estimate, mo, *ops_, device.device_free_bytes, kDeviceMemoryHeadroomBytes,
                           fmt::format("cuda device {}", plan_.device_index));
}

Status Trainer::setup_model() {
  const GroupLayout& L = groups_.layout;
  FullWeights initial;
  const bool from_file = !o_.init_from.empty();
  if (from_file) {
    RS_ASSIGN_OR_RETURN(initial, read_llmc_model(o_.init_from));
    config_ = initial.config;
    if (o_.seq_len > config_.max_seq_len)
      return rankscope::invalid_argument(fmt::format("--seq-len {} exceeds the model file's maxT {}",
                                                     o_.seq_len, config_.max_seq_len));
    RS_RETURN_IF_ERROR(config_.validate(L.tp));
  } else {
    RS_ASSIGN_OR_RETURN(config_, model_config(o_, L.tp));
  }
  GPT2::Options mo;
  mo.config = config_;
  mo.tp = {L.tp, L.tp_rank(groups_.rank), o_.vocab_shard};
  mo.recompute = o_.recompute;
  mo.attention = plan_.attention;
  // bf16 precision on the GPU stores activations and their gradients in bf16; the MoE ops
  // compute in fp32 only, so MoE models keep fp32 activations with bf16 GEMM operands.
  mo.activations = plan_.precision == CudaPrecision::kBf16 && !o_.moe.enabled() ? ActType::kBF16 : ActType::kF32;
  if (plan_.cuda) RS_RETURN_IF_ERROR(check_cuda_attention(plan_.attention, config_.head_size()));
  mo.batch = o_.batch;
  mo.seq_len = o_.seq_len;
  mo.moe = o_.moe;
  mo.ep = {L.ep, L.ep_rank(groups_.rank)};
  RS_RETURN_IF_ERROR(check_device_memory(mo));
  RS_ASSIGN_OR_RETURN(model_, GPT2::create(mo, *ops_, L.tp > 1 ? groups_.tp.get() : nullptr,
                                           groups_.ep.get(), moe_ops_.get()));
  if (from_file) {
    RS_RETURN_IF_ERROR(model_->load_full_weights(initial));
  } else {
    RS_RETURN_IF_ERROR(model_->init_weights(o_.seed));
  }
  AdamWConfig ac;
  ac.weight_decay = o_.weight_decay;
  optimizer_ = std::make_unique<AdamW>(model_->params(), *ops_, ac);
  FaultInjector* faults = faults_.get();
  reducer_ = std::make_unique<DdpReducer>(model_->params(), *groups_.dp, probe_.get(),
                                          [faults](std::string_view p) { return faults->drop_grad(p); },
                                          kDdpBucketBytes, kDdpFirstBucketBytes, groups_.edp.get());
  if (auto skew = faults_->router_logit_bias(o_.moe); !skew.empty())
    RS_RETURN_IF_ERROR(model_->set_router_logit_bias(skew));
  schedule_ = {o_.lr, o_.warmup, o_.steps, o_.min_lr_frac};
  // Faults that can never fire are mistakes on the command line: say so before training starts.
  for (const FaultSpec& f : o_.inject) {
    if (f.rank >= L.world_size)
      return rankscope::invalid_argument(fmt::format("--inject {}: rank {} does not exist (world size {})",
                                                     f.text, f.rank, L.world_size));
    RS_RETURN_IF_ERROR(check_moe_fault(f, o_.moe, L));
    if (f.kind == FaultKind::kDropGrad && model_->params().index_of(f.param) < 0)
      return rankscope::invalid_argument(fmt::format(
          "--inject {}: no parameter '{}' (names as in Hugging Face GPT-2, e.g. wte.weight, "
          "h.0.mlp.c_fc.weight, ln_f.bias)", f.text, f.param));
  }

  if (!o_.resume.empty()) {
    ScopedRange r(probe_.get(), "init/checkpoint");
    RS_ASSIGN_OR_RETURN(auto dir, find_checkpoint(o_.resume));
    RS_ASSIGN_OR_RETURN(TrainState st, read_train_state(dir));
    if (st.world_size != L.world_size || st.tp != L.tp)
      return rankscope::invalid_argument(fmt::format(
          "--resume {}: written by {} ranks with --tp {}, this run has {} ranks with --tp {} "
          "(hint: resume with the same layout)", dir.string(), st.world_size, st.tp, L.world_size, L.tp));
    RS_RETURN_IF_ERROR(load_checkpoint(dir, groups_.rank, *model_, *optimizer_, *ops_, st));
    start_step_ = st.step;
    if (leader()) fmt::print("resumed from {} at step {}\n", dir.string(), st.step);
  }
  if (leader())
    fmt::print("model: {} | tp {} dp {} ep {} | B {} T {} accum {} | recompute {} | attention {} | activations {} | "
               "activation memory {:.1f} MiB per rank\n",
               config_.describe(), L.tp, L.dp, L.ep, o_.batch, o_.seq_len, o_.grad_accum,
               static_cast<int>(o_.recompute), attention_kind_name(plan_.attention),
               act_type_name(model_->options().activations),
               static_cast<double>(model_->activation_bytes()) / (1 << 20));
  if (leader() && o_.moe.enabled())
    fmt::print("moe: {} experts top-{} every {} block(s), {} per EP rank | capacity factor {} | aux loss coef {} | "
               "expert loop {}\n", o_.moe.experts, o_.moe.top_k, o_.moe.every, o_.moe.experts / L.ep,
               o_.moe.capacity_factor, o_.moe.aux_loss_coef, expert_loop_name(o_.moe.loop));
  return {};
}

Status Trainer::setup_data() {
  const GroupLayout& L = groups_.layout;
  const std::string spec = resolve_train_data(o_.data);
  RS_ASSIGN_OR_RETURN(std::unique_ptr<TokenSource> source, open_token_source(spec, config_.vocab_size, o_.seed));
  DataLoaderOptions lo;
  lo.batch = o_.batch;
  lo.seq_len = o_.seq_len;
  lo.dp_rank = L.dp_rank(groups_.rank);
  lo.dp_size = L.dp;
  lo.shuffle = o_.shuffle;
  lo.seed = o_.seed;
  if (leader()) fmt::print("data: {}\n", source->describe());
  RS_ASSIGN_OR_RETURN(loader_, DataLoader::create(std::move(source), lo, config_.vocab_size));
  loader_->seek(static_cast<uint64_t>(start_step_) * o_.grad_accum);
  if (o_.val_every > 0) {
    RS_ASSIGN_OR_RETURN(std::string val_spec, resolve_val_data(o_.val_data, spec));
    RS_ASSIGN_OR_RETURN(auto val_source, open_token_source(val_spec, config_.vocab_size, o_.seed + 1));
    lo.shuffle = false;
    RS_ASSIGN_OR_RETURN(val_loader_, DataLoader::create(std::move(val_source), lo, config_.vocab_size));
  }
  inputs_.resize(static_cast<size_t>(o_.batch) * o_.seq_len);
  targets_.resize(inputs_.size());
  return {};
}

Status Trainer::write_run_metadata(const std::vector<std::string>& hosts, const std::vector<std::string>& settings) {
  const GroupLayout& L = groups_.layout;
  rankscope::format::RunMetadata meta;
  meta.run_id = probe_->run_id();
  meta.created_ns = rankscope::now_unix_ns();
  meta.program = "gpt2-train";
  meta.command_line = o_.command_line;
  meta.world_size = L.world_size;
  meta.tp = L.tp;
  meta.dp = L.dp;
  meta.groups = L.groups();
  meta.hosts = hosts;
  meta.model = {{"preset", o_.init_from.empty() ? o_.model : "init-from"},
                {"layers", config_.num_layers}, {"heads", config_.num_heads},
                {"channels", config_.channels}, {"vocab_size", config_.vocab_size},
                {"padded_vocab_size", config_.padded_vocab_size(L.tp)},
                {"max_seq_len", config_.max_seq_len},
                {"params", model_->params().total_numel()},
                {"vocab_shard", std::string(vocab_shard_name(o_.vocab_shard))},
                {"recompute", static_cast<int>(o_.recompute)},
                {"attention", attention_kind_name(plan_.attention)},
                {"activations", act_type_name(model_->options().activations)},
                {"moe_experts", o_.moe.experts}};
  if (o_.moe.enabled()) {
    std::vector<int> moe_blocks;
    for (int l = 0; l < config_.num_layers; l++)
      if (o_.moe.is_moe_block(l)) moe_blocks.push_back(l);
    meta.model["moe"] = {{"experts", o_.moe.experts}, {"top_k", o_.moe.top_k}, {"every", o_.moe.every},
                         {"blocks", moe_blocks}, {"capacity_factor", o_.moe.capacity_factor},
                         {"aux_loss_coef", o_.moe.aux_loss_coef},
                         {"expert_loop", std::string(expert_loop_name(o_.moe.loop))},
                         {"local_experts", o_.moe.experts / L.ep},
                         {"tp_dispatch", "replicated: every TP rank routes all rows over its own ep group"}};
  }
  meta.training = {{"seq_len", o_.seq_len}, {"batch", o_.batch}, {"grad_accum", o_.grad_accum},
                   {"steps", o_.steps}, {"lr", o_.lr}, {"warmup", o_.warmup},
                   {"seed", o_.seed}, {"data", loader_->source().describe()},
                   {"device", plan_.cuda ? "cuda" : "cpu"},
                   {"precision", std::string(cuda_precision_name(plan_.precision))},
                   {"comm", std::string(comm_backend_name(plan_.comm))},
                   {"host_staging", plan_.host_staging},
                   {"ddp_buckets", reducer_->buckets().size()}};
  std::vector<std::string> faults;
  for (const auto& f : o_.inject) faults.push_back(f.text);
  meta.training["inject"] = faults;
  meta.training["ep"] = L.ep;
  meta.versions = {{"rankscope", RANKSCOPE_VERSION}};
  meta.extra["config"] = configuration_block(settings);
  if (boot_.uses_mpi()) meta.versions["mpi"] = boot_.mpi_version();
  return probe_->write_run_metadata(meta);
}

Status Trainer::train_step(int step, StepMetrics& m) {
  const GroupLayout& L = groups_.layout;
  const auto t0 = Clock::now();
  faults_->set_step(step);
  if (step == profile_steps_.first) RS_RETURN_IF_ERROR(cuda_profiler_start());
  probe_->begin_step(step);
  {
    ScopedRange step_range(probe_.get(), "step");
    model_->params().zero_grads();
    double loss_sum = 0;
    // Mean over micro-batches and over DP ranks: the DP sum of these gradients is the mean.
    const float loss_scale = 1.0f / static_cast<float>(o_.grad_accum * L.dp);
    for (int micro = 0; micro < o_.grad_accum; ++micro) {
      {
        ScopedRange r(probe_.get(), "data");
        loader_->next(inputs_.data(), targets_.data());
      }
      if (micro == 0)
        if (auto miscount = faults_->combine_miscount(step, L.ep_rank(groups_.rank)); miscount.peer >= 0)
          model_->inject_combine_miscount(miscount);
      // The backward's loss scale goes to forward too: the fused classifier writes the dlogits there.
      RS_ASSIGN_OR_RETURN(ForwardStats stats,
                          model_->forward(inputs_.data(), targets_.data(), probe_.get(), loss_scale));
      loss_sum += stats.loss;
      probe_->counter_add("embed.local_tokens", static_cast<double>(stats.embed_local_tokens));
      if (o_.moe.enabled()) add_moe_counters(stats);
      reducer_->begin_backward(micro + 1 == o_.grad_accum);
      RS_RETURN_IF_ERROR(model_->backward(loss_scale, [this](int p) { reducer_->on_grad_ready(p); },
                                          probe_.get()));
      ScopedRange r(probe_.get(), "grad_sync");
      RS_RETURN_IF_ERROR(reducer_->finish_backward());
    }
    float loss = static_cast<float>(loss_sum / o_.grad_accum);
    {
      ScopedRange r(probe_.get(), "grad_sync");
      RS_RETURN_IF_ERROR(groups_.dp->all_reduce(&loss, 1, DataType::kFloat32, ReduceOp::kSum));
    }
    m.loss = loss / static_cast<float>(L.dp);
    {
      ScopedRange r(probe_.get(), "optimizer");
      RS_ASSIGN_OR_RETURN(m.grad_norm, global_grad_norm(model_->params(), *ops_,
                                                        L.tp > 1 ? groups_.tp.get() : nullptr, groups_.ep.get()));
      if (o_.grad_clip > 0) clip_grads_to_norm(model_->params(), *ops_, m.grad_norm, o_.grad_clip);
      m.lr = schedule_.at(step);
      optimizer_->step(m.lr);
    }
  }
  probe_->counter("mem.peak_bytes", peak_memory_bytes());  // rankscope scaling's peak memory
  probe_->end_step();
  if (step == profile_steps_.second) RS_RETURN_IF_ERROR(cuda_profiler_stop());
  m.step = step;
  m.total_steps = o_.steps;
  m.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const double tokens = static_cast<double>(o_.batch) * o_.seq_len * o_.grad_accum * L.dp;
  m.tokens_per_s = tokens / (m.step_ms / 1e3);
  return {};
}

// The MoE counters of one micro-batch, summed over the MoE blocks (docs/FORMAT.md, counters):
// per step they add up over micro-batches; the aux loss is the micro-batches' mean.
void Trainer::add_moe_counters(const ForwardStats& stats) {
  Probe* p = probe_.get();
  p->counter_add("moe.tokens_received", static_cast<double>(stats.moe_received));
  p->counter_add("moe.tokens_dropped", static_cast<double>(stats.moe_dropped));
  p->counter_add("moe.aux_loss", static_cast<double>(stats.moe_aux_loss) / o_.grad_accum);
  if (expert_counter_names_.empty())
    for (int e = 0; e < o_.moe.experts; e++) expert_counter_names_.push_back(fmt::format("moe.expert{}.routed", e));
  for (size_t e = 0; e < stats.moe_routed.size() && e < expert_counter_names_.size(); e++)
    p->counter_add(expert_counter_names_[e], static_cast<double>(stats.moe_routed[e]));
}

Status Trainer::run() {
  for (int step = start_step_ + 1; step <= o_.steps; ++step) {
    StepMetrics m;
    RS_RETURN_IF_ERROR(train_step(step, m));
    if (val_loader_ && (step % o_.val_every == 0 || step == o_.steps)) {
      RS_ASSIGN_OR_RETURN(m.val_loss, validation_loss(*model_, *val_loader_, o_.val_batches, *groups_.dp));
    }
    if (leader()) {
      metrics_->append(m);
      if (!o_.quiet) {
        fmt::print("{}\n", progress_line(m));
        std::fflush(stdout);
      }
    }
    if (o_.save_every > 0 && (step % o_.save_every == 0 || step == o_.steps)) {
      TrainState st;
      st.step = step;
      st.data_position = loader_->position();
      st.world_size = groups_.layout.world_size;
      st.tp = groups_.layout.tp;
      st.extra = {{"model", config_.describe()}, {"loss", m.loss}};
      const auto dir = checkpoint_dir(run_dir_, step);
      RS_RETURN_IF_ERROR(save_checkpoint(dir, *model_, *optimizer_, *ops_, st, *groups_.world));
      if (leader()) fmt::print("checkpoint: {}\n", dir.string());
    }
  }
  return finish();
}

Status Trainer::finish() {
  if (o_.sample > 0 && groups_.layout.dp_rank(groups_.rank) == 0) {
    SampleOptions so;
    so.tokens = o_.sample;
    so.top_k = o_.sample_top_k;
    so.seed = o_.seed;
    so.start_token = config_.vocab_size > kEndOfText ? kEndOfText : 0;
    RS_ASSIGN_OR_RETURN(std::vector<int> ids,
                        sample_tokens(*model_, *ops_, groups_.layout.tp > 1 ? groups_.tp.get() : nullptr, so));
    if (leader()) {
      std::string text;
      if (config_.vocab_size == kGpt2VocabSize) {
        auto tok = Gpt2Tokenizer::load_dir(default_vocab_dir());
        if (tok.ok()) {
          auto decoded = tok->decode(ids);
          if (decoded.ok()) text = *decoded;
        }
      }
      if (text.empty()) {  // not GPT-2's vocabulary (or no vocabulary files): print the ids
        for (int id : ids) text += fmt::format("{} ", id);
      }
      fmt::print("sample ({} tokens, top-k {}, seed {}):\n{}\n", ids.size(), so.top_k, so.seed, text);
    }
  }
  if (leader()) fmt::print("run directory: {}\n", run_dir_);
  return {};
}

}  // namespace

// One training run: setup, the loop, and the exit code (the whole job ends on an error).
static int train_once(TrainOptions options, Bootstrap& boot) {
  Trainer trainer(std::move(options), boot);
  Status s = trainer.setup();
  if (s.ok()) s = trainer.run();
  if (!s.ok()) {
    fmt::print(stderr, "gpt2-train: rank {}: {}\n", boot.rank(), s.to_string());
    if (trainer.probe()) trainer.probe()->mark_aborted();
    std::fflush(stderr);
    // Out of memory is a wrong setting, not a crash: exit 2 as for a bad flag (the message says what to change).
    const int code = s.code() == rankscope::StatusCode::kOutOfMemory ? 2 : 1;
    boot.abort_job(code);
    return code;
  }
  return 0;
}

int run_gpt2_train(int argc, char** argv) {
  auto parsed = parse_train_options(argc, argv);
  if (!parsed.ok()) {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (rank == nullptr || std::string(rank) == "0")
      fmt::print(stderr, "gpt2-train: {}\n", parsed.status().to_string());
    return 2;
  }
  if (parsed->help) {
    fmt::print("{}", train_usage());
    return 0;
  }
  auto boot = Bootstrap::start(&argc, &argv);
  if (!boot.ok()) {
    fmt::print(stderr, "gpt2-train: {}\n", boot.status().to_string());
    return 1;
  }
  if (!parsed->sweep_seq_lens.empty()) return run_seq_len_sweep(*parsed, **boot, train_once);
  return train_once(std::move(parsed).value(), **boot);
}

}  // namespace gpt2
