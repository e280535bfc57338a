// lr_schedule.h — linear warmup, then cosine decay to a floor.
//
// Is: lr(step) for 1-based optimizer steps: step <= warmup rises linearly to max_lr (reaching it
// at step == warmup); later steps follow half a cosine from max_lr down to max_lr * min_frac at
// the last step. Is not: per-parameter-group rates.
#pragma once

namespace gpt2 {

struct LrSchedule {
  float max_lr = 1e-3f;
  int warmup = 0;
  int total_steps = 1;
  float min_frac = 0.1f;

  float at(int step) const;
};

}  // namespace gpt2
