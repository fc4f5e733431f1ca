// What the translators of single ONNX nodes (import_*.cpp) build through:
// the kiln values of ONNX names, attribute readers, emit(), which adds a
// kiln node or, when every input is known, computes it at once, and the
// sizes known at import time (Note [Known sizes] in import_sizes.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/jit/ir/graph.h"
#include "kiln/onnx/onnx_import.h"

namespace kiln::onnx {

namespace pb = ::onnx;

// kiln's dtype for an ONNX data type; throws naming `what` when kiln has none.
DType dtype_from_onnx(int64_t type, const std::string& what);

// An ONNX tensor as a kiln tensor (raw or typed data, or external data
// under `folder`); throws naming it for types kiln lacks or bad sizes.
Tensor tensor_from_proto(const pb::TensorProto& proto, const std::string& folder);

class ImportContext {
 public:
  ImportContext(jit::Graph& graph, int64_t opset, std::string folder)
      : graph_(graph), opset_(opset), folder_(std::move(folder)) {}
  // The context of a sub-graph (an If branch, a Loop or Scan body) built
  // into `block`. ONNX sub-graphs read the enclosing graphs' values by
  // name: a name `block` does not define is looked up in `outer`. A value
  // known at import (a constant, sizes) is copied in; any other becomes a
  // capture: an input of `block`, after those its translation added first,
  // which the control-flow node feeds with the outer value.
  ImportContext(jit::Graph& block, ImportContext& outer)
      : graph_(block), opset_(outer.opset_), folder_(outer.folder_), outer_(&outer) {}
  // A scope of `outer` building into its own graph (an unrolled Loop's
  // iteration): the names it defines stay its own, the outer values it
  // reads are used as they are.
  struct Inline {};
  ImportContext(ImportContext& outer, Inline)
      : graph_(outer.graph_),
        opset_(outer.opset_),
        folder_(outer.folder_),
        outer_(&outer),
        inline_(true) {}

  jit::Graph& graph() { return graph_; }
  // The model's graph, which holds the guards (graph() for the top context).
  jit::Graph& root_graph() { return outer_ ? outer_->root_graph() : graph_; }
  // The outer values a sub-graph reads, one per capture input, in order.
  const std::vector<jit::Value*>& captures() const { return captures_; }
  int64_t opset() const { return opset_; }
  const std::string& folder() const { return folder_; }

  void define(const std::string& name, jit::Value* value);
  // The value of an ONNX name; null for "" (an absent optional input).
  jit::Value* value(const std::string& name);
  jit::Value* input(const pb::NodeProto& node, int i);  // null when absent
  // The data of a value known at import time (a constant), or throws
  // naming `what` ("Reshape's shape") as needing to be constant.
  const Tensor& constant_data(const jit::Value* value, const std::string& what) const;
  IntList constant_ints(const jit::Value* value, const std::string& what) const;
  jit::Value* constant(const Tensor& data);
  // A constant with data (not a placeholder for symbolic sizes).
  bool is_constant(const jit::Value* value) const;
  // Values a translation knows hold no negative number (a Loop's iteration
  // number), so that indexing by them needs no wrap from the end.
  void mark_nonnegative(const jit::Value* value) { nonnegative_.insert(value); }
  bool marked_nonnegative(const jit::Value* value) const { return nonnegative_.count(value) > 0; }

  // A kiln op over values: a node, or its result at once when all inputs
  // are constants. An input holding symbolic sizes is an error naming it.
  jit::Value* emit(const std::string& op, const std::vector<jit::Value*>& inputs,
                   const Attrs& attrs = {});
  std::vector<jit::Value*> emit_multi(const std::string& op, const std::vector<jit::Value*>& inputs,
                                      const Attrs& attrs = {});
  // emit() where the op's shape inference needs a fact the import assumed
  // (assume()): the graph's guards decide its comparisons of sizes.
  jit::Value* emit_under_guards(const std::string& op, const std::vector<jit::Value*>& inputs,
                                const Attrs& attrs = {});

  // ---- sizes known at import time ----
  // The elements of a 0-D or 1-D integer or bool value known at import, as
  // Dims: a constant's (a float one's when all are whole numbers), or the
  // symbolic sizes of a placeholder; std::nullopt for a value computed at
  // run time.
  std::optional<DimList> known_sizes(const jit::Value* value) const;
  // Whether `value` is a placeholder for sizes that mention a symbol.
  bool holds_symbols(const jit::Value* value) const;
  // For a value read as a tensor at run time: a placeholder is an error
  // naming its sizes and `why`.
  void require_tensor(const jit::Value* value, const std::string& why) const;
  // A value holding `sizes` ([n], or 0-D when `scalar`): a constant when
  // all are static, else a placeholder that no node may read.
  jit::Value* sizes_value(const DimList& sizes, DType dtype, bool scalar = false);
  // The sizes a value holds, where a translation needs them at import:
  // constant_ints, with symbols allowed.
  DimList constant_sizes(const jit::Value* value, const std::string& what) const;
  // A fact about the symbols that a translation relies on: a guard of the
  // graph, checked on every call.
  void assume(const Dim& lhs, ShapeGuard::Relation relation, const Dim& rhs,
              const std::string& reason);

  // ---- value inputs (Note [Value inputs] in import.cpp) ----
  // A model input (root graph input) whose value a translation may need at
  // import, as a shape, an axis or a bound.
  void add_value_candidate(const jit::Value* input, const std::string& name);
  // Where translating needs `values` at import and they are computed at run
  // time: records the model inputs they are computed from as needed, so
  // that the model is imported again with those inputs' values bound.
  // False, recording nothing, when a value also depends on something no
  // input decides (a loop's iteration number, a weight); constants are
  // skipped.
  bool request_at_import(const std::vector<const jit::Value*>& values) const;
  // A Loop body's iteration number: a value needed at import that comes
  // from it asks the enclosing context to unroll the Loop instead.
  void mark_iteration(const jit::Value* input) { iterations_.insert(input); }
  // Whether a translation of this context's Loop body asked for that (and
  // forgets the request).
  bool take_unroll_request() { return std::exchange(unroll_requested_, false); }
  // The model inputs requested so far, by any context of the import.
  const std::set<std::string>& requested_inputs() const { return root().requested_; }
  // Where translating needs a fact about sizes that only a call decides
  // (Note [Shape inputs]): records the model inputs whose shapes hold
  // `symbols`, so that the model is imported again with their shapes
  // fixed. False, recording nothing, when no input holds them.
  bool request_shapes_at_import(const std::vector<std::string>& symbols) const;
  const std::set<std::string>& requested_shapes() const { return root().requested_shapes_; }
  // ---- ONNX sequences and optionals (import_sequences.cpp) ----
  // A sequence or an optional is a list of values known at import (an
  // optional's of none or one); a handle value, which no node reads,
  // stands for it wherever a translation passes values on (Identity, a
  // Loop's carried values).
  struct Composite {
    bool optional = false;
    std::vector<jit::Value*> elements;
  };
  jit::Value* composite(Composite parts);
  // The parts a handle stands for (in this or an enclosing scope); null
  // for any other value.
  const Composite* composite_of(const jit::Value* value) const;
  // A sub-graph's translation that meets a sequence it cannot hold (a
  // Loop's carried one) asks the enclosing Loop to unroll instead.
  void request_unroll() {
    if (outer_) outer_->unroll_requested_ = true;
  }

  // After the last node: drops the placeholders; an output that is one is
  // an error (the graph's outputs, or `outputs` for a sub-graph's).
  void finish();
  void finish(const std::vector<jit::Value*>& outputs);

 private:
  struct Placeholder {
    DimList sizes;
    std::string name;  // the first ONNX name defined as it, for errors
  };
  const Placeholder* placeholder(const jit::Value* value) const;
  // The local value standing for `outer_value` of the enclosing graph.
  jit::Value* capture(jit::Value* outer_value);
  // Appends the model inputs `value` is computed from to `names`; false
  // when it depends on anything else that is not a constant.
  bool inputs_behind(const jit::Value* value, std::vector<std::string>& names) const;
  const ImportContext& root() const { return outer_ ? outer_->root() : *this; }
  // The error for a placeholder read where a tensor or a number is needed.
  [[noreturn]] void refuse(const jit::Value* value, const std::string& why) const;

  jit::Graph& graph_;
  int64_t opset_;
  std::string folder_;
  std::unordered_map<std::string, jit::Value*> values_;                   // lookups only
  std::unordered_map<const jit::Value*, Placeholder> placeholder_sizes_;  // lookups only
  std::vector<jit::Value*> placeholders_;                                 // in creation order
  std::unordered_set<const jit::Value*> nonnegative_;                     // lookups only
  ImportContext* outer_ = nullptr;
  std::vector<jit::Value*> captures_;
  std::unordered_map<const jit::Value*, jit::Value*> captured_from_;     // lookups only
  std::unordered_map<const jit::Value*, std::string> value_candidates_;  // lookups only
  mutable std::set<std::string> requested_;         // the root's: requests come from any context
  mutable std::set<std::string> requested_shapes_;  // the root's, as requested_
  // The root's: the size symbols the import's data-dependent nodes bind,
  // in every graph, blocks under construction included (with_size_symbol
  // sees only the graph it builds into and what that is attached to).
  mutable std::set<std::string> size_symbols_;
  std::unordered_set<const jit::Value*> iterations_;  // lookups only
  mutable bool unroll_requested_ = false;
  std::unordered_map<const jit::Value*, Composite> composites_;  // lookups only
  bool inline_ = false;
};

// The size of `axis` of input `input` of `node` where a translation needs
// a number (`why`): a symbolic size is an error naming the input, the axis
// and the symbol.
int64_t concrete_size(const pb::NodeProto& node, int input, const jit::Value* value, int64_t axis,
                      const std::string& why);

// Attribute readers; `fallback` when the node lacks the attribute.
int64_t attr_int(const pb::NodeProto& node, const std::string& name, int64_t fallback);
float attr_float(const pb::NodeProto& node, const std::string& name, float fallback);
std::string attr_string(const pb::NodeProto& node, const std::string& name,
                        const std::string& fallback);
IntList attr_ints(const pb::NodeProto& node, const std::string& name, const IntList& fallback);
bool has_attr(const pb::NodeProto& node, const std::string& name);
// Axes from opset 13's input `input` (a constant), or the attribute before.
IntList axes_of(const pb::NodeProto& node, ImportContext& context, int input,
                const IntList& fallback);
const pb::AttributeProto* find_attr(const pb::NodeProto& node, const std::string& name);

// Translates one node: defines its outputs in the context.
using ImportFn = void (*)(const pb::NodeProto& node, ImportContext& context);
// The translation of `node`'s op (keyed "domain:type" outside the default
// domain), or null.
ImportFn find_importer(const pb::NodeProto& node);
std::string table_key(const pb::NodeProto& node);
void add_basic_importers(std::unordered_map<std::string, ImportFn>& table);
void add_nn_importers(std::unordered_map<std::string, ImportFn>& table);
void add_resample_importers(std::unordered_map<std::string, ImportFn>& table);
void add_math_importers(std::unordered_map<std::string, ImportFn>& table);
void add_shape_importers(std::unordered_map<std::string, ImportFn>& table);
void add_control_flow_importers(std::unordered_map<std::string, ImportFn>& table);
void add_rnn_importers(std::unordered_map<std::string, ImportFn>& table);
void add_loss_importers(std::unordered_map<std::string, ImportFn>& table);
void add_indexing_importers(std::unordered_map<std::string, ImportFn>& table);
void add_activation_importers(std::unordered_map<std::string, ImportFn>& table);
void add_sequence_importers(std::unordered_map<std::string, ImportFn>& table);
// Ops whose output sizes depend on input values: NonZero, Compress,
// Unique, NonMaxSuppression (import_dynamic.cpp).
void add_dynamic_importers(std::unordered_map<std::string, ImportFn>& table);
// DFT, STFT, MelWeightMatrix, Det (import_signal.cpp).
void add_signal_importers(std::unordered_map<std::string, ImportFn>& table);
// The ai.onnx.preview.training domain: Adagrad, Adam, Momentum
// (import_training.cpp).
void add_training_importers(std::unordered_map<std::string, ImportFn>& table);
// Conv, ConvTranspose and the pools (import_conv_pool.cpp).
void add_conv_pool_importers(std::unordered_map<std::string, ImportFn>& table);
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv (import_quant.cpp).
void add_quant_importers(std::unordered_map<std::string, ImportFn>& table);
// MaxRoiPool and DeformConv (import_vision.cpp).
void add_vision_importers(std::unordered_map<std::string, ImportFn>& table);
// CenterCropPad, AffineGrid and Col2Im (import_geometry.cpp).
void add_geometry_importers(std::unordered_map<std::string, ImportFn>& table);
// Model inputs and outputs of ONNX sequence or optional type
// (import_sequences.cpp): the input's tensors as graph inputs, from its
// form in `options` (false, adding none, where they lack it); the tensors
// the model's outputs hold, each output's form in `forms`.
bool add_composite_input(const pb::ValueInfoProto& input, const ImportOptions& options,
                         ImportContext& context);
std::vector<jit::Value*> flat_outputs(const pb::GraphProto& graph, ImportContext& context,
                                      std::vector<int64_t>& forms);
// Imports a sub-graph's initializers (as constants) and nodes into
// `context` (import.cpp); returns the values of its outputs.
std::vector<jit::Value*> import_subgraph(const pb::GraphProto& graph, ImportContext& context);
// Translates a node that computes on sizes holding symbols (Shape's
// output, Gather, Concat, arithmetic on it) at import time; false when the
// node is not one (its translation then runs).
bool import_on_sizes(const pb::NodeProto& node, ImportContext& context);

}  // namespace kiln::onnx
