// An operation a rank hands to another collective library instead of
// running it through inca, as its peers describe it to each other
// (Communicator::AgreeDelegated, inca/client/communicator.h). Its own
// header, so that the client's internals can describe one without the
// public Communicator.
#pragma once

#include <cstdint>
#include <string>

namespace inca {

// An operation a rank hands to another collective library instead of
// running it through inca (the torch backend hands float64 sums, AVG and
// the collectives inca lacks to Gloo): see Communicator::AgreeDelegated.
struct DelegatedOp {
  enum class Kind : uint8_t {
    kAllReduce,
    kAllGather,
    kBroadcast,
    kReduceScatter,
    kReduce,
    kGather,
    kScatter,
    kAllToAll,
  };
  Kind kind = Kind::kAllReduce;
  uint64_t count = 0;  // elements, summed over the rank's tensors
  // Names compared with the peers': "f64", "i64", "u8", "i8", "i16",
  // "bool", "c64", "c128" or one of inca's ("f32", "i32", "f16", "bf16");
  // any other compares as "other".
  std::string dtype;
  // "sum", "max", "min", "product", "avg", "band", "bor", "bxor",
  // "premul_sum" (others: "other"); empty where nothing is reduced.
  std::string reduce;
  int root = 0;  // where the collective has one
  uint16_t layer_id = 0;
};

}  // namespace inca
