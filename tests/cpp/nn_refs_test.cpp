// kiln::nn against PyTorch: replays the rows tests/oracle/gen_nn_refs.py
// wrote. A module row builds the kiln module from torch's constructor kwargs,
// loads torch's state_dict into it (keys and order must match), runs forward
// and compares the output and the buffers afterwards. A loss row runs the
// functional loss and the loss module and compares the value.
#include <gtest/gtest.h>

#include "kiln/core/factory.h"
#include "kiln/nn/nn.h"
#include "nn_refs.h"
#include "op_refs.h"

namespace kiln {
namespace {

using nlohmann::json;
namespace F = nn::functional;

// torch's "kernel_size=3" or "kernel_size=(3, 2)" (a JSON list).
IntList ints(const json& v) {
  return v.is_array() ? v.get<IntList>() : IntList{v.get<int64_t>()};
}

template <typename T>
T arg(const json& kwargs, const char* name, T fallback) {
  return kwargs.contains(name) ? kwargs[name].get<T>() : fallback;
}

IntList int_arg(const json& kwargs, const char* name, IntList fallback) {
  return kwargs.contains(name) ? ints(kwargs[name]) : fallback;
}

std::optional<double> momentum_arg(const json& kwargs) {
  if (!kwargs.contains("momentum")) return 0.1;
  if (kwargs["momentum"].is_null()) return std::nullopt;
  return kwargs["momentum"].get<double>();
}

// Builds the kiln module torch would build from getattr(nn, ctor)(**kwargs).
nn::ModulePtr make_module(const std::string& ctor, const json& kw) {
  using std::make_shared;
  if (ctor == "Sequential") {
    auto seq = make_shared<nn::Sequential>();
    for (const json& c : kw["children"])
      seq->push_back(make_module(c["ctor"], c["kwargs"]));
    return seq;
  }
  if (ctor == "Linear") {
    return make_shared<nn::Linear>(kw["in_features"].get<int64_t>(),
                                   kw["out_features"].get<int64_t>(), arg(kw, "bias", true));
  }
  if (ctor == "Conv2d") {
    return make_shared<nn::Conv2d>(
        kw["in_channels"].get<int64_t>(), kw["out_channels"].get<int64_t>(),
        ints(kw["kernel_size"]), int_arg(kw, "stride", {1}), int_arg(kw, "padding", {0}),
        int_arg(kw, "dilation", {1}), arg<int64_t>(kw, "groups", 1), arg(kw, "bias", true));
  }
  if (ctor == "ReLU") return make_shared<nn::ReLU>();
  if (ctor == "Sigmoid") return make_shared<nn::Sigmoid>();
  if (ctor == "Tanh") return make_shared<nn::Tanh>();
  if (ctor == "GELU") return make_shared<nn::GELU>(arg<std::string>(kw, "approximate", "none"));
  if (ctor == "LeakyReLU") return make_shared<nn::LeakyReLU>(arg(kw, "negative_slope", 0.01));
  if (ctor == "MaxPool2d") {
    return make_shared<nn::MaxPool2d>(ints(kw["kernel_size"]), int_arg(kw, "stride", {}),
                                      int_arg(kw, "padding", {0}), int_arg(kw, "dilation", {1}),
                                      arg(kw, "ceil_mode", false));
  }
  if (ctor == "AvgPool2d") {
    return make_shared<nn::AvgPool2d>(ints(kw["kernel_size"]), int_arg(kw, "stride", {}),
                                      int_arg(kw, "padding", {0}), arg(kw, "ceil_mode", false),
                                      arg(kw, "count_include_pad", true));
  }
  if (ctor == "AdaptiveAvgPool2d")
    return make_shared<nn::AdaptiveAvgPool2d>(ints(kw["output_size"]));
  if (ctor == "Flatten") {
    return make_shared<nn::Flatten>(arg<int64_t>(kw, "start_dim", 1),
                                    arg<int64_t>(kw, "end_dim", -1));
  }
  if (ctor == "Dropout") return make_shared<nn::Dropout>(arg(kw, "p", 0.5));
  if (ctor == "Softmax") return make_shared<nn::Softmax>(kw["dim"].get<int64_t>());
  if (ctor == "LogSoftmax") return make_shared<nn::LogSoftmax>(kw["dim"].get<int64_t>());
  if (ctor == "BatchNorm1d" || ctor == "BatchNorm2d") {
    int64_t features = kw["num_features"].get<int64_t>();
    double eps = arg(kw, "eps", 1e-5);
    bool affine = arg(kw, "affine", true), track = arg(kw, "track_running_stats", true);
    if (ctor == "BatchNorm1d") {
      return make_shared<nn::BatchNorm1d>(features, eps, momentum_arg(kw), affine, track);
    }
    return make_shared<nn::BatchNorm2d>(features, eps, momentum_arg(kw), affine, track);
  }
  if (ctor == "LayerNorm") {
    return make_shared<nn::LayerNorm>(ints(kw["normalized_shape"]), arg(kw, "eps", 1e-5),
                                      arg(kw, "elementwise_affine", true), arg(kw, "bias", true));
  }
  if (ctor == "Embedding") {
    std::optional<int64_t> padding;
    if (kw.contains("padding_idx")) padding = kw["padding_idx"].get<int64_t>();
    return make_shared<nn::Embedding>(kw["num_embeddings"].get<int64_t>(),
                                      kw["embedding_dim"].get<int64_t>(), padding);
  }
  throw Error("nn_refs: no kiln module for torch.nn." + ctor);
}

nn::StateDict state_from_json(const json& entries) {
  nn::StateDict out;
  for (const json& e : entries)
    out.emplace_back(e[0].get<std::string>(), tensor_from_json(e[1]));
  return out;
}

class ModuleVsTorch : public testing::TestWithParam<size_t> {};

TEST_P(ModuleVsTorch, ForwardAndBuffersMatch) {
  const json& row = nn_refs()["modules"][GetParam()];
  nn::ModulePtr module = make_module(row["ctor"], row["kwargs"]);
  module->train(row["train"].get<bool>());
  nn::StateDict torch_state = state_from_json(row["state"]);

  std::vector<std::string> kiln_keys, torch_keys;
  for (const auto& [name, t] : module->state_dict())
    kiln_keys.push_back(name);
  for (const auto& [name, t] : torch_state)
    torch_keys.push_back(name);
  ASSERT_EQ(kiln_keys, torch_keys);

  module->load_state_dict(torch_state);
  Tensor out = (*module)(tensor_from_json(row["input"]));
  expect_matches(out, row["output"], 1e-4, 1e-5, "output");
  for (const auto& [name, t] : module->state_dict()) {
    for (const json& e : row["state_after"]) {
      if (e[0] == name) expect_matches(t, e[1], 1e-4, 1e-5, name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, ModuleVsTorch, testing::ValuesIn(nn_ref_rows("modules")),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(nn_refs()["modules"][info.param]["id"]);
                         });

// ---- losses ----------------------------------------------------------------

struct LossInputs {
  Tensor input, target, weight, pos_weight;
  std::string reduction;
  int64_t ignore_index;
  double label_smoothing;
};

LossInputs loss_inputs(const json& row) {
  const json& kw = row["kwargs"];
  LossInputs in{tensor_from_json(row["input"]),
                tensor_from_json(row["target"]),
                {},
                {},
                arg<std::string>(kw, "reduction", "mean"),
                arg<int64_t>(kw, "ignore_index", -100),
                arg(kw, "label_smoothing", 0.0)};
  if (row.contains("weight")) in.weight = tensor_from_json(row["weight"]);
  if (row.contains("pos_weight")) in.pos_weight = tensor_from_json(row["pos_weight"]);
  return in;
}

Tensor run_functional(const std::string& fn, const LossInputs& a) {
  if (fn == "cross_entropy") {
    return F::cross_entropy(a.input, a.target,
                            {a.weight, a.ignore_index, a.reduction, a.label_smoothing});
  }
  if (fn == "nll_loss")
    return F::nll_loss(a.input, a.target, {a.weight, a.ignore_index, a.reduction});
  if (fn == "mse_loss") return F::mse_loss(a.input, a.target, a.reduction);
  if (fn == "l1_loss") return F::l1_loss(a.input, a.target, a.reduction);
  if (fn == "binary_cross_entropy_with_logits") {
    return F::binary_cross_entropy_with_logits(a.input, a.target,
                                               {a.weight, a.pos_weight, a.reduction});
  }
  throw Error("nn_refs: no kiln loss for F." + fn);
}

Tensor run_module(const std::string& fn, const LossInputs& a) {
  if (fn == "cross_entropy") {
    nn::CrossEntropyLoss loss({a.weight, a.ignore_index, a.reduction, a.label_smoothing});
    return loss(a.input, a.target);
  }
  if (fn == "nll_loss")
    return nn::NLLLoss({a.weight, a.ignore_index, a.reduction})(a.input, a.target);
  if (fn == "mse_loss") return nn::MSELoss(a.reduction)(a.input, a.target);
  if (fn == "l1_loss") return nn::L1Loss(a.reduction)(a.input, a.target);
  nn::BCEWithLogitsLoss loss({a.weight, a.pos_weight, a.reduction});
  return loss(a.input, a.target);
}

class LossVsTorch : public testing::TestWithParam<size_t> {};

TEST_P(LossVsTorch, FunctionalAndModuleMatch) {
  const json& row = nn_refs()["losses"][GetParam()];
  LossInputs inputs = loss_inputs(row);
  expect_matches(run_functional(row["fn"], inputs), row["output"], 1e-5, 1e-6, "functional");
  expect_matches(run_module(row["fn"], inputs), row["output"], 1e-5, 1e-6, "module");
}

INSTANTIATE_TEST_SUITE_P(Torch, LossVsTorch, testing::ValuesIn(nn_ref_rows("losses")),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return test_name_of(nn_refs()["losses"][info.param]["id"]);
                         });

}  // namespace
}  // namespace kiln
