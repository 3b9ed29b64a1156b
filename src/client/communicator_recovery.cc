// Communicator: the host recovery protocol (docs/design/cais-client.md,
// "Recovery"): the agreement round every rank runs when an operation did not
// finish through the switch, serving results from a peer's cache, and the
// closing Finalize.
#include <algorithm>
#include <string>
#include <vector>

#include "client/communicator_impl.h"

namespace inca::client_internal {

// The store key where rank `r` marks the last operation it brought to the
// host path (one key per rank, overwritten: bounded).
std::string CommunicatorImpl::AliveKey(int r) const {
  return absl::StrCat("inca/g", o_.group_id, "/recovering/", r);
}

// A host-path wait that failed: a peer silent past host_timeout_ms
// (stopped, hung) or gone. Says which group and operation, and which
// ranks never brought this operation to the host path (issue 18).
absl::Status CommunicatorImpl::HostPathFailed(const SwitchOp& s, const absl::Status& st) {
  std::string silent;
  if (store_) {
    for (int r = 0; r < o_.world_size; ++r) {
      if (r == o_.rank) continue;
      auto v = store_->Get(AliveKey(r), std::chrono::milliseconds(100));
      uint64_t at = 0;
      if (!v.ok() || !absl::SimpleAtoi(*v, &at) || at < op_index_) {
        absl::StrAppend(&silent, silent.empty() ? "" : ",", r);
      }
    }
  }
  return absl::Status(
      st.code(),
      absl::StrCat(
          "group ", o_.group_id, ", operation ", op_index_, " (", std::string(wire::ToString(s.op)),
          " of ", s.count * wire::ElementBytes(s.type),
          " bytes): ", silent.empty() ? std::string("a peer") : absl::StrCat("rank(s) ", silent),
          " did not reach it on the host path (gone, or stopped or hung past host_timeout_ms=",
          o_.host_timeout_ms, "): ", st.message()));
}

// An operation of no elements still takes its index on every rank and is
// checked against the peers' (a peer with elements would otherwise wait
// for it, and the ranks fall out of step): through the agreement round,
// or the host path's exchange. Nothing is sent to the switch.
absl::Status CommunicatorImpl::RunEmpty(const SwitchOp& s) {
  ++op_index_;
  if (!transport_) return o_.check_agreement ? AgreeOnHost(s) : absl::OkStatus();
  return Recover(s, {});
}

// An operation this rank hands to another library: its index and its
// check, as for an operation of no elements.
absl::Status CommunicatorImpl::AgreeDelegated(const DelegatedOp& d) {
  return Enqueue([=, this] {
           desc_ = client::DescribeDelegated(d);
           return RunEmpty(SwitchOp{});
         })
      ->Wait();
}

// The host path's one small exchange per operation (no switch
// configured): every rank's description, checked before Gloo runs.
absl::Status CommunicatorImpl::AgreeOnHost(const SwitchOp& s) {
  std::vector<OpDescriptor> all(static_cast<size_t>(o_.world_size));
  if (auto st = host_->AllGather(&desc_, all.data(), sizeof(OpDescriptor)); !st.ok()) {
    return HostPathFailed(s, absl::UnavailableError(st.message()));
  }
  return Refused(client::CheckAgreement(o_.group_id, op_index_, all));
}
absl::Status CommunicatorImpl::Refused(absl::Status st) {
  if (!st.ok()) Bump(&CommunicatorStats::ops_refused);
  return st;
}

absl::Status CommunicatorImpl::Recover(const SwitchOp& s, const std::vector<uint8_t>& have) {
  absl::Status st = RecoverRounds(s, have);
  if (st.ok() || st.code() != absl::StatusCode::kUnavailable) return st;
  return HostPathFailed(s, st);
}

absl::Status CommunicatorImpl::RecoverRounds(const SwitchOp& s, const std::vector<uint8_t>& have) {
  const size_t n = static_cast<size_t>(o_.world_size);
  // Which operation this rank brought to the host path, for the error
  // that names silent ranks (best effort: one small store write).
  if (store_) (void)store_->Set(AliveKey(o_.rank), absl::StrCat(op_index_));
  for (;;) {
    MaybeRejoin();
    AgreeRecord mine{op_index_, static_cast<uint32_t>(have.size()), 0, desc_};
    if (transport_ && transport_->ready() && want_offload_) mine.flags |= kReady;
    if (cache_.Holds(op_index_ - 1)) mine.flags |= kCacheValid;
    if (std::any_of(have.begin(), have.end(), [](uint8_t h) { return h != 0; })) {
      mine.flags |= kHaveChunks;
    }
    std::vector<AgreeRecord> all(n);
    if (auto st = host_->AllGather(&mine, all.data(), sizeof(AgreeRecord)); !st.ok()) {
      return absl::UnavailableError(absl::StrCat("host path lost while agreeing: ", st.message()));
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& a : all) {
      lo = std::min(lo, a.op_index);
      hi = std::max(hi, a.op_index);
    }
    if (lo != hi) {
      // Some ranks finished op `lo` through the switch, others did not:
      // ranks ahead that kept what the others need serve it.
      const bool rs = op_index_ == lo ? s.op == CaisOp::kReduceScatter : cache_.reduce_scatter();
      const int server = PickServer(all, hi, rs);
      if (server < 0) {
        if (op_index_ == lo) {
          switch_mode_ = false;
          return absl::DataLossError(
              "the switch was lost while peers had already finished this operation, and "
              "none kept its result (recovery_cache_bytes too small)");
        }
        continue;  // the ranks behind give up on their op; agree again on ours
      }
      if (op_index_ == lo) {
        if (s.op == CaisOp::kReduceScatter) {
          std::vector<uint8_t> packed = client::PackedInput(s, o_.world_size);
          if (auto st = ReduceScatterOnHost(s, &packed); !st.ok()) return st;
        } else {
          std::vector<uint8_t> tmp(client::ResultBytes(s, o_.world_size));
          if (auto st = host_->Broadcast(tmp.data(), tmp.size(), server); !st.ok()) return st;
          Restore(s, tmp);
        }
        cache_.Keep(op_index_, s);
        switch_mode_ = false;  // the others are on the host path for the next op
        Bump(&CommunicatorStats::chunks_recovered_on_host, have.size());
        return absl::OkStatus();
      }
      if (auto st = ServeFromCache(server); !st.ok()) return st;
      continue;
    }
    // Everyone is at this op: the same op? (A refusal keeps the group where
    // it is: on the switch if every rank is ready for it.)
    const bool resume = std::all_of(all.begin(), all.end(),
                                    [](const AgreeRecord& a) { return (a.flags & kReady) != 0; });
    std::vector<OpDescriptor> descs(n);
    for (size_t r = 0; r < n; ++r) descs[r] = all[r].desc;
    if (auto st = client::CheckAgreement(o_.group_id, op_index_, descs); !st.ok()) {
      if (resume && !switch_mode_) Bump(&CommunicatorStats::rejoins);
      switch_mode_ = resume;
      return Refused(st);
    }
    if (s.count == 0) {
      // The ranks agree on an operation of no elements: nothing to move, and
      // nothing for a peer to be served but its completion.
      cache_.Keep(op_index_, s);
      if (resume && !switch_mode_) Bump(&CommunicatorStats::rejoins);
      switch_mode_ = resume;
      return absl::OkStatus();
    }
    const bool any_chunks = std::any_of(
        all.begin(), all.end(), [](const AgreeRecord& a) { return (a.flags & kHaveChunks) != 0; });
    const size_t bytes = s.count * wire::ElementBytes(s.type);
    absl::Status st = s.broadcast                      ? host_->Broadcast(s.data, bytes, s.root)
                      : s.op == CaisOp::kAllGather     ? host_->AllGather(s.in, s.out, bytes)
                      : s.op == CaisOp::kReduceScatter ? HostReduceScatter(s)
                      : any_chunks                     ? RecoverAllReduce(s, have)
                                   : host_->AllReduce(s.data, s.count, s.type, s.reduce);
    if (!st.ok()) return st;
    cache_.Keep(op_index_, s);
    if (resume && !switch_mode_) Bump(&CommunicatorStats::rejoins);
    switch_mode_ = resume;
    return absl::OkStatus();
  }
}

// The rank that serves peers stuck on the op before `ahead`: the lowest
// rank at `ahead` that kept its result; -1 if none. A ReduceScatter needs
// every rank ahead to have kept its input (each contributes to the
// others' blocks).
int CommunicatorImpl::PickServer(const std::vector<AgreeRecord>& all, uint64_t ahead, bool rs) {
  int server = -1;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].op_index != ahead) continue;
    const bool valid = (all[r].flags & kCacheValid) != 0;
    if (rs && !valid) return -1;
    if (valid && server < 0) server = static_cast<int>(r);
  }
  return server;
}

// A rank ahead helps the ranks behind finish the op it cached: broadcasts
// the result, or joins the host all-reduce of a ReduceScatter's input.
absl::Status CommunicatorImpl::ServeFromCache(int server) {
  std::vector<uint8_t> served(cache_.bytes().begin(), cache_.bytes().end());
  absl::Status st =
      cache_.reduce_scatter()
          ? host_->AllReduce(served.data(), served.size() / wire::ElementBytes(cache_.type()),
                             cache_.type(), cache_.reduce())
          : host_->Broadcast(served.data(), served.size(), server);
  if (st.ok() && o_.rank == server) Bump(&CommunicatorStats::served_peers);
  return st;
}

// One more agreement round, at op_index + 1, in which this rank serves
// peers still recovering the last operation; returns once every rank
// has reached it.
absl::Status CommunicatorImpl::Finalize() {
  ++op_index_;
  const size_t n = static_cast<size_t>(o_.world_size);
  for (int round = 0; round < 4 * o_.world_size + 4; ++round) {
    AgreeRecord mine{op_index_, 0, 0, client::Leaving()};
    if (cache_.Holds(op_index_ - 1)) mine.flags |= kCacheValid;
    std::vector<AgreeRecord> all(n);
    if (auto st = host_->AllGather(&mine, all.data(), sizeof(AgreeRecord)); !st.ok()) return st;
    uint64_t lo = UINT64_MAX;
    for (const auto& a : all) lo = std::min(lo, a.op_index);
    if (lo == op_index_) return absl::OkStatus();
    const int server = PickServer(all, op_index_, cache_.reduce_scatter());
    if (server < 0) continue;  // the lagging ranks fail their op; agree again
    if (auto st = ServeFromCache(server); !st.ok()) return st;
  }
  return absl::DeadlineExceededError("peers did not reach the end of the last operation");
}

void CommunicatorImpl::Restore(const SwitchOp& s, const std::vector<uint8_t>& result) {
  if (result.empty()) return;  // no elements: the buffers may be null
  if (s.op == CaisOp::kAllGather) {
    const size_t b = s.count * wire::ElementBytes(s.type);
    for (int r = 0; r < o_.world_size; ++r) {
      std::memcpy(s.out + static_cast<size_t>(r) * s.block_stride_bytes,
                  result.data() + static_cast<size_t>(r) * b, b);
    }
  } else {
    std::memcpy(s.data, result.data(), result.size());
  }
}

// Chunks some rank got from the switch are broadcast from it; the rest
// are reduced from the inputs, which those chunks still hold.
absl::Status CommunicatorImpl::RecoverAllReduce(const SwitchOp& s,
                                                const std::vector<uint8_t>& have) {
  const size_t n = static_cast<size_t>(o_.world_size);
  const size_t total = have.size();
  std::vector<uint8_t> all(n * total);
  if (total > 0) {
    if (auto st = host_->AllGather(have.data(), all.data(), total); !st.ok()) return st;
  }
  const size_t esize = wire::ElementBytes(s.type);
  const size_t per = o_.chunk_size / esize;
  auto source = [&](size_t c) -> int {
    for (size_t r = 0; r < n; ++r) {
      if (all[r * total + c] != 0) return static_cast<int>(r);
    }
    return -1;
  };
  size_t recovered = 0;
  for (size_t c = 0; c < total;) {
    const int src = source(c);
    size_t end = c + 1;
    while (end < total && source(end) == src) ++end;
    const size_t first = c * per, last = std::min(s.count, end * per);
    uint8_t* p = s.data + first * esize;
    const absl::Status st = src < 0 ? host_->AllReduce(p, last - first, s.type, s.reduce)
                                    : host_->Broadcast(p, (last - first) * esize, src);
    if (!st.ok()) return st;
    if (src < 0) recovered += end - c;
    c = end;
  }
  Bump(&CommunicatorStats::chunks_recovered_on_host, recovered);
  return absl::OkStatus();
}

}  // namespace inca::client_internal
