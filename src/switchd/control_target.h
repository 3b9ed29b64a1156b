// What the control plane (SwitchControl) drives: one shard of a CAIS
// switch, its reducer, ports and groups handed to a task that runs between
// packets. inca-switchd's SwitchServer is one (the task runs on its switch
// thread); inca-sim's CaisSwitchNode is another (the task runs at once, at
// the simulated time), so the simulator's switches answer the control API,
// and the aggregation manager, with the code inca-switchd answers them with.
#pragma once

#include <functional>
#include <string>

#include "inca/cais/reducer.h"
#include "inca/counters/switch_counters.h"
#include "membership/group_manager.h"
#include "membership/port_table.h"
#include "switchd/config.h"

namespace inca::switchd {

class ControlTarget {
 public:
  // Mutable state handed to Execute() tasks.
  struct Control {
    cais::CaisReducer& reducer;
    membership::PortTable& ports;
    membership::GroupManager& groups;
    SwitchdConfig& config;
    dp::TimeNs now;  // the switch's clock when the task runs
  };
  virtual ~ControlTarget() = default;
  // Runs `fn` where the switch's state may be changed, and waits for it.
  virtual void Execute(const std::function<void(Control&)>& fn) = 0;
  // A consistent copy of the switch's counters.
  virtual counters::SwitchCounters counters() const = 0;
  // The switch's data address, as GetStats lists its shards.
  virtual std::string endpoint() const = 0;
};

}  // namespace inca::switchd
