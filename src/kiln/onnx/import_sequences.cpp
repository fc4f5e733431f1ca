// ONNX's sequences and optionals. kiln's graphs hold tensors only, so a
// sequence is held at import as the list of its elements, known in number
// (an optional as a list of none or one), and a handle value stands for it
// where translations pass values on (ImportContext::composite):
//
//   SequenceConstruct(a, b)   -> [a, b]
//   SequenceEmpty             -> []
//   SequenceInsert(s, t, p)   -> s with t inserted at p (p known at import)
//   SequenceErase(s, p)       -> s without its element p
//   SequenceAt(s, p)          -> s[p]
//   SequenceLength(s)         -> a constant
//   SplitToSequence(x, split) -> narrows of x (split known at import)
//   ConcatFromSequence(s)     -> cat (or stack, new_axis=1) of s
//   SequenceMap(s, ...)       -> the body once per element, inline
//   Optional(x) / Optional()  -> [x] / []
//   OptionalHasElement(o)     -> a constant
//   OptionalGetElement(o)     -> o's element
//
// A model input of sequence or optional type becomes one graph input per
// tensor it holds at a call, whose number and shapes onnx::Model
// specializes on (ImportOptions::composite_inputs); an output, the tensors
// it holds, with its form (kTensorForm, kAbsentForm or a length). A Loop
// that carries a sequence is unrolled (the trip count known at import);
// positions and splits computed at run time are refused.
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_util.h"
#include "kiln/onnx/onnx_import.h"
#include "kiln/util/error.h"

namespace kiln::onnx {

using jit::Value;
using Node = pb::NodeProto;
using Composite = ImportContext::Composite;

jit::Value* ImportContext::composite(Composite parts) {
  ImportContext* owner = this;  // the context of the graph the handle lives in
  while (owner->inline_)
    owner = owner->outer_;
  Value* handle = graph_.add_constant(zeros({0}, DType::Int64));
  owner->composites_[handle] = std::move(parts);
  return handle;
}

const ImportContext::Composite* ImportContext::composite_of(const jit::Value* value) const {
  for (const ImportContext* scope = this; scope; scope = scope->outer_) {
    auto found = scope->composites_.find(value);
    if (found != scope->composites_.end()) return &found->second;
  }
  return nullptr;
}

namespace {

// The elements of the sequence `node` reads as input `i`. A value that is
// not one, in a Loop's body, is a sequence the Loop carries or the body
// captures: the Loop is asked to unroll.
const std::vector<Value*>& sequence_input(const Node& node, ImportContext& c, int i) {
  Value* value = c.input(node, i);
  KILN_CHECK(value, "onnx import: ", node.op_type(), " without its input ", i);
  const Composite* parts = c.composite_of(value);
  if (!parts || parts->optional) c.request_unroll();
  KILN_CHECK(parts && !parts->optional, "onnx import: ", node.op_type(), "'s input '",
             node.input(i),
             "' is not a sequence known at import (kiln holds a sequence as its elements, known "
             "in number when the model is imported; a Loop carrying one is unrolled)");
  return parts->elements;
}

Value* sequence(ImportContext& c, std::vector<Value*> elements) {
  return c.composite({false, std::move(elements)});
}

// A position (SequenceAt, Insert, Erase) known at import, wrapped into
// [0, size) — [0, size] where it may be the end (`end_allowed`).
size_t position(const Node& node, ImportContext& c, int input, size_t size, bool end_allowed) {
  Value* value = c.input(node, input);
  IntList held = c.constant_ints(value, node.op_type() + "'s position");
  KILN_CHECK(held.size() == 1, "onnx import: ", node.op_type(),
             "'s position must be one integer, got ", held.size());
  const int64_t n = int64_t(size), p = held[0];
  const int64_t last = end_allowed ? n : n - 1;
  KILN_CHECK_INDEX(p >= -n && p <= last, "onnx import: ", node.op_type(), "'s position ", p,
                   " is out of range for a sequence of ", n, " elements ([", -n, ", ", last, "])");
  return size_t(p < 0 ? p + n : p);
}

void sequence_construct(const Node& node, ImportContext& c) {
  std::vector<Value*> elements;
  for (int i = 0; i < node.input_size(); ++i) {
    Value* element = c.input(node, i);
    KILN_CHECK(element && !c.composite_of(element), "onnx import: SequenceConstruct's input '",
               node.input(i), "' must be a tensor");
    elements.push_back(element);
  }
  define(node, c, sequence(c, std::move(elements)));
}

void sequence_empty(const Node& node, ImportContext& c) {
  define(node, c, sequence(c, {}));
}

void sequence_insert(const Node& node, ImportContext& c) {
  std::vector<Value*> elements = sequence_input(node, c, 0);
  Value* tensor = c.input(node, 1);
  KILN_CHECK(tensor && !c.composite_of(tensor), "onnx import: SequenceInsert's tensor '",
             node.input(1), "' must be a tensor");
  size_t at = c.input(node, 2) ? position(node, c, 2, elements.size(), true) : elements.size();
  elements.insert(elements.begin() + std::ptrdiff_t(at), tensor);
  define(node, c, sequence(c, std::move(elements)));
}

void sequence_erase(const Node& node, ImportContext& c) {
  std::vector<Value*> elements = sequence_input(node, c, 0);
  KILN_CHECK_INDEX(!elements.empty(), "onnx import: SequenceErase of an empty sequence");
  size_t at = c.input(node, 1) ? position(node, c, 1, elements.size(), false) : elements.size() - 1;
  elements.erase(elements.begin() + std::ptrdiff_t(at));
  define(node, c, sequence(c, std::move(elements)));
}

void sequence_at(const Node& node, ImportContext& c) {
  const std::vector<Value*>& elements = sequence_input(node, c, 0);
  define(node, c, elements[position(node, c, 1, elements.size(), false)]);
}

void sequence_length(const Node& node, ImportContext& c) {
  const std::vector<Value*>& elements = sequence_input(node, c, 0);
  define(node, c, c.constant(full({}, int64_t(elements.size()), DType::Int64)));
}

// The lengths SplitToSequence cuts axis `axis` of `x` into: `split`'s (a
// scalar: equal parts, the last shorter), or parts of one. A 1-D split
// needs no static size: that it sums to the size is a guard.
IntList split_lengths(const Node& node, ImportContext& c, Value* x, int64_t axis) {
  Value* split = c.input(node, 1);
  if (split && split->shape().size() == 1) {
    IntList held = c.constant_ints(split, "SplitToSequence's split");
    int64_t total = 0;
    for (int64_t length : held) {
      KILN_CHECK_VALUE(length >= 0, "onnx import: SplitToSequence's split ", held,
                       " holds a negative length");
      total += length;
    }
    const Dim& size = x->shape()[size_t(axis)];
    KILN_CHECK_VALUE(!size.is_static() || total == size.static_value(),
                     "onnx import: SplitToSequence's split ", held, " sums to ", total,
                     ", the axis has ", size);
    if (!size.is_static())
      c.assume(Dim(total), ShapeGuard::Relation::Eq, size,
               "SplitToSequence's split sums to the size of the axis it splits");
    return held;
  }
  const int64_t size = concrete_size(node, 0, x, axis, "SplitToSequence");
  if (!split) return IntList(size_t(size), 1);
  IntList held = c.constant_ints(split, "SplitToSequence's split");
  KILN_CHECK_VALUE(held.size() == 1 && held[0] > 0,
                   "onnx import: SplitToSequence's split must be one positive length, got ", held);
  IntList lengths;
  for (int64_t start = 0; start < size; start += held[0])
    lengths.push_back(std::min(held[0], size - start));
  return lengths;
}

void split_to_sequence(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const int64_t rank = rank_of(x);
  const int64_t axis = wrap(attr_int(node, "axis", 0), rank);
  KILN_CHECK_INDEX(axis >= 0 && axis < rank, "onnx import: SplitToSequence's axis ",
                   attr_int(node, "axis", 0), " is out of range for rank ", rank);
  const bool squeeze = !c.input(node, 1) && attr_int(node, "keepdims", 1) == 0;
  std::vector<Value*> parts;
  int64_t start = 0;
  for (int64_t length : split_lengths(node, c, x, axis)) {
    parts.push_back(
        squeeze ? c.emit("select", {x}, {{"dim", axis}, {"index", start}})
                : c.emit_under_guards("narrow", {x},
                                      {{"dim", axis}, {"start", start}, {"length", length}}));
    start += length;
  }
  define(node, c, sequence(c, std::move(parts)));
}

void concat_from_sequence(const Node& node, ImportContext& c) {
  const std::vector<Value*>& elements = sequence_input(node, c, 0);
  KILN_CHECK_VALUE(!elements.empty(), "onnx import: ConcatFromSequence of an empty sequence");
  const bool new_axis = attr_int(node, "new_axis", 0) == 1;
  const int64_t rank = rank_of(elements[0]) + (new_axis ? 1 : 0);
  KILN_CHECK(has_attr(node, "axis"), "onnx import: ConcatFromSequence without its axis");
  const int64_t axis = wrap(attr_int(node, "axis", 0), rank);
  KILN_CHECK_INDEX(axis >= 0 && axis < rank, "onnx import: ConcatFromSequence's axis ",
                   attr_int(node, "axis", 0), " is out of range for rank ", rank);
  define(node, c, c.emit(new_axis ? "stack" : "cat", elements, {{"dim", axis}}));
}

// The body once per element of the first input, inline; the other inputs
// are sequences of as many elements (read at the same position) or tensors.
void sequence_map(const Node& node, ImportContext& c) {
  const pb::AttributeProto* attr = find_attr(node, "body");
  KILN_CHECK(attr && attr->has_g(), "onnx import: SequenceMap without its body");
  const pb::GraphProto& body = attr->g();
  KILN_CHECK(body.input_size() == node.input_size(), "onnx import: SequenceMap's body takes ",
             body.input_size(), " inputs, where the node gives it ", node.input_size());
  const size_t count = sequence_input(node, c, 0).size();
  std::vector<std::vector<Value*>> outputs(size_t(node.output_size()));
  for (size_t k = 0; k < count; ++k) {
    ImportContext scope(c, ImportContext::Inline{});
    for (int i = 0; i < node.input_size(); ++i) {
      Value* given = c.input(node, i);
      const Composite* parts = c.composite_of(given);
      KILN_CHECK(!parts || (!parts->optional && parts->elements.size() == count),
                 "onnx import: SequenceMap's input '", node.input(i), "' must be a tensor or a ",
                 "sequence of ", count, " elements, as its first");
      scope.define(body.input(i).name(), parts ? parts->elements[k] : given);
    }
    std::vector<Value*> results = import_subgraph(body, scope);
    scope.finish(results);
    for (size_t j = 0; j < outputs.size() && j < results.size(); ++j)
      outputs[j].push_back(results[j]);
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    define(node, c, sequence(c, std::move(outputs[j])), int(j));
}

void optional(const Node& node, ImportContext& c) {
  Value* held = c.input(node, 0);
  define(node, c, c.composite({true, held ? std::vector<Value*>{held} : std::vector<Value*>{}}));
}

// Of opset 18, the two also take a tensor or a sequence (a present value)
// or no input (an absent one).
void optional_has_element(const Node& node, ImportContext& c) {
  Value* value = c.input(node, 0);
  const Composite* parts = value ? c.composite_of(value) : nullptr;
  // A sub-graph's own input (a Loop's carried value) may be an optional
  // known only at run time: the Loop is asked to unroll.
  if (value && !parts && value->kind() == jit::ValueKind::Input && &c.graph() != &c.root_graph()) {
    c.request_unroll();
    KILN_CHECK(false, "onnx import: OptionalHasElement of '", node.input(0),
               "', an input of a sub-graph, which kiln knows as an optional only at import (a "
               "Loop carrying one is unrolled)");
  }
  bool present = value && (!parts || !parts->optional || !parts->elements.empty());
  define(node, c, c.constant(full({}, present, DType::Bool)));
}

void optional_get_element(const Node& node, ImportContext& c) {
  Value* value = c.input(node, 0);
  KILN_CHECK(value, "onnx import: OptionalGetElement without its input");
  const Composite* parts = c.composite_of(value);
  if (!parts || !parts->optional) return define(node, c, value);
  KILN_CHECK_VALUE(!parts->elements.empty(), "onnx import: OptionalGetElement of the optional '",
                   node.input(0), "', which holds no value");
  define(node, c, parts->elements[0]);
}

// ---- model inputs and outputs ----

struct Held {
  bool optional = false, sequence = false;
  int64_t element_type = 0;
};

// What an input or output of ONNX sequence or optional type holds: tensors,
// a sequence of them, or an optional of either.
Held held_by(const pb::ValueInfoProto& info, const std::string& what) {
  const pb::TypeProto* type = &info.type();
  Held held;
  if (type->has_optional_type()) {
    held.optional = true;
    type = &type->optional_type().elem_type();
  }
  if (type->has_sequence_type()) {
    held.sequence = true;
    type = &type->sequence_type().elem_type();
  }
  KILN_CHECK(type->has_tensor_type(), "onnx import: ", what, " '", info.name(),
             "' is of a type kiln does not read (tensors, and sequences and optionals of them)");
  held.element_type = type->tensor_type().elem_type();
  return held;
}

}  // namespace

bool add_composite_input(const pb::ValueInfoProto& input, const ImportOptions& options,
                         ImportContext& context) {
  const std::string& name = input.name();
  Held held = held_by(input, "input");
  auto given = options.composite_inputs.find(name);
  if (given == options.composite_inputs.end()) return false;
  const CompositeInput& form = given->second;
  KILN_CHECK_VALUE(held.optional || form.form != kAbsentForm, "onnx import: input '", name,
                   "' is not optional; None was given");
  KILN_CHECK_VALUE(
      held.sequence == (form.form >= 0) || form.form == kAbsentForm, "onnx import: input '", name,
      "' holds ",
      held.sequence ? "a sequence; give a list of tensors" : "a tensor; give a tensor, not a list");
  const size_t count = form.form == kAbsentForm   ? 0
                       : form.form == kTensorForm ? 1
                                                  : size_t(form.form);
  KILN_CHECK_VALUE(form.shapes.size() == count, "onnx import: input '", name, "' has ", count,
                   " tensors, ", form.shapes.size(), " shapes were given");
  DType dtype = dtype_from_onnx(held.element_type, "input '" + name + "'");
  std::vector<Value*> tensors;
  for (size_t k = 0; k < count; ++k)
    tensors.push_back(context.graph().add_input({dtype, to_dims(form.shapes[k])},
                                                name + "_" + std::to_string(k)));
  Value* value = nullptr;
  if (form.form != kAbsentForm) value = held.sequence ? sequence(context, tensors) : tensors.at(0);
  if (held.optional)
    value = context.composite({true, value ? std::vector<Value*>{value} : std::vector<Value*>{}});
  context.define(name, value);
  return true;
}

std::vector<jit::Value*> flat_outputs(const pb::GraphProto& graph, ImportContext& context,
                                      std::vector<int64_t>& forms) {
  std::vector<Value*> tensors;
  forms.clear();
  for (const pb::ValueInfoProto& output : graph.output()) {
    Value* value = context.value(output.name());
    const Composite* parts = context.composite_of(value);
    // ONNX lets an output go untyped (no type, or an empty one): a tensor.
    const bool untyped =
        !output.has_type() || output.type().value_case() == pb::TypeProto::VALUE_NOT_SET;
    if (output.type().has_tensor_type() || untyped) {
      KILN_CHECK(!parts, "onnx import: output '", output.name(),
                 "' is declared a tensor and holds a sequence or an optional");
      tensors.push_back(value);
      forms.push_back(kTensorForm);
      continue;
    }
    Held held = held_by(output, "output");
    if (held.optional) {
      KILN_CHECK(parts && parts->optional, "onnx import: output '", output.name(),
                 "' is declared an optional and holds none");
      if (parts->elements.empty()) {
        forms.push_back(kAbsentForm);
        continue;
      }
      value = parts->elements[0];
      parts = context.composite_of(value);
    }
    if (!held.sequence) {
      KILN_CHECK(!parts, "onnx import: output '", output.name(), "' holds a sequence");
      tensors.push_back(value);
      forms.push_back(kTensorForm);
      continue;
    }
    KILN_CHECK(parts && !parts->optional, "onnx import: output '", output.name(),
               "' is declared a sequence and holds none known at import");
    tensors.insert(tensors.end(), parts->elements.begin(), parts->elements.end());
    forms.push_back(int64_t(parts->elements.size()));
  }
  return tensors;
}

void add_sequence_importers(Table& table) {
  table["SequenceConstruct"] = sequence_construct;
  table["SequenceEmpty"] = sequence_empty;
  table["SequenceInsert"] = sequence_insert;
  table["SequenceErase"] = sequence_erase;
  table["SequenceAt"] = sequence_at;
  table["SequenceLength"] = sequence_length;
  table["SplitToSequence"] = split_to_sequence;
  table["ConcatFromSequence"] = concat_from_sequence;
  table["SequenceMap"] = sequence_map;
  table["Optional"] = optional;
  table["OptionalHasElement"] = optional_has_element;
  table["OptionalGetElement"] = optional_get_element;
}

}  // namespace kiln::onnx
