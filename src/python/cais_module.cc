// _cais: the pybind11 core of `import cais` (docs/python.md). A thin adapter:
// inca::Communicator over raw host pointers that the Python layer
// (python/cais/__init__.py) takes from numpy arrays and torch tensors after
// checking dtype, device, contiguity and writability, and the control plane
// (inca::control::ConnectControl) for switch-side configuration.
//
// Ownership: the Python layer keeps every buffer alive until its operation
// completes (cais.Group's pending list holds references even when the Work
// is dropped). Every blocking call releases the GIL.
// Errors: absl::Status becomes ValueError (INVALID_ARGUMENT, OUT_OF_RANGE),
// TimeoutError (DEADLINE_EXCEEDED), ConnectionError (UNAVAILABLE) or
// cais.Error (anything else), each with the status message, which says what
// to fix.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "inca/client/communicator.h"
#include "inca/control/control_plane.h"
#include "python/options.h"
#include "python/stats_dict.h"
#include "python/store_server.h"

namespace py = pybind11;

namespace inca::python {
namespace {

py::object& ErrorType() {
  static py::object* type = nullptr;
  if (type == nullptr) type = new py::object();  // leaked: lives as long as the module
  return *type;
}

[[noreturn]] void Raise(const absl::Status& s, const std::string& what) {
  const std::string msg =
      absl::StrCat(what, ": ", s.message(), " [", absl::StatusCodeToString(s.code()), "]");
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: throw py::value_error(msg);
    case absl::StatusCode::kDeadlineExceeded:
      PyErr_SetString(PyExc_TimeoutError, msg.c_str());
      break;
    case absl::StatusCode::kUnavailable: PyErr_SetString(PyExc_ConnectionError, msg.c_str()); break;
    default: PyErr_SetString(ErrorType().ptr(), msg.c_str()); break;
  }
  throw py::error_already_set();
}

void Check(const absl::Status& s, const std::string& what) {
  if (!s.ok()) Raise(s, what);
}

void* Ptr(uintptr_t p) {
  return reinterpret_cast<void*>(p);
}

DType ParseDType(int d) {
  if (d < 0 || d >= wire::kDTypeCount) throw py::value_error(absl::StrCat("bad dtype code ", d));
  return static_cast<DType>(d);
}
ReduceOp ParseOp(int o) {
  if (o < 0 || o >= wire::kReduceOpCount) throw py::value_error(absl::StrCat("bad op code ", o));
  return static_cast<ReduceOp>(o);
}

// An operation in flight; Python's cais.Work wraps it with the buffers.
class PyWork {
 public:
  explicit PyWork(std::shared_ptr<Work> w) : work_(std::move(w)) {}
  void Wait() {
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = work_->Wait();
    }
    Check(s, "cais operation");
  }
  bool Done() const { return work_->Done(); }

 private:
  std::shared_ptr<Work> work_;
};

OpOptions Layer(int layer) {
  if (layer < 0 || layer > 65535) {
    throw py::value_error(absl::StrCat("layer id ", layer, " must be 0..65535"));
  }
  OpOptions o;
  o.layer_id = static_cast<uint16_t>(layer);
  return o;
}

class PyCommunicator {
 public:
  explicit PyCommunicator(std::unique_ptr<Communicator> c) : c_(std::move(c)) {}

  // Every operation is issued asynchronously; the blocking forms wait
  // without the GIL. The Python layer keeps the buffers alive until the
  // operation has completed, whether or not the Work is kept.
  PyWork AllReduceAsync(uintptr_t p, size_t n, int d, int op, int layer) {
    return PyWork(get().AllReduceAsync(Ptr(p), n, ParseDType(d), ParseOp(op), Layer(layer)));
  }
  PyWork AllGatherAsync(uintptr_t in, uintptr_t out, size_t n, int d, int layer) {
    return PyWork(get().AllGatherAsync(Ptr(in), Ptr(out), n, ParseDType(d), Layer(layer)));
  }
  PyWork ReduceScatterAsync(uintptr_t in, uintptr_t out, size_t n, int d, int op, int layer) {
    return PyWork(
        get().ReduceScatterAsync(Ptr(in), Ptr(out), n, ParseDType(d), ParseOp(op), Layer(layer)));
  }
  PyWork BroadcastAsync(uintptr_t p, size_t n, int d, int root, int layer) {
    return PyWork(get().BroadcastAsync(Ptr(p), n, ParseDType(d), root, Layer(layer)));
  }
  void Synchronize() {
    Communicator& c = get();
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = c.Synchronize();
    }
    Check(s, "synchronize");
  }
  void SetOffload(bool on) { get().SetOffload(on); }
  py::dict Stats() { return StatsDict(get().stats()); }
  int rank() { return get().rank(); }
  int world_size() { return get().world_size(); }
  // Destroys the communicator (joins its threads) without the GIL.
  void Close() {
    py::gil_scoped_release nogil;
    c_.reset();
  }
  Communicator& get() {
    if (!c_)
      throw py::value_error("this cais group was closed (cais.shutdown()); create a new one");
    return *c_;
  }

 private:
  std::unique_ptr<Communicator> c_;
};

std::unique_ptr<PyCommunicator> Create(const py::dict& options) {
  const CommunicatorOptions o = ParseOptions(options, "communicator option", false);
  Check(o.Validate(), "cais options");
  absl::StatusOr<std::unique_ptr<Communicator>> c = CreateCommunicator(o);
  if (!c.ok()) {
    Raise(c.status(), absl::StrCat("creating the cais group (rank ", o.rank, " of ", o.world_size,
                                   ", store ", o.store_address, ", switch ",
                                   o.switch_address.empty() ? "none" : o.switch_address, ")"));
  }
  return std::make_unique<PyCommunicator>(std::move(*c));
}

// The switch's control API (docs/control.md).
class PyControl {
 public:
  PyControl(const std::string& target, const std::string& token, int timeout_ms) {
    absl::StatusOr<std::unique_ptr<control::ControlClient>> c;
    {
      py::gil_scoped_release nogil;
      c = control::ConnectControl(target, token, timeout_ms);
    }
    if (!c.ok()) Raise(c.status(), absl::StrCat("connecting to the controller at ", target));
    c_ = std::move(*c);
    target_ = target;
  }
  void Health() {
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = c_->Health();
    }
    if (!s.ok()) {
      Raise(s, absl::StrCat("controller ", target_,
                            " does not answer; is inca-switchd running with "
                            "--control-listen on that address (see docs/control.md)?"));
    }
  }
  std::map<std::string, std::string> GetConfig() {
    absl::StatusOr<std::map<std::string, std::string>> r;
    {
      py::gil_scoped_release nogil;
      r = c_->GetConfig();
    }
    if (!r.ok()) Raise(r.status(), "get_config");
    return *r;
  }
  void SetConfig(const std::map<std::string, std::string>& v) {
    absl::Status s;
    {
      py::gil_scoped_release nogil;
      s = c_->SetConfig(v);
    }
    Check(s, absl::StrCat("configuring the switch at ", target_));
  }
  py::dict Stats() {
    absl::StatusOr<control::Stats> r;
    {
      py::gil_scoped_release nogil;
      r = c_->GetStats();
    }
    if (!r.ok()) Raise(r.status(), "switch stats");
    py::dict d;
    d["sram_usage"] = r->sram_usage;
    d["reductions_per_s"] = r->reductions_per_s;
    d["completed_chunks"] = r->counters.cais.completed_chunks;
    d["timeouts"] = r->counters.cais.timeouts;
    d["fallback_notices"] = r->counters.cais.fallback_notices;
    d["fallback_ratio"] = r->fallback_ratio;
    d["avg_queue_delay_us"] = r->ingress_queue_delay_us;  // in the switch (write-up 4.4)
    d["slot_holding_avg_us"] = r->slot_holding_avg_us;
    d["rx_packets"] = r->counters.reducer.rx_packets;
    d["tx_packets"] = r->counters.reducer.tx_packets;
    d["drops"] = r->drops;
    d["conserved"] = r->conserved;
    // Every counters table the control API carries, as {table: {counter: n}}
    // (host, switch_counters, program, cais; names from the tables).
    for (const control::StatField<control::Stats>& f : control::kStatsFields) {
      const auto* b = std::get_if<counters::Block<control::Stats>>(&f.member);
      if (b == nullptr) continue;
      py::dict t;
      for (size_t i = 0; i < b->size; ++i) t[b->row(i).json] = b->get(*r, i);
      d[f.name] = t;
    }
    // inca-switchd --threads N > 1: each shard's tables (empty list with one).
    py::list shards;
    for (const control::ShardStats& sh : r->shards) {
      py::dict one;
      one["shard"] = sh.shard;
      one["endpoint"] = sh.endpoint;
      one["conserved"] = sh.conserved;
      for (const control::StatField<control::ShardStats>& f : control::kShardStatsFields) {
        const auto* b = std::get_if<counters::Block<control::ShardStats>>(&f.member);
        if (b == nullptr) continue;
        py::dict t;
        for (size_t i = 0; i < b->size; ++i) t[b->row(i).json] = b->get(sh, i);
        one[f.name] = t;
      }
      shards.append(one);
    }
    d["shards"] = shards;
    return d;
  }
  const std::string& target() const { return target_; }

 private:
  std::unique_ptr<control::ControlClient> c_;
  std::string target_;
};

}  // namespace
}  // namespace inca::python

PYBIND11_MODULE(_cais, m) {
  using namespace inca::python;
  m.doc() = "inca CAIS client core; use the `cais` package (docs/python.md)";
  ErrorType() = py::reinterpret_borrow<py::object>(
      py::exception<std::runtime_error>(m, "Error", PyExc_RuntimeError).ptr());

  m.attr("DTYPE_F32") = static_cast<int>(inca::DType::kF32);
  m.attr("DTYPE_F16") = static_cast<int>(inca::DType::kF16);
  m.attr("DTYPE_BF16") = static_cast<int>(inca::DType::kBF16);
  m.attr("DTYPE_I32") = static_cast<int>(inca::DType::kI32);
  m.attr("OP_SUM") = static_cast<int>(inca::ReduceOp::kSum);
  m.attr("OP_MAX") = static_cast<int>(inca::ReduceOp::kMax);
  m.attr("OP_MIN") = static_cast<int>(inca::ReduceOp::kMin);
  m.attr("OP_PRODUCT") = static_cast<int>(inca::ReduceOp::kProduct);

  py::class_<PyWork>(m, "Work")
      .def("wait", &PyWork::Wait, "Blocks until the operation finished; raises on failure")
      .def("done", &PyWork::Done);

  py::class_<PyCommunicator>(m, "Communicator")
      .def("all_reduce_async", &PyCommunicator::AllReduceAsync, py::arg("ptr"), py::arg("count"),
           py::arg("dtype"), py::arg("op"), py::arg("layer") = 0)
      .def("all_gather_async", &PyCommunicator::AllGatherAsync, py::arg("inp"), py::arg("out"),
           py::arg("count"), py::arg("dtype"), py::arg("layer") = 0)
      .def("reduce_scatter_async", &PyCommunicator::ReduceScatterAsync, py::arg("inp"),
           py::arg("out"), py::arg("count"), py::arg("dtype"), py::arg("op"), py::arg("layer") = 0)
      .def("broadcast_async", &PyCommunicator::BroadcastAsync, py::arg("ptr"), py::arg("count"),
           py::arg("dtype"), py::arg("root"), py::arg("layer") = 0)
      .def("synchronize", &PyCommunicator::Synchronize)
      .def("set_offload", &PyCommunicator::SetOffload)
      .def("stats", &PyCommunicator::Stats)
      .def("close", &PyCommunicator::Close)
      .def_property_readonly("rank", &PyCommunicator::rank)
      .def_property_readonly("world_size", &PyCommunicator::world_size);
  m.def(
      "validate_token",
      [](const std::string& token, const std::string& where) {
        Check(inca::control::ValidateControlToken(token, where), "cais.init");
      },
      py::arg("token"), py::arg("where") = "token",
      "Raises ValueError unless `token` can be sent to the control API (printable ASCII)");
  inca::python::DefineStoreServer(m);
  m.def("stats_help", &StatsHelp, "{key: help} of stats()'s dict, from its declaration");
  m.def("create", &Create, py::arg("options"),
        "Creates a communicator from a dict of CommunicatorOptions fields; every rank calls it");

  py::class_<PyControl>(m, "Control")
      .def(py::init<const std::string&, const std::string&, int>(), py::arg("target"),
           py::arg("token") = "", py::arg("timeout_ms") = 3000)
      .def("health", &PyControl::Health)
      .def("get_config", &PyControl::GetConfig)
      .def("set_config", &PyControl::SetConfig)
      .def("stats", &PyControl::Stats)
      .def_property_readonly("target", &PyControl::target);
}
