// CommunicatorOptions from a Python dict, for both bindings (`_cais` and
// the torch backend): who the rank is by hand, every setting through its
// declaration (inca/client/settings.h), so neither binding lists them.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "inca/client/communicator.h"
#include "inca/client/settings.h"

namespace inca::python {

// Sets option `key` of `o` from `v`. False when `key` is no option;
// ValueError for a value of the wrong type or out of range.
inline bool SetOption(CommunicatorOptions* o, const std::string& key, pybind11::handle v) {
  namespace py = pybind11;
  if (key == "rank") {
    o->rank = v.cast<int>();
  } else if (key == "world_size") {
    o->world_size = v.cast<int>();
  } else if (key == "switch_address") {
    o->switch_address = v.cast<std::string>();
  } else if (key == "store_address") {
    o->store_address = v.cast<std::string>();
  } else if (key == "serve_store") {
    o->serve_store = v.cast<bool>();
  } else if (key == "own_store") {
    o->own_store = v.cast<bool>();
  } else if (key == "switch_port") {
    o->switch_port = v.cast<int>();
  } else if (key == "bind_ip") {
    o->bind_ip = v.cast<std::string>();
  } else {
    client::SettingValue value;
    if (py::isinstance<py::bool_>(v)) {
      value = v.cast<bool>();
    } else if (py::isinstance<py::int_>(v)) {
      const auto i = v.cast<long long>();
      if (i < 0) throw py::value_error(absl::StrCat(key, ": ", i, " is negative"));
      value = static_cast<uint64_t>(i);
    } else if (py::isinstance<py::float_>(v)) {
      value = v.cast<double>();
    } else {
      value = py::str(v).cast<std::string>();
    }
    const absl::Status s = client::SetClientSetting(o, key, value);
    if (absl::IsNotFound(s)) return false;
    if (!s.ok()) throw py::value_error(std::string(s.message()));
  }
  return true;
}

// Options from the declared environment variables (INCA_IO, ...), then
// `d`'s keys over them; a key that is no option (or, with `rank_given`,
// "rank" or "world_size", which the caller sets) is a ValueError naming it
// as a `what`.
inline CommunicatorOptions ParseOptions(const pybind11::dict& d, std::string_view what,
                                        bool rank_given) {
  namespace py = pybind11;
  CommunicatorOptions o;
  if (absl::Status s = client::ApplyClientEnvironment(&o); !s.ok()) {
    throw py::value_error(std::string(s.message()));
  }
  for (auto [k, v] : d) {
    const auto key = k.cast<std::string>();
    if ((rank_given && (key == "rank" || key == "world_size")) || !SetOption(&o, key, v)) {
      throw py::value_error(
          absl::StrCat("unknown ", absl::string_view(what.data(), what.size()), " '", key, "'"));
    }
  }
  return o;
}

// Communicator::Create without the GIL (it waits for the other ranks).
inline absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const CommunicatorOptions& o) {
  pybind11::gil_scoped_release nogil;
  return Communicator::Create(o);
}

}  // namespace inca::python
