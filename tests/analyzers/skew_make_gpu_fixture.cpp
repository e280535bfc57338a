// skew_make_gpu_fixture.cpp — regenerates tests/fixtures/analyzers/skew_gpu_kernels, the checked-in
// GPU-like run directory (kernel records in steps 2-3; see skew_gpu_fake_run.cpp for every kernel).
// Run by hand only when the fixture must change:
// `skew_make_gpu_fixture <source dir>/tests/fixtures/analyzers/skew_gpu_kernels`.
#include <cstdio>
#include <filesystem>

#include "skew_gpu_fake_run.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: skew_make_gpu_fixture OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::remove_all(out);
  rankscope::testing::write_gpu_fake_run(out);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
