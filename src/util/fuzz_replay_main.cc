// Replays fuzz corpora through LLVMFuzzerTestOneInput when the build has no
// libFuzzer (g++ builds, sanitizer builds): every file named on the command
// line, and every regular file inside directories named there, is fed once.
// Exit status 0 means every input ran without a crash or sanitizer report.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
int RunFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz_replay: cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  size_t ran = 0;
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) {
          failures += RunFile(e.path());
          ++ran;
        }
      }
    } else {
      failures += RunFile(p);
      ++ran;
    }
  }
  // Also the empty input, which every target must accept.
  LLVMFuzzerTestOneInput(nullptr, 0);
  std::printf("fuzz_replay: %zu inputs replayed, %d unreadable\n", ran, failures);
  return (failures == 0 && ran > 0) ? 0 : 1;
}
