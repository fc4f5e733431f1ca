#include "kiln/onnx/import_context.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/core/factory.h"
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
    case pb::TensorProto_DataType_INT32:
      return DType::Int32;
    case pb::TensorProto_DataType_INT64:
      return DType::Int64;
    case pb::TensorProto_DataType_BOOL:
      return DType::Bool;
    default:
      break;
  }
  KILN_CHECK_TYPE(false, "onnx import: ", what, " has ONNX data type ",
                  pb::TensorProto_DataType_Name(pb::TensorProto_DataType(type)),
                  ", which kiln does not have (float, double, int32, int64, bool)");
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
    case DType::Bool:
      copy_typed<bool>(out, proto.int32_data(), proto.name());
      break;
  }
  return out;
}

void ImportContext::define(const std::string& name, jit::Value* value) {
  if (!name.empty()) values_[name] = value;
}

jit::Value* ImportContext::value(const std::string& name) const {
  if (name.empty()) return nullptr;
  auto found = values_.find(name);
  KILN_CHECK(found != values_.end(), "onnx import: '", name, "' is used before it is defined");
  return found->second;
}

jit::Value* ImportContext::input(const pb::NodeProto& node, int i) const {
  return i < node.input_size() ? value(node.input(i)) : nullptr;
}

const Tensor& ImportContext::constant_data(const jit::Value* value, const std::string& what) const {
  KILN_CHECK(value, "onnx import: ", what, " is missing");
  KILN_CHECK(value->kind() == jit::ValueKind::Constant ||
                 (value->kind() == jit::ValueKind::Param && value->data().defined()),
             "onnx import: ", what, " must be known when the model is imported (a constant)");
  return value->data();
}

IntList ImportContext::constant_ints(const jit::Value* value, const std::string& what) const {
  return constant_data(value, what).to_vector<int64_t>();
}

jit::Value* ImportContext::constant(const Tensor& data) {
  return graph_.add_constant(data);
}

std::vector<jit::Value*> ImportContext::emit_multi(const std::string& name,
                                                   const std::vector<jit::Value*>& inputs,
                                                   const Attrs& attrs) {
  const OpDef& def = op(name);
  bool known = true;
  for (const jit::Value* input : inputs)
    known = known && (!input || input->kind() == jit::ValueKind::Constant);
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

const pb::AttributeProto* find_attr(const pb::NodeProto& node, const std::string& name) {
  for (const pb::AttributeProto& attr : node.attribute())
    if (attr.name() == name) return &attr;
  return nullptr;
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

ImportFn find_importer(const std::string& op_type) {
  static const std::unordered_map<std::string, ImportFn> table = [] {
    std::unordered_map<std::string, ImportFn> all;
    add_basic_importers(all);
    add_nn_importers(all);
    return all;
  }();
  auto found = table.find(op_type);
  return found == table.end() ? nullptr : found->second;
}

}  // namespace kiln::onnx
