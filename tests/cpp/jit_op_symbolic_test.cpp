// Every value row of the op test table traced with a symbolic leading
// dimension (issue 21), then run at the traced size and at two others.
//
// Which dims are symbols: dim 0 of the first graph input that has dims (the
// lead input: input 0 unless that is 0-d) is `n`. Every later graph input
// whose dim 0 has the same example size gets a symbol of its own (`n1`,
// `n2`, ...): the row does not say whether that size must equal n (add's
// second operand) or only happens to (a conv weight with as many filters as
// the batch), and the op's own shape checks do, as guards (`n == n1`) or by
// fixing it (`n1 == 4`). Rows whose graph inputs are all 0-d (or that have
// none) have no leading dim and are skipped.
//
// Other sizes: n + 1, and n - 1 (n + 2 when n is 0 or 1). The rows grow by
// repeating the leading slices cyclically and shrink by dropping the last, so
// indices and layouts stay valid. The lead input is resized, and with it
// the largest set of the other symbolized inputs whose sizes the graph's
// guards admit (every input when none is admitted). There eager and compiled both run and
// agree bitwise, or both refuse with a kiln::Error, or the graph's guards
// refuse the sizes (only in rows that decide on n, below): never a crash,
// never a wrong result.
//
// A graph that admits neither other size pinned (specialized) n; one that
// refuses a size eager runs bounded it. An op that does either where its
// shape inference could stay symbolic is a bug to fix in its infer; the rows
// that do so legitimately are listed in kDecidesOnN with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>

#include "jit_test_util.h"
#include "kiln/core/random.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/ops/dispatch.h"
#include "op_refs.h"

namespace kiln::jit {
namespace {

using nlohmann::json;

// Rows whose op takes a decision on n that another size takes differently,
// by row id. The graph is right for the sizes it admits and refuses the
// others by a guard (a cache then traces again): it either pins n to its
// example size or admits some sizes only.
enum class OnN { Pins, Bounds };
struct Decision {
  OnN kind;
  const char* why;
};
constexpr const char* kFixedElsewhere =
    "n must equal a static size of another input or attribute (broadcast, contraction, "
    "channels, normalized_shape, input_size)";
constexpr const char* kConstantTarget = "the target shape is a constant";
constexpr const char* kIsOne = "whether n is 1 decides the output's rank or the broadcast";
constexpr const char* kPieces = "n decides the number of pieces";
const std::map<std::string, Decision> kDecidesOnN = {
    {"add/bool_f32", {OnN::Pins, kFixedElsewhere}},
    {"where/broadcast_all_three", {OnN::Pins, kFixedElsewhere}},
    {"matmul/1d_batched", {OnN::Pins, kFixedElsewhere}},
    {"matmul/f64_1d_broadcast", {OnN::Pins, kFixedElsewhere}},
    {"linear/x_1d", {OnN::Pins, kFixedElsewhere}},
    {"addmm/broadcast_input", {OnN::Pins, kFixedElsewhere}},
    {"masked_fill/broadcast_input", {OnN::Pins, kFixedElsewhere}},
    {"conv2d/unbatched_single_stride", {OnN::Pins, kFixedElsewhere}},
    {"conv2d/f64_unbatched_stride_skips_edge", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_fused/unbatched", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_backward_input/stride_groups", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_backward_input/dilation_strided", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_backward_input/f64_stride_skips_edge", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_backward_input/empty_batch", {OnN::Pins, kFixedElsewhere}},
    {"conv2d_backward_weight/unbatched", {OnN::Pins, kFixedElsewhere}},
    {"conv3d/f64_unbatched", {OnN::Pins, kFixedElsewhere}},
    {"conv3d_backward_input/stride_groups", {OnN::Pins, kFixedElsewhere}},
    {"conv3d_backward_input/f64_dilation_skips_edge", {OnN::Pins, kFixedElsewhere}},
    {"conv3d_backward_input/empty_batch", {OnN::Pins, kFixedElsewhere}},
    {"layer_norm/f64_no_lead_dims", {OnN::Pins, kFixedElsewhere}},
    // a single matrix: its leading dim is a row count that must equal the column count
    {"det/2x2", {OnN::Pins, kFixedElsewhere}},
    {"det_cofactor/3x3_f64", {OnN::Pins, kFixedElsewhere}},
    // grad_output's dims are the forward's output at input_size
    {"upsample_nearest2d_backward/double", {OnN::Pins, kFixedElsewhere}},
    {"upsample_nearest2d_backward/scales", {OnN::Pins, kFixedElsewhere}},
    {"upsample_nearest2d_backward/downscale_transposed", {OnN::Pins, kFixedElsewhere}},
    {"upsample_nearest2d_backward/exact", {OnN::Pins, kFixedElsewhere}},
    {"upsample_nearest2d_backward/f64_exact_scales_strided", {OnN::Pins, kFixedElsewhere}},
    {"upsample_nearest2d_backward/empty_batch", {OnN::Pins, kFixedElsewhere}},
    {"upsample_bilinear2d_backward/up", {OnN::Pins, kFixedElsewhere}},
    {"upsample_bilinear2d_backward/align_corners_down", {OnN::Pins, kFixedElsewhere}},
    {"upsample_bilinear2d_backward/scale_keeps_a_size", {OnN::Pins, kFixedElsewhere}},
    {"upsample_bilinear2d_backward/f64_strided", {OnN::Pins, kFixedElsewhere}},
    {"upsample_bilinear2d_backward/f64_align_corners_transposed", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/nearest", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/nearest_exact_down_transposed", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/linear_up", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/linear_align_corners_f64", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/linear_1d_scales", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/cubic_up_strided", {OnN::Pins, kFixedElsewhere}},
    {"resize_backward/cubic_align_corners_down_f64", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/constant_crop", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/reflect_2d", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/reflect_1d_unbatched_transposed", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/replicate_3d", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/replicate_crop_strided", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/circular_2d", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/f64_circular_crop", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/f64_reflect_3d_unbatched", {OnN::Pins, kFixedElsewhere}},
    {"pad_backward/empty_batch", {OnN::Pins, kFixedElsewhere}},
    {"view", {OnN::Pins, kConstantTarget}},
    {"view/int", {OnN::Pins, kConstantTarget}},
    {"view/to_zero_dim", {OnN::Pins, kConstantTarget}},
    {"view/empty", {OnN::Pins, kConstantTarget}},
    {"view/expanded_split_inner", {OnN::Pins, kConstantTarget}},
    {"reshape", {OnN::Pins, kConstantTarget}},
    {"reshape/expanded_int", {OnN::Pins, kConstantTarget}},
    {"reshape/bool", {OnN::Pins, kConstantTarget}},
    {"reshape/empty", {OnN::Pins, kConstantTarget}},
    {"expand", {OnN::Pins, kConstantTarget}},
    {"expand/middle_f64", {OnN::Pins, kConstantTarget}},
    {"split/with_empty_piece_f64", {OnN::Pins, kConstantTarget}},
    {"expand/leading_f64", {OnN::Pins, kIsOne}},
    {"expand/int_transposed", {OnN::Pins, kIsOne}},
    {"expand/to_empty", {OnN::Pins, kIsOne}},
    {"squeeze/all", {OnN::Pins, kIsOne}},
    {"squeeze/list_transposed", {OnN::Pins, kIsOne}},
    {"squeeze/all_f64_strided", {OnN::Pins, kIsOne}},
    {"addmm/f64_broadcast_scalar_input", {OnN::Pins, kIsOne}},
    {"index_select/zero_dim", {OnN::Pins, kIsOne}},  // a 0-d input takes one index
    {"squeeze/not_one_kept", {OnN::Bounds, kIsOne}},
    {"chunk/empty", {OnN::Pins, kPieces}},  // an empty dim gives `chunks` empty pieces
    {"split", {OnN::Bounds, kPieces}},
    {"split/one_piece_int", {OnN::Bounds, kPieces}},
    {"chunk", {OnN::Bounds, kPieces}},
};

// Graph inputs are tensors: absent inputs stay absent and numbers stay
// numbers (constants of the graph).
bool is_graph_input(const json& spec) {
  return !spec.value("absent", false) && !spec.value("wrapped", false);
}

// The positions of the row's graph inputs among its inputs.
std::vector<size_t> graph_positions(const json& row) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < row["inputs"].size(); ++i) {
    if (is_graph_input(row["inputs"][i])) positions.push_back(i);
  }
  return positions;
}

// Which graph input is the lead input (see the top of the file), if any.
std::optional<size_t> lead_input(const json& row) {
  std::vector<size_t> positions = graph_positions(row);
  for (size_t k = 0; k < positions.size(); ++k) {
    if (!row["inputs"][positions[k]]["shape"].empty()) return k;
  }
  return std::nullopt;
}

// Why the row has no symbolic leading dim, or "" when it has one.
std::string skip_reason(const json& row) {
  if (graph_positions(row).empty()) return "no graph input";
  if (!lead_input(row)) return "every graph input is 0-d";
  return "";
}

int64_t leading_size(const json& spec) {
  return spec["shape"][0].get<int64_t>();
}

// The spec with `rows` leading slices: slice i is the original's i % n
// (zeros when it has none).
json resized(const json& spec, int64_t rows) {
  json out = spec;
  const int64_t n = leading_size(spec);
  int64_t slice = 1;
  for (size_t d = 1; d < spec["shape"].size(); ++d)
    slice *= spec["shape"][d].get<int64_t>();
  json data = json::array();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < slice; ++k)
      data.push_back(n == 0 ? json(0) : spec["data"][size_t((i % n) * slice + k)]);
  }
  out["shape"][0] = rows;
  out["data"] = std::move(data);
  return out;
}

// The symbolic dims of a row: see the top of the file. Entry k names graph
// input dynamic[k].input.
std::vector<DynamicDim> dynamic_dims_of(const json& row) {
  std::vector<size_t> positions = graph_positions(row);
  const size_t lead = *lead_input(row);
  const int64_t n = leading_size(row["inputs"][positions[lead]]);
  std::vector<DynamicDim> dims = {{lead, 0, "n"}};
  for (size_t k = lead + 1; k < positions.size(); ++k) {
    const json& spec = row["inputs"][positions[k]];
    if (!spec["shape"].empty() && leading_size(spec) == n)
      dims.push_back({k, 0, "n" + std::to_string(dims.size())});
  }
  return dims;
}

struct RowCall {
  const json& row;
  const OpDef& def;
  Attrs attrs;

  // The row's inputs, graph input k resized to `sizes[k]` rows where given.
  std::vector<Tensor> inputs(const std::map<size_t, int64_t>& sizes = {}) const {
    std::vector<Tensor> all;
    for (size_t i = 0, k = 0; i < row["inputs"].size(); ++i) {
      const json& spec = row["inputs"][i];
      if (!is_graph_input(spec)) {
        all.push_back(tensor_from_json(spec));
        continue;
      }
      auto size = sizes.find(k++);
      all.push_back(tensor_from_json(size == sizes.end() ? spec : resized(spec, size->second)));
    }
    return all;
  }
  static std::vector<Tensor> graph_inputs(const std::vector<Tensor>& all) {
    std::vector<Tensor> out;
    for (const Tensor& t : all) {
      if (t.defined() && !t.impl()->wrapped_number) out.push_back(t);
    }
    return out;
  }
  std::vector<Tensor> eager(const std::vector<Tensor>& all) const {
    manual_seed(7);
    return dispatch(def, all, attrs);
  }
  CompiledFunction trace(const std::vector<DynamicDim>& dims) const {
    std::vector<Tensor> traced_with = inputs();
    TracedFn fn = [this, traced_with](const std::vector<Tensor>& in) {
      std::vector<Tensor> all = traced_with;
      for (size_t i = 0, k = 0; i < all.size(); ++i) {
        if (all[i].defined() && !all[i].impl()->wrapped_number) all[i] = in[k++];
      }
      return dispatch(def, all, attrs);
    };
    RecordOptions options;
    options.dynamic_dims = dims;
    return jit::trace(fn, graph_inputs(traced_with), options);
  }
};

// The graph inputs to resize to `rows` along with the lead input: the
// largest set of the other symbolized inputs the graph admits at that size,
// or nullopt when it admits none (the graph refuses the size).
std::optional<std::map<size_t, int64_t>> admitted_sizes(const RowCall& call,
                                                        const CompiledFunction& f,
                                                        const std::vector<DynamicDim>& dims,
                                                        int64_t rows) {
  const size_t others = dims.size() - 1;
  std::vector<uint32_t> subsets;
  for (uint32_t mask = 0; mask < (1u << others); ++mask)
    subsets.push_back(mask);
  std::stable_sort(subsets.begin(), subsets.end(),
                   [](uint32_t a, uint32_t b) { return std::popcount(a) > std::popcount(b); });
  auto sizes_of = [&](uint32_t mask) {
    std::map<size_t, int64_t> sizes = {{dims[0].input, rows}};
    for (size_t k = 0; k < others; ++k) {
      if (mask & (1u << k)) sizes[dims[k + 1].input] = rows;
    }
    return sizes;
  };
  for (uint32_t mask : subsets) {
    std::map<size_t, int64_t> sizes = sizes_of(mask);
    if (f.size_mismatch(RowCall::graph_inputs(call.inputs(sizes))).empty()) return sizes;
  }
  return std::nullopt;
}

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Runs eager and compiled at `sizes`: both agree, or both refuse, or the
// graph's guards refuse sizes eager runs (returns true then).
bool refused_by_guard(const RowCall& call, const CompiledFunction& f,
                      const std::map<size_t, int64_t>& sizes, const std::string& where) {
  std::vector<Tensor> expected, got;
  std::exception_ptr eager_error, compiled_error;
  try {
    expected = call.eager(call.inputs(sizes));
  } catch (const Error&) {
    eager_error = std::current_exception();
  }
  try {
    manual_seed(7);
    got = f(RowCall::graph_inputs(call.inputs(sizes)));
  } catch (const Error&) {
    compiled_error = std::current_exception();
  } catch (const std::exception& e) {
    ADD_FAILURE() << where << ": compiled threw a non-kiln error: " << e.what();
    return false;
  }
  if (eager_error) {
    EXPECT_TRUE(compiled_error) << where << ": eager refuses (" << what_of(eager_error)
                                << ") but compiled runs";
    return false;
  }
  if (compiled_error) {
    if (!f.size_mismatch(RowCall::graph_inputs(call.inputs(sizes))).empty()) return true;
    ADD_FAILURE() << where << ": eager runs, and compiled admits the sizes but fails: "
                  << what_of(compiled_error);
    return false;
  }
  EXPECT_EQ(got.size(), expected.size()) << where;
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i)
    EXPECT_TRUE(bitwise_equal(got[i], expected[i])) << where << " output " << i;
  return false;
}

class JitOpSymbolic : public testing::TestWithParam<size_t> {};

TEST_P(JitOpSymbolic, LeadingDimIsSymbolic) {
  const json& row = op_refs()["cases"][GetParam()];
  const OpDef& def = op(row["op"].get<std::string>());
  const RowCall call{row, def, attrs_from_json(def, row["attrs"])};
  const std::string id = row["id"];

  std::vector<Tensor> expected = call.eager(call.inputs());
  const std::vector<DynamicDim> dims = dynamic_dims_of(row);
  CapturedWarnings captured;
  CompiledFunction f = call.trace(dims);
  ASSERT_TRUE(f.symbolic()) << id;
  EXPECT_EQ(lone_symbol(f.graph().inputs()[dims[0].input]->shape()[0]), "n") << id;
  EXPECT_EQ(captured.count(WarningKind::HostRead), 0u) << captured.all();

  // (a) the traced size
  manual_seed(7);
  std::vector<Tensor> got = f(RowCall::graph_inputs(call.inputs()));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(bitwise_equal(got[i], expected[i])) << id << " output " << i;

  // (b) the other sizes
  const int64_t n = leading_size(row["inputs"][graph_positions(row)[dims[0].input]]);
  bool admits_another = false, refuses_eager_size = false;
  for (int64_t rows : {n + 1, n >= 2 ? n - 1 : n + 2}) {
    std::optional<std::map<size_t, int64_t>> sizes = admitted_sizes(call, f, dims, rows);
    admits_another |= sizes.has_value();
    std::map<size_t, int64_t> all_resized;
    for (const DynamicDim& d : dims)
      all_resized[d.input] = rows;
    refuses_eager_size |= refused_by_guard(call, f, sizes.value_or(all_resized),
                                           id + " at n = " + std::to_string(rows));
  }

  std::string guards;
  for (const ShapeGuard& g : f.graph().guards())
    guards += g.to_string() + " (" + g.reason + "); ";
  auto listed = kDecidesOnN.find(id);
  if (listed == kDecidesOnN.end()) {
    EXPECT_TRUE(admits_another && !refuses_eager_size)
        << id << (admits_another ? " refuses a size eager runs" : " pins its leading dim")
        << "; guards: " << guards << captured.all();
  } else if (listed->second.kind == OnN::Pins) {
    EXPECT_FALSE(admits_another) << id << " is listed as pinning n; guards: " << guards;
  } else {
    EXPECT_TRUE(admits_another && refuses_eager_size)
        << id << " is listed as bounding n; guards: " << guards;
  }
}

std::vector<size_t> symbolic_rows() {
  std::vector<size_t> idx;
  for (size_t i = 0; i < op_refs()["cases"].size(); ++i) {
    const json& row = op_refs()["cases"][i];
    if (!row.contains("error") && skip_reason(row).empty()) idx.push_back(i);
  }
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Rows, JitOpSymbolic, testing::ValuesIn(symbolic_rows()),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(op_refs()["cases"][info.param]["id"]);
                         });

// The rows left out have no dim to make symbolic, and they are few.
TEST(JitOpSymbolicCoverage, SkippedRowsHaveNoLeadingDim) {
  size_t values = 0, skipped = 0;
  for (const json& row : op_refs()["cases"]) {
    if (row.contains("error")) continue;
    ++values;
    if (skip_reason(row).empty()) continue;
    ++skipped;
    for (size_t i : graph_positions(row))
      EXPECT_TRUE(row["inputs"][i]["shape"].empty()) << row["id"] << " input " << i;
  }
  EXPECT_EQ(values - skipped, symbolic_rows().size());
  EXPECT_LT(skipped, values / 10) << "most rows run with a symbolic leading dim";
}

}  // namespace
}  // namespace kiln::jit
