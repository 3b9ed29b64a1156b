#include "switchd/shards.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace inca::switchd {

namespace {

// Ephemeral bases tried when the ports above one are taken.
constexpr int kEphemeralTries = 16;

absl::StatusOr<std::vector<std::unique_ptr<SwitchServer>>> Bind(const SwitchdConfig& config,
                                                                const net::Endpoint& listen,
                                                                const net::TimeSource& clock) {
  const uint32_t n = config.threads;
  std::vector<std::unique_ptr<SwitchServer>> out;
  for (uint32_t i = 0; i < n; ++i) {
    SwitchdConfig c = config;
    c.cais.sram_bytes = config.cais.sram_bytes / n;
    c.loss_seed = config.loss_seed + i;
    const uint32_t port = i == 0 ? listen.port() : out[0]->local_port() + i;
    if (port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("threads=", n, " from port ", out[0]->local_port(), " passes port 65535"));
    }
    c.listen = listen.WithPort(static_cast<uint16_t>(port)).ToString();
    auto s = SwitchServer::Create(c, clock);
    if (!s.ok()) {
      return absl::Status(s.status().code(),
                          absl::StrCat("shard ", i, " of ", n, ": ", s.status().message()));
    }
    (*s)->SetShard(static_cast<uint8_t>(i), static_cast<uint8_t>(n));
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SwitchShards>> SwitchShards::Create(const SwitchdConfig& config,
                                                                   const net::TimeSource& clock) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto listen = net::Endpoint::Resolve(config.listen);
  if (!listen.ok()) return listen.status();
  std::unique_ptr<SwitchShards> shards(new SwitchShards);
  const int tries = listen->port() == 0 && config.threads > 1 ? kEphemeralTries : 1;
  absl::Status last;
  for (int t = 0; t < tries; ++t) {
    auto bound = Bind(config, *listen, clock);
    if (bound.ok()) {
      shards->shards_ = std::move(*bound);
      return shards;
    }
    last = bound.status();
    if (!absl::IsUnavailable(last)) break;
  }
  return last;
}

SwitchShards::~SwitchShards() = default;

std::vector<SwitchServer*> SwitchShards::servers() const {
  std::vector<SwitchServer*> out;
  for (const auto& s : shards_) out.push_back(s.get());
  return out;
}

void SwitchShards::Stop() noexcept {
  for (const auto& s : shards_) s->Stop();
}

absl::Status SwitchShards::Run() {
  absl::Mutex mu;
  absl::Status first;
  auto serve = [&](SwitchServer* s) {
    absl::Status r = s->Run();
    if (!r.ok()) {
      Stop();  // one shard failing stops the switch
      absl::MutexLock lock(&mu);
      first.Update(r);
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < shards_.size(); ++i) threads.emplace_back(serve, shards_[i].get());
  serve(shards_[0].get());
  Stop();  // shard 0 stopped: so do the others
  for (auto& t : threads) t.join();
  return first;
}

counters::SwitchCounters SwitchShards::counters() const {
  counters::SwitchCounters sum = shards_[0]->counters();
  for (size_t i = 1; i < shards_.size(); ++i) sum.Add(shards_[i]->counters());
  return sum;
}

}  // namespace inca::switchd
