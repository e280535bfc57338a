// periodic_thread.h — the watchdog's thread: calls a tick function every period until stopped.
//
// Is: a std::thread with a condition variable so stop() returns promptly instead of after a full
// period, a "fast" mode (1 ms) while asynchronous completions are pending, and a thread name
// visible in stack dumps. Is not: the watchdog's policy (probe_watchdog.cpp) — it knows nothing of
// collectives or ranges.
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace rankscope::probe {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  ~PeriodicThread() { stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void start(std::string name, double period_s, std::function<void()> tick) {
    period_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(period_s));
    tick_ = std::move(tick);
    stopping_ = false;
    thread_ = std::thread([this, name = std::move(name)] {
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      run();
    });
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // While true, the thread ticks every millisecond (pending GPU completions want quick polling).
  void set_fast(bool fast) { fast_.store(fast, std::memory_order_relaxed); }
  bool running() const { return thread_.joinable(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      tick_();
      lock.lock();
      auto wait = fast_.load(std::memory_order_relaxed)
                      ? std::min<std::chrono::nanoseconds>(period_, std::chrono::milliseconds(1))
                      : period_;
      cv_.wait_for(lock, wait, [this] { return stopping_; });
    }
  }

  std::chrono::nanoseconds period_{100'000'000};
  std::function<void()> tick_;
  std::atomic<bool> fast_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rankscope::probe
