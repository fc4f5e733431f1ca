// OpDef: everything kiln knows about one operator, declared once. The table
// of OpDefs drives eager dispatch, and later tracing, autodiff, constant
// folding, memory planning, serialization and ONNX export.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/dim.h"
#include "kiln/core/tensor.h"
#include "kiln/kernels/cpu/strided.h"
#include "kiln/ops/attrs.h"

namespace kiln {

// The metadata shape inference works on. `defined` is false for an absent
// optional input (linear without a bias). Dims are symbolic in a graph
// traced with dynamic shapes (core/dim.h) and static in eager calls.
struct TensorMeta {
  DType dtype = DType::Float32;
  DimList shape;
  bool wrapped_number = false;  // a Python number turned into a 0-d tensor
  bool defined = true;

  int64_t dim() const { return int64_t(shape.size()); }
};

struct InferResult {
  std::vector<TensorMeta> outputs;
  // Dtypes the kernel expects its inputs in; dispatch inserts casts (as cast
  // ops, so traces and autograd see them). Empty: inputs are used as given.
  std::vector<DType> input_dtypes;
};

struct OpDef;

struct InferArgs {
  const OpDef& op;
  std::span<const TensorMeta> inputs;
  const Attrs& attrs;
};

// The storage behind an eager call's packable input (OpDef::packs_input)
// and its version when the op was issued: a kernel may reuse a packed copy
// made from those same bytes (Note [Eager packed weights],
// ops/packed_weights.h).
struct IssuedStorage {
  const StorageImpl* storage = nullptr;
  uint64_t version = 0;
};

struct KernelArgs {
  std::span<const cpu::StridedView> inputs;
  std::span<const cpu::StridedView> outputs;  // allocated by dispatch to the inferred meta
  const Attrs& attrs;
  // Eager calls of an op with packs_input: that input's storage. Null in
  // compiled plans, which keep their own packed copies (run_packed).
  const IssuedStorage* packable = nullptr;
};

// A view op's outputs are new shapes/strides/offsets over input 0's storage.
// Shape inference runs the same rules over Dims (BasicViewMeta<Dim>).
template <typename I>
struct BasicViewMeta {
  std::vector<I> shape, strides;
  I offset = 0;
};
using ViewMeta = BasicViewMeta<int64_t>;

struct ViewArgs {
  const Tensor& input;
  const Attrs& attrs;
};

// What a backward rule sees. The autograd layer implements it; rules are
// written with kiln ops on Tensors (so gradients can themselves be traced,
// compiled and differentiated again) and live beside their op.
class GradContext {
 public:
  virtual ~GradContext() = default;
  virtual size_t num_inputs() const = 0;
  // The forward's input i / output i as saved; throws PyTorch's "modified by
  // an inplace operation" error when it changed since.
  virtual Tensor input(size_t i) const = 0;
  virtual Tensor output(size_t i) const = 0;
  // Shape and dtype of input i without touching its value (for sum_to).
  virtual const TensorMeta& input_meta(size_t i) const = 0;
  // Its shape as integers: rules run on tensors, whose sizes are concrete.
  IntList input_shape(size_t i) const { return to_static(input_meta(i).shape, "backward"); }
  // False for inputs that need no gradient (return an undefined Tensor there).
  virtual bool needs_input_grad(size_t i) const = 0;
  // The gradient of output i (zeros when that output got none).
  virtual const Tensor& grad_output(size_t i) const = 0;
  virtual const Attrs& attrs() const = 0;
};

// Kernel state made once for a fixed geometry, so a compiled plan does per
// call only the work that depends on the data: a oneDNN primitive already
// created, the choice between kiln's batch-1 matvec and oneDNN already made.
// run() gives exactly what the op's plain kernel gives for the same views
// (same algorithm, so the bits are equal) and may be called from several
// threads at once.
class PreparedKernel {
 public:
  virtual ~PreparedKernel() = default;
  virtual void run(const KernelArgs& args) const = 0;

  // A weight this kernel can keep in a packed form across calls (the input
  // index), or -1. When that input is a parameter or constant that nothing
  // in the plan writes, the executable calls run_packed() instead of run(),
  // with the version counter of the input's storage: the kernel packs the
  // weight on the first call and again whenever the version moved (an
  // optimizer step, copy_, any in-place op). Same bits as run().
  virtual int packable_input() const { return -1; }
  virtual void run_packed(const KernelArgs& args, uint64_t version) const { run(args); }

  // Asked once, before any run, by a fused op whose activation is relu
  // (linear_act): true when this kernel will apply relu to its output as it
  // stores it, so the caller does not make a second pass over it.
  virtual bool take_relu() { return false; }
};

using InferFn = InferResult (*)(const InferArgs&);
using KernelFn = void (*)(const KernelArgs&);
using ViewFn = std::vector<ViewMeta> (*)(const ViewArgs&);
// One gradient per input, each of that input's shape (undefined where none).
using GradFn = std::vector<Tensor> (*)(const GradContext&);
// Prepares the kernel for views of exactly these shapes, strides and dtypes
// and these attributes. The views' data pointers are placeholders (non-null
// exactly for present inputs) and must not be read or kept: the data changes
// per call, and parameters may be updated in place between calls. Null
// result: nothing worth preparing, run the plain kernel.
using PrepareFn = std::unique_ptr<PreparedKernel> (*)(const KernelArgs&);
// Inputs the kernel writes in place under these attributes (batch_norm's
// running statistics when training).
using MutatedInputsFn = std::vector<int> (*)(const Attrs&);

enum class OpKind {
  Elementwise,  // output[i] depends on input[i] only (after broadcasting)
  Reduction,
  View,  // output aliases input 0; no kernel
  Opaque,
};

// How an op is written in ONNX and read back (onnx/export_generic.cpp,
// onnx/import_generic.cpp). Three forms:
//
//   one to one      onnx_op("LeakyRelu", {{"negative_slope", "alpha", 0.01}}):
//                   the ONNX op takes the same inputs in the same order and
//                   has the same outputs; attributes are renamed, their
//                   values converted by the kiln attribute's kind (Float <->
//                   float, Bool <-> int 0/1, DType <-> TensorProto type,
//                   Int, Ints, String as they are). The generic exporter
//                   and importer translate it; no hand-written translator
//                   of the same op (or ONNX op type) may exist.
//   hand-written    {"Conv"}: a translator in onnx/export_*.cpp writes it
//                   (op_type only says which ONNX op it mainly becomes);
//                   an empty OnnxInfo with a registered exporter is the same.
//   not exportable  onnx_not_exportable("a backward op; ..."): the reason.
//
// tests/cpp/onnx_table_test.cpp makes every op of the table declare one.

// How a kiln attribute is named in ONNX.
struct OnnxAttr {
  std::string kiln;
  std::string onnx;
  // The value ONNX means when a node leaves the attribute out (what the
  // importer sets); None: kiln's default is ONNX's. ONNX's float attributes
  // are float32: its 0.01 is double(0.01f).
  AttrValue onnx_default = {};
};

// The dtype the exporter gives an input (ONNX ops take one dtype where
// kiln's promote).
enum class OnnxOperand {
  AsIs,
  Output,    // the output's dtype (a function computing in float)
  Bool,      // bool (Not, Where's condition)
  Promoted,  // the dtype a binary op computes in; bools compute as int32 and
             // the result is cast back
};

enum class OnnxDirection { Both, ExportOnly, ImportOnly };

// An opset beyond any ONNX has published: "no upper bound".
inline constexpr int64_t kLatestOnnxOpset = 1000;

struct OnnxInfo {
  std::string op_type;      // the ONNX op ("": none)
  bool one_to_one = false;  // translated by the generic exporter and importer
  OnnxDirection direction = OnnxDirection::Both;
  std::vector<OnnxAttr> attrs = {};
  // Per input, the last one repeating; empty: every input as it is.
  std::vector<OnnxOperand> operands = {};
  // The opsets (of the model, import; of the export) the translation holds
  // for: ONNX changed the op's form outside them.
  int64_t min_opset = 1;
  int64_t max_opset = kLatestOnnxOpset;
  std::string not_exportable = {};  // why the op has no ONNX form

  bool exports_generically() const { return one_to_one && direction != OnnxDirection::ImportOnly; }
  bool imports_generically() const { return one_to_one && direction != OnnxDirection::ExportOnly; }
  // "opsets 13 to 17", or "opset 18 on" when open-ended, for errors.
  std::string opsets() const {
    if (max_opset >= kLatestOnnxOpset) return "opset " + std::to_string(min_opset) + " on";
    return "opsets " + std::to_string(min_opset) + " to " + std::to_string(max_opset);
  }
  OnnxOperand operand(size_t i) const {
    if (operands.empty()) return OnnxOperand::AsIs;
    return operands[std::min(i, operands.size() - 1)];
  }
};

// A one-to-one translation (see OnnxInfo).
inline OnnxInfo onnx_op(std::string op_type, std::vector<OnnxAttr> attrs = {},
                        std::vector<OnnxOperand> operands = {},
                        OnnxDirection direction = OnnxDirection::Both) {
  return OnnxInfo{.op_type = std::move(op_type),
                  .one_to_one = true,
                  .direction = direction,
                  .attrs = std::move(attrs),
                  .operands = std::move(operands)};
}

inline OnnxInfo onnx_not_exportable(std::string reason) {
  return OnnxInfo{.not_exportable = std::move(reason)};
}

struct OpDef {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;   // -1: variadic (cat, stack)
  int num_outputs = 1;  // -1: decided by infer (split, chunk)
  // Inputs that may be absent (an undefined Tensor): linear's bias,
  // batch_norm's weight, bias and running statistics.
  std::vector<int> optional_inputs = {};
  std::vector<AttrSpec> attrs;

  InferFn infer = nullptr;
  KernelFn cpu = nullptr;  // null for view ops
  ViewFn view = nullptr;   // only for view ops
  GradFn grad = nullptr;
  PrepareFn prepare = nullptr;  // optional: what a compiled plan calls instead of `cpu`

  OpKind kind = OpKind::Opaque;
  bool may_run_inplace = false;   // output may share input 0's buffer
  bool has_side_effects = false;  // never folded or removed (batch_norm's running stats)
  bool is_random = false;         // draws from the generator (dropout)
  // False: its outputs never carry a gradient, whatever its inputs (a random
  // draw that reads only its input's shape, as randn_like): dispatch records
  // no backward node, so they do not require grad, as in PyTorch.
  bool differentiable = true;
  // An activation function (relu, gelu, ...): one input, elementwise, the
  // op a fusion appends to a linear or conv2d.
  bool is_activation = false;
  // Its backward reads only its output y = f(x), never x (relu, sigmoid,
  // tanh): an op that runs it in place over its producer's output
  // (linear_act) still has what the backward needs.
  bool grad_reads_output_only = false;
  // Its kernel runs on the thread that issued it, in async mode too: it
  // calls back into Python (custom_function), or every rank must issue it
  // in its program's order (the collectives, collective_ops.h).
  bool runs_where_issued = false;
  // With has_side_effects: which inputs are written (null: none).
  MutatedInputsFn mutated_inputs = nullptr;
  // The input whose packed form eager calls may keep across calls (a
  // product's b: Note [Eager packed weights]), or -1: dispatch hands the
  // kernel its storage and version as issued (KernelArgs::packable).
  int packs_input = -1;
  // The names of the sub-graphs a node of this op owns (cond: then, else;
  // while_loop: cond, body; scan: step). Ops with blocks are control flow:
  // only graphs hold them (jit/ir/control_flow.h types and checks them), and
  // dispatch never runs them; the eager API is ops/control_flow.h.
  std::vector<std::string> blocks = {};

  OnnxInfo onnx;

  // An activation a fused op (linear_act) can run in place over its
  // producer's output, which is all such an op keeps: its backward reads
  // only that output, and it has no attributes for the fused op to hold.
  bool fuses_after_producer() const {
    return is_activation && grad_reads_output_only && attrs.empty();
  }

  bool input_may_be_absent(size_t i) const {
    return std::find(optional_inputs.begin(), optional_inputs.end(), int(i)) !=
           optional_inputs.end();
  }
};

}  // namespace kiln
