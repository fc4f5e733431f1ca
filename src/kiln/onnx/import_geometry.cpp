// Translations of ONNX's CenterCropPad (opset 18), AffineGrid (opset 20),
// Col2Im (opset 18) and GridSample (opsets 16 on) into kiln ops. The shape each takes as an input
// (the window, the grid's size, the image and block shapes) must be numbers at import: a constant,
// a model input on whose value onnx::Model specializes the graph per call (Note [Value inputs] in
// import_context.cpp), or sizes of input shapes (Shape(x)), specialized on those shapes where
// symbolic.
//
//   CenterCropPad  -> pad (constant 0; negative amounts crop)
//   AffineGrid     -> matmul of a constant base grid and theta^T, reshape
//                     (the grid of F.affine_grid, ops/geometry.h)
//   Col2Im         -> index_add of the columns into a zero padded image,
//                     narrow (the scatter of F.fold, over N spatial dims)
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/ops/geometry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;
using Relation = ShapeGuard::Relation;

// The size of `axis` of input `input` where a translation needs a number:
// a symbolic one makes the model import again per shape of the inputs that
// hold its symbols (Note [Shape inputs] in import_context.cpp).
int64_t size_at_import(const Node& node, ImportContext& c, int input, const Value* value,
                       int64_t axis, const std::string& why) {
  const Dim& size = value->shape().at(size_t(axis));
  if (size.is_static()) return size.static_value();
  c.request_shapes_at_import(symbols_of(DimList{size}));
  return concrete_size(node, input, value, axis, why);  // throws, naming the symbol
}

// The numbers a shape input holds: a constant's, or sizes computed from
// the inputs' shapes (Shape(x)), which make the model import again per
// shape of the inputs that hold their symbols where any is symbolic.
IntList numbers_at_import(const Node& node, ImportContext& c, int input, const std::string& what) {
  const Value* value = c.input(node, input);
  KILN_CHECK_VALUE(value, what, " is missing");
  KILN_CHECK_VALUE(rank_of(value) == 1, what, " must be a 1-D tensor, but got shape ",
                   to_string(value->shape()));
  const DimList sizes = c.constant_sizes(value, what);
  if (is_static(sizes)) return to_static(sizes);
  const bool specialized = c.request_shapes_at_import(symbols_of(sizes));
  KILN_CHECK(false, what, " ", to_string(sizes),
             " holds symbolic sizes, which kiln needs as numbers here",
             specialized ? "; they come from the shapes of the model's inputs, on which "
                           "onnx::Model (kiln.onnx.load) specializes the graph per call"
                         : "");
  return {};
}

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// Along each listed axis the window of `shape` centered on the input: a
// crop drops floor(d / 2) at the start and the rest at the end, a pad adds
// zeros the same way (ONNX's reference; ONNX Runtime agrees). One pad does
// both, as kiln's constant pad crops where its amount is negative.
void center_crop_pad(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t rank = rank_of(x);
  const IntList window = numbers_at_import(node, c, 1, "CenterCropPad's shape");
  IntList axes = attr_ints(node, "axes", {});
  if (!has_attr(node, "axes")) {
    for (int64_t axis = 0; axis < rank; ++axis)
      axes.push_back(axis);
  }
  KILN_CHECK_VALUE(window.size() == axes.size(), "CenterCropPad: shape ", window, " has ",
                   window.size(), " sizes for ", axes.size(), " axes ", axes,
                   " of an input of rank ", rank);
  IntList pads(size_t(2 * rank), 0);  // kiln's pad: (before, after) from the last axis
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = wrap(axes[i], rank);
    KILN_CHECK_INDEX(axis >= 0 && axis < rank, "CenterCropPad: axis ", axes[i],
                     " is out of range for an input of rank ", rank);
    KILN_CHECK_VALUE(!seen[size_t(axis)], "CenterCropPad: axis ", axes[i], " is repeated in ",
                     axes);
    seen[size_t(axis)] = true;
    KILN_CHECK_VALUE(window[i] >= 0, "CenterCropPad: shape ", window, " holds a negative size");
    const int64_t change =
        window[i] - size_at_import(node, c, 0, x, axis, "CenterCropPad's crop or pad");
    const int64_t before = change >= 0 ? change / 2 : -(-change / 2);
    pads[size_t(2 * (rank - 1 - axis))] = before;
    pads[size_t(2 * (rank - 1 - axis) + 1)] = change - before;
  }
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return define(node, c, x);
  define(node, c,
         c.emit("pad", {x}, {{"pad", pads}, {"mode", std::string("constant")}, {"value", 0.0}}));
}

// grid[n, ..., :] = theta[n] (x, y[, z], 1): the base grid [S, k + 1] of the
// spatial sizes times theta^T [N, k + 1, k], reshaped to [N, spatial, k].
void affine_grid(const Node& node, ImportContext& c) {
  Value* theta = c.input(node, 0);
  const IntList size = numbers_at_import(node, c, 1, "AffineGrid's size");
  KILN_CHECK_VALUE(size.size() == 4 || size.size() == 5,
                   "AffineGrid: size must be (N, C, H, W) or (N, C, D, H, W), but got ", size);
  const int64_t dims = int64_t(size.size()) - 2;
  KILN_CHECK_TYPE(is_floating(theta->dtype()), "AffineGrid: theta must be floating, but got ",
                  theta->dtype());
  KILN_CHECK_VALUE(rank_of(theta) == 3, "AffineGrid: theta must be [N, ", dims, ", ", dims + 1,
                   "] for size ", size, ", but got ", to_string(theta->shape()));
  const int64_t rows = size_at_import(node, c, 0, theta, 1, "AffineGrid's theta");
  const int64_t columns = size_at_import(node, c, 0, theta, 2, "AffineGrid's theta");
  KILN_CHECK_VALUE(rows == dims && columns == dims + 1, "AffineGrid: theta must be [N, ", dims,
                   ", ", dims + 1, "] for size ", size, ", but got ", to_string(theta->shape()));
  const Dim& batch = theta->shape()[0];
  if (batch.is_symbolic()) {
    c.assume(batch, Relation::Eq, size[0],
             str("AffineGrid '", node.name(), "' has theta's batch equal to size[0] = ", size[0]));
  } else {
    KILN_CHECK_VALUE(batch.static_value() == size[0], "AffineGrid: size[0] (", size[0],
                     ") must equal theta's batch (", batch.static_value(), ")");
  }
  const IntList spatial(size.begin() + 2, size.end());
  // A size of 1 with align_corners has no step between corners: ONNX
  // Runtime's grid puts its point at 1 (PyTorch at 0, ONNX's function body
  // divides by zero); the import follows ONNX Runtime.
  const bool align_corners = attr_int(node, "align_corners", 0) != 0;
  Value* base = c.constant(affine_base_grid(spatial, align_corners, theta->dtype(), 1.0));
  Value* transposed = c.emit("transpose", {theta}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}});
  Value* grid = c.emit("matmul", {base, transposed});  // [N, S, dims]
  DimList shape = {batch};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  shape.push_back(dims);
  define(node, c, reshape_to(c, grid, shape));
}

// The columns [N, C * prod(block_shape), L] summed into the padded image at
// the positions ops/geometry.h gives (as F.fold does in 2-D), then the pads
// cut off. pads are ONNX's [begins..., ends...].
void col2im(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const IntList image = numbers_at_import(node, c, 1, "Col2Im's image_shape");
  const IntList block = numbers_at_import(node, c, 2, "Col2Im's block_shape");
  const size_t dims = image.size();
  KILN_CHECK_VALUE(dims >= 1 && block.size() == dims, "Col2Im: image_shape ", image,
                   " and block_shape ", block, " must be 1-D and of one length");
  KILN_CHECK_VALUE(rank_of(x) == 3, "Col2Im: input must be [N, C * prod(block_shape), L], ",
                   "but got ", to_string(x->shape()));
  const IntList pads = attr_ints(node, "pads", IntList(2 * dims, 0));
  KILN_CHECK_VALUE(pads.size() == 2 * dims, "Col2Im: pads ", pads, " must hold ", 2 * dims,
                   " values (begins, then ends) for image_shape ", image);
  const SlidingBlocks b =
      sliding_blocks(image, block, attr_ints(node, "dilations", IntList(dims, 1)),
                     IntList(pads.begin(), pads.begin() + long(dims)),
                     IntList(pads.begin() + long(dims), pads.end()),
                     attr_ints(node, "strides", IntList(dims, 1)), "Col2Im");
  const int64_t rows = size_at_import(node, c, 0, x, 1, "Col2Im's channels");
  KILN_CHECK_VALUE(rows % b.kernel_volume() == 0, "Col2Im: input's dimension 1 (", rows,
                   ") must be divisible by the product of block_shape ", block, " (",
                   b.kernel_volume(), ")");
  const Dim& length = x->shape()[2];
  if (length.is_symbolic()) {
    c.assume(length, Relation::Eq, b.count(),
             str("Col2Im '", node.name(), "' has ", b.count(), " blocks (", b.blocks, ")"));
  } else {
    KILN_CHECK_VALUE(length.static_value() == b.count(),
                     "Col2Im: input has L = ", length.static_value(), " blocks, but image_shape ",
                     image, ", block_shape ", block, ", dilations ", b.dilation, ", pads ", pads,
                     " and strides ", b.stride, " give ", b.count(), " (", b.blocks, ")");
  }
  const Dim batch = x->shape()[0];
  const int64_t channels = rows / b.kernel_volume();
  Value* columns = reshape_to(c, x, {batch, channels, b.kernel_volume() * b.count()});
  Value* zero = c.constant(zeros({1, 1, 1}, x->dtype()));
  Value* padded = c.emit("expand", {zero}, {{"size", DimList{batch, channels, b.padded_volume()}}});
  padded = c.emit("index_add", {padded, c.constant(b.positions()), columns}, {{"dim", int64_t(2)}});
  DimList shape = {batch, channels};
  shape.insert(shape.end(), b.padded.begin(), b.padded.end());
  Value* out = reshape_to(c, padded, shape);
  for (size_t d = 0; d < dims; ++d) {
    if (b.padded[d] == image[d]) continue;
    out = c.emit(
        "narrow", {out},
        {{"dim", int64_t(2 + d)}, {"start", Dim(b.pads_begin[d])}, {"length", Dim(image[d])}});
  }
  define(node, c, out);
}

// GridSample: opsets 16 to 19 name the modes bilinear, nearest and bicubic;
// opset 20 renamed them linear and cubic and took N-D inputs, of which
// kiln's grid_sample runs the 4-D form (the spatial transformer's AffineGrid
// -> GridSample, both opset 20).
void grid_sample(const Node& node, ImportContext& c) {
  const bool renamed = c.opset() >= 20;
  std::string mode = attr_string(node, "mode", renamed ? "linear" : "bilinear");
  // Each opset's own names only: opset 20 has no bilinear or bicubic.
  const bool known = renamed ? (mode == "linear" || mode == "nearest" || mode == "cubic")
                             : (mode == "bilinear" || mode == "nearest" || mode == "bicubic");
  if (renamed && mode == "linear") mode = "bilinear";
  if (renamed && mode == "cubic") mode = "bicubic";
  KILN_CHECK_VALUE(known, "onnx import: GridSample '", node.name(), "': mode '",
                   attr_string(node, "mode", ""), "' is not one of opset ", c.opset(), "'s (",
                   renamed ? "linear, nearest, cubic" : "bilinear, nearest, bicubic", ")");
  Value *x = c.input(node, 0), *grid = c.input(node, 1);
  KILN_CHECK(x->shape().size() == 4 && grid->shape().size() == 4, "onnx import: GridSample '",
             node.name(), "': kiln samples 4-D inputs ([N, C, H, W], grid [N, H, W, 2]), got X ",
             to_string(x->shape()), " and grid ", to_string(grid->shape()));
  define(node, c,
         c.emit("grid_sample", {x, grid},
                {{"mode", mode},
                 {"padding_mode", attr_string(node, "padding_mode", "zeros")},
                 {"align_corners", attr_int(node, "align_corners", 0) != 0}}));
}

}  // namespace

void add_geometry_importers(std::unordered_map<std::string, ImportFn>& table) {
  table["CenterCropPad"] = center_crop_pad;
  table["AffineGrid"] = affine_grid;
  table["Col2Im"] = col2im;
  table["GridSample"] = grid_sample;
}

}  // namespace kiln::onnx
