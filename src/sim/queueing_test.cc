// The simulator against queueing theory nobody here wrote: a FIFO queue
// (the FIFO policy of the OLAF switch, paced at a line rate) fed by Poisson
// arrivals matches the Pollaczek-Khinchine mean sojourn time of M/G/1 (and
// so the M/M/1 and M/D/1 figures), and the mean Age of Information of an
// M/M/1 FCFS queue matches Kaul, Yates and Gruteser, "Real-time status: How
// often should one update?", INFOCOM 2012: Δ = (1/μ)(1 + 1/ρ + ρ²/(1−ρ)).
#include <gtest/gtest.h>

#include <cmath>

#include "inca/sim/olaf_nodes.h"
#include "inca/sim/simulator.h"

namespace inca::sim {
namespace {

constexpr double kRateBps = 1e9;  // 1 Gbit/s: 1 byte = 8 ns

struct QueueRun {
  double mean_sojourn_s = 0;
  double mean_aom_s = 0;
  uint64_t delivered = 0;
};

// Poisson arrivals at `lambda`/s of UPDATE datagrams whose size (header
// included) is drawn by `size`; one FIFO switch paced at kRateBps with no
// framing overhead; the PS measures sojourn (generation to delivery) and AoM.
QueueRun RunQueue(double lambda, std::function<uint32_t(std::mt19937_64&)> payload, uint64_t n,
                  uint64_t seed) {
  Simulator sim;
  Network net(&sim);
  double sojourn_sum = 0;
  uint64_t delivered = 0;
  const TimeNs warm = static_cast<TimeNs>(2000 / lambda * 1e9);  // 2,000 arrivals
  PsNodeConfig pc;
  pc.ps.apply = [&](const olaf::AppliedUpdate& u) {
    if (static_cast<TimeNs>(u.gen_time_ns) < warm) return;
    sojourn_sum += static_cast<double>(u.applied_ns - static_cast<TimeNs>(u.gen_time_ns)) * 1e-9;
    ++delivered;
  };
  pc.ps.reassembly.max_pending = 1 << 16;
  pc.ps.update_payload_bytes = 60000;
  auto* ps = net.Add(*PsNode::Create("ps", std::move(pc)));
  olaf::OlafSwitchConfig sc;
  sc.policy = olaf::QueuePolicy::kFifo;
  sc.depth = 512;  // no loss at rho 0.5
  sc.max_payload_bytes = 60000;
  sc.egress_rate_bps = static_cast<uint64_t>(kRateBps);
  sc.egress_overhead_bytes = 0;
  sc.delta_t_ns = INT64_MAX / 4;  // no eviction: a plain FIFO
  auto* sw = net.Add(*SwitchNode::Create("sw", sc));
  net.Connect(sw, ps, LinkConfig{kRateBps, 0, 1 << 20, 0, 1 << 20});
  PoissonSourceConfig src;
  src.rate_per_s = lambda;
  src.size_bytes = std::move(payload);
  src.seed = seed;
  src.max_updates = n;
  auto* source = net.Add(std::make_unique<PoissonSource>("src", src));
  net.Connect(source, sw, LinkConfig{0, 0, 1 << 20, 0, 1 << 20});
  sim.Schedule(warm, [&] { ps->mutable_core().ResetAomWindow(sim.now()); });
  net.Start();
  sim.RunUntil(static_cast<TimeNs>((static_cast<double>(n) / lambda + 1) * 1e9));
  QueueRun r;
  r.delivered = delivered;
  r.mean_sojourn_s = sojourn_sum / static_cast<double>(delivered);
  // The AoM window ends at the last delivery, not at the (later) run end.
  const auto st = ps->core().aom().Stats(0, ps->core().aom().Stats(0, sim.now())->last_delivery_ns);
  r.mean_aom_s = st->average_ns * 1e-9;
  EXPECT_TRUE(sw->program().counters().Conserved());
  EXPECT_EQ(sw->program().queue().totals().arrival_drops(), 0u);
  return r;
}

constexpr uint32_t kHeader = 40;  // OLAF UPDATE header: part of the service time

// Payload sizes drawn from an exponential distribution of mean `mean`
// bytes, whole 4-byte elements, 4 to 60,000 bytes.
auto ExponentialPayload(double mean) {
  return [mean](std::mt19937_64& g) {
    const double u = static_cast<double>(g() >> 11) * 0x1.0p-53;
    const double x = -std::log(1 - u) * mean;
    return static_cast<uint32_t>(std::clamp(std::llround(x / 4) * 4, 4LL, 60000LL));
  };
}

TEST(QueueingTheoryTest, MD1MeanSojournMatchesPollaczekKhinchine) {
  const uint32_t payload = 4960;  // 5,000 bytes on the wire: S = 40 us
  const double s = (payload + kHeader) * 8 / kRateBps, mu = 1 / s;
  for (double rho : {0.3, 0.7}) {
    const double lambda = rho * mu;
    const QueueRun r = RunQueue(
        lambda, [](std::mt19937_64&) { return 4960u; }, 150'000, 11);
    const double wq = rho / (2 * mu * (1 - rho));  // M/D/1
    EXPECT_NEAR(r.mean_sojourn_s, wq + s, 0.03 * (wq + s)) << "rho " << rho;
  }
}

// Exponential payloads with a 40-byte header: service is a + Exp, an M/G/1
// queue within 1% of M/M/1; compared with the exact P-K figure and, with a
// wider tolerance, with the M/M/1 formula itself.
TEST(QueueingTheoryTest, MM1MeanSojournMatchesTheory) {
  const double mean_payload = 4000;
  const double a = kHeader * 8 / kRateBps, m = mean_payload * 8 / kRateBps;
  const double es = a + m, es2 = a * a + 2 * a * m + 2 * m * m;
  const double rho = 0.5, lambda = rho / es;
  auto exp_payload = ExponentialPayload(mean_payload);
  const QueueRun r = RunQueue(lambda, exp_payload, 200'000, 12);
  const double pk = lambda * es2 / (2 * (1 - rho)) + es;
  EXPECT_NEAR(r.mean_sojourn_s, pk, 0.04 * pk);
  const double mm1 = 1 / (1 / es - lambda);
  EXPECT_NEAR(r.mean_sojourn_s, mm1, 0.06 * mm1);
}

TEST(QueueingTheoryTest, MM1AverageAgeMatchesKaulYatesGruteser) {
  const double mean_payload = 4000;
  const double es = (kHeader + mean_payload) * 8 / kRateBps, mu = 1 / es;
  auto exp_payload = ExponentialPayload(mean_payload);
  for (double rho : {0.3, 0.53, 0.8}) {
    const QueueRun r = RunQueue(rho * mu, exp_payload, 200'000, 13);
    const double kyg = (1 / mu) * (1 + 1 / rho + rho * rho / (1 - rho));
    EXPECT_NEAR(r.mean_aom_s, kyg, 0.05 * kyg) << "rho " << rho;
  }
}

}  // namespace
}  // namespace inca::sim
