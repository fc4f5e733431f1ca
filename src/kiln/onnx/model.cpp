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
    positions_.push_back(
        size_t(std::find(first_.input_names.begin(), first_.input_names.end(), name) -
               first_.input_names.begin()));
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

void Model::check_arity(const std::vector<Tensor>& inputs) const {
  KILN_CHECK_VALUE(inputs.size() == first_.input_names.size(), "onnx::Model: the model takes ",
                   first_.input_names.size(), " inputs, got ", inputs.size());
}

std::string Model::key_of(const std::vector<Tensor>& inputs) const {
  std::string key;
  for (size_t position : positions_) {
    const std::string& name = first_.input_names[position];
    const Tensor& value = inputs[position];
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
  return key;
}

Imported Model::specialize(const std::vector<Tensor>& inputs) {
  for (;;) {
    ImportOptions options = options_;
    for (size_t position : positions_)  // a copy: the caller may write into its tensor later
      options.constant_inputs[first_.input_names[position]] = clone(inputs[position]);
    Imported imported = try_import_model_bytes(bytes_, folder_, options);
    if (imported.graph) return imported;
    size_t known = positions_.size();
    for (const std::string& name : imported.value_inputs) {
      size_t position =
          size_t(std::find(first_.input_names.begin(), first_.input_names.end(), name) -
                 first_.input_names.begin());
      if (std::find(positions_.begin(), positions_.end(), position) == positions_.end())
        positions_.push_back(position);
    }
    if (positions_.size() == known) throw Error(ErrorKind::Runtime, imported.value_inputs_reason);
    std::sort(positions_.begin(), positions_.end());
    cache_.clear();  // keyed on fewer inputs
    key_of(inputs);  // checks the new value inputs' sizes
  }
}

Model::Entry& Model::entry_for(const std::vector<Tensor>& inputs) {
  try {
    return find_or_import(inputs);
  } catch (const Error& e) {
    if (path_.empty()) throw;
    throw Error(e.kind(), path_ + ": " + e.what());
  }
}

Model::Entry& Model::find_or_import(const std::vector<Tensor>& inputs) {
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

std::shared_ptr<const Imported> Model::import_for(const std::vector<Tensor>& inputs) {
  check_arity(inputs);
  std::lock_guard<std::mutex> lock(mutex_);
  return entry_for(inputs).imported;
}

std::vector<Tensor> Model::operator()(const std::vector<Tensor>& inputs) {
  check_arity(inputs);
  Runner run;
  std::vector<size_t> positions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& entry = entry_for(inputs);
    if (!entry.run) entry.run = compile_(*entry.imported);
    run = entry.run;
    positions = positions_;
  }
  std::vector<Tensor> graph_inputs;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (std::find(positions.begin(), positions.end(), k) == positions.end())
      graph_inputs.push_back(inputs[k]);
  return run(graph_inputs);
}

}  // namespace kiln::onnx
