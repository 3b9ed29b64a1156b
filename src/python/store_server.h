// inca's rendezvous store server as both Python modules offer it:
// StoreServer (its port) and serve_store(address). `_cais` serves the store
// every group of an `import cais` job meets in; `_cais_c10d` one per torch
// group. Each module registers its own type (module_local), so that either
// loads without the other.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "hostpath/tcp_store.h"

namespace inca::python {

inline void DefineStoreServer(pybind11::module_& m) {
  namespace py = pybind11;
  using Server = inca::hostpath::TcpStoreServer;
  py::class_<Server, std::shared_ptr<Server>>(m, "StoreServer", py::module_local())
      .def_property_readonly("port", &Server::port);
  m.def(
      "serve_store",
      [](const std::string& address) -> std::shared_ptr<Server> {
        auto server = Server::Start(address);
        if (!server.ok()) throw std::runtime_error(std::string(server.status().message()));
        return std::move(*server);
      },
      py::arg("address"), "Serves inca's store at host:port (raises RuntimeError if it cannot)");
}

}  // namespace inca::python
