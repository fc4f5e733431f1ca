// kiln._C's random numbers: the Generator class (kiln.Generator), the
// default generator and its state, the draws that take a generator of their
// own, and kiln._C.nn.init (kiln/nn/init.h, bound once for kiln.nn.init).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <random>

#include "convert.h"
#include "kiln/core/factory.h"
#include "kiln/nn/init.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/random.h"

namespace kiln::python {
namespace {

using nb::arg;
namespace init = kiln::nn::init;

// PyTorch's default seed for a new torch.Generator.
constexpr uint64_t kDefaultSeed = 67280421310721ULL;

// A generator's whole state: its seed (the Philox key) and the index of the
// next block it hands out. As an int64 tensor of two values, bit for bit.
Tensor state_of(Generator& gen) {
  Tensor state = empty({2}, DType::Int64);
  state.data<int64_t>()[0] = int64_t(gen.seed());
  state.data<int64_t>()[1] = int64_t(gen.offset());
  return state;
}

void set_state(Generator& gen, const Tensor& state) {
  KILN_CHECK_TYPE(state.dtype() == DType::Int64 && state.shape() == IntList{2},
                  "set_state: expected the int64 tensor of 2 values that get_state() returns, "
                  "got ",
                  state.dtype(), " of shape ", state.shape());
  Tensor values = kiln::clone(state);
  gen.manual_seed(uint64_t(values.data<int64_t>()[0]));
  gen.set_offset(uint64_t(values.data<int64_t>()[1]));
}

// torch.Generator.seed(): a fresh non-deterministic seed, set and returned.
uint64_t reseed(Generator& gen) {
  std::random_device device;
  uint64_t seed = (uint64_t(device()) << 32) ^ device() ^
                  uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  seed &= (1ULL << 63) - 1;  // a Python int that fits int64 too
  gen.manual_seed(seed);
  return seed;
}

void bind_generator(nb::module_& m) {
  nb::class_<Generator>(m, "Generator",
                        "A random number generator (Philox-4x32-10): pass it as `generator=` to "
                        "draw from a stream of your own")
      .def(nb::init<uint64_t>(), arg("seed") = kDefaultSeed)
      .def(
          "manual_seed",
          [](Generator& gen, int64_t seed) -> Generator& {
            gen.manual_seed(uint64_t(seed));
            return gen;
          },
          arg("seed"), nb::rv_policy::reference)
      .def("seed", &reseed)
      .def("initial_seed", [](Generator& gen) { return gen.seed(); })
      .def("get_state", &state_of)
      .def(
          "set_state",
          [](Generator& gen, const Tensor& state) -> Generator& {
            set_state(gen, state);
            return gen;
          },
          arg("new_state"), nb::rv_policy::reference);
  m.def("default_generator", &default_generator, nb::rv_policy::reference);
}

void bind_draws(nb::module_& m) {
  m.def(
      "bernoulli", [](const Tensor& p, Generator* gen) { return bernoulli(p, gen); }, arg("p"),
      arg("generator").none() = nb::none());
  m.def(
      "multinomial",
      [](const Tensor& weights, int64_t num_samples, bool replacement, Generator* gen) {
        return multinomial(weights, num_samples, replacement, gen);
      },
      arg("input"), arg("num_samples"), arg("replacement") = false,
      arg("generator").none() = nb::none());
  m.def(
      "randperm",
      [](int64_t n, DType dtype, bool requires_grad, Generator* gen) {
        TensorOptions options(dtype);
        options.requires_grad = requires_grad;
        return randperm(n, options, gen);
      },
      arg("n"), arg("dtype") = DType::Int64, arg("requires_grad") = false,
      arg("generator").none() = nb::none());
}

void bind_init(nb::module_& m) {
  m.def("uniform_", &init::uniform_, arg("tensor"), arg("a") = 0.0, arg("b") = 1.0,
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("normal_", &init::normal_, arg("tensor"), arg("mean") = 0.0, arg("std") = 1.0,
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("trunc_normal_", &init::trunc_normal_, arg("tensor"), arg("mean") = 0.0, arg("std") = 1.0,
        arg("a") = -2.0, arg("b") = 2.0, arg("generator").none() = nb::none(),
        nb::rv_policy::reference);
  m.def("constant_", &init::constant_, arg("tensor"), arg("val"), nb::rv_policy::reference);
  m.def("zeros_", &init::zeros_, arg("tensor"), nb::rv_policy::reference);
  m.def("ones_", &init::ones_, arg("tensor"), nb::rv_policy::reference);
  m.def("eye_", &init::eye_, arg("tensor"), nb::rv_policy::reference);
  m.def("dirac_", &init::dirac_, arg("tensor"), arg("groups") = 1, nb::rv_policy::reference);
  m.def("orthogonal_", &init::orthogonal_, arg("tensor"), arg("gain") = 1.0,
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("xavier_uniform_", &init::xavier_uniform_, arg("tensor"), arg("gain") = 1.0,
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("xavier_normal_", &init::xavier_normal_, arg("tensor"), arg("gain") = 1.0,
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("kaiming_uniform_", &init::kaiming_uniform_, arg("tensor"), arg("a") = 0.0,
        arg("mode") = "fan_in", arg("nonlinearity") = "leaky_relu",
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("kaiming_normal_", &init::kaiming_normal_, arg("tensor"), arg("a") = 0.0,
        arg("mode") = "fan_in", arg("nonlinearity") = "leaky_relu",
        arg("generator").none() = nb::none(), nb::rv_policy::reference);
  m.def("calculate_gain", &init::calculate_gain, arg("nonlinearity"),
        arg("param").none() = nb::none());
  m.def("_calculate_fan_in_and_fan_out", &init::calculate_fan_in_and_fan_out, arg("tensor"));
}

}  // namespace

void bind_random(nb::module_& m, nb::module_& nn) {
  bind_generator(m);
  bind_draws(m);
  nb::module_ init_module = nn.def_submodule("init", "kiln/nn/init.h: parameter initialization");
  bind_init(init_module);
}

}  // namespace kiln::python
