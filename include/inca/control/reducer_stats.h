// The CAIS reducer's figures as the control API reports them (GetStats):
// what SwitchControl, the monitor and cais-cli read, computed once.
#pragma once

#include <span>
#include <string>

#include "inca/cais/reducer.h"
#include "inca/control/stats.h"

namespace inca::control {

// Share of chunk outcomes that ended in a fallback to host collectives:
//   (timeouts + drops_by_reason[chunk_closed]) / (completed_chunks + timeouts)
// i.e. chunks released by timeout plus late packets answered with a fallback
// notice, over chunks that finished either way. 0 when nothing finished;
// capped at 1 (late packets can outnumber the chunks they belong to).
double FallbackRatio(const cais::GroupCounters& c);

// The reducer's part of a Stats: SRAM usage, rates, the since-start
// fallback ratio, slot-holding times, drops by reason, conservation and
// every group that received a packet or holds SRAM (with its share, its
// offload range and whether a rule still names it). Leaves `counters` and
// ingress_queue_delay_us (the server's) alone. Runs on the reducer's owner
// thread.
void CollectReducerStats(const cais::CaisReducer& reducer, Stats* st);

// Mean ingress queueing delay since start, us (0 before the first sample).
double IngressQueueDelayUs(const counters::HostCounters& c);

// One Stats for a switch of several data-plane shards (inca-switchd
// --threads): counters, groups, drops, rates and slot memory summed; the
// ratios and slot-holding quantiles recomputed from the summed counters
// (the histograms add, so they are exact); usage weighted by each shard's
// slot memory; `shards` gets each part's counters, named by `endpoints[i]`.
// One part is returned as it is.
Stats MergeShards(std::span<const Stats> parts, std::span<const std::string> endpoints);

}  // namespace inca::control
