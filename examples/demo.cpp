// The demo: SCENARIOS.md's story in C++. A function traced on constants, the
// reference workloads W1 (an MLP 512→256→128→2) and W2 (LeNet on 1×28×28)
// run eager and hybridized side by side (same outputs, time per call), and
// the graph the hybridized MLP runs.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kiln.h"

namespace {

using kiln::Tensor;
namespace jit = kiln::jit;
namespace nn = kiln::nn;

std::shared_ptr<nn::Sequential> make_mlp() {  // W1
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(512, 256), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(256, 128), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(128, 2));
}

std::shared_ptr<nn::Sequential> make_lenet() {  // W2, SCENARIOS.md §5
  using kiln::IntList;
  return std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(1, 6, IntList{5}, IntList{1}, IntList{2}),
      std::make_shared<nn::Sigmoid>(), std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}),
      std::make_shared<nn::Conv2d>(6, 16, IntList{5}), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::AvgPool2d>(IntList{2}, IntList{2}), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(16 * 5 * 5, 120), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::Linear>(120, 84), std::make_shared<nn::Sigmoid>(),
      std::make_shared<nn::Linear>(84, 10));
}

double micros_per_call(const std::function<Tensor()>& f, int calls = 1000) {
  for (int i = 0; i < 10; ++i)
    f();  // warm up: oneDNN builds its primitives on first use
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    f();
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / calls;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<float>() == b.to_vector<float>();
}

// Eager against hybridized at each batch size: outputs first, then time.
void eager_vs_hybrid(const char* title, const std::shared_ptr<nn::Sequential>& model,
                     const kiln::IntList& sample_shape, std::initializer_list<int64_t> batches) {
  auto hybrid = jit::hybridize(model);
  std::printf("\n== %s: eager vs hybridized (us/call, 1000 calls)\n", title);
  for (int64_t batch : batches) {
    kiln::IntList shape = sample_shape;
    shape.insert(shape.begin(), batch);
    Tensor x = kiln::rand(shape);
    bool same = same_values((*model)(x), (*hybrid)(x));
    double eager = micros_per_call([&] { return (*model)(x); });
    double compiled = micros_per_call([&] { return (*hybrid)(x); });
    std::printf("  batch %4lld: eager %9.1f   hybridized %9.1f   (%.2fx)   outputs %s\n",
                static_cast<long long>(batch), eager, compiled, eager / compiled,
                same ? "equal" : "DIFFER");
  }
}

}  // namespace

int main() {
  kiln::manual_seed(0);
  kiln::NoGradGuard inference;  // inference: no autograd bookkeeping in either path

  std::cout << "== SCENARIOS.md §4: fancy_func traced on constant inputs\n";
  auto fancy_func = [](const std::vector<Tensor>&) {
    Tensor a = kiln::scalar_tensor(1.0), b = kiln::scalar_tensor(2.0);
    Tensor c = kiln::scalar_tensor(3.0), d = kiln::scalar_tensor(4.0);
    return std::vector<Tensor>{(a + b) + (c + d)};
  };
  jit::CompiledFunction fancy = jit::trace(fancy_func, {});
  std::cout << fancy.graph() << "result: " << fancy({})[0] << "\n";

  auto mlp = make_mlp();
  mlp->eval();
  eager_vs_hybrid("W1: MLP 512-256-128-2", mlp, {512}, {1, 64, 1024});

  auto lenet = make_lenet();
  lenet->eval();
  eager_vs_hybrid("W2: LeNet on 1x28x28", lenet, {1, 28, 28}, {1, 64});

  std::cout << "\n== The graph the hybridized MLP runs (batch 1)\n";
  std::cout << jit::trace(*mlp, kiln::randn({1, 512})).graph();
  std::printf("\nthreads: %d (set OMP_NUM_THREADS=1 for the single-thread numbers)\n",
              kiln::cpu::max_threads());
  return 0;
}
