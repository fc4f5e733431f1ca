// Ops whose output shape depends on the input's values, not only on its
// shape: nonzero, argwhere, unique, non_max_suppression, bincount, and
// repeat_interleave with a tensor of counts.
//
// Note [Data-dependent output shapes]: an op's output shape usually follows
// from its inputs' metadata (OpDef::infer). Here it follows from their
// values. nonzero, unique and non_max_suppression are ops of the table all
// the same, as torch.export and Dynamo treat such ops, with "unbacked" size
// symbols:
//  - Each has a String attribute `size_symbol` (data_dependent_ops.cpp). A
//    graph (jit/ir/graph.cpp) names it when it appends the node: a symbol
//    no other size of the graph uses (nz0, uniq1, nms0); infer gives that
//    symbol as the data-dependent size ([nz0, 2] for nonzero of a 2-D x).
//    Later ops' shapes are expressions over it like over any symbol, and a
//    decision on it that nothing settles becomes a guard of the graph.
//  - dispatch sees a symbolic output shape where every input is concrete and
//    runs the op's data-dependent kernel (run_data_dependent), which makes
//    its outputs at the size the data gives.
//  - Graph runners bind the symbol when the node runs (exec/interpreter.cpp)
//    and check the graph's guards that mention it then. A plan cannot
//    allocate before the run what only the run decides: a graph holding such
//    a node runs node by node with allocation at run time (the Executable
//    falls back to the Interpreter, and says so in its stats and the compile
//    report), every other graph as before.
//  - Its lower bound is 0 (every size symbol is nonnegative); its upper bound
//    (size_symbol_bound: numel for nonzero and unique) is checked when it is
//    bound. A graph with such a node has no compiled backward: calls that
//    need gradients replay through dispatch. dce keeps a node whose symbol
//    something else reads (ones(idx.shape[0])); constant_fold folds one only
//    when nothing but the graph's outputs reads it.
//  - The recorder gives the symbol the traced call's count as its example
//    value, so kiln.jit.trace and hybridize capture these ops.
// bincount and repeat_interleave(tensor) stay C++ functions over concrete
// data that refuse to run while a trace records. The integer outputs carry
// no gradient (differentiable = false); unique's values are picked, not
// computed, and torch.unique does not differentiate them either;
// repeat_interleave's values come from index_select, so its gradient is
// index_select's.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"
#include "kiln/ops/op.h"

namespace kiln {

class OpRegistry;

// The indices of x's nonzero elements (NaN counts), one row of x.dim()
// coordinates each, in row-major order: int64 of shape [n, x.dim()].
Tensor nonzero(const Tensor& x);
// as_tuple=True: one 1-D int64 tensor of indices per dim (a 0-d x counts
// as 1-D).
std::vector<Tensor> nonzero_tuple(const Tensor& x);
Tensor argwhere(const Tensor& x);  // nonzero under NumPy's name

// The distinct values of x (dim unset: flattened) or its distinct slices
// along dim, in ascending order (NaNs last, each its own value; sorted=false
// gives the same order, which PyTorch's CPU kernel also does). inverse: the
// position in `values` of each element (shape of x) or slice ([x.size(dim)]);
// counts: how often each value occurs. Both int64, undefined unless asked.
struct UniqueResult {
  Tensor values, inverse, counts;
};
UniqueResult unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                    bool return_counts = false, std::optional<int64_t> dim = std::nullopt);

// The op `unique` (ONNX's Unique): values, the index of each value's first
// occurrence (flat, or along dim), inverse (x's shape, or [x.size(dim)])
// and counts. sorted: ascending; otherwise in the order of first occurrence.
struct UniqueAll {
  Tensor values, first_indices, inverse, counts;
};
UniqueAll unique_all(const Tensor& x, bool sorted, std::optional<int64_t> dim);

// ONNX's NonMaxSuppression (kernels/cpu/non_max_suppression.h): the kept
// (batch, class, box) rows, int64 [n, 3]. The optional scalars may be
// undefined: no box (max_output_boxes_per_class), 0 (iou_threshold), no
// threshold (score_threshold), as ONNX's defaults.
Tensor non_max_suppression(const Tensor& boxes, const Tensor& scores,
                           const Tensor& max_output_boxes_per_class = {},
                           const Tensor& iou_threshold = {}, const Tensor& score_threshold = {},
                           bool center_point_box = false);

// How often each value 0..max(x) occurs in the 1-D non-negative integer
// tensor x (at least minlength bins): int64, or with `weights` (x's length)
// their sums: float32 weights give float32, others float64, as PyTorch.
Tensor bincount(const Tensor& x, const Tensor& weights = Tensor(), int64_t minlength = 0);

// The indices 0, 1, ... each repeated repeats[i] times (torch.repeat_interleave(repeats)).
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = std::nullopt);
// Each element (dim unset: of the flattened x) or slice along dim repeated
// repeats[i] times; a one-element repeats applies to all. output_size, when
// given, must be the result's size along dim.
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);

// ---- the ops of the table (see the Note above) ----
inline constexpr const char* kSizeSymbolAttr = "size_symbol";
// The stem of the symbols a node of `op` binds ("nz" for nonzero), or ""
// for an op whose output sizes follow from its inputs' metadata.
std::string size_symbol_stem(const OpDef& op);
// The symbol a node binds: its size_symbol attribute, or the stem when
// unset (an eager call).
Dim size_symbol_of(const OpDef& op, const Attrs& attrs);
// The largest value the symbol can take for inputs of these types
// (numel for nonzero), if one is known.
std::optional<Dim> size_symbol_bound(const OpDef& op, std::span<const TensorMeta> inputs,
                                     const Attrs& attrs);
// Runs a data-dependent op (what dispatch does when infer gives a symbolic
// size for concrete inputs): outputs of the size the data gives, of the
// dtypes and ranks infer gave.
std::vector<Tensor> run_data_dependent(const OpDef& op, std::span<const Tensor> inputs,
                                       const Attrs& attrs);
void register_data_dependent_ops(OpRegistry& registry);

namespace detail {
// The ops' bodies over concrete data (data_dependent.cpp).
Tensor nonzero_of(const Tensor& x);
UniqueAll unique_all_of(const Tensor& x, bool sorted, std::optional<int64_t> dim);
Tensor non_max_suppression_of(std::span<const Tensor> inputs, bool center_point_box);
}  // namespace detail

}  // namespace kiln
