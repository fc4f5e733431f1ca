// OpenMP, the one threading runtime (oneDNN in Debian uses it too). Kernels
// ask here rather than calling omp_* directly, so the runtime is named once.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// What kiln sets GOMP_SPINCOUNT to when the user set neither it nor
// OMP_WAIT_POLICY (docs/kernels.md, "Threads"): libgomp's default spins
// about 40 ms before a waiting thread sleeps, ruinous when other programs
// keep the cores busy. python/kiln/_openmp_env.py holds the same value.
inline constexpr const char* kDefaultSpinCount = "200";

int omp_threads_in_region();
int omp_thread_id_in_region();
int max_threads();
void set_num_threads(int n);
// Whether a parallel region here would get more than one thread: the team
// size is above 1 and this thread is not inside a region already (regions
// do not nest).
bool can_split();

// While it lives, this thread's OpenMP team size is 1 (Note [Threads per
// step], ops/op_threads.h): parallel_for and the kernels that ask
// max_threads() run as plain loops, and a oneDNN primitive created and run
// under it is a one-thread primitive, entering no region. Restores the
// team size it found.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_;
};

// Calls body(i) for every i in [0, n): split across OpenMP threads when
// `split` and a region would have more than one thread, else a plain loop.
// A region with `if (false)`, or of a team of one, would still cost libgomp
// a team setup, microseconds per call on batch-1 shapes.
template <typename Body>
void parallel_for(int64_t n, bool split, const Body& body) {
  if (!split || !can_split()) {
    for (int64_t i = 0; i < n; ++i)
      body(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    body(i);
}

// Runs task(i) for every i in [0, n) on up to `threads` OpenMP threads
// (independent tasks: a compiled plan's concurrent steps). Kernels inside a
// task run on one thread, as OpenMP regions do not nest: tasks times
// threads per task stay within `threads`. The first exception a task
// throws is rethrown here once every task has ended.
void run_concurrently(int64_t n, int threads, void (*task)(void* context, int64_t i),
                      void* context);

template <typename Task>
void run_concurrently(int64_t n, int threads, const Task& task) {
  run_concurrently(
      n, threads, [](void* c, int64_t i) { (*static_cast<const Task*>(c))(i); },
      const_cast<Task*>(&task));
}

}  // namespace kiln::cpu
