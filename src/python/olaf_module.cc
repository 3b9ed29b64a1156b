// _olaf: OLAF's worker and parameter-server transports
// (include/inca/olaf/worker_endpoint.h, ps_endpoint.h) for Python, so a
// researcher's own agent (torch, numpy, anything that yields float32
// gradients) can train through an OLAF switch. python/inca_rl/olaf.py adds
// torch-tensor conversion on top; docs/rl.md "Your own agent" shows it.
//
//   ps = olaf.ParameterServer(apply=on_update, model=lambda: params)
//   w = olaf.Worker(peer=ps.address)
//   w.send(grad, version); w.poll(10); ps.poll(10)
//
// Both poll() calls release the GIL while they wait; the PS's apply and
// model callbacks take it back. An exception raised by a callback stops
// the callbacks for the rest of that poll (the updates still waiting are
// counted in stats()["apply_skipped"], not applied) and is re-raised by poll().
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "inca/olaf/ps_endpoint.h"
#include "inca/olaf/worker_endpoint.h"

namespace py = pybind11;

namespace {

using F32Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
namespace olaf = inca::olaf;

std::span<const float> Flat(const F32Array& a) {
  return {a.data(), static_cast<size_t>(a.size())};
}

py::array_t<float> ToArray(std::span<const float> v) {
  py::array_t<float> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
  return a;
}

std::chrono::milliseconds TimeoutMs(double ms) {
  if (!(ms >= 0) || ms > 3'600'000) throw py::value_error("timeout_ms must be in [0, 3600000]");
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

uint16_t ClusterArg(std::optional<int> cluster, uint16_t none, const char* what) {
  if (!cluster) return none;
  if (*cluster < 0 || *cluster > 0xfffe) {
    throw py::value_error(std::string(what) + " must be 0..65534 (or None)");
  }
  return static_cast<uint16_t>(*cluster);
}

py::dict AckDict(const olaf::AckHeader& a) {
  py::dict d;
  d["queue_util"] = static_cast<double>(a.queue_util) / olaf::kQueueUtilOne;
  d["worker_id"] = a.worker_id;
  d["update_id"] = a.update_id;
  d["model_version"] = a.model_version;
  d["aom_ms"] = a.aom_us == olaf::kAomUnknown ? py::object(py::none())
                                              : py::object(py::float_(a.aom_us / 1e3));
  d["cluster"] = a.cluster_id;
  d["active_clusters"] = a.active_clusters;
  return d;
}

class PyWorker {
 public:
  PyWorker(const std::string& peer, const std::string& bind, std::optional<int> cluster,
           uint32_t worker_id, const std::string& send_control, double delta_t_ms,
           const std::string& clock, size_t model_elements, uint64_t seed,
           uint32_t max_payload_bytes) {
    olaf::OlafWorkerEndpointOptions o;
    o.peer = peer;
    o.bind = bind;
    o.worker.cluster_id = ClusterArg(cluster, olaf::kUnassignedCluster, "cluster");
    o.worker.worker_id = worker_id;
    const auto mode = olaf::ParseSendControlMode(send_control);
    if (!mode) throw py::value_error("send_control must be 'off', 'priority' or 'fairness'");
    o.worker.send_control.mode = *mode;
    if (!(delta_t_ms > 0) || delta_t_ms > 3.6e6) {
      throw py::value_error("delta_t_ms must be in (0, 3600000]");
    }
    o.worker.send_control.delta_t_ns = static_cast<inca::dp::TimeNs>(delta_t_ms * 1e6);
    if (clock != "ps" && clock != "local") throw py::value_error("clock must be 'ps' or 'local'");
    o.worker.clock = clock == "ps" ? olaf::WorkerClock::kPs : olaf::WorkerClock::kLocal;
    o.worker.model_elements = model_elements;
    o.worker.seed = seed;
    o.worker.max_payload_bytes = max_payload_bytes;
    auto ep = olaf::OlafWorkerEndpoint::Create(o);
    if (!ep.ok()) throw py::value_error(std::string(ep.status().message()));
    ep_ = std::move(*ep);
  }

  py::dict Send(const F32Array& grad, uint32_t model_version) {
    absl::StatusOr<olaf::WorkerSendOutcome> s = ep_->Send(Flat(grad), model_version);
    if (!s.ok()) throw py::value_error(std::string(s.status().message()));
    py::dict d;
    d["sent"] = s->sent;
    d["probability"] = s->probability;
    d["update_id"] = s->update_id;
    d["datagrams"] = s->datagrams;
    d["send_errors"] = s->send_errors;
    return d;
  }
  size_t Poll(double timeout_ms) {
    const auto t = TimeoutMs(timeout_ms);
    py::gil_scoped_release unlocked;
    return ep_->Poll(t);
  }
  std::optional<uint32_t> ModelVersion() const {
    const olaf::AssembledModel* m = ep_->latest_model();
    return m ? std::optional<uint32_t>(m->model_version) : std::nullopt;
  }
  py::object LatestModel() const {
    const olaf::AssembledModel* m = ep_->latest_model();
    if (m == nullptr) return py::none();
    py::dict d;
    d["version"] = m->model_version;
    d["cluster"] = m->cluster_id;
    d["gen_time_ns"] = m->gen_time_ns;
    d["values"] = ToArray(m->values);
    return d;
  }
  py::object LastAck() const {
    const auto& a = ep_->core().last_ack();
    return a ? py::object(AckDict(*a)) : py::object(py::none());
  }
  double SendProbability() const {
    return ep_->core().send_control().Probability(olaf::OlafWorkerEndpoint::Now());
  }
  py::dict Stats() const {
    const olaf::WorkerCounters& c = ep_->stats();
    py::dict d;
    d["generated"] = c.generated;
    d["sent"] = c.sent;
    d["suppressed"] = c.suppressed;
    d["datagrams_sent"] = c.datagrams_sent;
    d["datagrams_rx"] = c.datagrams_rx;
    d["malformed"] = c.malformed;
    d["wrong_type"] = c.wrong_type;
    d["acks_rx"] = c.acks_rx;
    d["model_fragments_rx"] = c.model_fragments_rx;
    d["models_rx"] = c.models_rx;
    d["stale_models"] = c.stale_models;
    d["models_rejected"] = c.models_rejected;
    d["truncated"] = ep_->io().truncated;
    d["send_errors"] = ep_->io().send_errors;
    return d;
  }
  std::string Address() const { return ep_->local_address(); }

 private:
  std::unique_ptr<olaf::OlafWorkerEndpoint> ep_;
};

olaf::ModelPolicy PolicyArg(const std::optional<std::string>& policy, bool has_model,
                            bool fragments) {
  const std::string p =
      policy ? *policy : (has_model ? (fragments ? "last_fragment" : "updated_cluster") : "none");
  if (p == "none") return olaf::ModelPolicy::kNone;
  if (p == "updated_cluster") return olaf::ModelPolicy::kToUpdatedCluster;
  if (p == "last_fragment") return olaf::ModelPolicy::kToUpdatedClusterOnLastFragment;
  throw py::value_error("model_policy must be 'none', 'updated_cluster' or 'last_fragment'");
}

py::dict UpdateDict(const olaf::AppliedUpdate& a) {
  py::dict d;
  d["cluster"] = a.cluster_id;
  d["worker_id"] = a.worker_id;
  d["update_id"] = a.update_id;
  d["model_version"] = a.model_version;
  d["new_model_version"] = a.new_model_version;
  d["gen_time_ns"] = a.gen_time_ns;
  d["applied_ns"] = a.applied_ns;
  d["merged_count"] = a.merged_count;
  d["element_offset"] = a.element_offset;
  d["frag_index"] = a.frag_index;
  d["frag_count"] = a.frag_count;
  d["values"] = ToArray(a.values);
  return d;
}

class PyParameterServer {
 public:
  PyParameterServer(py::function apply, std::optional<py::function> model, const std::string& bind,
                    const std::string& granularity, std::optional<std::string> model_policy,
                    uint32_t model_every, size_t expected_elements, uint32_t initial_model_version,
                    uint32_t update_payload_bytes, size_t max_clusters)
      : apply_(std::move(apply)), model_(std::move(model)) {
    olaf::OlafPsEndpointOptions o;
    o.bind = bind;
    if (granularity != "update" && granularity != "fragment") {
      throw py::value_error("granularity must be 'update' or 'fragment'");
    }
    const bool fragments = granularity == "fragment";
    o.ps.granularity =
        fragments ? olaf::ApplyGranularity::kFragment : olaf::ApplyGranularity::kWholeUpdate;
    o.ps.model_policy = PolicyArg(model_policy, model_.has_value(), fragments);
    if (o.ps.model_policy != olaf::ModelPolicy::kNone && !model_) {
      throw py::value_error(
          "a model_policy other than 'none' needs model= (the current parameters)");
    }
    o.ps.model_every = model_every;
    o.ps.expected_elements = expected_elements;
    o.ps.initial_model_version = initial_model_version;
    o.ps.update_payload_bytes = update_payload_bytes;
    o.ps.max_clusters = max_clusters;
    // Both run inside Poll, without the GIL: they take it for Python.
    o.ps.apply = [this](const olaf::AppliedUpdate& a) {
      if (error_) {
        ++apply_skipped_;
        return;
      }
      py::gil_scoped_acquire locked;
      try {
        apply_(UpdateDict(a));
      } catch (py::error_already_set&) {
        error_ = std::current_exception();
      }
    };
    if (model_) {
      o.ps.model_params = [this]() -> std::span<const float> {
        if (error_) return params_;
        py::gil_scoped_acquire locked;
        try {
          const F32Array a = F32Array::ensure((*model_)());
          if (!a) throw py::value_error("model() must return an array of float32 (or convertible)");
          params_.assign(a.data(), a.data() + a.size());
        } catch (py::error_already_set&) {
          error_ = std::current_exception();
        } catch (py::value_error&) {
          error_ = std::current_exception();
        }
        return params_;
      };
    }
    auto ep = olaf::OlafPsEndpoint::Create(std::move(o));
    if (!ep.ok()) throw py::value_error(std::string(ep.status().message()));
    ep_ = std::move(*ep);
  }

  size_t Poll(double timeout_ms) {
    const auto t = TimeoutMs(timeout_ms);
    size_t n = 0;
    {
      py::gil_scoped_release unlocked;
      n = ep_->Poll(t);
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return n;
  }
  void Broadcast(const F32Array& params, std::optional<int> cluster) {
    const absl::Status s =
        ep_->BroadcastModel(Flat(params), ClusterArg(cluster, olaf::kAllClusters, "cluster"));
    if (!s.ok()) throw py::value_error(std::string(s.message()));
  }
  py::dict Stats() const {
    const olaf::PsCounters& c = ep_->stats();
    py::dict d;
    d["datagrams_rx"] = c.datagrams_rx;
    d["malformed"] = c.malformed;
    d["wrong_type"] = c.wrong_type;
    d["fragments_rx"] = c.fragments_rx;
    d["updates_applied"] = c.updates_applied;
    d["worker_updates_applied"] = c.worker_updates_applied;
    d["fragments_inconsistent"] = c.fragments_inconsistent;
    d["updates_incomplete"] = c.updates_incomplete();
    d["clusters_exhausted"] = c.clusters_exhausted;
    d["acks_sent"] = c.acks_sent;
    d["models_built"] = c.models_built;
    d["update_bytes_rx"] = c.update_bytes_rx;
    d["ack_bytes"] = c.ack_bytes;
    d["model_bytes_built"] = c.model_bytes_built;
    d["truncated"] = ep_->io().truncated;
    d["send_errors"] = ep_->io().send_errors;
    d["apply_skipped"] = apply_skipped_;
    return d;
  }
  // Per cluster: counts and the AoM at the PS (milliseconds; None before
  // the cluster's first applied update).
  py::list Clusters() const {
    py::list out;
    const inca::dp::TimeNs now = olaf::OlafPsEndpoint::Now();
    for (uint16_t id : ep_->core().cluster_ids()) {
      const auto cs = ep_->core().cluster(id, now);
      if (!cs) continue;
      py::dict d;
      d["cluster"] = id;
      d["fragments_rx"] = cs->fragments_rx;
      d["updates_applied"] = cs->updates_applied;
      d["worker_updates_applied"] = cs->worker_updates_applied;
      d["mean_aom_ms"] =
          cs->aom ? py::object(py::float_(cs->aom->average_ns / 1e6)) : py::object(py::none());
      d["peak_aom_ms"] =
          cs->aom ? py::object(py::float_(static_cast<double>(cs->aom->peak_max_ns) / 1e6))
                  : py::object(py::none());
      out.append(d);
    }
    return out;
  }
  uint32_t model_version() const { return ep_->core().model_version(); }
  std::string Address() const { return ep_->local_address(); }

 private:
  py::function apply_;
  std::optional<py::function> model_;
  std::vector<float> params_;
  std::exception_ptr error_;
  uint64_t apply_skipped_ = 0;
  std::unique_ptr<olaf::OlafPsEndpoint> ep_;
};

}  // namespace

PYBIND11_MODULE(_olaf, m) {
  m.doc() = "OLAF worker and parameter-server transports (docs/rl.md, 'Your own agent')";
  py::class_<PyWorker>(m, "Worker")
      .def(py::init<const std::string&, const std::string&, std::optional<int>, uint32_t,
                    const std::string&, double, const std::string&, size_t, uint64_t, uint32_t>(),
           py::arg("peer"), py::kw_only(), py::arg("bind") = "127.0.0.1:0",
           py::arg("cluster") = py::none(), py::arg("worker_id") = 0,
           py::arg("send_control") = "priority", py::arg("delta_t_ms") = 400.0,
           py::arg("clock") = "ps", py::arg("model_elements") = 0, py::arg("seed") = 1,
           py::arg("max_payload_bytes") = olaf::kDefaultUpdatePayloadBytes)
      .def("send", &PyWorker::Send, py::arg("grad"), py::arg("model_version"),
           "Generates an update now; sends it if send control agrees. -> dict(sent, "
           "probability, update_id, datagrams, send_errors)")
      .def("poll", &PyWorker::Poll, py::arg("timeout_ms") = 0.0,
           "Takes the ACKs and MODEL fragments waiting (up to timeout_ms). -> datagrams handled")
      .def_property_readonly("model_version", &PyWorker::ModelVersion,
                             "version of the newest complete model (None before the first)")
      .def("latest_model", &PyWorker::LatestModel,
           "-> dict(version, cluster, gen_time_ns, values float32[n]) or None")
      .def_property_readonly("last_ack", &PyWorker::LastAck)
      .def_property_readonly("send_probability", &PyWorker::SendProbability,
                             "P_send now, from the last ACK's feedback")
      .def("stats", &PyWorker::Stats)
      .def_property_readonly("address", &PyWorker::Address);
  py::class_<PyParameterServer>(m, "ParameterServer")
      .def(py::init<py::function, std::optional<py::function>, const std::string&,
                    const std::string&, std::optional<std::string>, uint32_t, size_t, uint32_t,
                    uint32_t, size_t>(),
           py::arg("apply"), py::kw_only(), py::arg("model") = py::none(),
           py::arg("bind") = "127.0.0.1:0", py::arg("granularity") = "update",
           py::arg("model_policy") = py::none(), py::arg("model_every") = 1,
           py::arg("expected_elements") = 0, py::arg("initial_model_version") = 0,
           py::arg("update_payload_bytes") = olaf::kDefaultUpdatePayloadBytes,
           py::arg("max_clusters") = olaf::AomTracker::kDefaultMaxClusters)
      .def("poll", &PyParameterServer::Poll, py::arg("timeout_ms") = 0.0,
           "Applies the updates waiting (up to timeout_ms), ACKs them and sends MODELs per "
           "the policy. -> datagrams handled")
      .def("broadcast_model", &PyParameterServer::Broadcast, py::arg("params"),
           py::arg("cluster") = py::none(),
           "Sends params as a MODEL to every peer (of `cluster`) that sent updates")
      .def_property_readonly("model_version", &PyParameterServer::model_version)
      .def("stats", &PyParameterServer::Stats)
      .def("clusters", &PyParameterServer::Clusters)
      .def_property_readonly("address", &PyParameterServer::Address);
  m.attr("UNASSIGNED_CLUSTER") = olaf::kUnassignedCluster;
}
