// What the profiler costs: W1 (MLP 512-256-128-2) at batch 1, eager and
// compiled (jit::trace), microseconds per call, the fastest of repetitions
// (on a shared machine the one least disturbed by other processes).
// Built twice to measure "compiled in but off" against a tree without the
// profiler: once here (the bench target), once with -DKILN_NO_PROFILER
// against a checkout from before it (the hooks are in the libraries; this
// file only adds the "on" rows). With the profiler, also the time per call
// while a session records, and what that adds per recorded range.
//
//   kiln_bench_profiler_overhead [--calls 20000] [--repeats 15]
//       [--case eager|compiled] [--off-only 1]
//
// Timings on a busy machine drift by more than the cost of a branch; the
// instructions per call do not: under valgrind --tool=callgrind, the
// difference of two runs with --off-only 1 and different --calls, divided
// by the difference in calls, is the instructions one call executes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "kiln/core/random.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kiln.h"
#ifndef KILN_NO_PROFILER
#include "kiln/profiler/profiler.h"
#endif

namespace {

using kiln::Tensor;
namespace nn = kiln::nn;

std::shared_ptr<nn::Sequential> make_w1() {
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

double fastest(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

// Microseconds per call of one repetition.
double time_calls(const std::function<void()>& f, int calls) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() /
         calls;
}

struct Timing {
  double off = 0, on = 0;
  double ranges_per_call = 0;
};

// Repetitions alternate off and on, so that the machine's drift hits both.
bool g_off_only = false;

Timing measure(const std::function<void()>& f, int calls, int repeats) {
  for (int i = 0; i < 200; ++i)
    f();
  std::vector<double> off, on;
  Timing t;
  for (int r = 0; r < repeats; ++r) {
    off.push_back(time_calls(f, calls));
#ifndef KILN_NO_PROFILER
    if (g_off_only) continue;
    kiln::profiler::Profile prof;
    on.push_back(time_calls(f, calls));
    prof.stop();
    t.ranges_per_call = double(prof.events().size()) / calls;
#endif
  }
  t.off = fastest(off);
  t.on = on.empty() ? 0 : fastest(on);
  return t;
}

void print(const char* name, const Timing& t) {
  std::printf("%-22s off %8.3f us/call", name, t.off);
  if (t.on > 0) {
    std::printf("   on %8.3f us/call   %.0f ranges/call   +%.0f ns/range", t.on, t.ranges_per_call,
                (t.on - t.off) * 1e3 / t.ranges_per_call);
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000, repeats = 15;
  const char* only = "";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--case")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--off-only")) g_off_only = std::atoi(argv[i + 1]) != 0;
  }
  kiln::cpu::set_num_threads(1);
  kiln::manual_seed(0);
  auto w1 = make_w1();
  w1->eval();
  Tensor x = kiln::randn({1, 512});
  kiln::NoGradGuard no_grad;
  kiln::jit::CompiledFunction compiled = kiln::jit::trace(*w1, x);
  if (std::strcmp(only, "compiled") != 0) {
    print("W1 batch 1 eager", measure([&] { (*w1)(x); }, calls / 4, repeats));
  }
  if (std::strcmp(only, "eager") != 0) {
    print("W1 batch 1 compiled", measure([&] { compiled({x}); }, calls, repeats));
  }
  return 0;
}
