// onnx::Model: the specializing cache over an ONNX model's value inputs
// (onnx_model.h).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/onnx/onnx_model.h"
#include "kiln/ops/copy.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, "onnx import: cannot open '", path, "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string folder_of(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

Model::Model(const std::string& path, ImportOptions options, Compile compile,
             size_t max_specializations) try
    : Model(read_file(path), folder_of(path), std::move(options), std::move(compile),
            max_specializations) {
  path_ = path;
} catch (const Error& e) {
  throw Error(e.kind(), path + ": " + e.what());
}

Model::Model(std::string bytes, std::string folder, ImportOptions options, Compile compile,
             size_t max_specializations)
    : bytes_(std::move(bytes)),
      folder_(std::move(folder)),
      options_(std::move(options)),
      compile_(std::move(compile)),
      max_specializations_(max_specializations) {
  KILN_CHECK_VALUE(max_specializations_ >= 1,
                   "onnx::Model: max_specializations must be at least 1, got ",
                   max_specializations_);
  KILN_CHECK(compile_, "onnx::Model: no compile function");
  first_ = try_import_model_bytes(bytes_, folder_, options_);
  for (const std::string& name : first_.value_inputs)
    positions_.push_back(position_of(name));
  for (const std::string& name : first_.shape_inputs)
    shape_positions_.push_back(position_of(name));
}

size_t Model::position_of(const std::string& name) const {
  return size_t(std::find(first_.input_names.begin(), first_.input_names.end(), name) -
                first_.input_names.begin());
}

std::vector<std::string> Model::shape_inputs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (size_t position : shape_positions_)
    names.push_back(first_.input_names[position]);
  return names;
}

std::vector<std::string> Model::value_inputs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  for (size_t position : positions_)
    names.push_back(first_.input_names[position]);
  return names;
}

size_t Model::num_specializations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

bool Model::has_composites() const {
  return !first_.composite_inputs.empty() ||
         std::any_of(first_.output_forms.begin(), first_.output_forms.end(),
                     [](int64_t form) { return form != kTensorForm; });
}

namespace {

size_t count_of(int64_t form) {
  return form == kAbsentForm ? 0 : form == kTensorForm ? 1 : size_t(form);
}

}  // namespace

Model::Given Model::given(const std::vector<Tensor>& tensors,
                          const std::vector<int64_t>& forms) const {
  const std::vector<std::string>& names = first_.input_names;
  KILN_CHECK_VALUE(!forms.empty() || tensors.size() == names.size(),
                   "onnx::Model: the model takes ", names.size(), " inputs, got ", tensors.size());
  Given inputs{
      tensors, forms.empty() ? std::vector<int64_t>(names.size(), kTensorForm) : forms, {}};
  KILN_CHECK_VALUE(inputs.forms.size() == names.size(), "onnx::Model: the model takes ",
                   names.size(), " inputs, got ", inputs.forms.size());
  size_t offset = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const int64_t form = inputs.forms[k];
    KILN_CHECK_VALUE(form >= kAbsentForm, "onnx::Model: input '", names[k], "' has the form ",
                     form);
    bool composite = std::find(first_.composite_inputs.begin(), first_.composite_inputs.end(),
                               names[k]) != first_.composite_inputs.end();
    KILN_CHECK_VALUE(composite || form == kTensorForm, "onnx::Model: input '", names[k],
                     "' is a tensor; got ", form == kAbsentForm ? "None" : "a list");
    inputs.offsets.push_back(offset);
    offset += count_of(form);
  }
  KILN_CHECK_VALUE(offset == tensors.size(), "onnx::Model: the inputs hold ", offset,
                   " tensors, got ", tensors.size());
  return inputs;
}

std::string Model::key_of(const Given& inputs) const {
  std::string key;
  for (size_t position : positions_) {
    const std::string& name = first_.input_names[position];
    KILN_CHECK_VALUE(inputs.forms[position] == kTensorForm, "onnx::Model: input '", name,
                     "' decides the graph and must be a tensor");
    const Tensor& value = inputs.tensors[inputs.offsets[position]];
    KILN_CHECK_VALUE(value.defined(), "onnx::Model: input '", name, "' is missing");
    KILN_CHECK_VALUE(value.numel() <= kMaxValueInputElements, "onnx::Model: input '", name,
                     "' decides the graph (its values are needed at import), and holds ",
                     value.numel(), " elements; kiln specializes only on inputs of at most ",
                     kMaxValueInputElements);
    Tensor data = contiguous(value);
    key += std::to_string(int(value.dtype())) + ":";
    for (int64_t size : value.shape())
      key += std::to_string(size) + ",";
    key += ":";
    key.append(static_cast<const char*>(data.data_ptr()), size_t(data.numel()) * data.itemsize());
  }
  // Inputs whose shapes decide the graph (Note [Shape inputs]).
  for (size_t position : shape_positions_) {
    const Tensor& value = inputs.tensors[inputs.offsets[position]];
    KILN_CHECK_VALUE(inputs.forms[position] == kTensorForm && value.defined(),
                     "onnx::Model: input '", first_.input_names[position], "' is missing");
    key += "#" + std::to_string(position) + ":";
    for (int64_t size : value.shape())
      key += std::to_string(size) + ",";
  }
  // Sequences and optionals: their forms and their tensors' shapes.
  for (size_t k = 0; k < inputs.forms.size(); ++k) {
    if (inputs.forms[k] == kTensorForm) continue;
    key += "|" + std::to_string(k) + ":" + std::to_string(inputs.forms[k]) + ":";
    for (size_t j = 0; j < count_of(inputs.forms[k]); ++j) {
      const Tensor& tensor = inputs.tensors[inputs.offsets[k] + j];
      KILN_CHECK_VALUE(tensor.defined(), "onnx::Model: input '", first_.input_names[k],
                       "' holds a missing tensor");
      for (int64_t size : tensor.shape())
        key += std::to_string(size) + ",";
      key += ";";
    }
  }
  return key;
}

Imported Model::specialize(const Given& inputs) {
  for (;;) {
    ImportOptions options = options_;
    for (size_t position : positions_)  // a copy: the caller may write into its tensor later
      options.constant_inputs[first_.input_names[position]] =
          clone(inputs.tensors[inputs.offsets[position]]);
    for (size_t position : shape_positions_)
      options.input_shapes[first_.input_names[position]] =
          inputs.tensors[inputs.offsets[position]].shape();
    for (const std::string& name : first_.composite_inputs) {
      size_t k = size_t(std::find(first_.input_names.begin(), first_.input_names.end(), name) -
                        first_.input_names.begin());
      CompositeInput& form = options.composite_inputs[name];
      form.form = inputs.forms[k];
      for (size_t j = 0; j < count_of(form.form); ++j)
        form.shapes.push_back(inputs.tensors[inputs.offsets[k] + j].shape());
    }
    Imported imported = try_import_model_bytes(bytes_, folder_, options);
    if (imported.graph) return imported;
    size_t known = positions_.size() + shape_positions_.size();
    for (const std::string& name : imported.value_inputs)
      if (std::find(positions_.begin(), positions_.end(), position_of(name)) == positions_.end())
        positions_.push_back(position_of(name));
    for (const std::string& name : imported.shape_inputs)
      if (std::find(shape_positions_.begin(), shape_positions_.end(), position_of(name)) ==
          shape_positions_.end())
        shape_positions_.push_back(position_of(name));
    if (positions_.size() + shape_positions_.size() == known)
      throw Error(ErrorKind::Runtime, imported.value_inputs_reason);
    std::sort(positions_.begin(), positions_.end());
    std::sort(shape_positions_.begin(), shape_positions_.end());
    cache_.clear();  // keyed on fewer inputs
    key_of(inputs);  // checks the new value inputs' sizes
  }
}

Model::Entry& Model::entry_for(const Given& inputs) {
  try {
    return find_or_import(inputs);
  } catch (const Error& e) {
    if (path_.empty()) throw;
    throw Error(e.kind(), path_ + ": " + e.what());
  }
}

Model::Entry& Model::find_or_import(const Given& inputs) {
  std::string key = key_of(inputs);
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->key != key) continue;
    cache_.splice(cache_.begin(), cache_, it);
    return cache_.front();
  }
  auto imported = std::make_shared<const Imported>(first_.graph ? first_ : specialize(inputs));
  cache_.push_front(Entry{key_of(inputs), std::move(imported), nullptr});
  if (cache_.size() > max_specializations_) cache_.pop_back();
  return cache_.front();
}

std::shared_ptr<const Imported> Model::import_for(const std::vector<Tensor>& inputs,
                                                  const std::vector<int64_t>& forms) {
  std::lock_guard<std::mutex> lock(mutex_);
  return entry_for(given(inputs, forms)).imported;
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs) {
  return call(inputs, {}).tensors;
}

Model::Flat Model::call(const std::vector<Tensor>& tensors, const std::vector<int64_t>& forms) {
  Runner run;
  Flat outputs;
  std::vector<Tensor> graph_inputs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Given inputs = given(tensors, forms);
    Entry& entry = entry_for(inputs);
    if (!entry.run) entry.run = compile_(*entry.imported);
    run = entry.run;
    outputs.forms = entry.imported->output_forms;
    for (size_t k = 0; k < inputs.forms.size(); ++k) {
      if (std::find(positions_.begin(), positions_.end(), k) != positions_.end()) continue;
      for (size_t j = 0; j < count_of(inputs.forms[k]); ++j)
        graph_inputs.push_back(tensors[inputs.offsets[k] + j]);
    }
  }
  outputs.tensors = run(graph_inputs);
  return outputs;
}

}  // namespace kiln::onnx
