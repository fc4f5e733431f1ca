// grid_sample(input, grid; mode, padding_mode, align_corners): torch's
// F.grid_sample on 4-D inputs and ONNX's GridSample (opsets 16 to 19 name
// the modes so; onnx/import_geometry.cpp also reads opset 20's),
// kernels/cpu/grid_sample.h.
//
// It has no backward rule yet: PyTorch's gradient w.r.t. the input is a
// scatter of the interpolation weights and w.r.t. the grid the weights'
// derivatives, one more kernel per mode; until then backward through it is
// an error naming the op rather than a silent zero.
#include "kiln/kernels/cpu/grid_sample.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

cpu::GridSampleParams params_of(const Attrs& attrs) {
  cpu::GridSampleParams p;
  const std::string& mode = attrs.get_string("mode");
  const std::string& padding = attrs.get_string("padding_mode");
  if (mode == "nearest") p.mode = cpu::GridSampleMode::Nearest;
  if (mode == "bicubic") p.mode = cpu::GridSampleMode::Bicubic;
  KILN_CHECK_VALUE(mode == "bilinear" || mode == "nearest" || mode == "bicubic",
                   "grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got '", mode,
                   "'");
  if (padding == "border") p.padding = cpu::GridSamplePadding::Border;
  if (padding == "reflection") p.padding = cpu::GridSamplePadding::Reflection;
  KILN_CHECK_VALUE(padding == "zeros" || padding == "border" || padding == "reflection",
                   "grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got '",
                   padding, "'");
  p.align_corners = attrs.get_bool("align_corners");
  return p;
}

InferResult infer_grid_sample(const InferArgs& args) {
  check_floating(args, 0);
  const TensorMeta &x = args.inputs[0], &grid = args.inputs[1];
  params_of(args.attrs);
  KILN_CHECK(x.dim() == 4 && grid.dim() == 4,
             "grid_sample: expected a 4-D input [N, C, H, W] and a 4-D grid [N, OH, OW, 2], got ",
             "shapes ", x.shape, " and ", grid.shape);
  KILN_CHECK_TYPE(grid.dtype == x.dtype, "grid_sample: expected grid to have the input's dtype ",
                  x.dtype, ", got ", grid.dtype);
  KILN_CHECK(grid.shape[3] == Dim(2) && grid.shape[0] == x.shape[0],
             "grid_sample: expected grid of shape [N, OH, OW, 2] with the input's N, got input ",
             x.shape, " and grid ", grid.shape);
  KILN_CHECK(!definitely_less(x.shape[2], 1) && !definitely_less(x.shape[3], 1),
             "grid_sample: expected an input with non-empty spatial dims, got shape ", x.shape);
  return InferResult{{TensorMeta{x.dtype, {x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]}}},
                     {}};
}

void grid_sample_kernel(const KernelArgs& args) {
  cpu::grid_sample2d(args.outputs[0], args.inputs[0], args.inputs[1], params_of(args.attrs));
}

}  // namespace

void register_grid_sample_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "grid_sample",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {{"mode", AttrKind::String, std::string("bilinear")},
                               {"padding_mode", AttrKind::String, std::string("zeros")},
                               {"align_corners", AttrKind::Bool, false}},
                     .infer = infer_grid_sample,
                     .cpu = grid_sample_kernel,
                     .kind = OpKind::Opaque,
                     // Exported one to one at opsets 16 to 19 (the exporter's); imported
                     // by onnx/import_geometry.cpp, which also reads opset 20's mode names.
                     .onnx = [] {
                       OnnxInfo info =
                           onnx_op("GridSample",
                                   {{"mode", "mode", std::string("bilinear")},
                                    {"padding_mode", "padding_mode", std::string("zeros")},
                                    {"align_corners", "align_corners", false}},
                                   {}, OnnxDirection::ExportOnly);
                       info.min_opset = 16;
                       info.max_opset = 19;
                       return info;
                     }()});
}

}  // namespace kiln
