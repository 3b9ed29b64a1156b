#include "switchd/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "membership/group_manager.h"
#include "net/endpoint.h"
#include "net/udp.h"
#include "spdlog/spdlog.h"
#include "switchd/settings.h"
#include "util/file.h"
#include "util/string_compat.h"

namespace inca::switchd {

using util::Av;

namespace {

using settings::KindOf;
using settings::Where;

absl::Status KeyError(absl::string_view source, absl::string_view key, const YAML::Node& n,
                      absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": key '", key, "'", Where(n), ": ", what));
}

absl::Status WrongType(absl::string_view source, absl::string_view key, const YAML::Node& n,
                       absl::string_view want) {
  std::string got = n.IsScalar() ? absl::StrCat("'", n.Scalar(), "'") : std::string(KindOf(n));
  return KeyError(source, key, n, absl::StrCat("expected ", want, ", got ", got));
}

// Reads one typed value out of a node. `source` and `key` name it in errors.
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Uint(const YAML::Node& n, absl::string_view key, uint64_t lo, uint64_t hi,
                    uint64_t* out) const {
    uint64_t v = 0;
    if (!n.IsScalar() || n.Scalar().empty() ||
        n.Scalar().find_first_not_of("0123456789") != std::string::npos ||
        !absl::SimpleAtoi(n.Scalar(), &v)) {
      return WrongType(source_, key, n, "a non-negative integer");
    }
    if (v < lo || v > hi) {
      return KeyError(source_, key, n,
                      absl::StrCat("value ", v, " out of range [", lo, ", ", hi, "]"));
    }
    *out = v;
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status UintAs(const YAML::Node& n, absl::string_view key, uint64_t lo, uint64_t hi,
                      T* out) const {
    uint64_t v = 0;
    if (absl::Status s = Uint(n, key, lo, hi, &v); !s.ok()) return s;
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }

  absl::Status Bool(const YAML::Node& n, absl::string_view key, bool* out) const {
    if (n.IsScalar()) {
      const std::string s = absl::AsciiStrToLower(n.Scalar());
      if (s == "true" || s == "yes" || s == "on") {
        *out = true;
        return absl::OkStatus();
      }
      if (s == "false" || s == "no" || s == "off") {
        *out = false;
        return absl::OkStatus();
      }
    }
    return WrongType(source_, key, n, "true or false");
  }

  absl::Status String(const YAML::Node& n, absl::string_view key, std::string* out) const {
    if (!n.IsScalar()) return WrongType(source_, key, n, "a string");
    *out = n.Scalar();
    return absl::OkStatus();
  }

  // An integer in [0, 65535] or "*" (nullopt).
  absl::Status IdOrWildcard(const YAML::Node& n, absl::string_view key,
                            std::optional<uint16_t>* out) const {
    if (n.IsScalar() && n.Scalar() == "*") {
      *out = std::nullopt;
      return absl::OkStatus();
    }
    uint16_t v = 0;
    if (!n.IsScalar() || n.Scalar().find_first_not_of("0123456789") != std::string::npos) {
      return WrongType(source_, key, n, "an integer in [0, 65535] or \"*\"");
    }
    if (absl::Status s = UintAs(n, key, 0, 65535, &v); !s.ok()) return s;
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Ports(const YAML::Node& n, absl::string_view key, cais::PortMask* out) const {
    if (!n.IsSequence()) return WrongType(source_, key, n, "a list of ports");
    cais::PortMask mask;
    for (size_t i = 0; i < n.size(); ++i) {
      dp::PortId p = 0;
      if (absl::Status s = UintAs(n[i], absl::StrCat(key, "[", i, "]"), 0, dp::kMaxPorts - 1, &p);
          !s.ok()) {
        return s;
      }
      mask.add(p);
    }
    if (mask.empty()) return KeyError(source_, key, n, "needs at least one port");
    *out = mask;
    return absl::OkStatus();
  }

  // Calls `handlers[key]` for every key of mapping `n` (named `where`);
  // unknown and duplicate keys are errors.
  absl::Status Map(
      const YAML::Node& n, absl::string_view where,
      const absl::flat_hash_map<std::string,
                                std::function<absl::Status(const YAML::Node&, const std::string&)>>&
          handlers) const {
    if (!n.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": ", where, Where(n), ": expected a mapping, got ", KindOf(n)));
    }
    absl::flat_hash_set<std::string> seen;
    for (const auto& kv : n) {
      // Copies: yaml-cpp's iterator hands out proxies that die with the iterator.
      const YAML::Node k = kv.first;
      const YAML::Node v = kv.second;
      if (!k.IsScalar()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": ", where, Where(k), ": keys must be plain names"));
      }
      const std::string name = k.Scalar();
      auto h = handlers.find(name);
      if (h == handlers.end()) {
        std::vector<std::string> known;
        for (const auto& [key, unused] : handlers) known.push_back(key);
        std::sort(known.begin(), known.end());
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": unknown key '", name, "' in ", where, Where(k),
                         "; known keys: ", absl::StrJoin(known, ", ")));
      }
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_, ": duplicate key '", name, "' in ", where, Where(k)));
      }
      if (absl::Status s = h->second(v, name); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::string_view source() const { return source_; }

 private:
  absl::string_view source_;
};

using Handlers =
    absl::flat_hash_map<std::string,
                        std::function<absl::Status(const YAML::Node&, const std::string&)>>;

absl::Status ParseStaticPort(const Reader& r, const YAML::Node& n, size_t index, StaticPort* out) {
  const std::string where = absl::StrCat("ports[", index, "]");
  bool has_port = false;
  bool has_endpoint = false;
  Handlers h;
  h["port"] = [&](const YAML::Node& v, const std::string& k) {
    has_port = true;
    return r.UintAs(v, absl::StrCat(where, ".", k), 0, dp::kMaxPorts - 1, &out->port);
  };
  h["endpoint"] = [&](const YAML::Node& v, const std::string& k) {
    has_endpoint = true;
    const std::string key = absl::StrCat(where, ".", k);
    if (absl::Status s = r.String(v, key, &out->endpoint); !s.ok()) return s;
    if (auto ep = net::Endpoint::Parse(out->endpoint); !ep.ok()) {
      return KeyError(r.source(), key, v, ep.status().message());
    }
    return absl::OkStatus();
  };
  if (absl::Status s = r.Map(n, where, h); !s.ok()) return s;
  if (!has_port || !has_endpoint) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.source(), ": ", where, Where(n), ": needs both 'port' and 'endpoint'"));
  }
  return absl::OkStatus();
}

absl::Status ParseRule(const Reader& r, const YAML::Node& n, size_t index, cais::Rule* out) {
  const std::string where = absl::StrCat("rules[", index, "]");
  bool has_group = false;
  bool has_inputs = false;
  bool has_outputs = false;
  out->key.layer_id = std::nullopt;
  out->key.chunk_id = std::nullopt;
  out->op = wire::CaisOp::kAllReduce;
  out->host_path = false;
  auto key = [&](const std::string& k) { return absl::StrCat(where, ".", k); };
  Handlers h;
  h["group_id"] = [&](const YAML::Node& v, const std::string& k) {
    has_group = true;
    return r.UintAs(v, key(k), 0, 255, &out->key.group_id);
  };
  h["layer_id"] = [&](const YAML::Node& v, const std::string& k) {
    return r.IdOrWildcard(v, key(k), &out->key.layer_id);
  };
  h["chunk_id"] = [&](const YAML::Node& v, const std::string& k) {
    return r.IdOrWildcard(v, key(k), &out->key.chunk_id);
  };
  h["input_ports"] = [&](const YAML::Node& v, const std::string& k) {
    has_inputs = true;
    return r.Ports(v, key(k), &out->input_ports);
  };
  h["output_ports"] = [&](const YAML::Node& v, const std::string& k) {
    has_outputs = true;
    return r.Ports(v, key(k), &out->output_ports);
  };
  h["op_type"] = [&](const YAML::Node& v, const std::string& k) {
    std::string name;
    if (absl::Status s = r.String(v, key(k), &name); !s.ok()) return s;
    auto op = ParseOpType(name);
    if (!op.ok()) return KeyError(r.source(), key(k), v, op.status().message());
    out->op = *op;
    return absl::OkStatus();
  };
  h["host_path"] = [&](const YAML::Node& v, const std::string& k) {
    return r.Bool(v, key(k), &out->host_path);
  };
  h["uplink"] = [&](const YAML::Node& v, const std::string& k) {
    uint16_t port = 0;
    if (absl::Status s = r.UintAs(v, key(k), 0, dp::kMaxPorts - 1, &port); !s.ok()) return s;
    out->uplink = port;
    return absl::OkStatus();
  };
  if (absl::Status s = r.Map(n, where, h); !s.ok()) return s;
  if (has_group && out->host_path) return absl::OkStatus();  // a policy rule: no ports
  if (!has_group || !has_inputs) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.source(), ": ", where, Where(n), ": needs 'group_id' and 'input_ports'"));
  }
  if (!has_outputs) out->output_ports = out->input_ports;
  return absl::OkStatus();
}

// The olaf_clusters list (key `k`): {src_port, cluster} entries into `*out`.
absl::Status ParseOlafClusters(const Reader& r, const YAML::Node& v, const std::string& k,
                               std::vector<std::pair<uint16_t, uint16_t>>* out) {
  if (!v.IsSequence()) return WrongType(r.source(), k, v, "a list of {src_port, cluster}");
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = absl::StrCat(k, "[", i, "]");
    if (!v[i].IsMap() || !v[i]["src_port"] || !v[i]["cluster"] || v[i].size() != 2) {
      return WrongType(r.source(), where, v[i], "{src_port: P, cluster: C}");
    }
    uint16_t port = 0, cluster = 0;
    if (absl::Status s = r.UintAs(v[i]["src_port"], where + ".src_port", 0, 65535, &port);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = r.UintAs(v[i]["cluster"], where + ".cluster", 0, 65534, &cluster);
        !s.ok()) {
      return s;
    }
    out->emplace_back(port, cluster);
  }
  return absl::OkStatus();
}

// The top-level mapping into `*c`: the settings by their table
// (switchd/settings.cc), the lists here. Keys absent keep their values.
absl::Status ParseTop(const Reader& r, const YAML::Node& root, SwitchdConfig* c) {
  std::map<std::string, settings::YamlHandler> lists;
  lists["ports"] = [&r, c](const YAML::Node& v, const std::string& k) {
    if (!v.IsSequence()) return WrongType(r.source(), k, v, "a list of {port, endpoint}");
    c->ports.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      StaticPort p;
      if (absl::Status s = ParseStaticPort(r, v[i], i, &p); !s.ok()) return s;
      c->ports.push_back(p);
    }
    return absl::OkStatus();
  };
  lists["rules"] = [&r, c](const YAML::Node& v, const std::string& k) {
    if (!v.IsSequence()) return WrongType(r.source(), k, v, "a list of rules");
    c->rules.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      cais::Rule rule;
      if (absl::Status s = ParseRule(r, v[i], i, &rule); !s.ok()) return s;
      c->rules.push_back(rule);
    }
    return absl::OkStatus();
  };
  lists["olaf_clusters"] = [&r, c](const YAML::Node& v, const std::string& k) {
    return ParseOlafClusters(r, v, k, &c->olaf.clusters);
  };
  std::vector<std::string> deprecated;
  if (absl::Status s =
          settings::ApplyYaml(SwitchdSettings(), root, r.source(), c, lists, &deprecated);
      !s.ok()) {
    return s;
  }
  for (const std::string& d : deprecated) {
    spdlog::warn("{}: deprecated key {} (docs/settings.md)", std::string(r.source()), d);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<wire::CaisOp>> ParseOpType(std::string_view name_sv) {
  const absl::string_view name = Av(name_sv);
  if (name == "allreduce") return std::optional<wire::CaisOp>(wire::CaisOp::kAllReduce);
  if (name == "allgather") return std::optional<wire::CaisOp>(wire::CaisOp::kAllGather);
  if (name == "broadcast") return std::optional<wire::CaisOp>(wire::CaisOp::kBroadcast);
  if (name == "reducescatter") return std::optional<wire::CaisOp>(wire::CaisOp::kReduceScatter);
  if (name == "any") return std::optional<wire::CaisOp>(std::nullopt);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown op_type '", name, "'; use allreduce, allgather, broadcast, reducescatter or any"));
}

absl::Status SwitchdConfig::Validate() const {
  // Every setting against its declaration (switchd/settings.cc), then what
  // spans settings: the reducer's own checks, the static tables.
  if (absl::Status s = settings::ValidateAll(SwitchdSettings(), *this); !s.ok()) return s;
  if (absl::Status s = cais.Validate(); !s.ok()) return s;
  if (threads > 1 && program != "cais") {
    return absl::InvalidArgumentError(absl::StrCat("threads=", threads,
                                                   " applies to the cais program only; the ",
                                                   program, " program runs on one thread"));
  }
  if (threads > 1) {
    // Each shard holds sram_bytes / threads: the reducer's own checks on that.
    cais::CaisConfig shard = cais;
    shard.sram_bytes = cais.sram_bytes / threads;
    if (absl::Status s = shard.Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("threads=", threads, ": each shard's ",
                                                     shard.sram_bytes,
                                                     " bytes of slot memory "
                                                     "are too few: ",
                                                     s.message()));
    }
  }
  absl::flat_hash_set<dp::PortId> port_numbers;
  absl::flat_hash_set<net::Endpoint> endpoints;
  for (size_t i = 0; i < ports.size(); ++i) {
    const StaticPort& p = ports[i];
    if (p.port >= dp::kMaxPorts) {
      return absl::InvalidArgumentError(
          absl::StrCat("ports[", i, "].port ", p.port, " out of range [0, 63]"));
    }
    auto ep = net::Endpoint::Parse(p.endpoint);
    if (!ep.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ports[", i, "].endpoint: ", ep.status().message()));
    }
    if (!port_numbers.insert(p.port).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ports[", i, "].port ", p.port, " is listed twice"));
    }
    if (!endpoints.insert(*ep).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ports[", i, "].endpoint ", p.endpoint, " is listed twice"));
    }
  }
  cais::RuleTable table(rules.size() + 1);
  for (size_t i = 0; i < rules.size(); ++i) {
    if (absl::Status s = table.Add(rules[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rules[", i, "]: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplySwitchdConfigYaml(std::string_view yaml, std::string_view source_sv,
                                    SwitchdConfig* config) {
  const absl::string_view source = Av(source_sv);
  // yaml-cpp reports syntax errors by exception; they stop here.
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return absl::OkStatus();  // empty document: all defaults
    return ParseTop(Reader(source), root, config);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": YAML error at line ", e.mark.line + 1, ": ", e.msg));
  }
}

absl::StatusOr<SwitchdConfig> LoadSwitchdConfigYaml(const std::string& path) {
  // Bounded: --config /dev/zero read forever; a read error (/proc/self/mem)
  // started the switch silently with the defaults.
  auto text = util::ReadSmallFile(path, util::kMaxConfigFileBytes, "config file");
  if (!text.ok()) return text.status();
  SwitchdConfig config;
  if (absl::Status s = ApplySwitchdConfigYaml(*text, path, &config); !s.ok()) return s;
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return config;
}

}  // namespace inca::switchd
