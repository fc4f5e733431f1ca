// The foundation demo: SCENARIOS.md's reference workloads W1 (an MLP
// 512→256→128→2) and W2 (LeNet on 1×28×28) run forward in eager C++, printing
// their outputs and the time per call.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>

#include "kiln/kernels/cpu/parallel.h"
#include "kiln/kiln.h"

namespace {

using kiln::Tensor;

// PyTorch's default init for Linear and Conv2d weights and biases: uniform in
// ±1/sqrt(fan_in) (Kaiming-uniform with a=sqrt(5) reduces to this bound).
Tensor init_uniform(const kiln::IntList& shape, int64_t fan_in) {
  double bound = 1.0 / std::sqrt(double(fan_in));
  return kiln::rand(shape) * (2 * bound) - bound;
}

struct Linear {
  Tensor w, b;
  Linear(int64_t in, int64_t out) : w(init_uniform({out, in}, in)), b(init_uniform({out}, in)) {}
  Tensor operator()(const Tensor& x) const { return kiln::linear(x, w, b); }
};

struct Conv2d {
  Tensor w, b;
  int64_t padding;
  Conv2d(int64_t in, int64_t out, int64_t k, int64_t pad = 0)
      : w(init_uniform({out, in, k, k}, in * k * k)),
        b(init_uniform({out}, in * k * k)),
        padding(pad) {}
  Tensor operator()(const Tensor& x) const {
    return kiln::conv2d(x, w, b, {1, 1}, {padding, padding});
  }
};

struct Mlp {  // W1
  Linear l1{512, 256}, l2{256, 128}, l3{128, 2};
  Tensor operator()(const Tensor& x) const { return l3(kiln::relu(l2(kiln::relu(l1(x))))); }
};

struct LeNet {  // W2
  Conv2d c1{1, 6, 5, 2}, c2{6, 16, 5};
  Linear f1{16 * 5 * 5, 120}, f2{120, 84}, f3{84, 10};
  Tensor operator()(const Tensor& x) const {
    Tensor h = kiln::avg_pool2d(kiln::sigmoid(c1(x)), {2, 2}, {2, 2});
    h = kiln::avg_pool2d(kiln::sigmoid(c2(h)), {2, 2}, {2, 2});
    h = kiln::flatten(h, 1);
    return f3(kiln::sigmoid(f2(kiln::sigmoid(f1(h)))));
  }
};

double micros_per_call(const std::function<Tensor()>& f, int calls = 1000) {
  for (int i = 0; i < 10; ++i)
    f();  // warm up: oneDNN builds its primitives on first use
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    f();
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / calls;
}

}  // namespace

int main() {
  kiln::manual_seed(0);
  Mlp mlp;
  LeNet lenet;

  std::cout << "== W1: MLP 512-256-128-2, eager\n";
  Tensor x = kiln::randn({1, 512});
  std::cout << "output (batch 1): " << mlp(x) << "\n";
  for (int64_t batch : {1, 64, 1024}) {
    Tensor xb = kiln::randn({batch, 512});
    std::printf("  batch %4lld: %9.1f us/call\n", static_cast<long long>(batch),
                micros_per_call([&] { return mlp(xb); }));
  }

  std::cout << "\n== W2: LeNet on 1x28x28, eager\n";
  Tensor image = kiln::rand({1, 1, 28, 28});
  std::cout << "output (batch 1): " << lenet(image) << "\n";
  for (int64_t batch : {1, 64}) {
    Tensor xb = kiln::rand({batch, 1, 28, 28});
    std::printf("  batch %4lld: %9.1f us/call\n", static_cast<long long>(batch),
                micros_per_call([&] { return lenet(xb); }));
  }
  std::printf("\nthreads: %d (set OMP_NUM_THREADS=1 for the single-thread numbers)\n",
              kiln::cpu::max_threads());
  return 0;
}
