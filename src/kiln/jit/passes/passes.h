// The builtin graph passes, one file each. Every pass rewrites the graph in
// place and returns whether it changed anything; the pipeline (pipeline.h)
// runs them by name. Calling one directly is fine too (tests do).
#pragma once

#include "kiln/jit/passes/pipeline.h"

namespace kiln::jit {

// Nodes whose inputs are all constants (and, frozen, parameters) become
// constants, computed by the op's own kernel through dispatch.
bool constant_fold(Graph& graph, PassContext& context);

// Algebraic simplifications from a table of rules (x*1 -> x, ...).
bool peephole(Graph& graph, PassContext& context);

// Nodes computing what an earlier node computes, and constants holding what
// an earlier constant holds, are merged into it.
bool cse(Graph& graph, PassContext& context);

// Nodes whose results nobody uses, and unused constants, are removed.
bool dce(Graph& graph, PassContext& context);

// conv2d followed by a residual add and/or an activation (relu, clamp,
// hardsigmoid, hardswish, sigmoid, silu, tanh, as kiln.nn and ONNX imports
// write them) becomes one conv2d_fused (fuse_conv_epilogue.cpp). Changes
// rounding: fast-math, and frozen graphs unless exact.
bool fuse_conv_epilogue(Graph& graph, PassContext& context);

// Chains of float32 convolutions run channels-last (conv2d_fused {layout=
// "nhwc"}), reordered only at a chain's edges (carry_conv_layout.cpp).
// Changes rounding: fast-math, and frozen graphs unless exact.
bool carry_conv_layout(Graph& graph, PassContext& context);

// linear/conv2d followed by relu/sigmoid/tanh become one fused op
// (linear_act, conv2d_act) when the activation is the only user.
bool fuse_activations(Graph& graph, PassContext& context);

// linear followed by gelu (erf form) becomes linear_act {activation="gelu"}
// when the gelu is the only reader (fuse_linear_gelu.cpp).
bool fuse_linear_gelu(Graph& graph, PassContext& context);

// matmul -> (mul|div by a constant) -> (add mask) -> softmax -> matmul
// becomes one scaled_dot_product_attention (fuse_attention.cpp). Changes
// rounding: fast-math, and frozen graphs unless exact.
bool fuse_attention(Graph& graph, PassContext& context);

// The passes of the transformer encoder (fuse_linear_gelu, fuse_attention),
// added to `registry`.
void register_transformer_passes(PassRegistry& registry);

// Trees of elementwise ops whose inner results only the tree reads become
// one fused_elementwise op.
bool fuse_elementwise(Graph& graph, PassContext& context);

// Frozen, eval mode: a batch_norm after a conv2d or linear folds into the
// weights of that op (may change rounding: fast-math only).
bool fold_batch_norm(Graph& graph, PassContext& context);

// Control flow: a cond with a constant predicate becomes its taken branch;
// loop-invariant nodes of loop bodies move before the loop; inputs no block
// reads are dropped.
bool simplify_control_flow(Graph& graph, PassContext& context);

// A scan with a small static trip count (measured: unroll.cpp) becomes its
// step inlined once per iteration: slices by select, ys by stack.
// KILN_UNROLL=0 keeps every loop; KILN_UNROLL=all unrolls every static scan.
bool unroll_loops(Graph& graph, PassContext& context);

// Fills `registry` with the passes above (the default pipeline is its own
// list: default_pipeline_steps in pipeline.h).
void register_builtin_passes(PassRegistry& registry);

}  // namespace kiln::jit
