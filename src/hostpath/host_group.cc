// HostGroup: see host_group.h.
//
// Reductions run through Gloo's ring allreduce with a reduce function built on
// inca::reduce::ReduceInto, so element semantics (i32 wrap, NaN-propagating
// max/min, f32 accumulation) are the switch's. f16/bf16 buffers are widened
// once into an f32 scratch buffer, reduced as f32 and narrowed once (RNE).
//
// Every collective call takes the next Gloo tag (all ranks make the same
// calls in the same order, so tags agree). After a Gloo error the mesh is in
// an unknown state (partial transfers, closed pairs); the group then refuses
// further collectives with FailedPrecondition.

#include "hostpath/host_group.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/attr.h"
#include "gloo/transport/tcp/device.h"
#include "reduce/kernels.h"

namespace inca::hostpath {
namespace {

using wire::DType;
using wire::ReduceOp;

// Gloo's connectFullMesh calls get() on keys other ranks may not have set
// yet, relying on the store's get() to block; the store's own default
// (30 s) would then bound Create instead of options.timeout. This adapter
// makes every get() a wait(key, timeout) followed by a get() of a key that
// now exists.
class TimeoutStore final : public gloo::rendezvous::Store {
 public:
  TimeoutStore(gloo::rendezvous::Store& inner, std::chrono::milliseconds timeout)
      : inner_(inner), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    inner_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    inner_.wait({key}, timeout_);
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { inner_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    inner_.wait(keys, timeout);
  }

 private:
  gloo::rendezvous::Store& inner_;
  std::chrono::milliseconds timeout_;
};

// Runs `fn`, turning Gloo's exceptions into a Status naming `what`.
template <typename Fn>
absl::Status GuardGloo(const char* what, Fn&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const gloo::IoException& e) {
    return absl::UnavailableError(absl::StrCat("hostpath ", what, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("hostpath ", what, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat("hostpath ", what, ": unknown exception"));
  }
}

static_assert(std::endian::native == std::endian::little,
              "f32/i32 buffers are reduced in place as accumulators");

bool ValidDType(DType t) {
  return static_cast<uint8_t>(t) < wire::kDTypeCount;
}
bool ValidOp(ReduceOp op) {
  return static_cast<uint8_t>(op) < wire::kReduceOpCount;
}

}  // namespace

struct HostGroup::Impl {
  HostGroupOptions options;
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;  // null when world_size == 1
  uint32_t next_tag = 0;
  absl::Status broken;            // non-OK after a failed collective
  std::vector<uint32_t> scratch;  // f32 accumulators / aligned copies

  absl::Status BeginCollective(uint32_t* tag) {
    *tag = next_tag++;
    if (!broken.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("hostpath: group unusable after an earlier error: ", broken.message()));
    }
    return absl::OkStatus();
  }

  absl::Status Record(absl::Status s) {
    if (!s.ok()) broken = s;
    return s;
  }

  // In-place allreduce of `count` 4-byte accumulators (f32 or wrapping u32)
  // at 4-byte aligned `buf`.
  absl::Status AllReduceAcc(void* buf, size_t count, DType acc_type, ReduceOp op, uint32_t tag) {
    return Record(GuardGloo("allreduce", [&] {
      gloo::AllreduceOptions opts(context);
      opts.setOutput(static_cast<uint32_t*>(buf), count);
      opts.setReduceFunction([op, acc_type](void* c, const void* a, const void* b, size_t n) {
        const auto* ab = static_cast<const uint8_t*>(a);
        const auto* bb = static_cast<const uint8_t*>(b);
        if (c == a) {
          reduce::ReduceInto(op, acc_type, c, bb, n);
        } else if (c == b) {
          // Every op is commutative; avoids clobbering b before reading it.
          reduce::ReduceInto(op, acc_type, c, ab, n);
        } else {
          std::memmove(c, a, n * reduce::kAccBytesPerElement);
          reduce::ReduceInto(op, acc_type, c, bb, n);
        }
      });
      opts.setTag(tag);
      opts.setTimeout(options.timeout);
      gloo::allreduce(opts);
    }));
  }
};

HostGroup::HostGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostGroup::~HostGroup() = default;

int HostGroup::rank() const {
  return impl_->options.rank;
}
int HostGroup::world_size() const {
  return impl_->options.world_size;
}

absl::StatusOr<std::unique_ptr<HostGroup>> HostGroup::Create(
    const HostGroupOptions& options, std::shared_ptr<gloo::rendezvous::Store> store) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("hostpath create: rank ", options.rank,
                                                   " / world_size ", options.world_size,
                                                   " out of range"));
  }
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError("hostpath create: timeout must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->store = std::move(store);
  if (options.world_size == 1) {
    // Nothing to connect: collectives are local no-ops/copies.
    return std::unique_ptr<HostGroup>(new HostGroup(std::move(impl)));
  }
  if (impl->store == nullptr) {
    return absl::InvalidArgumentError("hostpath create: a store is required when world_size > 1");
  }
  absl::Status s = GuardGloo("create (connect full mesh)", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.bind_ip;
    impl->device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.store_prefix, *impl->store);
    TimeoutStore bounded(prefixed, options.timeout);
    context->connectFullMesh(bounded, impl->device);
    impl->context = std::move(context);
  });
  if (!s.ok()) return s;
  return std::unique_ptr<HostGroup>(new HostGroup(std::move(impl)));
}

absl::Status HostGroup::AllReduce(void* data, size_t count, wire::DType type, wire::ReduceOp op) {
  Impl& im = *impl_;
  uint32_t tag = 0;
  if (absl::Status s = im.BeginCollective(&tag); !s.ok()) return s;
  if (!ValidDType(type) || !ValidOp(op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hostpath allreduce: bad dtype ", static_cast<int>(type), " or op ", static_cast<int>(op)));
  }
  if (count == 0 || im.options.world_size == 1) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("hostpath allreduce: null data");
  if (count > std::numeric_limits<size_t>::max() / reduce::kAccBytesPerElement) {
    return absl::InvalidArgumentError("hostpath allreduce: count too large");
  }
  auto* bytes = static_cast<uint8_t*>(data);

  if (type == DType::kF16 || type == DType::kBF16) {
    im.scratch.resize(count);
    reduce::LoadAcc(type, bytes, count, im.scratch.data());
    absl::Status s = im.AllReduceAcc(im.scratch.data(), count, DType::kF32, op, tag);
    if (s.ok()) reduce::StoreAcc(type, im.scratch.data(), count, bytes);
    return s;
  }

  // f32 / i32: the wire layout is the accumulator layout (little-endian
  // hosts); reduce in place unless the buffer is misaligned for the kernels.
  const size_t nbytes = count * reduce::kAccBytesPerElement;
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint32_t) == 0) {
    return im.AllReduceAcc(data, count, type, op, tag);
  }
  im.scratch.resize(count);
  std::memcpy(im.scratch.data(), data, nbytes);
  absl::Status s = im.AllReduceAcc(im.scratch.data(), count, type, op, tag);
  if (s.ok()) std::memcpy(data, im.scratch.data(), nbytes);
  return s;
}

absl::Status HostGroup::Broadcast(void* data, size_t bytes, int root) {
  Impl& im = *impl_;
  uint32_t tag = 0;
  if (absl::Status s = im.BeginCollective(&tag); !s.ok()) return s;
  if (root < 0 || root >= im.options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("hostpath broadcast: root ", root, " out of range"));
  }
  if (bytes == 0 || im.options.world_size == 1) return absl::OkStatus();
  if (data == nullptr) return absl::InvalidArgumentError("hostpath broadcast: null data");
  return im.Record(GuardGloo("broadcast", [&] {
    gloo::BroadcastOptions opts(im.context);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(im.options.timeout);
    gloo::broadcast(opts);
  }));
}

absl::Status HostGroup::AllGather(const void* in, void* out, size_t bytes_per_rank) {
  Impl& im = *impl_;
  uint32_t tag = 0;
  if (absl::Status s = im.BeginCollective(&tag); !s.ok()) return s;
  if (bytes_per_rank == 0) return absl::OkStatus();
  if (in == nullptr || out == nullptr) {
    return absl::InvalidArgumentError("hostpath allgather: null buffer");
  }
  const auto world = static_cast<size_t>(im.options.world_size);
  if (bytes_per_rank > std::numeric_limits<size_t>::max() / world) {
    return absl::InvalidArgumentError("hostpath allgather: size too large");
  }
  // Put our contribution in its slot first (memmove: `in` may overlap
  // `out`), then gather in place; Gloo's own copy would be a memcpy that
  // must not see overlapping buffers.
  auto* slot = static_cast<uint8_t*>(out) + static_cast<size_t>(im.options.rank) * bytes_per_rank;
  if (in != slot) std::memmove(slot, in, bytes_per_rank);
  if (world == 1) return absl::OkStatus();
  return im.Record(GuardGloo("allgather", [&] {
    gloo::AllgatherOptions opts(im.context);
    opts.setOutput(static_cast<uint8_t*>(out), bytes_per_rank * world);
    opts.setTag(tag);
    opts.setTimeout(im.options.timeout);
    gloo::allgather(opts);
  }));
}

}  // namespace inca::hostpath
