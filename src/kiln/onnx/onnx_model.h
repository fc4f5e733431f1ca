// onnx::Model: an ONNX model called as ONNX Runtime calls it, with every
// graph input given at call time.
//
// Some inputs decide the graph itself: a Reshape's shape, a TopK's k, a
// Slice's starts or a Loop's trip count fed from a graph input, which
// kiln's graph needs as numbers (its sizes are static, or symbolic and
// bound from input shapes). These are the model's value inputs (Note
// [Value inputs] in import_context.cpp). A call reads their values and
// runs the graph imported with them bound as constants, every other input
// staying an input of that graph (symbolic sizes included); graphs are
// cached per distinct tuple of values, at most max_specializations of them
// (the least recently used is dropped), as torch.compile specializes on
// Python ints. A model without value inputs is imported once, here. Where
// a comparison of symbolic sizes decides the graph's form, the inputs whose
// shapes hold those sizes are specialized on the same way, their shapes
// fixed per import (Note [Shape inputs] in import_context.cpp).
//
//   onnx::Model model("model.onnx", {}, [](const onnx::Imported& imported) {
//     auto run = std::make_shared<jit::CompiledFunction>(
//         jit::Capture{imported.graph, imported.num_outputs});
//     return [run](const std::vector<Tensor>& inputs) { return run->run(inputs); };
//   });
//   std::vector<Tensor> outputs = model({x, shape});
//
// The onnx layer compiles nothing itself (it depends on jit/ir only):
// `compile` turns an import into what runs it, once per specialization.
// A specialized model has no one graph to save or export: save the graph
// of one tuple of values (import_for) instead.
//
// Inputs and outputs of ONNX sequence or optional type are given flat
// (call): each one's form (kTensorForm, kAbsentForm, or a sequence's
// length) and the tensors it holds, in order. A graph is imported per
// distinct forms and shapes of the sequence and optional inputs, as per
// tuple of values.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/onnx/onnx_import.h"

namespace kiln::onnx {

class Model {
 public:
  using Runner = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  using Compile = std::function<Runner(const Imported&)>;
  static constexpr size_t kDefaultMaxSpecializations = 8;

  Model(const std::string& path, ImportOptions options, Compile compile,
        size_t max_specializations = kDefaultMaxSpecializations);
  // From the bytes of a model; external data is resolved against `folder`.
  Model(std::string bytes, std::string folder, ImportOptions options, Compile compile,
        size_t max_specializations = kDefaultMaxSpecializations);

  // Every input a call takes (the model's, less constant_inputs), in order.
  const std::vector<std::string>& input_names() const { return first_.input_names; }
  const std::vector<std::string>& output_names() const { return first_.output_names; }
  size_t num_outputs() const { return first_.num_outputs; }
  int64_t opset() const { return first_.opset; }
  // The inputs a call specializes on, in input order. It may grow on a
  // call: a translation can ask for an input only once those it asked for
  // first have values (the cache is then emptied).
  std::vector<std::string> value_inputs() const;
  // The inputs whose shapes a call specializes on (a comparison of sizes
  // that decides the graph's form), in input order; it may grow as
  // value_inputs.
  std::vector<std::string> shape_inputs() const;
  // The import of a model without value inputs; null for one with them.
  const Imported* single() const { return first_.graph ? &first_ : nullptr; }

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
  // A call with inputs and outputs of sequence or optional type: `forms`
  // has one entry per input; the outputs' tensors come back with theirs.
  struct Flat {
    std::vector<Tensor> tensors;
    std::vector<int64_t> forms;
  };
  Flat call(const std::vector<Tensor>& tensors, const std::vector<int64_t>& forms);
  // The import a call with `inputs` runs (imported now unless cached): its
  // graph's inputs are the call's inputs' tensors less the value inputs.
  // No forms: every input a tensor.
  std::shared_ptr<const Imported> import_for(const std::vector<Tensor>& inputs,
                                             const std::vector<int64_t>& forms = {});
  // The inputs of sequence or optional type, and whether any input or
  // output is of such a type (calls then go through call()).
  const std::vector<std::string>& composite_inputs() const { return first_.composite_inputs; }
  bool has_composites() const;
  // The graphs cached now, and the most kept.
  size_t num_specializations() const;
  size_t max_specializations() const { return max_specializations_; }

 private:
  struct Entry {
    std::string key;  // the value inputs' dtypes, shapes and bytes
    std::shared_ptr<const Imported> imported;
    Runner run;  // made on the entry's first call
  };
  // A call's inputs: the tensors, each input's form and first tensor.
  struct Given {
    const std::vector<Tensor>& tensors;
    std::vector<int64_t> forms;
    std::vector<size_t> offsets;
  };
  Given given(const std::vector<Tensor>& tensors, const std::vector<int64_t>& forms) const;
  // The cached entry for `inputs`, or a new one (errors name the file).
  Entry& entry_for(const Given& inputs);
  Entry& find_or_import(const Given& inputs);
  std::string key_of(const Given& inputs) const;
  Imported specialize(const Given& inputs);
  size_t position_of(const std::string& name) const;  // among input_names()

  std::string bytes_, folder_;
  std::string path_;  // the file's, for errors; "" for bytes
  ImportOptions options_;
  Compile compile_;
  size_t max_specializations_;
  Imported first_;                       // the import without values
  std::vector<size_t> positions_;        // of the value inputs among input_names()
  std::vector<size_t> shape_positions_;  // of the inputs whose shapes are specialized on
  std::list<Entry> cache_;               // the most recently used first
  mutable std::mutex mutex_;
};

}  // namespace kiln::onnx
