// What the exporters of single ops (export_*.cpp) write through: the
// names of kiln values in the ONNX graph, new nodes, and initializers.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/jit/ir/graph.h"

namespace kiln::onnx {

namespace pb = ::onnx;

pb::TensorProto_DataType onnx_dtype(DType dtype);

// The integer shape of a value `node` reads or writes, for the exporters
// that need concrete sizes; a symbolic dim is an error naming the op.
IntList static_shape(const jit::Node& node, const jit::Value* value);

class ExportContext {
 public:
  ExportContext(pb::GraphProto& graph, int64_t opset, bool dynamic_batch, int64_t batch)
      : graph_(graph),
        root_(graph),
        opset_(opset),
        dynamic_batch_(dynamic_batch),
        batch_(batch),
        names_in_use_(std::make_shared<NamesInUse>()) {}
  // The context of a sub-graph (an If branch, a Loop or Scan body) written
  // into `graph`: ONNX names are unique across a model and its sub-graphs,
  // so it draws fresh names from `outer`'s pool; initializers go to the
  // model's graph (sub-graphs read them by name); the sizes `outer` has
  // computed so far are visible to it, as any outer-scope value is.
  ExportContext(pb::GraphProto& graph, const ExportContext& outer);

  int64_t opset() const { return opset_; }
  bool dynamic_batch() const { return dynamic_batch_; }
  int64_t batch() const { return batch_; }

  // The ONNX name of a kiln value (absent optional input: "").
  std::string name(const jit::Value* value);
  void bind(const jit::Value* value, std::string name);
  // A name never used before, made from `base`.
  std::string fresh(const std::string& base);

  // The names of the nodes this context has written (a sub-graph's outputs
  // must be computed in it, export_control_flow.cpp).
  bool produced_here(const std::string& name) const { return produced_.count(name) > 0; }

  // The value as `dtype`: itself, a converted initializer for a constant,
  // or a Cast node.
  std::string as_dtype(const jit::Value* value, DType dtype);
  std::string cast(const std::string& input, DType dtype);

  // Initializers.
  std::string initializer(const Tensor& data, const std::string& name = "");
  std::string ints(const std::vector<int64_t>& values);  // 1-D int64
  std::string scalar(double value, DType dtype);         // 0-d

  // Appends a node; returns it so the caller can add attributes.
  pb::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs);
  // One output named after `value` (the kiln value it computes).
  pb::NodeProto& node_for(const jit::Value* value, const std::string& op_type,
                          const std::vector<std::string>& inputs);
  // A one-output node with a fresh output name, returned.
  std::string temp(const std::string& op_type, const std::vector<std::string>& inputs,
                   pb::NodeProto** made = nullptr);

  // A shape for Reshape/Expand: with a dynamic batch, a first dimension
  // equal to the batch (taken from an input whose first dimension is the
  // batch) is written as 0 ("copy it from the input") for Reshape.
  std::vector<int64_t> reshape_target(const IntList& shape, const jit::Value* input) const;

  // ---- symbolic sizes (export_sizes.cpp) ----
  // Where the graph reads `symbol` at run time: dim `dim` of the ONNX input
  // `input` (the first one that is the symbol alone is kept).
  void add_symbol_source(const std::string& symbol, const std::string& input, int64_t dim);
  // A size as a 1-D int64 tensor of one element: an initializer when
  // static, else computed in the graph from the inputs' shapes (once per
  // size). An error when a symbol it names has no source.
  std::string size(const Dim& dim);
  // The same for one symbol, read off its source input's Shape.
  std::string symbol_size(const std::string& symbol);
  // Sizes as one 1-D int64 tensor: static runs as initializers, symbolic
  // dims computed, joined by a Concat.
  std::string sizes(const DimList& dims);

 private:
  struct SymbolSource {
    std::string input;
    int64_t dim;
  };

  struct NamesInUse {
    std::unordered_map<std::string, int> counters;  // lookups only
    std::unordered_set<std::string> taken;          // lookups only
  };

  pb::GraphProto& graph_;
  pb::GraphProto& root_;  // the model's graph, which holds the initializers
  int64_t opset_;
  bool dynamic_batch_;
  int64_t batch_;
  std::shared_ptr<NamesInUse> names_in_use_;  // shared with the sub-graphs' contexts
  std::unordered_map<const jit::Value*, std::string> names_;  // lookups only
  std::unordered_set<std::string> produced_;                  // lookups only
  std::map<std::string, SymbolSource> symbol_sources_;
  std::unordered_map<std::string, std::string> size_names_;    // size text -> name; lookups only
  std::unordered_map<std::string, std::string> input_shapes_;  // input -> its Shape; lookups only
};

void set_attr(pb::NodeProto& node, const std::string& name, int64_t value);
void set_attr(pb::NodeProto& node, const std::string& name, float value);
void set_attr(pb::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
void set_attr(pb::NodeProto& node, const std::string& name, const std::string& value);

using ExportFn = void (*)(const jit::Node& node, ExportContext& context);
// The exporter of an op by name, or null.
ExportFn find_exporter(const std::string& op_name);
// Translates the nodes of `graph` in order (an error names an op without
// a translation).
void export_nodes(const jit::Graph& graph, ExportContext& context);
// The ONNX type of a kiln value: its dtype, and its dims (static ones as
// dim_value, symbolic ones as dim_param named by their text) unless
// `with_dims` is false, when only the rank is said.
void set_value_type(pb::ValueInfoProto& info, const jit::Value* value, bool with_dims);
// Whether the op's exporter writes symbolic attributes (a reshape target
// `[batch, -1]`, a slice end `seq // 2`) as sizes computed in the graph.
// Export refuses a symbolic attribute of any other op by name.
bool exports_symbolic_attrs(const std::string& op_name);

// The dtype a binary op computes in: its output's for arithmetic, the
// promoted operand dtype for comparisons (whose output is bool).
DType binary_compute_dtype(const jit::Node& node);

// Each file of exporters adds its own to the table; export_generic.cpp adds
// the ops whose OpDef declares a one-to-one ONNX form (one_source.h).
void add_generic_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_elementwise_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_tensor_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_nn_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_random_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_resample_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_math_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_order_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_function_exporters(std::unordered_map<std::string, ExportFn>& table);
void add_control_flow_exporters(std::unordered_map<std::string, ExportFn>& table);
// Writes a scan that is one direction of an nn.LSTM or nn.GRU layer as
// ONNX's LSTM or GRU op (export_rnn.cpp); false, writing nothing, for any
// other scan.
bool export_rnn_layer(const jit::Node& scan, ExportContext& context);

}  // namespace kiln::onnx
