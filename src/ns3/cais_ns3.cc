#include "inca/ns3/cais_ns3.h"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/ns3/cais_apps.h"
#include "inca/wire/cais.h"
#include "ns3/inca_links.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"

namespace inca {

namespace n3 = ::ns3;

namespace {

constexpr uint16_t kSwitchPort = 7000;

// Rank r's element i, and the exact sum over `hosts` ranks: small integers,
// so that every order of f32 additions gives the same result.
float Input(int r, size_t i) {
  return static_cast<float>(i % 251 + static_cast<size_t>(r));
}
float Sum(int hosts, size_t i) {
  return static_cast<float>(static_cast<size_t>(hosts) * (i % 251) +
                            static_cast<size_t>(hosts * (hosts - 1) / 2));
}

}  // namespace

absl::Status CaisNs3Config::Validate() const {
  auto bad = [](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("cais on ns-3: ", what));
  };
  if (hosts < 2 || hosts > 64) return bad("hosts must be in [2, 64]");
  if (!(link_gbps > 0) || !(delay_us >= 0)) return bad("link_gbps and delay_us out of range");
  if (bytes < 4 || bytes % 4 || bytes > (uint64_t{1} << 30)) {
    return bad("bytes must be a multiple of 4 in [4, 1 GiB]");
  }
  if (chunk_size < 4 || chunk_size % 4 || chunk_size > 8952) {
    return bad("chunk_size must be a multiple of 4 in [4, 8952]");
  }
  return absl::OkStatus();
}

absl::StatusOr<CaisNs3Result> RunCaisAllReduceOnNs3(const CaisNs3Config& c) {
  if (auto st = c.Validate(); !st.ok()) return st;
  std::mt19937_64 draw(c.seed);
  const auto seq_start = static_cast<uint32_t>(draw());
  const uint64_t job = draw() | 1;
  cais::CaisConfig cc;
  cc.max_payload_bytes = c.chunk_size;
  n3::Ptr<n3::Node> sw = n3::CreateObject<n3::Node>();
  n3::InternetStackHelper stack;
  stack.Install(sw);
  auto sw_app = n3::CreateObject<CaisSwitchApp>();
  if (auto st = sw_app->Configure(cc, kSwitchPort, seq_start); !st.ok()) {
    n3::Simulator::Destroy();
    return st;
  }
  sw->AddApplication(sw_app);
  ns3_links::Links links;
  const uint32_t mtu = std::max<uint32_t>(
      ns3_links::kMtu, static_cast<uint32_t>(28 + wire::kCaisHeaderBytes + c.chunk_size));
  const size_t n = c.bytes / 4;
  std::vector<std::vector<float>> data(static_cast<size_t>(c.hosts), std::vector<float>(n));
  std::vector<n3::Ptr<CaisRankApp>> ranks;
  int joined = 0, done = 0;
  dp::TimeNs started = 0, ended = 0;
  for (int r = 0; r < c.hosts; ++r) {
    for (size_t i = 0; i < n; ++i) data[static_cast<size_t>(r)][i] = Input(r, i);
    n3::Ptr<n3::Node> host = n3::CreateObject<n3::Node>();
    stack.Install(host);
    links.Connect(host, sw, c.link_gbps, c.delay_us, 4096, mtu);
    auto app = n3::CreateObject<CaisRankApp>();
    app->Configure(
        r, c.hosts, c.chunk_size, n3::InetSocketAddress(links.Address(1), kSwitchPort), job,
        [&](int) {
          if (++joined < c.hosts) return;
          started = n3::Simulator::Now().GetNanoSeconds();
          for (size_t k = 0; k < ranks.size(); ++k) ranks[k]->Begin(&data[k]);
        },
        [&](int) {
          ++done;
          ended = n3::Simulator::Now().GetNanoSeconds();
          if (done == c.hosts) n3::Simulator::Stop();
        });
    host->AddApplication(app);
    ranks.push_back(app);
  }
  CaisNs3Result out;
  // Bounded: the all-reduce at a tenth of the link's rate, and a second.
  const double bound_s = 1 + 10 * static_cast<double>(c.bytes) * 8 / (c.link_gbps * 1e9);
  ns3_links::RunAndDestroy(
      n3::Seconds(bound_s),
      [&] {
        for (const auto& r : ranks) {
          out.completed += r->complete() ? 1 : 0;
          out.resent += r->resent();
        }
        out.exact = out.completed == c.hosts;
        for (size_t k = 0; k < data.size() && out.exact; ++k) {
          for (size_t i = 0; i < n; ++i) {
            if (data[k][i] != Sum(c.hosts, i)) {
              out.exact = false;
              break;
            }
          }
        }
        out.time_ms = done == c.hosts ? static_cast<double>(ended - started) / 1e6 : 0;
      },
      &out.events, &out.wall_s);
  return out;
}

}  // namespace inca
