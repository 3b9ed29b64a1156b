#include "membership/port_table.h"

#include "absl/strings/str_cat.h"

namespace inca::membership {

void PortTable::Set(dp::PortId port, const net::Endpoint& endpoint, bool is_static) {
  entries_[port] = Entry{endpoint, true, is_static};
  by_endpoint_[endpoint] = port;
}

absl::Status PortTable::AddStatic(dp::PortId port, const net::Endpoint& endpoint) {
  if (port >= kCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("port ", port, " out of range; ports are 0..", kCapacity - 1));
  }
  if (!endpoint.valid()) return absl::InvalidArgumentError("static port needs a valid endpoint");
  if (entries_[port].bound) {
    return absl::AlreadyExistsError(
        absl::StrCat("port ", port, " is already bound to ", entries_[port].endpoint.ToString()));
  }
  if (auto held = Lookup(endpoint)) {
    return absl::AlreadyExistsError(
        absl::StrCat("endpoint ", endpoint.ToString(), " already holds port ", *held));
  }
  Set(port, endpoint, /*is_static=*/true);
  return absl::OkStatus();
}

absl::StatusOr<dp::PortId> PortTable::Bind(const net::Endpoint& endpoint, uint16_t requested) {
  if (!endpoint.valid()) return absl::InvalidArgumentError("cannot bind an invalid endpoint");
  if (requested != kAnyPort && requested >= kCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("requested port ", requested, " out of range; ports are 0..", kCapacity - 1));
  }
  if (auto held = Lookup(endpoint)) return *held;
  if (full()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("all ", max_bound_, " switch ports are bound"));
  }
  if (requested != kAnyPort && !entries_[requested].bound) {
    Set(static_cast<dp::PortId>(requested), endpoint, /*is_static=*/false);
    return static_cast<dp::PortId>(requested);
  }
  for (dp::PortId p = 0; p < kCapacity; ++p) {
    if (!entries_[p].bound) {
      Set(p, endpoint, /*is_static=*/false);
      return p;
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat("all ", max_bound_, " switch ports are bound"));
}

bool PortTable::Remove(dp::PortId port) {
  if (port >= kCapacity || !entries_[port].bound) return false;
  by_endpoint_.erase(entries_[port].endpoint);
  entries_[port] = Entry{};
  return true;
}

bool PortTable::Release(dp::PortId port) {
  if (port >= kCapacity || !entries_[port].bound || entries_[port].is_static) return false;
  by_endpoint_.erase(entries_[port].endpoint);
  entries_[port] = Entry{};
  return true;
}

}  // namespace inca::membership
