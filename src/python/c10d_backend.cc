// _cais_c10d: the torch.distributed backend "cais" (docs/python.md), a
// c10d::ProcessGroup (torch 1.13 API) over inca::Communicator.
//
// What runs where:
//   - allreduce (sum/max/min/product), allreduce_coalesced, allgather,
//     _allgather_base, reduce_scatter, _reduce_scatter_base, broadcast and
//     barrier on f32/f16/bf16/i32 CPU tensors: inca (the switch, with inca's
//     own Gloo host path behind it: declines, timeouts, SetOffload);
//   - every other dtype, op or collective (reduce, gather, scatter,
//     alltoall, send/recv, allreduce of f64/i64, AVG...): delegated to a
//     torch ProcessGroupGloo built on the same store, so code written for
//     gloo runs unchanged. Each delegated kind warns once on stderr;
//     stats()["delegated"] and stats()["delegated_by_op"] count them.
// Lifetimes: an operation keeps its tensors alive until it has finished,
// through OpOptions::on_done on the communicator's thread, so dropping the
// Work (async_op=True without wait(), DDP) never frees memory still in use.
// getFuture() is completed there too, with the output tensors, which is
// what DDP's communication hooks chain on.
// Ordering: inca operations run in issue order on the communicator's thread;
// delegated ones in issue order on Gloo's. As with any two process groups,
// a tensor used by both needs a wait() in between (dist's default is blocking).
// Non-contiguous tensors are reduced through a contiguous copy that is
// copied back when the work is waited for.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hostpath/tcp_store.h"
#include "inca/client/communicator.h"
#include "python/options.h"
#include "python/stats_dict.h"
#include "python/store_server.h"

namespace py = pybind11;

namespace inca::python {
namespace {

std::optional<DType> ToDType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kF32;
    case at::kHalf: return DType::kF16;
    case at::kBFloat16: return DType::kBF16;
    case at::kInt: return DType::kI32;
    default: return std::nullopt;
  }
}

std::optional<ReduceOp> ToOp(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProduct;
    default: return std::nullopt;
  }
}

// A delegated collective as the peers compare it (Communicator::
// AgreeDelegated): inca's short names for types and reductions.
std::string DTypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "f32";
    case at::kHalf: return "f16";
    case at::kBFloat16: return "bf16";
    case at::kInt: return "i32";
    case at::kDouble: return "f64";
    case at::kLong: return "i64";
    case at::kByte: return "u8";
    case at::kChar: return "i8";
    case at::kShort: return "i16";
    case at::kBool: return "bool";
    case at::kComplexFloat: return "c64";
    case at::kComplexDouble: return "c128";
    default: return "other";
  }
}

std::string ReduceName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "sum";
    case c10d::ReduceOp::AVG: return "avg";
    case c10d::ReduceOp::PRODUCT: return "product";
    case c10d::ReduceOp::MIN: return "min";
    case c10d::ReduceOp::MAX: return "max";
    case c10d::ReduceOp::BAND: return "band";
    case c10d::ReduceOp::BOR: return "bor";
    case c10d::ReduceOp::BXOR: return "bxor";
    case c10d::ReduceOp::PREMUL_SUM: return "premul_sum";
    default: return "other";
  }
}

DelegatedOp Described(DelegatedOp::Kind kind, const std::vector<at::Tensor>& ts,
                      std::string reduce = {}, int64_t root = 0) {
  DelegatedOp d;
  d.kind = kind;
  for (const auto& t : ts) d.count += static_cast<uint64_t>(t.numel());
  d.dtype = ts.empty() ? "other" : DTypeName(ts[0].scalar_type());
  d.reduce = std::move(reduce);
  d.root = static_cast<int>(root);
  return d;
}

// Releases the GIL if this thread holds it: torch's bindings already release
// it around wait(), autograd threads never held it.
class ReleaseGil {
 public:
  ReleaseGil() {
    if (PyGILState_Check()) release_.emplace();
  }

 private:
  std::optional<py::gil_scoped_release> release_;
};

// What one inca operation keeps until it has finished: its tensors, the
// copies to write back into non-contiguous originals, and its future.
// Shared by the work handle and the completion callback, so either may go
// first.
struct OpState {
  std::vector<at::Tensor> keep;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (dst, src)
  std::vector<at::Tensor> outputs;                           // the future's value
  c10::intrusive_ptr<c10::ivalue::Future> future =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));

  // On the communicator's thread, once the operation is over.
  void Finish(const absl::Status& s) {
    if (s.ok()) {
      at::NoGradGuard no_grad;
      for (auto& [dst, src] : copy_back) dst.copy_(src);
    }
    copy_back.clear();
    keep.clear();
    if (s.ok()) {
      future->markCompleted(c10::IValue(outputs));
    } else {
      future->setError(std::make_exception_ptr(
          std::runtime_error(absl::StrCat("cais backend: ", s.message(), Hint(s)))));
    }
    outputs.clear();
  }
  // Where the host path would not have helped (the ranks disagree, or the
  // input is refused), no advice to take it.
  static const char* Hint(const absl::Status& s) {
    return s.code() == absl::StatusCode::kInvalidArgument ? "" : kFallbackHint;
  }
  static constexpr const char* kFallbackHint =
      " (switch to the host path with cais.set_offload(False) or INCA_OFFLOAD=0, or use backend "
      "'gloo')";
};

OpOptions Track(const std::shared_ptr<OpState>& st, uint16_t layer) {
  OpOptions o;
  o.layer_id = layer;
  o.on_done = [st](const absl::Status& s) { st->Finish(s); };
  return o;
}

class CaisWork : public c10d::Work {
 public:
  CaisWork(int rank, c10d::OpType type, std::shared_ptr<inca::Work> work,
           c10::intrusive_ptr<c10::ivalue::Future> future)
      : c10d::Work(rank, type), work_(std::move(work)), future_(std::move(future)) {}

  bool isCompleted() override { return work_->Done(); }
  bool isSuccess() const override { return work_->Done() && !future_->hasError(); }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    absl::Status s;
    {
      ReleaseGil nogil;
      s = work_->Wait();
    }
    TORCH_CHECK(s.ok(), "cais backend: ", std::string(s.message()), OpState::Hint(s));
    return true;
  }
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::shared_ptr<inca::Work> work_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// An already-finished work (barrier).
class DoneWork : public c10d::Work {
 public:
  DoneWork(int rank, std::vector<at::Tensor> outputs) : c10d::Work(rank, c10d::OpType::BARRIER) {
    future_->markCompleted(c10::IValue(std::move(outputs)));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_ =
      c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
};

// The layer tag of operations issued from this thread (cais.layer()).
thread_local uint16_t current_layer = 0;

class ProcessGroupCais : public c10d::ProcessGroup {
 public:
  // `store` (group rank 0's, else null) outlives the communicator that uses it.
  ProcessGroupCais(int rank, int size, std::unique_ptr<Communicator> comm,
                   c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                   std::shared_ptr<hostpath::TcpStoreServer> store)
      : c10d::ProcessGroup(rank, size),
        store_(std::move(store)),
        comm_(std::move(comm)),
        gloo_(std::move(gloo)) {
    init();
  }
  ~ProcessGroupCais() override {
    // Joins the communicator's thread, which may drop the last reference to
    // a tensor with a Python object (that takes the GIL): never hold it here.
    // The delegated Gloo group goes too, still without the GIL: its
    // destructor joins worker threads that may be releasing tensors.
    ReleaseGil nogil;
    comm_.reset();
    gloo_.reset();
    store_.reset();
  }

  // Destroys the delegated Gloo group now (cais's atexit hook): a Gloo
  // worker thread that releases a finished operation's tensors takes the
  // GIL, and one that does so once the interpreter is finalizing is killed
  // by it (std::terminate). Later delegated calls raise.
  void ReleaseDelegate() {
    ReleaseGil nogil;
    gloo_.reset();
  }

  const std::string getBackendName() const override { return "cais"; }
  using Kind = DelegatedOp::Kind;

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const auto op = ToOp(opts.reduceOp);
    if (tensors.size() != 1 || !op || !Eligible(tensors[0])) {
      return Delegate("allreduce", Described(Kind::kAllReduce, tensors, ReduceName(opts.reduceOp)),
                      [&] { return gloo_->allreduce(tensors, opts); });
    }
    auto st = std::make_shared<OpState>();
    at::Tensor buf = Dense(tensors[0], st.get());
    st->outputs = tensors;
    auto w = comm_->AllReduceAsync(buf.data_ptr(), static_cast<size_t>(buf.numel()), *ToDType(buf),
                                   *op, Track(st, current_layer));
    return Make(c10d::OpType::ALLREDUCE, std::move(w), st);
  }

  // Bucketed gradient sync: one operation over the flattened tensors.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    const auto op = ToOp(opts.reduceOp);
    bool ok = !tensors.empty() && op.has_value();
    int64_t total = 0;
    for (const auto& t : tensors) {
      ok = ok && Eligible(t) && t.scalar_type() == tensors[0].scalar_type();
      total += t.numel();
    }
    if (!ok || total >= (int64_t{1} << 31)) {
      return Delegate("allreduce_coalesced",
                      Described(Kind::kAllReduce, tensors, ReduceName(opts.reduceOp)),
                      [&] { return gloo_->allreduce_coalesced(tensors, opts); });
    }
    auto st = std::make_shared<OpState>();
    std::vector<at::Tensor> flat_in;
    flat_in.reserve(tensors.size());
    for (const auto& t : tensors) flat_in.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(flat_in);
    int64_t off = 0;
    for (auto& t : tensors) {
      st->copy_back.emplace_back(t, flat.narrow(0, off, t.numel()).view_as(t));
      off += t.numel();
    }
    st->keep = {flat};
    st->outputs = tensors;
    auto w = comm_->AllReduceAsync(flat.data_ptr(), static_cast<size_t>(flat.numel()),
                                   *ToDType(flat), *op, Track(st, current_layer));
    return Make(c10d::OpType::ALLREDUCE_COALESCED, std::move(w), st);
  }

  // Broadcast and all-gather move bytes without arithmetic, so any dtype
  // whose tensor is a whole number of 4-byte words (int64, float64: DDP's
  // start-up checks) travels as int32 words.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    if (tensors.size() != 1 || opts.rootTensor != 0 || !Movable(tensors[0])) {
      return Delegate("broadcast", Described(Kind::kBroadcast, tensors, {}, opts.rootRank),
                      [&] { return gloo_->broadcast(tensors, opts); });
    }
    auto st = std::make_shared<OpState>();
    at::Tensor buf = Words(Dense(tensors[0], st.get()));
    st->outputs = tensors;
    auto w = comm_->BroadcastAsync(buf.data_ptr(), static_cast<size_t>(buf.numel()), *ToDType(buf),
                                   static_cast<int>(opts.rootRank), Track(st, current_layer));
    return Make(c10d::OpType::BROADCAST, std::move(w), st);
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    bool ok = inputs.size() == 1 && outputs.size() == 1 &&
              outputs[0].size() == static_cast<size_t>(size_) && Movable(inputs[0]);
    for (size_t r = 0; ok && r < outputs[0].size(); ++r) {
      const auto& o = outputs[0][r];
      ok = o.scalar_type() == inputs[0].scalar_type() && o.numel() == inputs[0].numel() &&
           o.device() == inputs[0].device();
    }
    if (!ok) {  // Gloo's own checks produce the error message
      return Delegate("allgather", Described(Kind::kAllGather, inputs),
                      [&] { return gloo_->allgather(outputs, inputs, opts); });
    }
    auto st = std::make_shared<OpState>();
    at::Tensor in = inputs[0].contiguous();
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    for (int r = 0; r < size_; ++r) {
      st->copy_back.emplace_back(outputs[0][r],
                                 flat.narrow(0, r * in.numel(), in.numel()).view_as(outputs[0][r]));
    }
    st->keep = {in, flat};
    st->outputs = outputs[0];
    const at::Tensor win = Words(in), wflat = Words(flat);
    auto w =
        comm_->AllGatherAsync(win.data_ptr(), wflat.data_ptr(), static_cast<size_t>(win.numel()),
                              *ToDType(win), Track(st, current_layer));
    return Make(c10d::OpType::ALLGATHER, std::move(w), st);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    if (!Movable(input) || output.scalar_type() != input.scalar_type() ||
        output.numel() != input.numel() * size_ || !output.device().is_cpu()) {
      return Delegate("_allgather_base", Described(Kind::kAllGather, {input}),
                      [&] { return gloo_->_allgather_base(output, input, opts); });
    }
    auto st = std::make_shared<OpState>();
    at::Tensor in = Words(input.contiguous());
    at::Tensor out = Words(Dense(output, st.get()));
    st->keep.push_back(in);
    st->outputs = {output};
    auto w = comm_->AllGatherAsync(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                                   *ToDType(in), Track(st, current_layer));
    return Make(c10d::OpType::_ALLGATHER_BASE, std::move(w), st);
  }

  // outputs[0] = op over ranks of inputs[0][rank]. (torch 1.13's Gloo has
  // no reduce-scatter at all; inca's host path carries the fallback.)
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const auto op = ToOp(opts.reduceOp);
    bool ok = op.has_value() && outputs.size() == 1 && inputs.size() == 1 &&
              inputs[0].size() == static_cast<size_t>(size_) && Eligible(outputs[0]);
    for (size_t r = 0; ok && r < inputs[0].size(); ++r) {
      const auto& i = inputs[0][r];
      ok = i.device().is_cpu() && i.scalar_type() == outputs[0].scalar_type() &&
           i.numel() == outputs[0].numel();
    }
    if (!ok) {
      return Delegate("reduce_scatter",
                      Described(Kind::kReduceScatter, outputs, ReduceName(opts.reduceOp)),
                      [&] { return gloo_->reduce_scatter(outputs, inputs, opts); });
    }
    auto st = std::make_shared<OpState>();
    std::vector<at::Tensor> flat_in;
    for (const auto& t : inputs[0]) flat_in.push_back(t.reshape({-1}));
    at::Tensor in = at::cat(flat_in);
    at::Tensor out = Dense(outputs[0], st.get());
    st->keep.push_back(in);
    st->outputs = outputs;
    auto w =
        comm_->ReduceScatterAsync(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                  *ToDType(out), *op, Track(st, current_layer));
    return Make(c10d::OpType::REDUCE_SCATTER, std::move(w), st);
  }

  // Megatron's sequence parallelism: input holds size * output.numel().
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    const auto op = ToOp(opts.reduceOp);
    if (!op || !Eligible(output) || !input.device().is_cpu() ||
        input.scalar_type() != output.scalar_type() || input.numel() != output.numel() * size_) {
      return Delegate("_reduce_scatter_base",
                      Described(Kind::kReduceScatter, {output}, ReduceName(opts.reduceOp)),
                      [&] { return gloo_->_reduce_scatter_base(output, input, opts); });
    }
    auto st = std::make_shared<OpState>();
    at::Tensor in = input.contiguous();
    at::Tensor out = Dense(output, st.get());
    st->keep.push_back(in);
    st->outputs = {output};
    auto w =
        comm_->ReduceScatterAsync(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()),
                                  *ToDType(out), *op, Track(st, current_layer));
    return Make(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(w), st);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& /*opts*/) override {
    // Everything issued on this group before, then one token through the
    // same path: returns when every rank has reached the barrier.
    int32_t token = 0;
    absl::Status s;
    {
      ReleaseGil nogil;
      s = comm_->AllReduce(&token, 1, DType::kI32, ReduceOp::kSum);
    }
    TORCH_CHECK(s.ok(), "cais backend barrier: ", std::string(s.message()));
    return c10::make_intrusive<DoneWork>(rank_, std::vector<at::Tensor>{});
  }

  // Delegated to Gloo as they are.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t,
                                        const c10d::ReduceOptions& o) override {
    return Delegate("reduce", Described(Kind::kReduce, t, ReduceName(o.reduceOp), o.rootRank),
                    [&] { return gloo_->reduce(t, o); });
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out,
                                                     std::vector<at::Tensor>& in,
                                                     const c10d::AllgatherOptions& o) override {
    return Delegate("allgather_coalesced", Described(Kind::kAllGather, in),
                    [&] { return gloo_->allgather_coalesced(out, in, o); });
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out,
                                        std::vector<at::Tensor>& in,
                                        const c10d::GatherOptions& o) override {
    return Delegate("gather", Described(Kind::kGather, in, {}, o.rootRank),
                    [&] { return gloo_->gather(out, in, o); });
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out,
                                         std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& o) override {
    return Delegate("scatter", Described(Kind::kScatter, out, {}, o.rootRank),
                    [&] { return gloo_->scatter(out, in, o); });
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override {
    return Delegate("alltoall_base", Described(Kind::kAllToAll, {in}),
                    [&] { return gloo_->alltoall_base(out, in, out_splits, in_splits, o); });
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions& o) override {
    return Delegate("alltoall", Described(Kind::kAllToAll, in),
                    [&] { return gloo_->alltoall(out, in, o); });
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override {
    return Delegate("send", std::nullopt, [&] { return gloo_->send(t, dst, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override {
    return Delegate("recv", std::nullopt, [&] { return gloo_->recv(t, src, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override {
    return Delegate("recvAnysource", std::nullopt, [&] { return gloo_->recvAnysource(t, tag); });
  }

  void SetOffload(bool on) { comm_->SetOffload(on); }
  void Synchronize() {
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = comm_->Synchronize();
    }
    TORCH_CHECK(s.ok(), "cais backend synchronize: ", std::string(s.message()));
  }
  py::dict Stats() const {
    py::dict d = StatsDict(comm_->stats());
    py::dict by_op;
    uint64_t total = 0;
    {
      std::lock_guard lock(delegated_mu_);
      for (const auto& [name, n] : delegated_) {
        by_op[py::str(name)] = n;
        total += n;
      }
    }
    d["delegated"] = total;
    d["delegated_by_op"] = by_op;
    return d;
  }

 private:
  // A CPU tensor inca can carry: f32/f16/bf16/i32, at most 2^31 elements.
  static bool Eligible(const at::Tensor& t) {
    return t.device().is_cpu() && !t.is_sparse() && ToDType(t).has_value() &&
           t.numel() < (int64_t{1} << 31);
  }
  // A CPU tensor inca can move without reducing: a carried dtype, or a whole
  // number of 4-byte words.
  static bool Movable(const at::Tensor& t) {
    if (Eligible(t)) return true;
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    return t.device().is_cpu() && t.layout() == at::kStrided && bytes % 4 == 0 &&
           bytes / 4 < (int64_t{1} << 31);
  }
  // A dense tensor as inca carries it: itself, or its bytes as int32 words.
  static at::Tensor Words(const at::Tensor& dense) {
    if (ToDType(dense).has_value()) return dense;
    return dense.reshape({-1}).view(at::kInt);
  }
  // The tensor itself when dense, else a contiguous copy written back on
  // completion. Either way kept alive by `st` until then.
  static at::Tensor Dense(at::Tensor& t, OpState* st) {
    st->keep.push_back(t);
    if (t.is_contiguous()) return t;
    at::Tensor c = t.contiguous();
    st->copy_back.emplace_back(t, c);
    st->keep.push_back(c);
    return c;
  }
  c10::intrusive_ptr<c10d::Work> Make(c10d::OpType type, std::shared_ptr<inca::Work> w,
                                      const std::shared_ptr<OpState>& st) {
    return c10::make_intrusive<CaisWork>(rank_, type, std::move(w), st->future);
  }
  // Runs `fn` on Gloo, counting it and warning once per kind of call. A
  // collective (`d`; point-to-point calls have none) first takes its
  // operation index in inca's order and is checked against the peers'
  // (AgreeDelegated): a rank delegating while a peer runs the operation
  // through inca, or ranks delegating different operations, get the same
  // error instead of Gloo's abort or timeout.
  template <typename Fn>
  c10::intrusive_ptr<c10d::Work> Delegate(const char* what, std::optional<DelegatedOp> d, Fn&& fn) {
    bool first = false;
    {
      std::lock_guard lock(delegated_mu_);
      first = delegated_[what]++ == 0;
    }
    if (first) {
      std::fprintf(stderr,
                   "cais backend (rank %d): %s with these arguments is not carried by inca "
                   "(dtype, op or layout); delegated to Gloo from now on without further "
                   "warnings, counted in stats()['delegated_by_op']\n",
                   rank_, what);
    }
    if (!gloo_) {
      throw std::runtime_error(absl::StrCat("cais backend (rank ", rank_, "): ", what,
                                            " needs the delegated Gloo group, which was released "
                                            "at interpreter exit"));
    }
    if (d) {
      d->layer_id = current_layer;
      absl::Status s;
      {
        ReleaseGil nogil;
        s = comm_->AgreeDelegated(*d);
      }
      if (!s.ok()) throw std::runtime_error(absl::StrCat("cais backend: ", s.message()));
    }
    return fn();
  }

  std::shared_ptr<hostpath::TcpStoreServer> store_;  // declared first: destroyed last
  std::unique_ptr<Communicator> comm_;
  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  mutable std::mutex delegated_mu_;
  std::map<std::string, uint64_t> delegated_;
};

c10::intrusive_ptr<ProcessGroupCais> Create(int rank, int size, const py::dict& options,
                                            c10::intrusive_ptr<c10d::ProcessGroup> gloo,
                                            std::shared_ptr<hostpath::TcpStoreServer> store) {
  // Who the rank is comes from torch.distributed.
  CommunicatorOptions o = ParseOptions(options, "cais backend option", true);
  o.rank = rank;
  o.world_size = size;
  if (auto s = o.Validate(); !s.ok()) throw py::value_error(std::string(s.message()));
  absl::StatusOr<std::unique_ptr<Communicator>> c = CreateCommunicator(o);
  if (!c.ok()) {
    throw std::runtime_error(absl::StrCat(
        "cais backend: creating the group (rank ", rank, " of ", size, ", group_id ", o.group_id,
        ", switch ", o.switch_address.empty() ? "none" : o.switch_address,
        "): ", c.status().message(), " — check INCA_SWITCH and that every rank called ",
        "init_process_group; INCA_SWITCH=none runs on the host path only"));
  }
  return c10::make_intrusive<ProcessGroupCais>(rank, size, std::move(*c), std::move(gloo),
                                               std::move(store));
}

}  // namespace
}  // namespace inca::python

PYBIND11_MODULE(_cais_c10d, m) {
  using inca::python::ProcessGroupCais;
  m.doc() = "torch.distributed backend 'cais' (registered by `import cais`)";
  // c10d::ProcessGroup's Python type must exist before ours derives from it.
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupCais, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupCais>>(
      m, "ProcessGroupCais")
      .def("set_offload", &ProcessGroupCais::SetOffload, py::arg("enabled"),
           "Use (True) or avoid (False) the switch; the group agrees within about a second")
      .def("synchronize", &ProcessGroupCais::Synchronize)
      .def("stats", &ProcessGroupCais::Stats)
      .def("_release_delegate", &ProcessGroupCais::ReleaseDelegate,
           "Destroys the delegated Gloo group (at interpreter exit)");
  // inca's rendezvous store, served by group rank 0 before the group is
  // created, so that its address is published only once it is bound; the
  // group then owns it (create's `store`).
  inca::python::DefineStoreServer(m);
  m.def("create", &inca::python::Create, py::arg("rank"), py::arg("size"), py::arg("options"),
        py::arg("gloo"), py::arg("store") = nullptr);
  m.def(
      "set_layer",
      [](int layer) {
        if (layer < 0 || layer > 65535) throw py::value_error("layer id must be 0..65535");
        inca::python::current_layer = static_cast<uint16_t>(layer);
      },
      py::arg("layer"), "Layer tag of the operations this thread issues from now on (0 = none)");
  m.def("get_layer", [] { return int{inca::python::current_layer}; });
}
