// side_by_side.h — two independent pieces of work, one on a second thread while this one does the
// other, both done when it returns.
//
// Is: for the passes of a verdict that read the same data and write their own results (the record
// scans of a 16,384-rank job, half a second each on 2 cores). What the other thread throws is thrown
// again here, after both are done, so a command's boundary (command_boundary.h) still sees it and no
// thread is left running. With one core the two run one after the other, `there` first.
// Is not: a pool: each call starts and joins one thread (~50 us), so it pays only for work of
// milliseconds or more.
#pragma once

#include <exception>
#include <thread>
#include <utility>

namespace rankscope::format {

template <typename There, typename Here>
void side_by_side(There&& there, Here&& here) {
  if (std::thread::hardware_concurrency() < 2) {
    there();
    here();
    return;
  }
  std::exception_ptr failed;
  {
    std::jthread other([&] {
      try {
        there();
      } catch (...) {
        failed = std::current_exception();
      }
    });
    here();  // if this throws, `other` is joined on the way out
  }
  if (failed) std::rethrow_exception(failed);
}

}  // namespace rankscope::format
