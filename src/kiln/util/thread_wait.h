// How long a thread waited for a core: the kernel's count of the time a
// thread spent runnable but not running (/proc/.../schedstat, its second
// field). The async engine (Note [Busy cores], engine/busy_cores.cpp) and
// the OpenMP team (Note [A busy team], kernels/cpu/parallel.h) use it to
// tell when other programs keep the cores busy.
#pragma once

#include <cstdint>

namespace kiln {

// A thread's total time on a core and waiting for one, in ns.
struct CoreTimes {
  int64_t ran = 0;
  int64_t waited = 0;
};

// The calling thread's; false where the kernel does not say.
bool core_times(CoreTimes& times);

// Thread `tid`'s of this process.
bool thread_core_times(int64_t tid, CoreTimes& times);

// The calling thread's kernel thread id.
int64_t current_thread_id();

// True when a thread that waited `waited_ns` for a core during `wall_ns`
// of wall time was starved: a quarter of the time or more.
bool starved(int64_t waited_ns, int64_t wall_ns);

// std::chrono::steady_clock's now, in ns.
int64_t steady_now_ns();

}  // namespace kiln
