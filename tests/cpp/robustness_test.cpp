// Bad input must never crash or abort: every op in the table is called with
// random shapes, dtypes and attribute values, and may only succeed or throw
// kiln::Error.
#include <gtest/gtest.h>

#include <random>

#include "kiln/core/factory.h"
#include "kiln/ops/dispatch.h"

// Other seeds and longer runs can be asked for at compile time when hunting.
#ifndef KILN_ROBUST_SEED
#define KILN_ROBUST_SEED 1234
#endif
#ifndef KILN_ROBUST_TRIALS
#define KILN_ROBUST_TRIALS 300
#endif

namespace kiln {
namespace {

class RandomCalls {
 public:
  explicit RandomCalls(uint32_t seed) : rng_(seed) {}

  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  Tensor input() {
    if (pick(0, 9) == 0) return Tensor();  // an absent optional input
    IntList shape(size_t(pick(0, 3)));
    for (int64_t& s : shape)
      s = pick(0, 4);
    DType dtype = DType(pick(0, kNumDTypes - 1));
    Tensor t = zeros(shape, dtype);
    if (t.numel() > 0 && dtype != DType::Bool) fill_uniform_values(t);
    return t;
  }

  AttrValue attr(const AttrSpec& spec) {
    if (spec.optional && pick(0, 3) == 0) return std::monostate{};
    switch (spec.kind) {
      case AttrKind::Bool:
        return pick(0, 1) == 1;
      case AttrKind::Int:
        return pick(-3, 5);
      case AttrKind::Float:
        return double(pick(-2, 4)) * 0.5;
      case AttrKind::DType:
        return DType(pick(0, kNumDTypes - 1));
      case AttrKind::String:
        return std::string(pick(0, 1) ? "none" : "tanh");
      case AttrKind::Ints: {
        IntList values(size_t(pick(0, 3)));
        for (int64_t& v : values)
          v = pick(-2, 4);
        return values;
      }
    }
    return std::monostate{};
  }

 private:
  void fill_uniform_values(const Tensor& t) {
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i)
        p[i] = T(pick(-3, 5));
    });
  }
  std::mt19937 rng_;
};

TEST(Robustness, RandomCallsOnlyEverThrowKilnErrors) {
  RandomCalls random(KILN_ROBUST_SEED);
  for (const OpDef* def : op_registry().all()) {
    for (int trial = 0; trial < KILN_ROBUST_TRIALS; ++trial) {
      int max_inputs = def->max_inputs < 0 ? def->min_inputs + 3 : def->max_inputs;
      std::vector<Tensor> inputs(size_t(random.pick(def->min_inputs, max_inputs)));
      for (Tensor& t : inputs)
        t = random.input();
      Attrs attrs;
      for (const AttrSpec& spec : def->attrs) {
        if (random.pick(0, 4) > 0) attrs.set(spec.name, random.attr(spec));
      }
      try {
        dispatch(*def, inputs, attrs);
      } catch (const Error&) {
        // a clear error is the expected outcome for most random calls
      } catch (const std::exception& e) {
        ADD_FAILURE() << def->name << ": threw a non-kiln exception: " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace kiln
