#include "control/controller_service.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace inca::control {

absl::Status ControllerServiceOptions::Validate() const {
  if (switches.empty()) {
    return absl::InvalidArgumentError("no switch to manage: give at least one --switch HOST:PORT");
  }
  std::set<std::string> seen;
  for (const std::string& s : switches) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "switch '", s, "' must be HOST:PORT (its control API, e.g. 127.0.0.1:50051)"));
    }
    if (!seen.insert(s).second) {
      return absl::InvalidArgumentError(absl::StrCat("switch '", s, "' is listed twice"));
    }
  }
  const std::string& n = loop.name;
  if (n.empty() || n.size() > 64 || !std::all_of(n.begin(), n.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
               c == '.' || c == ':';
      })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "controller name '", n, "' must be 1-64 letters, digits, '-', '_', '.' or ':'"));
  }
  if (rpc_timeout_ms <= 0) return absl::InvalidArgumentError("rpc timeout must be positive");
  return loop.controller.Validate();
}

absl::StatusOr<std::unique_ptr<ControllerService>> ControllerService::Create(
    const ControllerServiceOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::unique_ptr<ControllerService> svc(new ControllerService(options));
  for (const std::string& target : options.switches) {
    // Channels connect lazily: an unreachable switch fails its ticks, not Create.
    auto plane = ConnectControl(target, options.token, options.rpc_timeout_ms);
    if (!plane.ok()) return plane.status();
    Managed m;
    m.target = target;
    m.plane = std::move(*plane);
    m.loop = std::make_unique<OffloadLoop>(m.plane.get(), options.loop);
    svc->switches_.push_back(std::move(m));
  }
  return svc;
}

namespace {
bool SameDecisions(const OffloadPolicy& a, const OffloadPolicy& b) {
  if (a.threshold != b.threshold || a.groups.size() != b.groups.size()) return false;
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const GroupOffload &x = a.groups[i], &y = b.groups[i];
    if (x.group_id != y.group_id || x.min_bytes != y.min_bytes || x.max_bytes != y.max_bytes) {
      return false;
    }
  }
  return true;
}
}  // namespace

std::vector<SwitchTickResult> ControllerService::Tick(dp::TimeNs now) {
  std::vector<SwitchTickResult> out;
  for (Managed& m : switches_) {
    SwitchTickResult r;
    r.target = m.target;
    auto p = m.loop->Tick(now);
    if (!p.ok()) {
      r.status = p.status();
    } else {
      r.policy = *p;
      r.changed = !SameDecisions(*p, m.last);
      m.last = *p;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace inca::control
