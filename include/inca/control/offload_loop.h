// The offload controller's loop (CAIS write-up 3.3): every period, read a
// switch's figures through the ControlPlane API, re-evaluate the
// OffloadController, and push each group's decision back as an
// OffloadPolicy. The same code runs embedded in inca-switchd (against its
// own SwitchControl) and in the standalone inca-controller (against
// several switches over gRPC).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "inca/control/control_plane.h"
#include "inca/control/offload_controller.h"

namespace inca::control {

struct OffloadLoopOptions {
  OffloadControllerConfig controller;
  std::string name = "embedded";  // reported as OffloadPolicy::controller
  // Follow the switch's `offload_threshold` config key as the base threshold.
  bool follow_config_threshold = true;
};

// One switch's loop, driven by the caller's clock. Not thread-safe.
class OffloadLoop {
 public:
  OffloadLoop(ControlPlane* plane, const OffloadLoopOptions& options);

  // One evaluation at `now`: GetStats -> Observe -> ListGroups -> Range per
  // formed group -> SetOffloadPolicy. Calls within one period of the last
  // evaluation do nothing and return the last policy. Errors from the
  // switch are returned (the next Tick tries again).
  absl::StatusOr<OffloadPolicy> Tick(dp::TimeNs now);

  const OffloadController& controller() const { return *controller_; }

 private:
  ControlPlane* plane_;
  OffloadLoopOptions options_;
  std::unique_ptr<OffloadController> controller_;
  OffloadPolicy last_;
};

// Runs OffloadLoop::Tick every period on its own thread with the steady
// clock until destroyed. Errors are logged at most once per distinct message.
class OffloadLoopThread {
 public:
  OffloadLoopThread(ControlPlane* plane, const OffloadLoopOptions& options);
  ~OffloadLoopThread();
  OffloadLoopThread(const OffloadLoopThread&) = delete;
  OffloadLoopThread& operator=(const OffloadLoopThread&) = delete;

  uint64_t ticks() const { return ticks_.load(); }
  uint64_t errors() const { return errors_.load(); }

 private:
  void Run();
  OffloadLoop loop_;
  std::chrono::nanoseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<uint64_t> ticks_{0}, errors_{0};
  std::thread thread_;
};

}  // namespace inca::control
