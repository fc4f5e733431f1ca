#include "kiln/util/thread_wait.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

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

// The busy ticks (all but idle and iowait) of the CPUs in `allowed`, from
// /proc/stat's "cpuN" lines.
bool busy_ticks(const cpu_set_t& allowed, int64_t& ticks) {
  const int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char chunk[4096];
  ssize_t n;
  while ((n = ::read(fd, chunk, sizeof(chunk))) > 0)
    text.append(chunk, size_t(n));
  ::close(fd);
  ticks = 0;
  bool any = false;
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string::npos) end = text.size();
    const char* p = text.c_str() + line;
    line = end + 1;
    if (std::strncmp(p, "cpu", 3) != 0 || p[3] < '0' || p[3] > '9') continue;
    char* next = nullptr;
    const long cpu = std::strtol(p + 3, &next, 10);
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(size_t(cpu), &allowed)) continue;
    // user nice system idle iowait irq softirq steal
    for (int field = 0; field < 8; ++field) {
      const long long value = std::strtoll(next, &next, 10);
      if (field != 3 && field != 4) ticks += value;
    }
    any = true;
  }
  return any;
}

}  // namespace

bool machine_times(MachineTimes& times) {
  static const cpu_set_t allowed = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) != 0) CPU_ZERO(&set);
    return set;
  }();
  static const int64_t ns_per_tick = 1'000'000'000 / std::max(1L, ::sysconf(_SC_CLK_TCK));
  int64_t ticks = 0;
  if (!busy_ticks(allowed, ticks)) return false;
  timespec cpu{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) != 0) return false;
  times.wall_ns = steady_now_ns();
  times.cores_busy_ns = ticks * ns_per_tick;
  times.process_ns = int64_t(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec;
  return true;
}

std::optional<double> others_busy_cores(const MachineTimes& before, const MachineTimes& now) {
  const int64_t span = now.wall_ns - before.wall_ns;
  if (span < kLeastMachineSpanNs) return std::nullopt;
  const int64_t others =
      (now.cores_busy_ns - before.cores_busy_ns) - (now.process_ns - before.process_ns);
  return std::max<int64_t>(others, 0) / double(span);
}

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
