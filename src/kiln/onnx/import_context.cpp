#include "kiln/onnx/import_context.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/size_symbols.h"
#include "kiln/ops/data_dependent.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {}  // namespace

DType dtype_from_onnx(int64_t type, const std::string& what) {
  switch (type) {
    case pb::TensorProto_DataType_FLOAT:
      return DType::Float32;
    case pb::TensorProto_DataType_DOUBLE:
      return DType::Float64;
    case pb::TensorProto_DataType_INT8:
      return DType::Int8;
    case pb::TensorProto_DataType_UINT8:
      return DType::UInt8;
    case pb::TensorProto_DataType_INT16:
      return DType::Int16;
    case pb::TensorProto_DataType_INT32:
      return DType::Int32;
    case pb::TensorProto_DataType_INT64:
      return DType::Int64;
    case pb::TensorProto_DataType_BOOL:
      return DType::Bool;
    default:
      break;
  }
  KILN_CHECK_TYPE(
      false, "onnx import: ", what, " has ONNX data type ",
      pb::TensorProto_DataType_Name(pb::TensorProto_DataType(type)),
      ", which kiln does not have (float, double, int8, uint8, int16, int32, int64, bool)");
  return DType::Float32;
}

namespace {

// External data must stay inside the model's folder: a relative path
// without "..", whose real path (symlinks resolved) lies under the folder.
std::string external_bytes(const pb::TensorProto& proto, const std::string& folder,
                           uint64_t nbytes) {
  std::string location;
  uint64_t offset = 0, length = nbytes;
  for (const pb::StringStringEntryProto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = std::stoull(entry.value());
    if (entry.key() == "length") length = std::stoull(entry.value());
  }
  namespace fs = std::filesystem;
  fs::path relative(location);
  KILN_CHECK(!location.empty() && relative.is_relative(), "onnx import: tensor '", proto.name(),
             "': external data location '", location, "' must be a relative path");
  for (const fs::path& part : relative)
    KILN_CHECK(part != "..", "onnx import: tensor '", proto.name(), "': external data location '",
               location, "' leaves the model's folder");
  std::error_code error;
  fs::path base = fs::weakly_canonical(fs::path(folder.empty() ? "." : folder), error);
  fs::path target = fs::weakly_canonical(base / relative, error);
  std::string base_text = base.string() + "/";
  KILN_CHECK(!error && target.string().rfind(base_text, 0) == 0, "onnx import: tensor '",
             proto.name(), "': external data '", location, "' resolves outside the model's folder");
  KILN_CHECK(length == nbytes, "onnx import: tensor '", proto.name(), "': external data holds ",
             length, " bytes, its type needs ", nbytes);
  std::ifstream in(target, std::ios::binary);
  KILN_CHECK(in, "onnx import: cannot read external data '", location, "'");
  in.seekg(std::streamoff(offset));
  std::string bytes(nbytes, '\0');
  in.read(bytes.data(), std::streamsize(nbytes));
  KILN_CHECK(uint64_t(in.gcount()) == nbytes, "onnx import: external data '", location,
             "' is shorter than tensor '", proto.name(), "' needs");
  return bytes;
}

template <typename T, typename Field>
void copy_typed(Tensor& out, const Field& field, const std::string& name) {
  KILN_CHECK(int64_t(field.size()) == out.numel(), "onnx import: tensor '", name, "' holds ",
             field.size(), " values, its shape needs ", out.numel());
  T* data = static_cast<T*>(out.data_ptr());
  for (int i = 0; i < field.size(); ++i)
    data[i] = T(field.Get(i));
}

}  // namespace

Tensor tensor_from_proto(const pb::TensorProto& proto, const std::string& folder) {
  DType dtype = dtype_from_onnx(proto.data_type(), "tensor '" + proto.name() + "'");
  IntList shape(proto.dims().begin(), proto.dims().end());
  uint64_t count = 1;
  for (int64_t dim : shape) {
    KILN_CHECK(dim >= 0 && (dim == 0 || count <= (uint64_t(1) << 40) / uint64_t(dim)),
               "onnx import: tensor '", proto.name(), "' has a bad shape ", shape);
    count *= uint64_t(dim);
  }
  uint64_t nbytes = count * element_size(dtype);
  Tensor out = empty(shape, dtype);
  if (proto.data_location() == pb::TensorProto_DataLocation_EXTERNAL) {
    std::string bytes = external_bytes(proto, folder, nbytes);
    if (nbytes) std::memcpy(out.data_ptr(), bytes.data(), nbytes);
    return out;
  }
  if (proto.has_raw_data()) {
    KILN_CHECK(proto.raw_data().size() == nbytes, "onnx import: tensor '", proto.name(), "' has ",
               proto.raw_data().size(), " bytes of data, its type needs ", nbytes);
    if (nbytes) std::memcpy(out.data_ptr(), proto.raw_data().data(), nbytes);
    return out;
  }
  switch (dtype) {
    case DType::Float32:
      copy_typed<float>(out, proto.float_data(), proto.name());
      break;
    case DType::Float64:
      copy_typed<double>(out, proto.double_data(), proto.name());
      break;
    case DType::Int64:
      copy_typed<int64_t>(out, proto.int64_data(), proto.name());
      break;
    case DType::Int32:
      copy_typed<int32_t>(out, proto.int32_data(), proto.name());
      break;
    // ONNX keeps the narrow integer types in int32_data, one value an entry.
    case DType::Int8:
      copy_typed<int8_t>(out, proto.int32_data(), proto.name());
      break;
    case DType::UInt8:
      copy_typed<uint8_t>(out, proto.int32_data(), proto.name());
      break;
    case DType::Int16:
      copy_typed<int16_t>(out, proto.int32_data(), proto.name());
      break;
    case DType::Bool:
      copy_typed<bool>(out, proto.int32_data(), proto.name());
      break;
  }
  return out;
}

void ImportContext::define(const std::string& name, jit::Value* value) {
  if (name.empty()) return;
  values_[name] = value;
  auto found = placeholder_sizes_.find(value);
  if (found != placeholder_sizes_.end() && found->second.name.empty()) found->second.name = name;
}

jit::Value* ImportContext::value(const std::string& name) {
  if (name.empty()) return nullptr;
  auto found = values_.find(name);
  if (found != values_.end()) return found->second;
  KILN_CHECK(outer_, "onnx import: '", name, "' is used before it is defined");
  jit::Value* local = capture(outer_->value(name));
  define(name, local);
  return local;
}

jit::Value* ImportContext::capture(jit::Value* outer_value) {
  if (const Placeholder* held = outer_->placeholder(outer_value))
    return sizes_value(held->sizes, outer_value->dtype(), outer_value->shape().empty());
  if (inline_) {
    if (outer_->marked_nonnegative(outer_value)) mark_nonnegative(outer_value);
    return outer_value;
  }
  // An outer sequence or optional: its elements, captured one by one.
  if (const Composite* parts = outer_->composite_of(outer_value)) {
    Composite local{parts->optional, {}};
    for (jit::Value* element : parts->elements)
      local.elements.push_back(capture(element));
    return composite(std::move(local));
  }
  if (outer_->is_constant(outer_value))
    return graph_.add_constant(outer_value->data(), outer_value->type().wrapped_number);
  captures_.push_back(outer_value);
  jit::Value* input = graph_.add_input(outer_value->type());
  captured_from_[input] = outer_value;
  if (outer_->marked_nonnegative(outer_value)) mark_nonnegative(input);
  return input;
}

jit::Value* ImportContext::input(const pb::NodeProto& node, int i) {
  return i < node.input_size() ? value(node.input(i)) : nullptr;
}

const Tensor& ImportContext::constant_data(const jit::Value* value, const std::string& what) const {
  KILN_CHECK(value, "onnx import: ", what, " is missing");
  if (placeholder(value)) refuse(value, what + " must be numbers at import");
  if (value->kind() == jit::ValueKind::Constant ||
      (value->kind() == jit::ValueKind::Param && value->data().defined()))
    return value->data();
  std::vector<std::string> names;
  if (!inputs_behind(value, names) || names.empty())
    throw_error(ErrorKind::Runtime, str("onnx import: ", what,
                                        " must be known when the model is imported (a constant)"));
  request_at_import({value});
  std::string listed;
  for (const std::string& name : names)
    listed += (listed.empty() ? "'" : ", '") + name + "'";
  throw_error(ErrorKind::Runtime,
              str("onnx import: ", what, " must be known when the model is imported (a constant); ",
                  "it comes from the model's input ", listed,
                  ", on whose value onnx::Model (kiln.onnx.load) specializes the graph per call"));
}

// ---- value inputs ----

// Note [Value inputs]: an ONNX model may feed a Reshape's shape, a TopK's k
// or a Loop's trip count from a graph input, where kiln's graph needs it as
// a number (kiln's sizes are static or symbolic, bound from input shapes).
// A translation that needs such a value at import asks for it
// (constant_data, request_at_import); the import then fails, recording the
// model inputs the value is computed from, and onnx::Model imports the file
// again per distinct tuple of those inputs' values, bound as constants,
// while every other input stays an input of the graph (as torch.compile
// specializes on Python ints).

void ImportContext::add_value_candidate(const jit::Value* input, const std::string& name) {
  value_candidates_[input] = name;
}

bool ImportContext::inputs_behind(const jit::Value* value, std::vector<std::string>& names) const {
  std::vector<const jit::Value*> pending = {value};
  std::unordered_set<const jit::Value*> seen;
  while (!pending.empty()) {
    const jit::Value* next = pending.back();
    pending.pop_back();
    if (!next || !seen.insert(next).second) continue;
    switch (next->kind()) {
      case jit::ValueKind::Constant:
        continue;  // data or symbolic sizes: known at import either way
      case jit::ValueKind::Param:
        return false;  // a weight decides no shape
      case jit::ValueKind::NodeOutput:
        for (const jit::Value* input : next->producer()->inputs())
          pending.push_back(input);
        continue;
      case jit::ValueKind::Input:
        break;
    }
    if (auto captured = captured_from_.find(next); captured != captured_from_.end()) {
      if (!outer_->inputs_behind(captured->second, names)) return false;
      continue;
    }
    if (iterations_.count(next)) {
      outer_->unroll_requested_ = true;
      return false;
    }
    auto candidate = value_candidates_.find(next);
    if (candidate == value_candidates_.end()) {
      if (inline_) return outer_->inputs_behind(next, names);  // an input of the outer graph
      return false;                                            // a loop's state
    }
    if (std::find(names.begin(), names.end(), candidate->second) == names.end())
      names.push_back(candidate->second);
  }
  return true;
}

bool ImportContext::request_at_import(const std::vector<const jit::Value*>& values) const {
  std::vector<std::string> names;
  for (const jit::Value* value : values)
    if (!inputs_behind(value, names)) return false;
  root().requested_.insert(names.begin(), names.end());
  return !names.empty();
}

// Note [Shape inputs]: a fact about symbolic sizes that only a call
// decides, and that the graph's form depends on (silero VAD squeezes its
// frames' axis when `(n - 192) // 512 + 1 == 1`, changing the rank of what
// follows), cannot be a guard of one graph: the import asks for the shapes
// of the model inputs that hold the symbols, and onnx::Model imports the
// file again per distinct tuple of those shapes, fixed (input_shapes), as
// torch.compile specializes on a size that decides control flow.

bool ImportContext::request_shapes_at_import(const std::vector<std::string>& symbols) const {
  const ImportContext& top = root();
  bool found = false;
  for (const jit::Value* input : top.graph_.inputs()) {
    if (input->name().empty()) continue;
    std::vector<std::string> held = symbols_of(input->shape());
    bool holds = std::any_of(symbols.begin(), symbols.end(), [&](const std::string& symbol) {
      return std::find(held.begin(), held.end(), symbol) != held.end();
    });
    if (!holds) continue;
    top.requested_shapes_.insert(input->name());
    found = true;
  }
  return found;
}

IntList ImportContext::constant_ints(const jit::Value* value, const std::string& what) const {
  return constant_data(value, what).to_vector<int64_t>();
}

jit::Value* ImportContext::constant(const Tensor& data) {
  return graph_.add_constant(data);
}

bool ImportContext::is_constant(const jit::Value* value) const {
  return value && value->kind() == jit::ValueKind::Constant && !placeholder(value);
}

std::vector<jit::Value*> ImportContext::emit_multi(const std::string& name,
                                                   const std::vector<jit::Value*>& inputs,
                                                   const Attrs& given_attrs) {
  const OpDef& def = op(name);
  Attrs attrs = given_attrs;
  if (!size_symbol_stem(def).empty()) {
    // A block is built apart from the graphs around it: its count's name
    // must differ from theirs and from every other block's.
    std::set<std::string> used = root().size_symbols_;
    used.merge(jit::symbols_in(root_graph()));
    attrs = jit::with_size_symbol(graph_, def, attrs, used);
    root().size_symbols_.insert(attrs.get_string(kSizeSymbolAttr));
  }
  // Sizes meeting run-time values: known at import when the model's inputs
  // those values come from are (Note [Value inputs]).
  bool reads_sizes = std::any_of(inputs.begin(), inputs.end(),
                                 [&](const jit::Value* input) { return placeholder(input); });
  if (reads_sizes) {
    std::vector<const jit::Value*> computed;
    for (const jit::Value* input : inputs)
      if (input && !is_constant(input) && !placeholder(input)) computed.push_back(input);
    if (request_at_import(computed))
      KILN_CHECK(false, "onnx import: kiln's ", name,
                 " combines sizes known at import with values the model's inputs give at run "
                 "time; onnx::Model (kiln.onnx.load) specializes the graph on those inputs");
  }
  for (const jit::Value* input : inputs)
    if (placeholder(input))
      refuse(input, "kiln's " + name +
                        " reads them as a tensor at run time, and kiln makes no "
                        "tensor of symbolic sizes");
  // Symbolic attributes (an expand to [batch, 4]) leave the op to run time.
  bool known = !attrs.any_symbolic();
  for (const jit::Value* input : inputs)
    known = known && (!input || is_constant(input));
  if (known) {
    std::vector<Tensor> tensors;
    for (const jit::Value* input : inputs)
      tensors.push_back(input ? input->data() : Tensor());
    std::vector<jit::Value*> results;
    for (const Tensor& result : dispatch(def, tensors, attrs))
      results.push_back(constant(result));
    return results;
  }
  return graph_.append(def, inputs, attrs)->outputs();
}

jit::Value* ImportContext::emit(const std::string& name, const std::vector<jit::Value*>& inputs,
                                const Attrs& attrs) {
  return emit_multi(name, inputs, attrs).front();
}

jit::Value* ImportContext::emit_under_guards(const std::string& name,
                                             const std::vector<jit::Value*>& inputs,
                                             const Attrs& attrs) {
  jit::GraphShapeScope facts(root_graph());
  return emit(name, inputs, attrs);
}

// ---- sizes known at import time ----

const ImportContext::Placeholder* ImportContext::placeholder(const jit::Value* value) const {
  if (!value || placeholder_sizes_.empty()) return nullptr;
  auto found = placeholder_sizes_.find(value);
  return found == placeholder_sizes_.end() ? nullptr : &found->second;
}

bool ImportContext::holds_symbols(const jit::Value* value) const {
  return placeholder(value) != nullptr;
}

void ImportContext::require_tensor(const jit::Value* value, const std::string& why) const {
  if (placeholder(value)) refuse(value, why);
}

void ImportContext::refuse(const jit::Value* value, const std::string& why) const {
  const Placeholder& held = *placeholder(value);
  std::vector<std::string> symbols = symbols_of(held.sizes);
  std::string names;
  for (const std::string& symbol : symbols)
    names += (names.empty() ? "" : ", ") + symbol;
  throw_error(
      ErrorKind::Runtime,
      str("onnx import: ", held.name.empty() ? "a value" : "input '" + held.name + "'",
          " holds the sizes ", to_string(held.sizes), ", computed at import from the symbolic size",
          symbols.size() > 1 ? "s " : " ", names, ", but ", why,
          " (give the model's inputs fixed shapes with input_shapes to import it)"));
}

std::optional<DimList> ImportContext::known_sizes(const jit::Value* value) const {
  if (!value || value->shape().size() > 1) return std::nullopt;
  if (const Placeholder* held = placeholder(value)) return held->sizes;
  if (!is_constant(value)) return std::nullopt;
  const Tensor& data = value->data();
  if (data.dtype() == DType::Bool) {
    DimList flags;
    for (bool flag : data.to_vector<bool>())
      flags.push_back(int64_t(flag));
    return flags;
  }
  if (is_floating(data.dtype())) {  // whole numbers, as a size cast to float (Range's bounds)
    DimList whole;
    for (double number : data.to_vector<double>()) {
      if (number != std::trunc(number) || std::abs(number) > 9.0e15) return std::nullopt;
      whole.push_back(int64_t(number));
    }
    return whole;
  }
  if (data.dtype() != DType::Int64 && data.dtype() != DType::Int32) return std::nullopt;
  return to_dims(data.to_vector<int64_t>());
}

jit::Value* ImportContext::sizes_value(const DimList& sizes, DType dtype, bool scalar) {
  KILN_CHECK(!scalar || sizes.size() == 1, "onnx import: a 0-D value of ", sizes.size(), " sizes");
  IntList shape = scalar ? IntList{} : IntList{int64_t(sizes.size())};
  if (is_static(sizes)) {
    IntList values = to_static(sizes);
    return constant(tensor_from_data(values.data(), DType::Int64, shape, dtype));
  }
  // Its data is never read: emit() and constant_data() refuse it.
  jit::Value* value = constant(zeros(shape, dtype));
  placeholder_sizes_[value] = Placeholder{sizes, ""};
  placeholders_.push_back(value);
  return value;
}

DimList ImportContext::constant_sizes(const jit::Value* value, const std::string& what) const {
  if (const Placeholder* held = placeholder(value)) return held->sizes;
  return to_dims(constant_ints(value, what));
}

void ImportContext::assume(const Dim& lhs, ShapeGuard::Relation relation, const Dim& rhs,
                           const std::string& reason) {
  if (outer_) return outer_->assume(lhs, relation, rhs, reason);
  // What holds for every value of the symbols (`seq - 2 <= seq`) needs no check.
  SizeExpr gap = rhs.expr() - lhs.expr();
  if (relation == ShapeGuard::Relation::Eq && gap == SizeExpr(0)) return;
  if (relation == ShapeGuard::Relation::Le && gap.provably_nonnegative()) return;
  graph_.add_guard(ShapeGuard{lhs.expr(), rhs.expr(), relation, "onnx import: " + reason});
}

void ImportContext::finish() {
  finish(graph_.outputs());
}

void ImportContext::finish(const std::vector<jit::Value*>& outputs) {
  for (const jit::Value* output : outputs)
    if (placeholder(output)) refuse(output, "a model output must be a tensor at run time");
  for (jit::Value* value : placeholders_)
    if (value->uses().empty()) graph_.remove_unused(value);
  placeholder_sizes_.clear();
  placeholders_.clear();
  // Sequences' and optionals' handles: none may be read as a tensor.
  for (const auto& [handle, parts] : composites_) {
    KILN_CHECK(handle->uses().empty() &&
                   std::find(outputs.begin(), outputs.end(), handle) == outputs.end(),
               "onnx import: a sequence or an optional is read where a tensor is needed");
    graph_.remove_unused(const_cast<jit::Value*>(handle));
  }
  composites_.clear();
}

int64_t concrete_size(const pb::NodeProto& node, int input, const jit::Value* value, int64_t axis,
                      const std::string& why) {
  const Dim& size = value->shape().at(size_t(axis));
  if (size.is_static()) return size.static_value();
  throw_error(ErrorKind::Runtime,
              str("onnx import: input '", node.input(input), "' has the symbolic size ", size,
                  " along axis ", axis, " (shape ", to_string(value->shape()), "), and ", why,
                  " needs it as a number (give the model's inputs fixed shapes with "
                  "input_shapes to import it)"));
}

const pb::AttributeProto* find_attr(const pb::NodeProto& node, const std::string& name) {
  for (const pb::AttributeProto& attr : node.attribute())
    if (attr.name() == name) return &attr;
  return nullptr;
}

IntList axes_of(const pb::NodeProto& node, ImportContext& context, int input,
                const IntList& fallback) {
  if (const jit::Value* value = context.input(node, input))
    return context.constant_ints(value, node.op_type() + "'s axes");
  return attr_ints(node, "axes", fallback);
}

bool has_attr(const pb::NodeProto& node, const std::string& name) {
  return find_attr(node, name) != nullptr;
}

int64_t attr_int(const pb::NodeProto& node, const std::string& name, int64_t fallback) {
  const pb::AttributeProto* attr = find_attr(node, name);
  return attr ? attr->i() : fallback;
}

float attr_float(const pb::NodeProto& node, const std::string& name, float fallback) {
  const pb::AttributeProto* attr = find_attr(node, name);
  return attr ? attr->f() : fallback;
}

std::string attr_string(const pb::NodeProto& node, const std::string& name,
                        const std::string& fallback) {
  const pb::AttributeProto* attr = find_attr(node, name);
  return attr ? attr->s() : fallback;
}

IntList attr_ints(const pb::NodeProto& node, const std::string& name, const IntList& fallback) {
  const pb::AttributeProto* attr = find_attr(node, name);
  return attr ? IntList(attr->ints().begin(), attr->ints().end()) : fallback;
}

}  // namespace kiln::onnx
