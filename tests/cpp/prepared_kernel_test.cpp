// OpDef::prepare: a prepared kernel gives bit for bit what the op's plain
// kernel gives, for every path it can choose (matvec, oneDNN, the reference
// loops, empty outputs) and any strides, and keeps no data between calls.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

struct Case {
  std::string op;
  std::vector<IntList> shapes;  // an empty shape list entry = an absent input
  Attrs attrs = {};
  DType dtype = DType::Float32;
  bool transpose_input1 = false;  // pass input 1 as a transposed view
};

Tensor random(const IntList& shape, DType dtype) {
  return is_floating(dtype) ? randn(shape, dtype) : randint(-5, 5, shape, dtype);
}

std::vector<Tensor> make_inputs(const Case& c) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    const IntList& shape = c.shapes[i];
    if (shape.size() == 1 && shape[0] < 0) {
      inputs.emplace_back();
      continue;
    }
    if (i == 1 && c.transpose_input1) {
      IntList flipped(shape.rbegin(), shape.rend());
      IntList order(shape.size());
      for (size_t d = 0; d < order.size(); ++d)
        order[d] = int64_t(order.size() - 1 - d);
      inputs.push_back(permute(random(flipped, c.dtype), order));
      continue;
    }
    inputs.push_back(random(shape, c.dtype));
  }
  return inputs;
}

// The prepared kernel's output for these inputs, written into a fresh tensor.
Tensor run_prepared(const PreparedKernel& kernel, const std::vector<Tensor>& inputs,
                    const Attrs& attrs, const Tensor& like) {
  Tensor out = make_tensor(like.shape(), like.dtype());
  std::vector<cpu::StridedView> in_views;
  for (const Tensor& t : inputs)
    in_views.push_back(view_of(t));
  cpu::StridedView out_view = view_of(out);
  kernel.run(KernelArgs{in_views, {&out_view, 1}, attrs});
  return out;
}

class PreparedKernelTest : public testing::TestWithParam<Case> {};

TEST_P(PreparedKernelTest, EqualsThePlainKernel) {
  const Case& c = GetParam();
  const OpDef& def = op(c.op);
  ASSERT_NE(def.prepare, nullptr);
  const Attrs attrs = normalize_attrs(def, c.attrs);
  std::vector<Tensor> inputs = make_inputs(c);
  const Tensor want = dispatch1(def, inputs, attrs);

  std::vector<cpu::StridedView> in_views;
  for (const Tensor& t : inputs)
    in_views.push_back(view_of(t));
  Tensor geometry = make_tensor(want.shape(), want.dtype());
  cpu::StridedView out_view = view_of(geometry);
  std::unique_ptr<PreparedKernel> kernel = def.prepare(KernelArgs{in_views, {&out_view, 1}, attrs});
  ASSERT_NE(kernel, nullptr);
  EXPECT_TRUE(bitwise_equal(run_prepared(*kernel, inputs, attrs, want), want));

  // New values, same geometry: nothing of the first call's data was kept.
  std::vector<Tensor> again = make_inputs(c);
  EXPECT_TRUE(
      bitwise_equal(run_prepared(*kernel, again, attrs, want), dispatch1(def, again, attrs)));
}

const IntList kAbsent{-1};

INSTANTIATE_TEST_SUITE_P(
    Ops, PreparedKernelTest,
    testing::Values(
        Case{"linear", {{1, 64}, {32, 64}, {32}}},   // matvec
        Case{"linear", {{64}, {32, 64}, kAbsent}},   // 1-D input, matvec
        Case{"linear", {{5, 64}, {32, 64}, {32}}},   // oneDNN
        Case{"linear", {{2, 3, 16}, {8, 16}, {8}}},  // batch folded into rows
        Case{"linear", {{1, 16}, {8, 16}, {8}}, {}, DType::Float32, true},  // Wᵀ stored
        Case{"linear", {{4, 16}, {8, 16}, {8}}, {}, DType::Float64},        // reference loop
        Case{"linear", {{3, 0}, {4, 0}, {4}}},                              // K = 0
        Case{"linear", {{0, 8}, {4, 8}, {4}}},                              // empty output
        Case{"matmul", {{3, 4}, {4, 5}}}, Case{"matmul", {{4}, {4, 5}}},
        Case{"matmul", {{2, 1, 3, 4}, {5, 4, 6}}},  // broadcast batch dims
        Case{"matmul", {{3, 4}, {4, 5}}, {}, DType::Float32, true},
        Case{"matmul", {{3, 4}, {4, 5}}, {}, DType::Int64},
        Case{"addmm", {{5}, {3, 4}, {4, 5}}, {{"beta", 0.5}, {"alpha", 2.0}}},
        Case{"addmm", {{3, 5}, {3, 4}, {4, 5}}, {{"beta", 0.0}}},
        Case{"conv2d", {{2, 4, 9, 9}, {6, 2, 3, 3}, {6}}, {{"groups", 2}, {"padding", 1}}},
        Case{"conv2d", {{1, 3, 8, 8}, {4, 3, 3, 3}, kAbsent}, {{"stride", 2}, {"dilation", 2}}},
        Case{"conv2d", {{3, 8, 8}, {4, 3, 5, 5}, {4}}},  // unbatched
        Case{"conv2d", {{1, 2, 6, 6}, {4, 2, 3, 3}, {4}}, {}, DType::Float64}));

}  // namespace
}  // namespace kiln
