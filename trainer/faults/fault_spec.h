// fault_spec.h — what `--inject KIND:key=value,...` asks for, parsed and checked at start-up.
//
// Is: the grammar of every fault kind and its keys, table-driven, so an unknown kind, an unknown
// or missing key, or a malformed value is a clear error naming the allowed alternatives:
//   stall:rank=R,range=NAME[,step=S]             block forever on entering NAME (at step S; start-up
//                                                is step 0, e.g. range=init/model)
//   delay:rank=R,range=NAME,ms=M[,step=S]        sleep M ms inside NAME (every step unless S)
//   skip:rank=R,comm=NAME,seq=K                  leave out collective K of communicator NAME
//   resize:rank=R,comm=NAME,seq=K,factor=F       collective K gets count*F elements on rank R
//   gpu-stall:rank=R,range=NAME,step=S,seconds=N a kernel spinning N s on the compute stream on
//                                                entering NAME at step S: the host goes on, the GPU
//                                                falls behind (needs --device cuda)
//   crash:rank=R,step=S[,range=NAME]             SIGKILL itself at step S (on entering NAME, or
//                                                the step itself)
//   drop-grad:rank=R,param=NAME[,step=S]         never report NAME's gradient ready
//   lossy:model=bernoulli,p=P[,rank=R,comm=NAME,chunk=BYTES,seed=N]
//   lossy:model=gilbert-elliott,p_gb=..,p_bg=..,loss_good=..,loss_bad=..[,rank,comm,chunk,seed]
//                                                zero chunks of TP collective payloads
//   route-skew:expert=E,bias=B                   add B to expert E's router logit in every MoE
//                                                block on every rank (a hot expert)
//   a2a-miscount:rank=R,step=S,delta=D           at step S, rank R expects D rows more (D < 0:
//                                                fewer) back from its first other EP peer in the
//                                                first MoE block's combine all_to_all_v
// Is not: the behaviour (fault_injector.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rankscope/format/status.h"

namespace gpt2 {

enum class FaultKind {
  kStall, kDelay, kSkip, kResize, kCrash, kDropGrad, kLossy, kGpuStall, kRouteSkew, kA2aMiscount
};
enum class LossModel { kBernoulli, kGilbertElliott };

std::string_view fault_kind_name(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kStall;
  std::string text;        // as given on the command line, for messages
  int rank = -1;           // -1: every rank (lossy only)
  int64_t step = -1;       // -1: every step (delay, drop-grad)
  std::string range;       // stall, delay, crash, gpu-stall
  std::string comm;        // skip, resize; lossy: "" = every tp{k} communicator
  uint64_t seq = 0;        // skip, resize
  double factor = 1.0;     // resize
  double ms = 0;           // delay
  double seconds = 0;      // gpu-stall
  std::string param;       // drop-grad
  int expert = -1;         // route-skew
  double bias = 0;         // route-skew: added to the router logit
  int64_t delta = 0;       // a2a-miscount: rows off (non-zero)
  // lossy
  LossModel loss_model = LossModel::kBernoulli;
  double p = 0;            // bernoulli: probability a chunk is lost
  double p_gb = 0;         // gilbert-elliott: P(good -> bad) per chunk
  double p_bg = 0;         //                  P(bad -> good) per chunk
  double loss_good = 0;    //                  P(loss) in the good state
  double loss_bad = 0;     //                  P(loss) in the bad state
  size_t chunk_bytes = 1024;
  uint64_t seed = 1;
};

// Parses one --inject value; errors start with "--inject <text>: " and give a hint.
rankscope::Result<FaultSpec> parse_fault_spec(std::string_view text);

}  // namespace gpt2
