#include "inca/control/offload_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace inca::control {

OffloadLoop::OffloadLoop(ControlPlane* plane, const OffloadLoopOptions& options)
    : plane_(plane),
      options_(options),
      controller_(std::make_unique<OffloadController>(options.controller)) {}

absl::StatusOr<OffloadPolicy> OffloadLoop::Tick(dp::TimeNs now) {
  CaisControlPlane* cais = plane_->cais();
  if (cais == nullptr) return WrongProgram(plane_->program(), "cais");
  if (options_.follow_config_threshold) {
    auto config = plane_->GetConfig();
    if (!config.ok()) return config.status();
    double base = 0;
    if (auto it = config->find("offload_threshold"); it != config->end() &&
                                                     absl::SimpleAtod(it->second, &base) &&
                                                     base != controller_->config().base_threshold) {
      controller_->set_base_threshold(base);
    }
  }
  auto stats = plane_->GetStats();
  if (!stats.ok()) return stats.status();
  if (!controller_->Observe(*stats, now)) return last_;
  auto groups = cais->ListGroups();
  if (!groups.ok()) return groups.status();
  OffloadPolicy p;
  p.controller = options_.name;
  p.threshold = controller_->threshold();
  p.fallback_alarm = controller_->fallback_alarm();
  p.fallback_ratio = controller_->fallback_ratio();
  p.queue_delay_us = controller_->queue_delay_s() * 1e6;
  p.port_utilisation = controller_->port_utilisation();
  p.sram_usage = controller_->sram_usage();
  for (const GroupInfo& g : *groups) {
    if (!g.formed) continue;
    p.groups.push_back(controller_->Plan(g, now));
    const GroupOffload& n = p.groups.back();
    // One line per change of a group's measured decisions, and per explore.
    const auto before =
        std::find_if(last_.groups.begin(), last_.groups.end(),
                     [&](const GroupOffload& o) { return o.group_id == n.group_id; });
    const bool changed = before == last_.groups.end() || before->measured_bins != n.measured_bins ||
                         before->offload_bins != n.offload_bins ||
                         before->borrowed_bins != n.borrowed_bins;
    const bool was_held = before != last_.groups.end() && before->fallback_hold;
    if (n.fallback_hold != was_held) {
      if (n.fallback_hold) {
        spdlog::warn(
            "event=fallback_hold group={} fallback_ratio={:.3f} window_ms={} hint=\"over {:.0f} % "
            "of the group's chunks fell back to the hosts in the window; its operations run on "
            "the host path until that clears\"",
            n.group_id, n.fallback_ratio, options_.controller.fallback_window_ns / dp::kNsPerMs,
            100 * options_.controller.fallback_alarm);
      } else {
        spdlog::info("event=fallback_hold_released group={} fallback_ratio={:.3f}", n.group_id,
                     n.fallback_ratio);
      }
    }
    if (changed || n.explore_bins != 0) {
      spdlog::info(
          "event=offload_plan group={} measured_bins={:#x} offload_bins={:#x} explore_bins={:#x} "
          "borrowed_bins={:#x} model_range={}..{}",
          n.group_id, n.measured_bins, n.offload_bins, n.explore_bins, n.borrowed_bins, n.min_bytes,
          n.max_bytes);
    }
  }
  if (auto s = cais->SetOffloadPolicy(p); !s.ok()) return s;
  last_ = p;
  return p;
}

OffloadLoopThread::OffloadLoopThread(ControlPlane* plane, const OffloadLoopOptions& options)
    : loop_(plane, options), period_(options.controller.period_ns), thread_([this] { Run(); }) {}

OffloadLoopThread::~OffloadLoopThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OffloadLoopThread::Run() {
  std::string last_error;
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    auto r = loop_.Tick(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
    ++ticks_;
    if (!r.ok()) {
      ++errors_;
      if (std::string(r.status().message()) != last_error) {
        last_error = std::string(r.status().message());
        spdlog::warn("event=offload_loop_error error=\"{}\"", last_error);
      }
    } else {
      last_error.clear();
    }
    lock.lock();
    cv_.wait_for(lock, period_, [this] { return stop_; });
  }
}

}  // namespace inca::control
