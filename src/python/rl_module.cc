// _inca_rl: the C++ LunarLander (include/inca/rl/lunar_lander.h) for
// Python, in the reset/step style Gymnasium users know:
//   env = inca_rl.LunarLander(seed=1)
//   obs, info = env.reset(seed=42)
//   obs, reward, terminated, truncated, info = env.step(action)
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "inca/rl/lunar_lander.h"

namespace py = pybind11;

namespace {

py::array_t<float> ToArray(const inca::rl::LunarObservation& o) {
  py::array_t<float> a(static_cast<py::ssize_t>(o.size()));
  auto m = a.mutable_unchecked<1>();
  for (size_t i = 0; i < o.size(); ++i) m(static_cast<py::ssize_t>(i)) = o[i];
  return a;
}

inca::rl::LunarObservation FromArray(
    const py::array_t<float, py::array::c_style | py::array::forcecast>& a) {
  if (a.ndim() != 1 || a.shape(0) != static_cast<py::ssize_t>(inca::rl::kLunarObservationSize)) {
    throw py::value_error("observation must be a 1-d array of 8 floats (as reset/step return)");
  }
  inca::rl::LunarObservation o{};
  auto r = a.unchecked<1>();
  for (size_t i = 0; i < o.size(); ++i) o[i] = r(static_cast<py::ssize_t>(i));
  return o;
}

class PyLunarLander {
 public:
  PyLunarLander(uint64_t seed, int max_episode_steps, double gravity) {
    inca::rl::LunarLanderOptions o;
    o.seed = seed;
    o.max_episode_steps = max_episode_steps;
    o.gravity = gravity;
    auto env = inca::rl::LunarLander::Create(o);
    if (!env.ok()) throw py::value_error(std::string(env.status().message()));
    env_ = std::move(*env);
  }
  py::tuple Reset(std::optional<uint64_t> seed) {
    started_ = true;
    return py::make_tuple(ToArray(env_->Reset(seed)), py::dict());
  }
  py::tuple Step(int action) {
    if (!started_) throw py::value_error("call reset() before step()");
    if (action < 0 || action > 3) {
      throw py::value_error("action must be 0 (noop), 1 (left engine), 2 (main), 3 (right engine)");
    }
    const inca::rl::LunarStep s = env_->Step(static_cast<inca::rl::LunarAction>(action));
    return py::make_tuple(ToArray(s.observation), s.reward, s.terminated, s.truncated, py::dict());
  }
  int elapsed_steps() const { return env_->elapsed_steps(); }

 private:
  std::unique_ptr<inca::rl::LunarLander> env_;
  bool started_ = false;
};

}  // namespace

PYBIND11_MODULE(_inca_rl, m) {
  m.doc() = "LunarLander-v3 semantics in C++ on Box2D (docs/rl.md)";
  py::class_<PyLunarLander>(m, "LunarLander")
      .def(py::init<uint64_t, int, double>(), py::arg("seed") = 0,
           py::arg("max_episode_steps") = 1000, py::arg("gravity") = -10.0)
      .def("reset", &PyLunarLander::Reset, py::arg("seed") = py::none(),
           "-> (observation float32[8], info)")
      .def("step", &PyLunarLander::Step, py::arg("action"),
           "-> (observation, reward, terminated, truncated, info)")
      .def_property_readonly("elapsed_steps", &PyLunarLander::elapsed_steps);
  m.def(
      "heuristic",
      [](const py::array_t<float, py::array::c_style | py::array::forcecast>& obs) {
        return static_cast<int>(inca::rl::HeuristicAction(FromArray(obs)));
      },
      py::arg("observation"), "Gymnasium's hand-written landing controller: -> action");
  m.attr("observation_size") = inca::rl::kLunarObservationSize;
  m.attr("action_count") = 4;
}
