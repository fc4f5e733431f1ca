// Translations of ONNX's convolution, transposed convolution and pooling
// ops over 1, 2 or 3 spatial dims. A 1-D op runs as the 2-D one over
// [N, C, 1, L]; 2-D and 3-D ones map to kiln's 2d and 3d ops. Padding that
// kiln's ops cannot express (different at the two ends, more than half a
// pooling window, negative) becomes an explicit pad (or crop) step.
#include <limits>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

// ONNX's window attributes per spatial dim; a 1-D op has been widened to 2-D
// (windowed()) before these are read.
IntList spatial_attr(const Node& node, const char* name, size_t k, int64_t fallback) {
  IntList values = attr_ints(node, name, IntList(k, fallback));
  KILN_CHECK(values.size() == k, "onnx import: ", node.op_type(), " with ", name, " ", values,
             " for ", k, " spatial dims");
  return values;
}

// ONNX's pads [begin of each spatial dim, end of each]: given, or what
// auto_pad asks for. "Same" padding with stride 1 pads (kernel - 1) *
// dilation whatever the size; other strides need the input's size.
IntList onnx_pads(const Node& node, const IntList& kernel, const IntList& stride,
                  const IntList& dilation, const Value* x) {
  const size_t k = kernel.size();
  std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  if (auto_pad == "VALID") return IntList(2 * k, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    IntList pads = attr_ints(node, "pads", IntList(2 * k, 0));
    KILN_CHECK(pads.size() == 2 * k, "onnx import: ", node.op_type(), " with pads ", pads, " for ",
               k, " spatial dims");
    return pads;
  }
  IntList pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    int64_t total = (kernel[i] - 1) * dilation[i];
    if (stride[i] != 1) {
      int64_t axis = int64_t(x->shape().size() - k + i);
      int64_t size = concrete_size(
          node, 0, x, axis,
          str(node.op_type(), " with auto_pad ", auto_pad, " and stride ", stride[i]));
      int64_t out = (size + stride[i] - 1) / stride[i];
      total =
          std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - size);
    }
    pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[i + k] = total - pads[i];
  }
  return pads;
}

bool symmetric(const IntList& pads) {
  const size_t k = pads.size() / 2;
  for (size_t i = 0; i < k; ++i)
    if (pads[i] != pads[i + k]) return false;
  return true;
}

IntList begins(const IntList& pads) {
  return IntList(pads.begin(), pads.begin() + int64_t(pads.size() / 2));
}

// x with ONNX's spatial pads (negative ones crop) done by kiln's pad op,
// whose pads are (before, after) pairs from the last dim back.
Value* pad_spatial(ImportContext& c, Value* x, const IntList& pads, double value) {
  const size_t k = pads.size() / 2;
  IntList kiln_pads;
  for (size_t i = k; i-- > 0;) {
    kiln_pads.push_back(pads[i]);
    kiln_pads.push_back(pads[i + k]);
  }
  return c.emit("pad", {x},
                {{"pad", kiln_pads}, {"mode", std::string("constant")}, {"value", value}});
}

// The value that never wins a max: what max pooling pads with.
double lowest_of(DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Float64:
      return -std::numeric_limits<double>::infinity();
    case DType::Int64:
      return double(std::numeric_limits<int64_t>::min());  // -2^63, exact in a double
    case DType::Bool:
      return 0.0;
    default:  // the narrower integers: exact in a double
      return visit_dtype(
          dtype, [](auto tag) { return double(std::numeric_limits<decltype(tag)>::lowest()); });
  }
}

// kiln's op for `base` ("conv", "max_pool"...) over k = 2 or 3 spatial dims.
std::string op_for(const char* base, size_t k) {
  return str(base, k == 3 ? "3d" : "2d");
}

// ---- 1-D as 2-D ----------------------------------------------------------

Value* as_2d(ImportContext& c, Value* x) {
  DimList shape = x->shape();
  shape.insert(shape.end() - 1, 1);
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// The node of a 1-D op with every window attribute widened to two dims: a
// leading 1 (a 0 for padding), so ONNX pads [begin, end] become [0, begin,
// 0, end].
pb::NodeProto widened_node(const Node& node) {
  pb::NodeProto copy = node;
  for (pb::AttributeProto& attr : *copy.mutable_attribute()) {
    if (attr.ints_size() == 0) continue;
    std::vector<int64_t> values(attr.ints().begin(), attr.ints().end());
    attr.clear_ints();
    if (attr.name() == "pads" && values.size() == 2) values = {0, values[0], 0, values[1]};
    bool is_padding = attr.name() == "pads" || attr.name() == "output_padding";
    if (attr.name() != "pads" && values.size() == 1)
      values.insert(values.begin(), is_padding ? 0 : 1);
    for (int64_t value : values)
      attr.add_ints(value);
  }
  return copy;
}

Value* back_to_1d(ImportContext& c, Value* y) {
  DimList shape = y->shape();
  shape.erase(shape.end() - 2);
  return c.emit("reshape", {y}, {{"shape", shape}});
}

// A window op's node and input, widened to the 2-D form when 1-D; k is the
// number of spatial dims the kiln op sees (2 or 3).
struct Windowed {
  pb::NodeProto node;
  Value* x;
  bool one_d;
  size_t k;

  Value* weight(ImportContext& c, const Node& raw) const {
    Value* w = c.input(raw, 1);
    return one_d ? as_2d(c, w) : w;
  }
  // The op's result under the node's ONNX name, narrowed back when 1-D.
  void define_result(ImportContext& c, Value* y, int i = 0) const {
    c.define(node.output(i), one_d ? back_to_1d(c, y) : y);
  }
};

Windowed windowed(const Node& raw, ImportContext& c) {
  Value* x = c.input(raw, 0);
  const size_t rank = x->shape().size();
  KILN_CHECK(rank >= 3 && rank <= 5, "onnx import: ", raw.op_type(), " over a ", rank,
             "-D input (kiln has the 1-D, 2-D and 3-D forms)");
  if (rank == 3) return Windowed{widened_node(raw), as_2d(c, x), true, 2};
  return Windowed{raw, x, false, rank - 2};
}

// ---- convolution ------------------------------------------------------------

void conv(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const Node& node = w.node;
  Value* weight = w.weight(c, raw);
  IntList weight_shape = to_static(weight->shape(), "onnx import");
  IntList kernel(weight_shape.begin() + 2, weight_shape.end());
  IntList stride = spatial_attr(node, "strides", w.k, 1);
  IntList dilation = spatial_attr(node, "dilations", w.k, 1);
  IntList pads = onnx_pads(node, kernel, stride, dilation, w.x);
  Value* x = symmetric(pads) ? w.x : pad_spatial(c, w.x, pads, 0.0);
  IntList padding = symmetric(pads) ? begins(pads) : IntList(w.k, 0);
  std::vector<Value*> inputs = {x, weight};
  if (Value* bias = c.input(node, 2)) inputs.push_back(bias);
  Value* y = c.emit(op_for("conv", w.k), inputs,
                    {{"stride", stride},
                     {"padding", padding},
                     {"dilation", dilation},
                     {"groups", attr_int(node, "group", 1)}});
  w.define_result(c, y);
}

// ConvTranspose's pads: given, or derived from output_shape (or, with
// auto_pad SAME_*, input * stride) as ONNX's spec says: the total padding
// that size leaves, split between the two ends.
IntList conv_transpose_pads(const Node& node, const Value* x, const IntList& kernel,
                            const IntList& stride, const IntList& dilation,
                            const IntList& output_padding) {
  const size_t k = kernel.size();
  std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") return IntList(2 * k, 0);
  if (!same && !has_attr(node, "output_shape")) {
    IntList pads = attr_ints(node, "pads", IntList(2 * k, 0));
    KILN_CHECK(pads.size() == 2 * k, "onnx import: ConvTranspose with pads ", pads, " for ", k,
               " spatial dims");
    return pads;
  }
  IntList wanted = attr_ints(node, "output_shape", {});
  if (wanted.size() > k) wanted.erase(wanted.begin(), wanted.end() - int64_t(k));
  IntList pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    int64_t axis = int64_t(x->shape().size() - k + i);
    int64_t in = concrete_size(node, 0, x, axis, "ConvTranspose's derived padding");
    int64_t out = wanted.empty() ? in * stride[i] : wanted.at(i);
    int64_t total =
        stride[i] * (in - 1) + output_padding[i] + (kernel[i] - 1) * dilation[i] + 1 - out;
    // Halved rounding down, as ONNX's reference does: a negative total
    // (output_shape larger than the full result) adds zeros at the end.
    int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
    pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    pads[i + k] = total - pads[i];
  }
  return pads;
}

// Whether kiln's conv_transpose op computes these pads itself: padding at
// the start, less padding at the end as output_padding, which kiln (as
// PyTorch) keeps below the stride or the dilation.
bool transpose_pads_fit(const IntList& pads, const IntList& output_padding, const IntList& stride,
                        const IntList& dilation) {
  const size_t k = stride.size();
  for (size_t i = 0; i < k; ++i) {
    int64_t extra = output_padding[i] + pads[i] - pads[i + k];
    if (pads[i + k] < 0 || extra < 0 || extra >= std::max(stride[i], dilation[i])) return false;
  }
  return true;
}

// Otherwise: the full transposed convolution (no padding, no bias), then
// each end cropped by its pad (a negative pad adds zeros), output_padding
// zeros added at the end, and the bias over all of it.
void conv_transpose(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const Node& node = w.node;
  Value* weight = w.weight(c, raw);
  IntList weight_shape = to_static(weight->shape(), "onnx import");
  IntList kernel(weight_shape.begin() + 2, weight_shape.end());
  IntList stride = spatial_attr(node, "strides", w.k, 1);
  IntList dilation = spatial_attr(node, "dilations", w.k, 1);
  IntList output_padding = spatial_attr(node, "output_padding", w.k, 0);
  IntList pads = conv_transpose_pads(node, w.x, kernel, stride, dilation, output_padding);
  Value* bias = c.input(node, 2);
  Attrs attrs = {{"stride", stride},
                 {"padding", IntList(w.k, 0)},
                 {"output_padding", IntList(w.k, 0)},
                 {"groups", attr_int(node, "group", 1)},
                 {"dilation", dilation}};
  const std::string op = op_for("conv_transpose", w.k);
  if (transpose_pads_fit(pads, output_padding, stride, dilation)) {
    IntList extra(w.k);
    for (size_t i = 0; i < w.k; ++i)
      extra[i] = output_padding[i] + pads[i] - pads[i + w.k];
    attrs.set("padding", begins(pads));
    attrs.set("output_padding", extra);
    std::vector<Value*> inputs = {w.x, weight};
    if (bias) inputs.push_back(bias);
    return w.define_result(c, c.emit(op, inputs, attrs));
  }
  Value* full = c.emit(op, {w.x, weight}, attrs);
  IntList crop(2 * w.k);
  for (size_t i = 0; i < w.k; ++i) {
    crop[i] = -pads[i];
    crop[i + w.k] = output_padding[i] - pads[i + w.k];
  }
  Value* y = pad_spatial(c, full, crop, 0.0);
  if (bias) {
    DimList channel_shape(w.k + 1, 1);
    channel_shape[0] = bias->shape()[0];
    y = c.emit("add", {y, c.emit("reshape", {bias}, {{"shape", channel_shape}})});
  }
  w.define_result(c, y);
}

// ---- pooling ------------------------------------------------------------

// A pooling window: its attributes and the input after any explicit pad.
struct PoolWindow {
  IntList kernel, stride, dilation, padding;
  Value* x;
  bool padded_explicitly;
};

// kiln's pools pad both ends alike, at most half the (dilated) window, as
// PyTorch; other pads are done on the input first with `pad_value`.
PoolWindow pool_window(const Windowed& w, ImportContext& c, double pad_value) {
  const Node& node = w.node;
  PoolWindow p;
  p.kernel = spatial_attr(node, "kernel_shape", w.k, 1);
  p.stride = spatial_attr(node, "strides", w.k, 1);
  p.dilation = spatial_attr(node, "dilations", w.k, 1);
  IntList pads = onnx_pads(node, p.kernel, p.stride, p.dilation, w.x);
  bool fits = symmetric(pads);
  for (size_t i = 0; i < w.k; ++i) {
    fits = fits && pads[i] >= 0 && pads[i] <= ((p.kernel[i] - 1) * p.dilation[i] + 1) / 2;
  }
  p.padded_explicitly = !fits;
  p.x = fits ? w.x : pad_spatial(c, w.x, pads, pad_value);
  p.padding = fits ? begins(pads) : IntList(w.k, 0);
  return p;
}

// MaxPool's indices count over the whole input [N, C, H, W]: the plane's
// offset plus h * W + w (storage_order 0) or h + w * H (1); kiln's count
// h * W + w within each plane.
Value* onnx_indices(ImportContext& c, const Node& node, Value* within_plane, const Value* x) {
  IntList shape = to_static(x->shape(), "onnx import: MaxPool's indices");
  const int64_t planes = shape[0] * shape[1], H = shape[2], W = shape[3];
  Value* index = within_plane;
  if (attr_int(node, "storage_order", 0) == 1) {
    Value* width = c.constant(full({}, W, DType::Int64));
    Value* h = c.emit("floor_divide", {index, width});
    Value* w = c.emit("remainder", {index, width});
    index = c.emit("add", {h, c.emit("mul", {w, c.constant(full({}, H, DType::Int64))})});
  }
  std::vector<int64_t> offsets(static_cast<size_t>(planes));
  for (int64_t i = 0; i < planes; ++i)
    offsets[size_t(i)] = i * H * W;
  Tensor offset =
      tensor_from_data(offsets.data(), DType::Int64, {shape[0], shape[1], 1, 1}, DType::Int64);
  return c.emit("add", {index, c.constant(offset)});
}

void max_pool(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const Node& node = w.node;
  PoolWindow p = pool_window(w, c, lowest_of(w.x->dtype()));
  Attrs attrs = {{"kernel_size", p.kernel},
                 {"stride", p.stride},
                 {"padding", p.padding},
                 {"dilation", p.dilation},
                 {"ceil_mode", attr_int(node, "ceil_mode", 0) != 0}};
  if (node.output_size() < 2 || node.output(1).empty())
    return w.define_result(c, c.emit(op_for("max_pool", w.k), {p.x}, attrs));
  KILN_CHECK(w.k == 2 && !p.padded_explicitly, "onnx import: MaxPool's indices output ",
             w.k == 3 ? "over a 3-D input" : "with pads kiln's max_pool2d cannot take",
             " (kiln has indices for 1-D and 2-D pools padded alike at both ends, at most half "
             "the window)");
  std::vector<Value*> outputs = c.emit_multi("max_pool2d_with_indices", {p.x}, attrs);
  w.define_result(c, outputs[0]);
  w.define_result(c, onnx_indices(c, node, outputs[1], w.x), 1);
}

// With explicit zero padding and padding not counted, the sum of each
// window is divided by the number of input elements in it: the same pool
// over ones padded alike.
void average_pool(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const Node& node = w.node;
  PoolWindow p = pool_window(w, c, 0.0);
  for (int64_t d : p.dilation) {
    KILN_CHECK(d == 1, "onnx import: AveragePool with dilations ", p.dilation);
  }
  bool include_pad = attr_int(node, "count_include_pad", 0) != 0;
  Attrs attrs = {{"kernel_size", p.kernel},
                 {"stride", p.stride},
                 {"padding", p.padding},
                 {"ceil_mode", attr_int(node, "ceil_mode", 0) != 0},
                 {"count_include_pad", include_pad || p.padded_explicitly}};
  const std::string op = op_for("avg_pool", w.k);
  Value* y = c.emit(op, {p.x}, attrs);
  if (p.padded_explicitly && !include_pad) {
    IntList pads = onnx_pads(node, p.kernel, p.stride, p.dilation, w.x);
    Value* ones = c.emit("fill", {w.x}, {{"value", 1.0}});
    Value* counts = c.emit(op, {pad_spatial(c, ones, pads, 0.0)}, attrs);
    y = c.emit("div", {y, counts});
  }
  w.define_result(c, y);
}

// |x|^p, and its p-th root, for the Lp pools (p = 1 and 2 without pow).
Value* abs_pow(ImportContext& c, Value* x, int64_t p) {
  Value* magnitude = c.emit("abs", {x});
  if (p == 1) return magnitude;
  if (p == 2) return c.emit("mul", {magnitude, magnitude});
  return c.emit("pow", {magnitude, c.constant(full({}, double(p), x->dtype()))});
}

Value* root(ImportContext& c, Value* sum, int64_t p) {
  if (p == 1) return sum;
  if (p == 2) return c.emit("sqrt", {sum});
  return c.emit("pow", {sum, c.constant(full({}, 1.0 / double(p), sum->dtype()))});
}

// LpPool: (sum of |x|^p over each window)^(1/p), zero padding adding
// nothing: an average pool of |x|^p over the padded input, times the
// window's size (every window lies inside it without ceil_mode).
void lp_pool(const Node& raw, ImportContext& c) {
  Windowed w = windowed(raw, c);
  const Node& node = w.node;
  const int64_t p = attr_int(node, "p", 2);
  KILN_CHECK(p > 0, "onnx import: LpPool with p ", p);
  KILN_CHECK(attr_int(node, "ceil_mode", 0) == 0, "onnx import: LpPool with ceil_mode");
  IntList kernel = spatial_attr(node, "kernel_shape", w.k, 1);
  IntList stride = spatial_attr(node, "strides", w.k, 1);
  IntList dilation = spatial_attr(node, "dilations", w.k, 1);
  for (int64_t d : dilation) {
    KILN_CHECK(d == 1, "onnx import: LpPool with dilations ", dilation);
  }
  IntList pads = onnx_pads(node, kernel, stride, dilation, w.x);
  Value* powered = pad_spatial(c, abs_pow(c, w.x, p), pads, 0.0);
  Value* mean = c.emit(op_for("avg_pool", w.k), {powered},
                       {{"kernel_size", kernel},
                        {"stride", stride},
                        {"padding", IntList(w.k, 0)},
                        {"ceil_mode", false},
                        {"count_include_pad", true}});
  int64_t size = 1;
  for (int64_t k : kernel)
    size *= k;
  Value* sum = c.emit("mul", {mean, c.constant(full({}, double(size), mean->dtype()))});
  w.define_result(c, root(c, sum, p));
}

IntList spatial_dims_of(const Value* x) {
  IntList dims;
  for (int64_t d = 2; d < rank_of(x); ++d)
    dims.push_back(d);
  return dims;
}

// Global pools over every dim after [N, C], of any rank.
void global_average_pool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  if (rank_of(x) <= 2) return define(node, c, x);
  if (rank_of(x) == 4) {
    return define(node, c, c.emit("adaptive_avg_pool2d", {x}, {{"output_size", IntList{1, 1}}}));
  }
  define(node, c, c.emit("mean", {x}, {{"dims", spatial_dims_of(x)}, {"keepdim", true}}));
}

void global_lp_pool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t p = attr_int(node, "p", 2);
  KILN_CHECK(p > 0, "onnx import: GlobalLpPool with p ", p);
  if (rank_of(x) <= 2) return define(node, c, c.emit("abs", {x}));
  Value* sum = c.emit("sum", {abs_pow(c, x, p)}, {{"dims", spatial_dims_of(x)}, {"keepdim", true}});
  define(node, c, root(c, sum, p));
}

void global_max_pool(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  if (rank_of(x) <= 2) return define(node, c, x);
  define(node, c, c.emit("amax", {x}, {{"dims", spatial_dims_of(x)}, {"keepdim", true}}));
}

}  // namespace

void add_conv_pool_importers(Table& table) {
  table["Conv"] = conv;
  table["ConvTranspose"] = conv_transpose;
  table["MaxPool"] = max_pool;
  table["AveragePool"] = average_pool;
  table["GlobalAveragePool"] = global_average_pool;
  table["GlobalMaxPool"] = global_max_pool;
  table["LpPool"] = lp_pool;
  table["GlobalLpPool"] = global_lp_pool;
}

}  // namespace kiln::onnx
