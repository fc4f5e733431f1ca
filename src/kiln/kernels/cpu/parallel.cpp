#include "kiln/kernels/cpu/parallel.h"

#include <omp.h>

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

}  // namespace kiln::cpu
