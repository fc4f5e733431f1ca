// OpDef::prepare: a prepared kernel gives bit for bit what the op's plain
// kernel gives, for every path it can choose (matvec, kiln's GEMM, oneDNN,
// the reference loops, empty outputs) and any strides, and keeps no data
// between calls but a packed weight, tied to the weight's version.
#include <gtest/gtest.h>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
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

// run_packed keeps b packed while the version it is given stays the same,
// and packs again when it moves.
TEST(PreparedKernelPacking, RepacksWhenTheVersionMoves) {
  const OpDef& def = op("linear");
  const Attrs attrs = normalize_attrs(def, {});
  Tensor x = randn({9, 40}), w = randn({24, 40}), b = randn({24});
  const Tensor want = dispatch1(def, {x, w, b}, attrs);
  std::vector<cpu::StridedView> in_views{view_of(x), view_of(w), view_of(b)};
  Tensor out = empty_like(want);
  cpu::StridedView out_view = view_of(out);
  const KernelArgs args{in_views, {&out_view, 1}, attrs};
  std::unique_ptr<PreparedKernel> kernel = def.prepare(args);
  ASSERT_EQ(kernel->packable_input(), 1) << "the weight";

  kernel->run_packed(args, 5);
  EXPECT_TRUE(bitwise_equal(out, want));
  mul_(w, 2.0);  // in place: the views still point at w's memory
  kernel->run_packed(args, 5);
  EXPECT_TRUE(bitwise_equal(out, want)) << "same version: the packed copy is used";
  kernel->run_packed(args, 6);
  EXPECT_TRUE(bitwise_equal(out, dispatch1(def, {x, w, b}, attrs))) << "new version: repacked";
}

TEST(PreparedKernelPacking, OnlyKilnsGemmPacks) {
  const OpDef& def = op("linear");
  const Attrs attrs = normalize_attrs(def, {});
  for (const IntList& x_shape : {IntList{1, 16}, IntList{4, 16}}) {
    Tensor x = randn(x_shape), w = randn({x_shape[0] == 1 ? 8 : 2, 16});
    std::vector<cpu::StridedView> in_views{view_of(x), view_of(w), {}};
    Tensor out = make_tensor({x_shape[0], w.size(0)}, DType::Float32);
    cpu::StridedView out_view = view_of(out);
    std::unique_ptr<PreparedKernel> kernel = def.prepare({in_views, {&out_view, 1}, attrs});
    EXPECT_EQ(kernel->packable_input(), -1) << "matvec at batch 1 and for 2 columns";
  }
}

const IntList kAbsent{-1};

INSTANTIATE_TEST_SUITE_P(
    Ops, PreparedKernelTest,
    testing::Values(
        Case{"linear", {{1, 64}, {32, 64}, {32}}},      // matvec
        Case{"linear", {{64}, {32, 64}, kAbsent}},      // 1-D input, matvec
        Case{"linear", {{5, 64}, {32, 64}, {32}}},      // kiln's GEMM
        Case{"linear", {{7, 300}, {40, 300}, {40}}},    // GEMM: two K blocks, a partial panel
        Case{"linear", {{2, 3, 16}, {8, 16}, {8}}},     // batch folded into rows
        Case{"linear", {{5, 64}, {3, 64}, {3}}},        // 3 columns: matvec per row
        Case{"linear_act", {{9, 70}, {20, 70}, {20}}},  // relu in the GEMM's store
        Case{"linear_act", {{1, 70}, {21, 70}, {21}}},  // relu in the matvec's store
        Case{"linear_act", {{6, 70}, {3, 70}, {3}}},    // matvec per row, relu in its store
        Case{"linear_act", {{9, 70}, {20, 70}, {20}}, {{"activation", "sigmoid"}}},
        Case{"matmul", {{6, 4}, {4, 3}}},  // 3 columns, b not Wᵀ: oneDNN
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
