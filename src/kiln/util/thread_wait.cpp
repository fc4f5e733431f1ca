#include "kiln/util/thread_wait.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace kiln {
namespace {

// The first two numbers of a schedstat file: open, read and close rather
// than stdio, as the OpenMP team's watch reads one per thread per window.
bool read_schedstat(const char* path, CoreTimes& times) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[96];
  const ssize_t n = ::read(fd, text, sizeof(text) - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  char* end = nullptr;
  const long long ran = std::strtoll(text, &end, 10);
  if (end == text) return false;
  char* wait_end = nullptr;
  const long long waited = std::strtoll(end, &wait_end, 10);
  if (wait_end == end) return false;
  times = {ran, waited};
  return true;
}

}  // namespace

bool core_times(CoreTimes& times) {
  return read_schedstat("/proc/thread-self/schedstat", times);
}

bool thread_core_times(int64_t tid, CoreTimes& times) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%lld/schedstat", static_cast<long long>(tid));
  return read_schedstat(path, times);
}

int64_t current_thread_id() {
  return static_cast<int64_t>(::syscall(SYS_gettid));
}

std::optional<bool> starved_between(const CoreTimes& before, const CoreTimes& now) {
  const int64_t waited = now.waited - before.waited;
  const int64_t runnable = now.ran - before.ran + waited;
  if (runnable < kLeastRunnableNs) return std::nullopt;
  return waited * 4 >= runnable;
}

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln
