// OpenMP, the one threading runtime (oneDNN in Debian uses it too). Kernels
// ask here rather than calling omp_* directly, so the runtime is named once.
#pragma once

#include <cstdint>

namespace kiln::cpu {

int omp_threads_in_region();
int omp_thread_id_in_region();
int max_threads();
void set_num_threads(int n);

}  // namespace kiln::cpu
