// What both programs' control planes (SwitchControl, OlafControl) say about
// the switch's ports, written once.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "inca/control/control_plane.h"
#include "membership/port_table.h"

namespace inca::switchd {

// The control API's list of a port table's entries, lowest port first.
inline std::vector<control::PortInfo> PortInfos(const membership::PortTable& ports) {
  std::vector<control::PortInfo> out;
  for (dp::PortId p = 0; p < dp::kMaxPorts; ++p) {
    if (const net::Endpoint* e = ports.endpoint(p)) {
      out.push_back({p, e->ToString(), ports.is_static(p)});
    }
  }
  return out;
}

// InvalidArgument naming the range for a port the table cannot hold.
inline absl::Status CheckPortInRange(uint16_t port) {
  if (port < dp::kMaxPorts) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("port ", port, " is out of range; ports are 0..", dp::kMaxPorts - 1));
}

}  // namespace inca::switchd
