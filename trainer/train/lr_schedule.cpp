// lr_schedule.cpp — warmup + cosine.
#include "lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace gpt2 {

float LrSchedule::at(int step) const {
  if (warmup > 0 && step <= warmup) return max_lr * static_cast<float>(step) / static_cast<float>(warmup);
  const float min_lr = max_lr * min_frac;
  const int decay_steps = std::max(1, total_steps - warmup);
  const float progress = std::clamp(static_cast<float>(step - warmup) / static_cast<float>(decay_steps), 0.0f, 1.0f);
  const float cosine = 0.5f * (1.0f + std::cos(std::numbers::pi_v<float> * progress));
  return min_lr + (max_lr - min_lr) * cosine;
}

}  // namespace gpt2
