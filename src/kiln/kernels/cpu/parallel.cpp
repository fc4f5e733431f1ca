#include "kiln/kernels/cpu/parallel.h"

#include <omp.h>

#include <exception>
#include <mutex>

namespace kiln::cpu {

int omp_threads_in_region() {
  return omp_get_num_threads();
}
int omp_thread_id_in_region() {
  return omp_get_thread_num();
}
int max_threads() {
  return omp_get_max_threads();
}
void set_num_threads(int n) {
  omp_set_num_threads(n);
}

bool can_split() {
  return omp_get_max_threads() > 1 && !omp_in_parallel();
}

OneThread::OneThread()
    : previous_(omp_get_max_threads()), previous_levels_(omp_get_max_active_levels()) {
  if (previous_ != 1) omp_set_num_threads(1);
  if (previous_levels_ != 0) omp_set_max_active_levels(0);
}
OneThread::~OneThread() {
  if (previous_ != 1) omp_set_num_threads(previous_);
  if (previous_levels_ != 0) omp_set_max_active_levels(previous_levels_);
}

void run_concurrently(int64_t n, int threads, void (*task)(void*, int64_t), void* context) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      task(context, i);
    } catch (...) {  // an exception must not leave an OpenMP region
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kiln::cpu
