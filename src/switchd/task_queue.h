// Runs control tasks on a server's I/O thread: the one mechanism behind
// SwitchServer::Execute and OlafServer::Execute.
//
// Start() / Finish() bracket the I/O loop (Finish() runs what was queued
// before it). Between them, Execute() queues `fn`, wakes the loop through
// `wake` and waits until the loop's RunPending() has run it; outside them,
// Execute() runs `fn` at once on the caller's thread. Either way tasks run
// one at a time. Thread-safe; Execute() must not be called from inside a task.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <utility>

namespace inca::switchd {

template <typename Control>
class TaskQueue {
 public:
  using Task = std::function<void(Control&)>;

  // False (nothing changes) when already started.
  bool Start() {
    std::lock_guard lock(tasks_mu_);
    return !running_.exchange(true);
  }
  // The loop has ended; `make` builds the Control for the last tasks.
  template <typename Make>
  void Finish(Make&& make) {
    {
      std::lock_guard lock(tasks_mu_);
      running_.store(false);
    }
    RunPending(std::forward<Make>(make));
  }
  // On the I/O thread, between batches: runs every queued task.
  template <typename Make>
  void RunPending(Make&& make) {
    std::deque<std::pair<Task, std::promise<void>>> tasks;
    {
      std::lock_guard lock(tasks_mu_);
      tasks.swap(tasks_);
    }
    if (tasks.empty()) return;
    std::lock_guard exec(exec_mu_);
    Control c = make();
    for (auto& [fn, done] : tasks) {
      fn(c);
      done.set_value();
    }
  }
  template <typename Make, typename Wake>
  void Execute(const Task& fn, Make&& make, Wake&& wake) {
    std::future<void> done;
    {
      std::lock_guard lock(tasks_mu_);
      if (!running_.load()) {
        std::lock_guard exec(exec_mu_);
        Control c = make();
        fn(c);
        return;
      }
      std::promise<void> p;
      done = p.get_future();
      tasks_.emplace_back(fn, std::move(p));
    }
    wake();
    done.wait();
  }

 private:
  std::mutex tasks_mu_;
  std::mutex exec_mu_;  // held while tasks run
  std::atomic<bool> running_{false};
  std::deque<std::pair<Task, std::promise<void>>> tasks_;
};

}  // namespace inca::switchd
