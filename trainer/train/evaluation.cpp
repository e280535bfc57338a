// evaluation.cpp — forward-only validation and top-k sampling over vocab-parallel logits.
#include "evaluation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>

namespace gpt2 {

rankscope::Result<float> validation_loss(GPT2& model, DataLoader& loader, int batches, Communicator& dp) {
  const auto& o = model.options();
  std::vector<int> inputs(static_cast<size_t>(o.batch) * o.seq_len), targets(inputs.size());
  loader.seek(0);
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    loader.next(inputs.data(), targets.data());
    RS_ASSIGN_OR_RETURN(ForwardStats stats, model.forward(inputs.data(), targets.data(), nullptr));
    sum += stats.loss;
  }
  float mean = static_cast<float>(sum / batches);
  RS_RETURN_IF_ERROR(dp.all_reduce(&mean, 1, DataType::kFloat32, ReduceOp::kSum));
  return mean / static_cast<float>(dp.size());
}

rankscope::Result<std::vector<int>> sample_tokens(GPT2& model, Ops& ops, Communicator* tp,
                                                  const SampleOptions& options) {
  const auto& o = model.options();
  const int T = o.seq_len;
  const int V = o.config.vocab_size;
  const VocabShardMap shard = model.params().vocab_shard_map();
  const int Vl = shard.local_rows;
  const int tp_size = tp ? tp->size() : 1;

  std::vector<int> inputs(static_cast<size_t>(o.batch) * T, 0);
  std::vector<int> context = {options.start_token};
  std::vector<int> generated;
  std::vector<float> local_row(Vl), all_rows(static_cast<size_t>(Vl) * tp_size), full(V);
  std::vector<int> order(V);
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);

  for (int n = 0; n < options.tokens; ++n) {
    // Row 0 holds the last T tokens of the context; other rows stay 0 and are ignored.
    const int len = std::min<int>(static_cast<int>(context.size()), T);
    std::copy(context.end() - len, context.end(), inputs.begin());
    RS_RETURN_IF_ERROR(model.forward(inputs.data(), nullptr, nullptr).status());
    model.copy_logits_to_host(local_row.data(), static_cast<size_t>(len - 1), 1);
    if (tp_size > 1) {
      RS_RETURN_IF_ERROR(tp->all_gather(local_row.data(), all_rows.data(), Vl, DataType::kFloat32));
    } else {
      all_rows = local_row;
    }
    // Put every rank's columns back at their global token ids; padding ids (>= V) drop out.
    for (int r = 0; r < tp_size; ++r) {
      VocabShardMap m = shard;
      m.tp_rank = r;
      for (int j = 0; j < Vl; ++j) {
        const int id = m.global_id(j);
        if (id < V) full[id] = all_rows[static_cast<size_t>(r) * Vl + j];
      }
    }
    // Top-k, then a softmax over those k, then one draw.
    const int k = std::min(options.top_k, V);
    for (int i = 0; i < V; ++i) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return full[a] > full[b] || (full[a] == full[b] && a < b); });
    const float top = full[order[0]];
    double total = 0;
    std::vector<double> probs(k);
    for (int i = 0; i < k; ++i) total += probs[i] = std::exp(static_cast<double>(full[order[i]] - top));
    double u = uniform(rng) * total;
    int pick = order[k - 1];
    for (int i = 0; i < k; ++i) {
      if ((u -= probs[i]) <= 0) {
        pick = order[i];
        break;
      }
    }
    generated.push_back(pick);
    context.push_back(pick);
  }
  return generated;
}

}  // namespace gpt2
