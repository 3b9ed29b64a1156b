// Golden datagram traces for the bit-for-bit tests (sim_vs_switchd_test,
// sim_vs_client_test): a trace's digest is checked against the one recorded
// in src/sim/testdata/<name>.golden, so that a change in what the simulated
// switch or client sends fails here even when the real and the simulated
// side change together. INCA_UPDATE_GOLDEN=1 rewrites the file instead (do
// it only for a change in behaviour you meant, and say so in the commit).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <sstream>
#include <string>

namespace inca::sim {

// FNV-1a, 64 bits, over each datagram's tag (its port, or its rank), length
// and bytes, in order.
class TraceDigest {
 public:
  void Add(uint64_t tag, std::span<const uint8_t> d) {
    Mix(tag);
    Mix(d.size());
    for (uint8_t b : d) Byte(b);
    ++datagrams_;
  }
  std::string Hex() const {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%016llx/%llu", static_cast<unsigned long long>(h_),
                  static_cast<unsigned long long>(datagrams_));
    return buf;
  }

 private:
  void Byte(uint8_t b) {
    h_ ^= b;
    h_ *= 1099511628211ull;
  }
  void Mix(uint64_t v) {
    for (int i = 0; i < 8; ++i) Byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  uint64_t h_ = 14695981039346656037ull;
  uint64_t datagrams_ = 0;
};

// Checks `digest` (one line of text) against testdata/<name>.golden.
inline void ExpectGolden(const std::string& name, const std::string& digest) {
  const std::string path = std::string(INCA_SIM_TESTDATA) + "/" + name + ".golden";
  const char* update = std::getenv("INCA_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << digest << "\n";
    return;
  }
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_EQ(s.str(), digest + "\n")
      << "the trace differs from " << path
      << " (INCA_UPDATE_GOLDEN=1 rewrites it, for a change in behaviour you meant)";
}

}  // namespace inca::sim
