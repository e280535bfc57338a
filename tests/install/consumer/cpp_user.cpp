// cpp_user.cpp — one step with one range through the installed C++ probe; argv[1] is the run directory.
#include <rankscope/probe/probe.h>
#include <cstdio>
int main(int argc, char** argv) {
  rankscope::probe::Options o;
  o.run_dir = argv[1];
  auto p = rankscope::probe::Probe::create(o);
  if (!p.ok()) { std::printf("create failed\n"); return 1; }
  auto& probe = *p.value();
  probe.begin_step(0); probe.push_range("forward"); probe.pop_range(); probe.end_step();
  std::printf("C++ probe wrote %s\n", argv[1]);
  return 0;
}
