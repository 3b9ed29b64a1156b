// Communicator: options (validation, the environment) and Create(). The
// implementation is in communicator_impl.h (the progress thread, the
// switch/host decision) and communicator_recovery.cc (the host recovery
// protocol). Design: docs/design/cais-client.md.
#include "inca/client/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/communicator_impl.h"
#include "client/group_roster.h"
#include "client/settings.h"
#include "inca/cais/port_mask.h"
#include "inca/dataplane/program.h"

namespace inca {

absl::Status CommunicatorOptions::Validate() const {
  if (world_size < 1 || world_size > cais::kMaxTreeRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size ", world_size, " must be between 1 and ", cais::kMaxTreeRanks,
                     " (more than 64 only across a tree of switches)"));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " must be in [0, world_size=", world_size, ")"));
  }
  // Each setting's range, as client/settings.cc declares it.
  if (absl::Status s = settings::ValidateAll(client::ClientSettings(), *this); !s.ok()) return s;
  if (switch_port < -1 || switch_port >= dp::kMaxPorts) {
    return absl::InvalidArgumentError(
        absl::StrCat("switch_port ", switch_port, " must be -1 (any) or 0..", dp::kMaxPorts - 1));
  }
  // What no single setting's range can say.
  if (max_retransmit_timeout_ms < retransmit_timeout_ms || host_timeout_ms <= switch_timeout_ms) {
    return absl::InvalidArgumentError(
        "timeouts: need retransmit_timeout_ms <= max_retransmit_timeout_ms and "
        "host_timeout_ms > switch_timeout_ms");
  }
  return absl::OkStatus();
}

absl::StatusOr<CommunicatorOptions> OptionsFromEnvironment(CommunicatorOptions o) {
  auto get_int = [](const char* name, int* out) -> absl::Status {
    const char* v = std::getenv(name);
    if (v == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtoi(v, out)) {
      return absl::InvalidArgumentError(absl::StrCat(name, "='", v, "' is not an integer"));
    }
    return absl::OkStatus();
  };
  if (auto s = get_int("RANK", &o.rank); !s.ok()) return s;
  if (auto s = get_int("WORLD_SIZE", &o.world_size); !s.ok()) return s;
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (addr != nullptr || port != nullptr) {
    // inca's store listens one port above torch's, so both can run.
    int p = 29500;
    if (port != nullptr && !absl::SimpleAtoi(port, &p)) {
      return absl::InvalidArgumentError(absl::StrCat("MASTER_PORT='", port, "' is not a port"));
    }
    o.store_address = absl::StrCat(addr ? addr : "127.0.0.1", ":", p + 1);
  }
  if (const char* sw = std::getenv("INCA_SWITCH")) {
    o.switch_address = std::string(sw) == "none" ? "" : sw;
  }
  // The settings that declare a variable (INCA_IO, INCA_OFFLOAD,
  // INCA_REQUIRE_SWITCH: src/client/settings.cc).
  if (auto s = client::ApplyClientEnvironment(&o); !s.ok()) return s;
  if (auto s = o.Validate(); !s.ok()) return s;
  return o;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const CommunicatorOptions& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  auto c = std::make_unique<client_internal::CommunicatorImpl>(options);
  if (auto s = c->Init(); !s.ok()) return s;
  return std::unique_ptr<Communicator>(std::move(c));
}

namespace client_internal {

// In all and for its size class as the switch estimates it.
void CommunicatorImpl::CountHostReason(const SwitchOp& whole) {
  const auto why = static_cast<size_t>(host_reason_);
  const int size_class =
      wire::SizeClass(client::OffloadEstimate(whole, o_.chunk_size, o_.world_size));
  absl::MutexLock lock(&stats_mu_);
  ++stats_.host_reasons[why];
  ++stats_.host_by_class[size_class][why];
}

void CommunicatorImpl::WarnFallback(const char* why) {
  if (fallback_warned_) return;
  fallback_warned_ = true;
  Log(absl::StrCat("inca rank ", o_.rank, ": warning: group ", o_.group_id, ", switch ",
                   o_.switch_address, ": ", why,
                   "; operations run on the host path (Gloo) until the group is back on the "
                   "switch (stats: ops_host, rejoins)"));
}

// Before the host path's mesh: every rank's entry in the store's roster,
// whatever its group (client/group_roster.h), so that ranks that disagree on
// the group id or the world size get the same error rather than each its own
// timeout.
absl::Status CommunicatorImpl::MeetInRoster() {
  if (o_.world_size == 1) return absl::OkStatus();
  // Whether the store dies with this rank's communicator (rank 0 serves it,
  // or its owner drops it when creation fails).
  const bool serves = store_server_ != nullptr || (o_.own_store && o_.rank == 0);
  client::RosterEntry me{o_.rank, o_.group_id, o_.world_size, serves || o_.own_store};
  auto index = store_->Add(std::string(client::kRosterCount), 1);
  if (!index.ok()) return index.status();
  if (auto s = store_->Set(client::RosterKey(*index), client::Encode(me)); !s.ok()) return s;
  const int64_t deadline = NowNs() + int64_t{o_.host_timeout_ms} * 1'000'000;
  std::vector<client::RosterEntry> seen;
  std::vector<int64_t> at;  // each entry's index in the store
  for (int64_t next = 1;; ++next) {
    const auto left = std::chrono::milliseconds((deadline - NowNs()) / 1'000'000);
    auto v = store_->Get(client::RosterKey(next), std::max(left, std::chrono::milliseconds(1)));
    const bool timed_out = !v.ok();
    if (timed_out && v.status().code() != absl::StatusCode::kDeadlineExceeded) return v.status();
    if (v.ok()) {
      if (auto e = client::Decode(*v)) {
        seen.push_back(*e);
        at.push_back(next);
      }
    }
    const client::RosterJudgement j = client::JudgeRoster(me, seen, timed_out);
    if (j.verdict == client::RosterVerdict::kFormed) return absl::OkStatus();
    if (j.verdict != client::RosterVerdict::kRefused) continue;
    absl::Status st = j.error;
    if (st.code() == absl::StatusCode::kInvalidArgument) {
      st = SharedVerdict(*index, j, at);
    } else {
      st = absl::Status(st.code(), absl::StrCat(st.message(), " at the store ", o_.store_address,
                                                " within host_timeout_ms=", o_.host_timeout_ms));
    }
    // Rank 0, whose store dies with this communicator, waits (bounded)
    // until every rank that came has its error, so that no peer gets a
    // lost store instead.
    (void)store_->Set(client::RosterKey(*index) + "/read", "1");
    if (serves) {
      const int64_t until = NowNs() + int64_t{5'000} * 1'000'000;
      for (int64_t i : at) {
        const auto wait = std::chrono::milliseconds((until - NowNs()) / 1'000'000);
        if (i == *index || wait.count() <= 0) continue;
        (void)store_->Get(client::RosterKey(i) + "/read", wait);
      }
    }
    return st;
  }
}

// One text for every rank a disagreement names (client/group_roster.h,
// VerdictKey). A rank that decides first for its own entry writes its text
// for each entry it names that nobody decided for yet; a rank decided for
// already (a peer that gave up earlier, whose next group's entries this
// rank may have read since) takes that text and claims nothing.
absl::Status CommunicatorImpl::SharedVerdict(int64_t mine, const client::RosterJudgement& j,
                                             const std::vector<int64_t>& at) {
  auto first = store_->Add(client::VerdictClaimKey(mine), 1);
  if (first.ok() && *first == 1) {
    (void)store_->Set(client::VerdictKey(mine), std::string(j.error.message()));
    for (size_t k : j.named) {
      if (at[k] == mine) continue;
      auto claimed = store_->Add(client::VerdictClaimKey(at[k]), 1);
      if (claimed.ok() && *claimed == 1) {
        (void)store_->Set(client::VerdictKey(at[k]), std::string(j.error.message()));
      }
    }
  }
  auto text = store_->Get(client::VerdictKey(mine), std::chrono::seconds(5));
  return text.ok() ? absl::InvalidArgumentError(*text) : j.error;
}

}  // namespace client_internal

}  // namespace inca
