#include "inca/tree/topology.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "util/string_compat.h"

namespace inca::tree {

using util::Av;
using util::Sv;

std::optional<std::array<uint8_t, 16>> NormalizeIp(std::string_view address) {
  const std::string a(address);
  std::array<uint8_t, 16> out{};
  in_addr v4{};
  if (inet_pton(AF_INET, a.c_str(), &v4) == 1) {
    out[10] = 0xff;
    out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    return out;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    return out;
  }
  return std::nullopt;
}

namespace {

absl::Status Bad(std::string_view source, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(source), ": ", Av(what)));
}

// A string field of a map entry; `required` ones must be there.
absl::Status Field(const YAML::Node& n, const char* key, bool required, std::string_view source,
                   std::string_view where, std::string* out) {
  const YAML::Node v = n[key];
  if (!v) {
    return required ? Bad(source, absl::StrCat(Av(where), ": '", key, "' is missing"))
                    : absl::OkStatus();
  }
  if (!v.IsScalar()) return Bad(source, absl::StrCat(Av(where), ": '", key, "' is not a string"));
  *out = v.Scalar();
  return absl::OkStatus();
}

absl::Status ReadSwitch(const YAML::Node& n, size_t i, std::string_view source, SwitchSpec* s) {
  const std::string where = absl::StrCat("switches[", i, "]");
  if (!n.IsMap()) return Bad(source, absl::StrCat(where, " is not a map"));
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    if (k != "name" && k != "address" && k != "parent" && k != "parents" && k != "uplink_bps" &&
        k != "control") {
      return Bad(source, absl::StrCat(where, ": unknown key '", k,
                                      "' (name, address, control, parent, parents, uplink_bps)"));
    }
  }
  if (const YAML::Node ps = n["parents"]) {
    if (n["parent"]) return Bad(source, absl::StrCat(where, ": 'parent' and 'parents': give one"));
    if (!ps.IsSequence() || ps.size() == 0) {
      return Bad(source, absl::StrCat(where, ": 'parents' must be a list of switch names"));
    }
    for (const auto& p : ps) {
      if (!p.IsScalar()) return Bad(source, absl::StrCat(where, ": a parent is not a string"));
      s->parents.push_back(p.Scalar());
    }
    s->parent = s->parents[0];
  }
  if (auto st = Field(n, "name", true, source, where, &s->name); !st.ok()) return st;
  if (auto st = Field(n, "address", true, source, where, &s->address); !st.ok()) return st;
  if (auto st = Field(n, "parent", false, source, where, &s->parent); !st.ok()) return st;
  if (auto st = Field(n, "control", false, source, where, &s->control); !st.ok()) return st;
  if (const YAML::Node u = n["uplink_bps"]) {
    try {
      s->uplink_bps = u.as<double>();
    } catch (const YAML::Exception&) {
      return Bad(source, absl::StrCat(where, ": uplink_bps '", u.Scalar(), "' is not a number"));
    }
    if (!(s->uplink_bps >= 0 && s->uplink_bps <= 1e13)) {
      return Bad(source, absl::StrCat(where, ": uplink_bps must be in [0, 1e13]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadHosts(const YAML::Node& n, size_t i, std::string_view source,
                       std::vector<HostSpec>* out) {
  const std::string where = absl::StrCat("hosts[", i, "]");
  if (!n.IsMap()) return Bad(source, absl::StrCat(where, " is not a map"));
  std::string at;
  if (auto st = Field(n, "at", true, source, where, &at); !st.ok()) return st;
  const YAML::Node list = n["addresses"];
  if (!list || !list.IsSequence()) {
    return Bad(source, absl::StrCat(where, ": 'addresses' must be a list of IP addresses"));
  }
  for (const auto& a : list) {
    if (!a.IsScalar()) return Bad(source, absl::StrCat(where, ": an address is not a string"));
    out->push_back({a.Scalar(), at});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Topology> Topology::FromYaml(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Bad(source, absl::StrCat("not YAML: ", e.what()));
  }
  if (!root.IsMap()) return Bad(source, "a topology is a map with 'switches' and 'hosts'");
  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    if (k != "switches" && k != "hosts") {
      return Bad(source, absl::StrCat("unknown key '", k, "' (switches, hosts)"));
    }
  }
  const YAML::Node switches = root["switches"];
  if (!switches || !switches.IsSequence() || switches.size() == 0) {
    return Bad(source, "'switches' must be a list of at least one switch");
  }
  if (switches.size() > kMaxSwitches) {
    return Bad(source,
               absl::StrCat("'switches' lists ", switches.size(), "; at most ", kMaxSwitches));
  }
  Topology t;
  for (size_t i = 0; i < switches.size(); ++i) {
    SwitchSpec s;
    if (auto st = ReadSwitch(switches[i], i, source, &s); !st.ok()) return st;
    t.switches.push_back(std::move(s));
  }
  if (const YAML::Node hosts = root["hosts"]) {
    if (!hosts.IsSequence()) return Bad(source, "'hosts' must be a list");
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (auto st = ReadHosts(hosts[i], i, source, &t.hosts); !st.ok()) return st;
    }
  }
  if (auto st = t.Validate(); !st.ok()) return Bad(source, Sv(st.message()));
  return t;
}

absl::Status Topology::Validate() const {
  std::map<std::string, int> index;
  for (size_t i = 0; i < switches.size(); ++i) {
    const SwitchSpec& s = switches[i];
    if (s.name.empty())
      return absl::InvalidArgumentError(absl::StrCat("switch ", i, " has no name"));
    if (!index.emplace(s.name, static_cast<int>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat("switch '", s.name, "' is named twice"));
    }
  }
  for (const SwitchSpec& s : switches) {
    if (!s.parents.empty() && s.parents[0] != s.parent) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch '", s.name, "': its first parent must be its parent"));
    }
    std::set<std::string> seen;
    for (const std::string& p : s.parents) {
      if (p.empty() || !seen.insert(p).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("switch '", s.name, "': parents must name each switch once (",
                         p.empty() ? "an empty name" : absl::StrCat("'", p, "' twice"), ")"));
      }
    }
    std::vector<std::string> all = s.parents;
    all.push_back(s.parent);
    for (const std::string& p : all) {
      if (!p.empty() && !index.count(p)) {
        return absl::InvalidArgumentError(
            absl::StrCat("switch '", s.name, "': parent '", p, "' is no switch"));
      }
    }
  }
  // No cycle: in every plane, every walk up ends at a root within
  // switches.size() steps.
  for (int plane = 0; plane < planes(); ++plane) {
    for (const SwitchSpec& s : switches) {
      const SwitchSpec* at = &s;
      for (size_t steps = 0; !at->ParentIn(plane).empty(); ++steps) {
        if (steps >= switches.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("switch '", s.name, "' is its own ancestor (a cycle of parents)"));
        }
        at = &switches[static_cast<size_t>(index.at(at->ParentIn(plane)))];
      }
    }
  }
  std::set<std::array<uint8_t, 16>> seen;
  for (const HostSpec& h : hosts) {
    const auto ip = NormalizeIp(h.address);
    if (!ip) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", h.address, "' is not an IP address"));
    }
    if (!index.count(h.at)) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", h.address, " is behind '", h.at, "', which is no switch"));
    }
    if (!seen.insert(*ip).second) {
      return absl::InvalidArgumentError(absl::StrCat("host ", h.address, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

int Topology::planes() const {
  size_t n = 1;
  for (const SwitchSpec& s : switches) n = std::max(n, s.parents.size());
  return static_cast<int>(n);
}

std::optional<int> Topology::SwitchIndex(std::string_view name) const {
  for (size_t i = 0; i < switches.size(); ++i) {
    if (switches[i].name == name) return static_cast<int>(i);
  }
  return std::nullopt;
}

std::optional<int> Topology::SwitchOfHost(std::string_view address) const {
  const auto ip = NormalizeIp(address);
  if (!ip) return std::nullopt;
  for (const HostSpec& h : hosts) {
    if (NormalizeIp(h.address) == ip) return SwitchIndex(h.at);
  }
  return std::nullopt;
}

std::optional<int> Tree::MemberToward(int node, int rank) const {
  if (node < 0 || static_cast<size_t>(node) >= nodes.size() || rank < 0 ||
      static_cast<size_t>(rank) >= node_of_rank.size()) {
    return std::nullopt;
  }
  const TreeNode& n = nodes[static_cast<size_t>(node)];
  const auto own = std::find(n.ranks.begin(), n.ranks.end(), rank);
  if (own != n.ranks.end()) return static_cast<int>(own - n.ranks.begin());
  // Walk up from the rank's switch to the child of `node` on the way.
  for (int at = node_of_rank[static_cast<size_t>(rank)]; at >= 0;
       at = nodes[static_cast<size_t>(at)].parent) {
    if (nodes[static_cast<size_t>(at)].parent == node) {
      return nodes[static_cast<size_t>(at)].index_at_parent;
    }
  }
  return std::nullopt;
}

}  // namespace inca::tree
