// _cais_c10d: the torch.distributed backend "cais" (docs/python.md), a
// c10d::ProcessGroup (torch 1.13 API) over inca::Communicator.
//
// What runs where:
//   - allreduce (sum/max/min/product), allgather, _allgather_base, broadcast
//     and barrier on f32/f16/bf16/i32 CPU tensors: inca (the switch, with
//     inca's own Gloo host path behind it: declines, timeouts, SetOffload);
//   - every other dtype, op or collective (reduce, gather, scatter,
//     reduce_scatter, alltoall, send/recv, allreduce of f64/i64, AVG...):
//     delegated to a torch ProcessGroupGloo built on the same store, so code
//     written for gloo runs unchanged. stats()["delegated"] counts them.
// Ordering: inca operations run in issue order on the communicator's thread;
// delegated ones in issue order on Gloo's. As with any two process groups,
// a tensor used by both needs a wait() in between (dist's default is blocking).
// Non-contiguous tensors are reduced through a contiguous copy that is
// copied back when the work is waited for.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inca/client/communicator.h"

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

// One inca operation: keeps its tensors alive, copies results back into
// non-contiguous outputs on wait().
class CaisWork : public c10d::Work {
 public:
  CaisWork(int rank, c10d::OpType type, std::shared_ptr<inca::Work> work,
           std::vector<at::Tensor> keep, std::vector<std::pair<at::Tensor, at::Tensor>> copy_back)
      : c10d::Work(rank, type),
        work_(std::move(work)),
        keep_(std::move(keep)),
        copy_back_(std::move(copy_back)) {}

  bool isCompleted() override { return work_->Done(); }
  bool isSuccess() const override {
    std::lock_guard lock(mu_);
    return finished_ && ok_;
  }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    absl::Status s;
    {
      ReleaseGil nogil;
      s = work_->Wait();
    }
    std::lock_guard lock(mu_);
    if (!finished_) {
      finished_ = true;
      ok_ = s.ok();
      if (ok_) {
        for (auto& [dst, src] : copy_back_) dst.copy_(src);
      }
      copy_back_.clear();
      keep_.clear();
    }
    TORCH_CHECK(s.ok(), "cais backend: ", std::string(s.message()),
                " (switch to the host path with cais.set_offload(False) or INCA_OFFLOAD=0, "
                "or use backend 'gloo')");
    return true;
  }
  void synchronize() override {}

 private:
  std::shared_ptr<inca::Work> work_;
  std::vector<at::Tensor> keep_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;
  mutable std::mutex mu_;
  bool finished_ = false;
  bool ok_ = false;
};

// An already-finished work (barrier).
class DoneWork : public c10d::Work {
 public:
  explicit DoneWork(int rank) : c10d::Work(rank, c10d::OpType::BARRIER) {}
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
};

class ProcessGroupCais : public c10d::ProcessGroup {
 public:
  ProcessGroupCais(int rank, int size, std::unique_ptr<Communicator> comm,
                   c10::intrusive_ptr<c10d::ProcessGroup> gloo)
      : c10d::ProcessGroup(rank, size), comm_(std::move(comm)), gloo_(std::move(gloo)) {
    init();
  }
  ~ProcessGroupCais() override {
    // Joins the communicator's threads; pending works hold only inca::Work.
    comm_.reset();
  }

  const std::string getBackendName() const override { return "cais"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const auto op = ToOp(opts.reduceOp);
    if (tensors.size() != 1 || !op || !Eligible(tensors[0])) {
      ++delegated_;
      return gloo_->allreduce(tensors, opts);
    }
    at::Tensor& t = tensors[0];
    std::vector<std::pair<at::Tensor, at::Tensor>> back;
    at::Tensor buf = Dense(t, &back);
    auto w =
        comm_->AllReduceAsync(buf.data_ptr(), static_cast<size_t>(buf.numel()), *ToDType(buf), *op);
    return c10::make_intrusive<CaisWork>(rank_, c10d::OpType::ALLREDUCE, std::move(w),
                                         std::vector<at::Tensor>{t, buf}, std::move(back));
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override {
    ++delegated_;
    return gloo_->allreduce_coalesced(tensors, opts);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    if (tensors.size() != 1 || opts.rootTensor != 0 || !Eligible(tensors[0])) {
      ++delegated_;
      return gloo_->broadcast(tensors, opts);
    }
    at::Tensor& t = tensors[0];
    std::vector<std::pair<at::Tensor, at::Tensor>> back;
    at::Tensor buf = Dense(t, &back);
    auto w = comm_->BroadcastAsync(buf.data_ptr(), static_cast<size_t>(buf.numel()), *ToDType(buf),
                                   static_cast<int>(opts.rootRank));
    return c10::make_intrusive<CaisWork>(rank_, c10d::OpType::BROADCAST, std::move(w),
                                         std::vector<at::Tensor>{t, buf}, std::move(back));
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    if (inputs.size() != 1 || outputs.size() != 1 ||
        outputs[0].size() != static_cast<size_t>(size_) || !Eligible(inputs[0])) {
      ++delegated_;
      return gloo_->allgather(outputs, inputs, opts);
    }
    for (const auto& o : outputs[0]) {
      if (o.scalar_type() != inputs[0].scalar_type() || o.numel() != inputs[0].numel() ||
          o.device() != inputs[0].device()) {
        ++delegated_;  // Gloo's own checks produce the error message
        return gloo_->allgather(outputs, inputs, opts);
      }
    }
    at::Tensor in = inputs[0].contiguous();
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
    std::vector<std::pair<at::Tensor, at::Tensor>> back;
    for (int r = 0; r < size_; ++r) {
      back.emplace_back(outputs[0][r],
                        flat.narrow(0, r * in.numel(), in.numel()).view_as(outputs[0][r]));
    }
    auto w = comm_->AllGatherAsync(in.data_ptr(), flat.data_ptr(), static_cast<size_t>(in.numel()),
                                   *ToDType(in));
    return c10::make_intrusive<CaisWork>(rank_, c10d::OpType::ALLGATHER, std::move(w),
                                         std::vector<at::Tensor>{in, flat}, std::move(back));
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    if (!Eligible(input) || output.scalar_type() != input.scalar_type() ||
        output.numel() != input.numel() * size_ || !output.device().is_cpu()) {
      ++delegated_;
      return gloo_->_allgather_base(output, input, opts);
    }
    at::Tensor in = input.contiguous();
    std::vector<std::pair<at::Tensor, at::Tensor>> back;
    at::Tensor out = Dense(output, &back);
    auto w = comm_->AllGatherAsync(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                                   *ToDType(in));
    return c10::make_intrusive<CaisWork>(rank_, c10d::OpType::_ALLGATHER_BASE, std::move(w),
                                         std::vector<at::Tensor>{in, out, output}, std::move(back));
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    // Everything issued on this group before, then one token through the
    // same path: returns when every rank has reached the barrier.
    int32_t token = 0;
    absl::Status s;
    {
      ReleaseGil nogil;
      s = comm_->AllReduce(&token, 1, DType::kI32, ReduceOp::kSum);
    }
    TORCH_CHECK(s.ok(), "cais backend barrier: ", std::string(s.message()));
    return c10::make_intrusive<DoneWork>(rank_);
  }

  // Delegated to Gloo as they are.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t,
                                        const c10d::ReduceOptions& o) override {
    ++delegated_;
    return gloo_->reduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& out,
                                                     std::vector<at::Tensor>& in,
                                                     const c10d::AllgatherOptions& o) override {
    ++delegated_;
    return gloo_->allgather_coalesced(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& out,
                                        std::vector<at::Tensor>& in,
                                        const c10d::GatherOptions& o) override {
    ++delegated_;
    return gloo_->gather(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& out,
                                         std::vector<std::vector<at::Tensor>>& in,
                                         const c10d::ScatterOptions& o) override {
    ++delegated_;
    return gloo_->scatter(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& out,
                                                std::vector<std::vector<at::Tensor>>& in,
                                                const c10d::ReduceScatterOptions& o) override {
    ++delegated_;
    return gloo_->reduce_scatter(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) override {
    ++delegated_;
    return gloo_->_reduce_scatter_base(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                               std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override {
    ++delegated_;
    return gloo_->alltoall_base(out, in, out_splits, in_splits, o);
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                          const c10d::AllToAllOptions& o) override {
    ++delegated_;
    return gloo_->alltoall(out, in, o);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& t, int dst, int tag) override {
    ++delegated_;
    return gloo_->send(t, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& t, int src, int tag) override {
    ++delegated_;
    return gloo_->recv(t, src, tag);
  }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override {
    ++delegated_;
    return gloo_->recvAnysource(t, tag);
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
    const CommunicatorStats s = comm_->stats();
    py::dict d;
    d["ops"] = s.ops;
    d["ops_switch"] = s.ops_switch;
    d["ops_host"] = s.ops_host;
    d["ops_declined"] = s.ops_declined;
    d["chunks_sent"] = s.chunks_sent;
    d["chunks_retransmitted"] = s.chunks_retransmitted;
    d["fallback_notices"] = s.fallback_notices;
    d["rejoins"] = s.rejoins;
    d["offload_active"] = s.offload_active;
    d["delegated"] = delegated_.load();
    return d;
  }

 private:
  // A CPU tensor inca can carry: f32/f16/bf16/i32, at most 2^31 elements.
  static bool Eligible(const at::Tensor& t) {
    return t.device().is_cpu() && !t.is_sparse() && ToDType(t).has_value() &&
           t.numel() < (int64_t{1} << 31);
  }
  // The tensor itself when dense, else a contiguous copy to write back.
  static at::Tensor Dense(at::Tensor& t, std::vector<std::pair<at::Tensor, at::Tensor>>* back) {
    if (t.is_contiguous()) return t;
    at::Tensor c = t.contiguous();
    back->emplace_back(t, c);
    return c;
  }

  std::unique_ptr<Communicator> comm_;
  c10::intrusive_ptr<c10d::ProcessGroup> gloo_;
  std::atomic<uint64_t> delegated_{0};
};

c10::intrusive_ptr<ProcessGroupCais> Create(int rank, int size, const py::dict& options,
                                            c10::intrusive_ptr<c10d::ProcessGroup> gloo) {
  CommunicatorOptions o;
  o.rank = rank;
  o.world_size = size;
  for (auto [k, v] : options) {
    const auto key = k.cast<std::string>();
    if (key == "group_id")
      o.group_id = v.cast<uint8_t>();
    else if (key == "switch_address")
      o.switch_address = v.cast<std::string>();
    else if (key == "store_address")
      o.store_address = v.cast<std::string>();
    else if (key == "bind_ip")
      o.bind_ip = v.cast<std::string>();
    else if (key == "offload")
      o.offload = v.cast<bool>();
    else if (key == "chunk_size")
      o.chunk_size = v.cast<uint32_t>();
    else if (key == "max_pending_chunks")
      o.max_pending_chunks = v.cast<uint32_t>();
    else if (key == "switch_timeout_ms")
      o.switch_timeout_ms = v.cast<int>();
    else if (key == "join_timeout_ms")
      o.join_timeout_ms = v.cast<int>();
    else if (key == "host_timeout_ms")
      o.host_timeout_ms = v.cast<int>();
    else
      throw py::value_error(absl::StrCat("unknown cais backend option '", key, "'"));
  }
  if (auto s = o.Validate(); !s.ok()) throw py::value_error(std::string(s.message()));
  absl::StatusOr<std::unique_ptr<Communicator>> c;
  {
    py::gil_scoped_release nogil;
    c = Communicator::Create(o);
  }
  if (!c.ok()) {
    throw std::runtime_error(absl::StrCat(
        "cais backend: creating the group (rank ", rank, " of ", size, ", group_id ", o.group_id,
        ", switch ", o.switch_address.empty() ? "none" : o.switch_address,
        "): ", c.status().message(), " — check INCA_SWITCH and that every rank called ",
        "init_process_group; INCA_SWITCH=none runs on the host path only"));
  }
  return c10::make_intrusive<ProcessGroupCais>(rank, size, std::move(*c), std::move(gloo));
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
      .def("stats", &ProcessGroupCais::Stats);
  m.def("create", &inca::python::Create, py::arg("rank"), py::arg("size"), py::arg("options"),
        py::arg("gloo"));
}
