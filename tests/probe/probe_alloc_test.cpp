// probe_alloc_test.cpp — once warm, a whole step (ranges, collectives, counters, gradients, the
// step record and its write) allocates nothing on the calling thread. Counted by replacing the
// global operator new of this test binary; only the test's own thread, only while armed.
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "probe_test_util.h"
#include "rankscope/probe/probe.h"

// malloc/free behind a replaced operator new/delete is the intended pairing here.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
thread_local bool t_counting = false;
thread_local long t_allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (t_counting) ++t_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace rankscope::probe {
namespace {

void one_step(Probe& probe, CommHandle dp, ParamHandle w, int64_t step) {
  format::CollectiveDesc d;
  d.op = format::CollectiveOp::kAllReduceSum;
  d.bytes = 64;
  probe.begin_step(step);
  {
    ScopedRange s(&probe, "step");
    for (int i = 0; i < 20; ++i) {
      ScopedRange f(&probe, i % 2 ? "forward/block0/attn" : "forward/block0/mlp");
    }
    probe.begin_backward();
    probe.grad_ready(w);
    probe.end_backward();
    ScopedRange g(&probe, "grad_sync");
    for (int i = 0; i < 10; ++i) probe.collective_complete(probe.collective_enqueue(dp, d));
    probe.counter("embed.local_tokens", 5);
    probe.counter_add("loader.batches", 1);
  }
  probe.end_step();
}

TEST(ProbeHotPath, WarmStepsDoNotAllocate) {
  testing::ScratchDir dir;
  auto created = Probe::create(testing::test_options(dir.path()));
  ASSERT_TRUE(created.ok());
  Probe& probe = **created;
  CommHandle dp = probe.register_comm("dp0", 2, 0);
  ParamHandle w = probe.register_param("wte", 10);
  for (int64_t s = 0; s < 3; ++s) one_step(probe, dp, w, s);  // warm: names, slots, buffers

  // The counter itself works: one explicit allocation is seen.
  t_allocations = 0;
  t_counting = true;
  void* probe_allocation = ::operator new(16);
  t_counting = false;
  ::operator delete(probe_allocation);
  ASSERT_EQ(t_allocations, 1);

  t_allocations = 0;
  t_counting = true;
  for (int64_t s = 3; s < 13; ++s) one_step(probe, dp, w, s);
  t_counting = false;
  EXPECT_EQ(t_allocations, 0) << "allocations in 10 warm steps";
}

}  // namespace
}  // namespace rankscope::probe
