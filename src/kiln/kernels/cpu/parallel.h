// OpenMP, the one threading runtime (oneDNN in Debian uses it too). Kernels
// ask here rather than calling omp_* directly, so the runtime is named once.
#pragma once

#include <cstdint>

namespace kiln::cpu {

int omp_threads_in_region();
int omp_thread_id_in_region();
int max_threads();
void set_num_threads(int n);

// Calls body(i) for every i in [0, n): split across OpenMP threads when
// `split`, else a plain loop. A region with `if (false)` would still cost
// libgomp a team setup, microseconds per call on batch-1 shapes.
template <typename Body>
void parallel_for(int64_t n, bool split, const Body& body) {
  if (!split) {
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
