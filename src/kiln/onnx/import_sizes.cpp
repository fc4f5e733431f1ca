// Note [Known sizes]: ONNX models compute shapes with tensors: Shape(x),
// then Gather, Slice, Concat and integer arithmetic on it, then Reshape,
// Expand or ConstantOfShape read the result. With static input shapes every
// step is a constant that emit() folds with kiln's kernels. With symbolic
// ones (`batch`), Shape gives a placeholder (ImportContext::sizes_value): a
// constant of the right dtype and shape, standing for elements that are
// Dims. This file evaluates the ops of such chains on the Dims at import,
// and the translations that take a shape read them (a reshape to
// [batch, 512]). Sizes cast to float stay sizes while they are whole
// numbers (Range's bounds). A placeholder is never a node's input: an op
// that needs the sizes as a tensor at run time is an error naming the input
// and the symbols. A comparison only a call decides (whether `batch == 1`)
// makes the model imported per shape of the inputs those symbols come from
// (Note [Shape inputs] in import_context.cpp).
#include <algorithm>
#include <optional>

#include "kiln/onnx/import_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// One operand: its elements, whether it is 0-D, its dtype.
struct Sizes {
  DimList values;
  bool scalar = false;
  DType dtype = DType::Int64;
};

Sizes sizes_of(const Node& node, ImportContext& c, int i) {
  const Value* value = c.input(node, i);
  return {*c.known_sizes(value), value->shape().empty(), value->dtype()};
}

bool define(const Node& node, ImportContext& c, const Sizes& result) {
  c.define(node.output(0), c.sizes_value(result.values, result.dtype, result.scalar));
  return true;
}

// The element at `k` of an operand broadcast to a longer one.
const Dim& at(const Sizes& s, size_t k) {
  return s.values[s.values.size() == 1 ? 0 : k];
}

// Elementwise over every input, each of one length or of one element.
template <typename Fn>
Sizes elementwise(const Node& node, ImportContext& c, DType dtype, Fn fn) {
  Sizes out = sizes_of(node, c, 0);
  for (int i = 1; i < node.input_size(); ++i) {
    Sizes next = sizes_of(node, c, i);
    size_t a = out.values.size(), b = next.values.size();
    KILN_CHECK(a == b || a == 1 || b == 1, "onnx import: ", node.op_type(), " of sizes ",
               to_string(out.values), " and ", to_string(next.values), ", which do not broadcast");
    size_t n = a == 1 ? b : a;
    DimList values;
    for (size_t k = 0; k < n; ++k)
      values.push_back(fn(at(out, k), at(next, k)));
    out = {values, out.scalar && next.scalar, out.dtype};
  }
  if (node.input_size() == 1) {
    for (Dim& value : out.values)
      value = fn(value, value);
  }
  out.dtype = dtype;
  return out;
}

// ONNX's integer Div truncates; sizes are nonnegative, where truncation and
// Python's floor division agree.
Dim divide(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) {
    KILN_CHECK(b.static_value() != 0, "onnx import: integer Div of ", a, " by 0");
    return a.static_value() / b.static_value();
  }
  if (std::optional<Dim> quotient = exact_divide(a, b)) return *quotient;
  KILN_CHECK(b.is_static() && b.static_value() > 0 && a.expr().provably_nonnegative(),
             "onnx import: Div of the size ", a, " by ", b,
             ", which kiln cannot write as a size expression");
  return floordiv(a, b.static_value());
}

// Which way a comparison goes when every value of the symbols agrees;
// nothing where only a call knows.
std::optional<bool> less(const Dim& a, const Dim& b) {
  if (definitely_less(a, b)) return true;
  if (definitely_less(b, a + 1)) return false;
  return std::nullopt;
}

std::optional<bool> equal(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return true;
  if (definitely_less(a, b) || definitely_less(b, a)) return false;
  return std::nullopt;
}

bool add(const Node& node, ImportContext& c) {
  return define(node, c, elementwise(node, c, c.input(node, 0)->dtype(), std::plus<Dim>()));
}
bool sub(const Node& node, ImportContext& c) {
  return define(node, c, elementwise(node, c, c.input(node, 0)->dtype(), std::minus<Dim>()));
}
bool mul(const Node& node, ImportContext& c) {
  return define(node, c, elementwise(node, c, c.input(node, 0)->dtype(), std::multiplies<Dim>()));
}
// A float Div of sizes (cast to float) is a size only where it divides exactly.
Dim divide_exactly(const Dim& a, const Dim& b) {
  std::optional<Dim> quotient = exact_divide(a, b);
  if (!quotient && a.is_static() && b.is_static() && b.static_value() != 0 &&
      a.static_value() % b.static_value() == 0)
    quotient = a.static_value() / b.static_value();
  KILN_CHECK(quotient, "onnx import: float Div of the size ", a, " by ", b,
             ", which is not a whole number for every value of the symbols");
  return *quotient;
}

bool div(const Node& node, ImportContext& c) {
  DType dtype = c.input(node, 0)->dtype();
  return define(node, c, elementwise(node, c, dtype, is_floating(dtype) ? divide_exactly : divide));
}
bool neg(const Node& node, ImportContext& c) {
  return define(
      node, c,
      elementwise(node, c, c.input(node, 0)->dtype(), [](const Dim& a, const Dim&) { return -a; }));
}
bool max(const Node& node, ImportContext& c) {
  return define(node, c,
                elementwise(node, c, c.input(node, 0)->dtype(),
                            [](const Dim& a, const Dim& b) { return kiln::max(a, b); }));
}
bool min(const Node& node, ImportContext& c) {
  return define(node, c,
                elementwise(node, c, c.input(node, 0)->dtype(),
                            [](const Dim& a, const Dim& b) { return kiln::min(a, b); }));
}

std::optional<bool> greater(const Dim& a, const Dim& b) {
  return less(b, a);
}
std::optional<bool> less_or_equal(const Dim& a, const Dim& b) {
  std::optional<bool> above = less(b, a);
  return above ? std::optional<bool>(!*above) : std::nullopt;
}
std::optional<bool> greater_or_equal(const Dim& a, const Dim& b) {
  std::optional<bool> below = less(a, b);
  return below ? std::optional<bool>(!*below) : std::nullopt;
}

// A comparison only a call decides (silero VAD's `(n - 192) // 512 + 1 ==
// 1`, which picks the rank of what follows): the model is imported per
// shape of the inputs the symbols come from (Note [Shape inputs] in
// import_context.cpp), where it is a number.
[[noreturn]] void undecided(const Node& node, ImportContext& c, const Dim& a, const Dim& b) {
  bool specialized = c.request_shapes_at_import(symbols_of(DimList{a, b}));
  KILN_CHECK(false, "onnx import: ", node.op_type(), " of the sizes ", a, " and ", b,
             " depends on the values of the symbolic sizes, which kiln needs at import here",
             specialized ? "; they come from the shapes of the model's inputs, on which "
                           "onnx::Model (kiln.onnx.load) specializes the graph per call"
                         : "");
}

template <std::optional<bool> (*Compare)(const Dim&, const Dim&)>
bool compare(const Node& node, ImportContext& c) {
  return define(node, c, elementwise(node, c, DType::Bool, [&](const Dim& a, const Dim& b) {
                  std::optional<bool> known = Compare(a, b);
                  if (!known) undecided(node, c, a, b);
                  return Dim(int64_t(*known));
                }));
}

bool where(const Node& node, ImportContext& c) {
  Sizes condition = sizes_of(node, c, 0), a = sizes_of(node, c, 1), b = sizes_of(node, c, 2);
  size_t n = std::max({condition.values.size(), a.values.size(), b.values.size()});
  DimList values;
  for (size_t k = 0; k < n; ++k) {
    const Dim& flag = at(condition, k);
    KILN_CHECK(flag.is_static(), "onnx import: Where on the condition ", flag);
    values.push_back(flag.static_value() ? at(a, k) : at(b, k));
  }
  return define(node, c, {values, condition.scalar && a.scalar && b.scalar, a.dtype});
}

// Sizes stay sizes through a Cast to an integer type, and to a float one
// (YOLOv8 computes Range(0.0, float(w), 1.0) for its anchor grid): a whole
// number of float32 is exact up to 2^24, which the import assumes of each
// symbolic size (a guard), as ONNX Runtime would round past it.
bool cast(const Node& node, ImportContext& c) {
  int64_t to = attr_int(node, "to", 0);
  const bool to_float =
      to == pb::TensorProto_DataType_FLOAT || to == pb::TensorProto_DataType_DOUBLE;
  if (to != pb::TensorProto_DataType_INT64 && to != pb::TensorProto_DataType_INT32 && !to_float)
    return false;
  Sizes x = sizes_of(node, c, 0);
  x.dtype = dtype_from_onnx(to, "Cast's target");
  if (x.dtype == DType::Float32) {
    constexpr int64_t kExactInFloat = int64_t(1) << 24;
    std::string reason = str("Cast '", node.name(), "' of sizes to float32, exact up to 2^24");
    for (const Dim& value : x.values) {
      if (value.is_static()) continue;
      c.assume(value, ShapeGuard::Relation::Le, kExactInFloat, reason);
      if (!value.expr().provably_nonnegative())
        c.assume(-kExactInFloat, ShapeGuard::Relation::Le, value, reason);
    }
  }
  return define(node, c, x);
}

// Whether `axes` names the only axis of a 1-D value (or none: all of them).
bool only_first_axis(const IntList& axes) {
  return axes.empty() || (axes.size() == 1 && (axes[0] == 0 || axes[0] == -1));
}

bool gather(const Node& node, ImportContext& c) {
  Sizes data = sizes_of(node, c, 0), indices = sizes_of(node, c, 1);
  if (data.scalar || !only_first_axis({attr_int(node, "axis", 0)}) || !is_static(indices.values))
    return false;
  int64_t n = int64_t(data.values.size());
  DimList picked;
  for (int64_t index : to_static(indices.values)) {
    KILN_CHECK(index >= -n && index < n, "onnx import: Gather index ", index, " out of range for ",
               n, " sizes");
    picked.push_back(data.values[size_t(index < 0 ? index + n : index)]);
  }
  return define(node, c, {picked, indices.scalar, data.dtype});
}

// Python's slice of a list, which ONNX's Slice follows along one axis.
DimList slice_list(const DimList& values, int64_t start, int64_t end, int64_t step) {
  int64_t n = int64_t(values.size());
  KILN_CHECK(step != 0, "onnx import: Slice with step 0");
  auto clamp = [&](int64_t bound, int64_t low, int64_t high) {
    if (bound < 0) bound += n;
    return std::clamp(bound, low, high);
  };
  DimList out;
  if (step > 0) {
    for (int64_t i = clamp(start, 0, n); i < clamp(end, 0, n); i += step)
      out.push_back(values[size_t(i)]);
    return out;
  }
  for (int64_t i = clamp(start, -1, n - 1); i > clamp(end, -1, n - 1); i += step)
    out.push_back(values[size_t(i)]);
  return out;
}

bool slice(const Node& node, ImportContext& c) {
  Sizes data = sizes_of(node, c, 0);
  bool inputs = node.input_size() > 1;
  IntList starts =
      inputs ? c.constant_ints(c.input(node, 1), "Slice's starts") : attr_ints(node, "starts", {});
  IntList ends =
      inputs ? c.constant_ints(c.input(node, 2), "Slice's ends") : attr_ints(node, "ends", {});
  IntList axes =
      inputs ? (c.input(node, 3) ? c.constant_ints(c.input(node, 3), "Slice's axes") : IntList{})
             : attr_ints(node, "axes", {});
  IntList steps =
      inputs && c.input(node, 4) ? c.constant_ints(c.input(node, 4), "Slice's steps") : IntList{1};
  if (data.scalar || starts.size() != 1 || ends.size() != 1 || steps.size() != 1 ||
      !only_first_axis(axes))
    return false;
  return define(node, c,
                {slice_list(data.values, starts[0], ends[0], steps[0]), false, data.dtype});
}

bool concat(const Node& node, ImportContext& c) {
  if (!only_first_axis({attr_int(node, "axis", 0)})) return false;
  Sizes out = sizes_of(node, c, 0);
  for (int i = 1; i < node.input_size(); ++i) {
    Sizes next = sizes_of(node, c, i);
    out.values.insert(out.values.end(), next.values.begin(), next.values.end());
  }
  return define(node, c, out);
}

bool unsqueeze(const Node& node, ImportContext& c) {
  Sizes x = sizes_of(node, c, 0);
  IntList axes = axes_of(node, c, 1, {});
  if (!x.scalar || axes.size() != 1 || !only_first_axis(axes)) return false;
  x.scalar = false;
  return define(node, c, x);
}

bool squeeze(const Node& node, ImportContext& c) {
  Sizes x = sizes_of(node, c, 0);
  if (x.scalar || x.values.size() != 1 || !only_first_axis(axes_of(node, c, 1, {}))) return false;
  x.scalar = true;
  return define(node, c, x);
}

// To 0-D ([]) or 1-D ([n], [-1], [0]: what stays a list of sizes).
bool reshape(const Node& node, ImportContext& c) {
  Sizes x = sizes_of(node, c, 0);
  IntList target = c.constant_ints(c.input(node, 1), "Reshape's shape");
  if (target.size() > 1) return false;
  if (target.empty()) {
    KILN_CHECK(x.values.size() == 1, "onnx import: Reshape of ", x.values.size(), " sizes to []");
    x.scalar = true;
    return define(node, c, x);
  }
  int64_t n = int64_t(x.values.size());
  KILN_CHECK(target[0] == n || target[0] == -1 || (target[0] == 0 && !x.scalar),
             "onnx import: Reshape of ", n, " sizes to ", target);
  x.scalar = false;
  return define(node, c, x);
}

// ReduceProd and ReduceSum of a whole list (an element count, a total).
template <bool Product>
bool reduce(const Node& node, ImportContext& c) {
  Sizes x = sizes_of(node, c, 0);
  bool axes_input = c.opset() >= (Product ? 18 : 13);
  IntList axes = axes_input ? axes_of(node, c, 1, {}) : attr_ints(node, "axes", {});
  if (!only_first_axis(axes)) return false;
  Dim total = Product ? 1 : 0;
  for (const Dim& value : x.values)
    total = Product ? total * value : total + value;
  bool keepdims = attr_int(node, "keepdims", 1) != 0 && !x.scalar;
  return define(node, c, {{total}, !keepdims, x.dtype});
}

using SizesFn = bool (*)(const Node&, ImportContext&);

const std::unordered_map<std::string, SizesFn>& sizes_table() {
  static const std::unordered_map<std::string, SizesFn> table = {
      {"Add", add},
      {"Sub", sub},
      {"Mul", mul},
      {"Div", div},
      {"Neg", neg},
      {"Max", max},
      {"Min", min},
      {"Equal", compare<equal>},
      {"Less", compare<less>},
      {"Greater", compare<greater>},
      {"LessOrEqual", compare<less_or_equal>},
      {"GreaterOrEqual", compare<greater_or_equal>},
      {"Where", where},
      {"Cast", cast},
      {"Gather", gather},
      {"Slice", slice},
      {"Concat", concat},
      {"Unsqueeze", unsqueeze},
      {"Squeeze", squeeze},
      {"Reshape", reshape},
      {"ReduceProd", reduce<true>},
      {"ReduceSum", reduce<false>},
  };
  return table;
}

}  // namespace

bool import_on_sizes(const Node& node, ImportContext& c) {
  // Only a node that reads symbols, and nothing computed at run time: the
  // rest is folded by emit() or becomes nodes.
  bool symbolic = false;
  for (int i = 0; i < node.input_size(); ++i)
    symbolic = symbolic || c.holds_symbols(c.input(node, i));
  if (!symbolic || node.output_size() != 1) return false;
  for (int i = 0; i < node.input_size(); ++i) {
    const Value* value = c.input(node, i);
    if (value && !c.known_sizes(value)) return false;
  }
  auto found = sizes_table().find(node.op_type());
  return found != sizes_table().end() && found->second(node, c);
}

}  // namespace kiln::onnx
