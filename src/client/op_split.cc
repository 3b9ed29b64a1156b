#include "client/op_split.h"

#include <algorithm>

namespace inca::client {

using wire::CaisOp;

size_t PieceElements(const SwitchOp& whole, uint32_t chunk_size, int world_size) {
  const size_t per = std::max<size_t>(1, chunk_size / wire::ElementBytes(whole.type));
  const bool blocked =
      whole.op == wire::CaisOp::kAllGather || whole.op == wire::CaisOp::kReduceScatter;
  const uint64_t max_chunks =
      blocked ? kMaxPieceChunks / static_cast<uint64_t>(world_size) : kMaxPieceChunks;
  return static_cast<size_t>(max_chunks) * per;
}

SwitchOp PieceOf(const SwitchOp& whole, size_t offset, size_t count) {
  SwitchOp s = whole;
  s.count = count;
  const size_t off = offset * wire::ElementBytes(whole.type);
  if (whole.data != nullptr) s.data = whole.data + off;
  if (whole.in != nullptr) s.in = whole.in + off;
  if (whole.out != nullptr) s.out = whole.out + off;
  if (whole.mirror != nullptr) s.mirror = whole.mirror + off;
  return s;
}

std::vector<Stripe> StripeOp(const SwitchOp& op, uint32_t chunk_size, size_t k) {
  const size_t per = std::max<size_t>(1, chunk_size / wire::ElementBytes(op.type));
  const size_t esize = wire::ElementBytes(op.type);
  // Chunks of the operation (all-reduce, broadcast) or of each block.
  const uint64_t chunks = (op.count + per - 1) / per;
  std::vector<Stripe> out;
  k = std::max<size_t>(1, k);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t c0 = chunks * i / k, c1 = chunks * (i + 1) / k;
    if (c1 == c0) continue;
    const size_t e0 = static_cast<size_t>(c0) * per;
    const size_t e1 = std::min(op.count, static_cast<size_t>(c1) * per);
    Stripe st;
    st.op = op;
    st.op.count = e1 - e0;
    st.first = static_cast<uint32_t>(c0);
    const size_t off = e0 * esize;
    if (op.data != nullptr) st.op.data = op.data + off;
    if (op.in != nullptr) st.op.in = op.in + off;
    if (op.out != nullptr) st.op.out = op.out + off;  // block_stride_bytes stays
    if (op.mirror != nullptr) st.op.mirror = op.mirror + off;
    out.push_back(st);
  }
  return out;
}

SwitchPhaseResult MergeStripes(const SwitchOp& op, uint32_t chunk_size, int world_size,
                               const std::vector<Stripe>& stripes,
                               const std::vector<SwitchPhaseResult>& results) {
  SwitchPhaseResult r;
  r.total_chunks = static_cast<uint32_t>(ChunkCount(op, chunk_size, world_size));
  r.have.assign(r.total_chunks, 0);
  r.complete = !stripes.empty();
  const bool blocked = op.op == CaisOp::kAllGather || op.op == CaisOp::kReduceScatter;
  const size_t per = std::max<size_t>(1, chunk_size / wire::ElementBytes(op.type));
  const uint64_t cpb = (op.count + per - 1) / per;  // chunks per block (blocked ops)
  for (size_t i = 0; i < stripes.size() && i < results.size(); ++i) {
    const SwitchPhaseResult& x = results[i];
    const uint64_t stripe_cpb = (stripes[i].op.count + per - 1) / per;
    for (size_t j = 0; j < x.have.size(); ++j) {
      // Chunk j of the stripe: chunk first + j of the operation, or of its
      // block j / stripe_cpb.
      const uint64_t c = blocked ? (j / stripe_cpb) * cpb + stripes[i].first + j % stripe_cpb
                                 : stripes[i].first + j;
      if (c < r.have.size()) r.have[c] = x.have[j];
    }
    r.complete = r.complete && x.complete;
    AddCounters(x, &r);
  }
  return r;
}

void AddCounters(const SwitchPhaseResult& x, SwitchPhaseResult* into) {
  into->fallback_notice = into->fallback_notice || x.fallback_notice;
  into->declined = into->declined || x.declined;
  into->disagreed = into->disagreed || x.disagreed;
  if (x.declined_reason != 0) into->declined_reason = x.declined_reason;
  into->sent += x.sent;
  into->retransmitted += x.retransmitted;
  into->requests += x.requests;
  into->notices += x.notices;
  into->tail_probes += x.tail_probes;
}

}  // namespace inca::client
