#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace inca::util {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                          std::string_view what) {
  const absl::string_view w(what.data(), what.size());
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", w, " ", path, ": ", strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(w, " ", path, " is a directory; name a YAML file"));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::DataLossError(absl::StrCat("cannot read ", w, " ", path, ": ", strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(w, " ", path, " is larger than ", max_bytes,
                                                     " bytes; is it the file you meant?"));
    }
  }
  close(fd);
  return text;
}

}  // namespace inca::util
