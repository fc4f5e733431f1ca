// Optimizers and schedulers: several steps against torch.optim (references
// written by tests/oracle/gen_optim_refs.py), state dicts, memory, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "kiln/core/allocator.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using nlohmann::json;

const json& optim_refs() {
  static const json refs = [] {
    std::ifstream in(KILN_OPTIM_REFS);
    if (!in) {
      throw Error(str("cannot open ", KILN_OPTIM_REFS, "; run tests/oracle/gen_optim_refs.py"));
    }
    return json::parse(in);
  }();
  return refs;
}

Tensor from_values(const json& values, const IntList& shape, DType dtype) {
  return tensor(values.get<std::vector<double>>(), shape, dtype);
}

void expect_close(const Tensor& actual, const json& expected, DType dtype,
                  const std::string& what) {
  std::vector<double> got = actual.to_vector<double>();
  std::vector<double> want = expected.get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size()) << what;
  // A few ulps from torch, in both dtypes: torch's vectorized kernels fuse
  // the multiply-adds of add_(alpha=), lerp_ and addcdiv_, which kiln does
  // as two rounded ops (measured: at most 2.4e-7 in float32, 4.4e-16 in
  // float64 over these cases).
  double rtol = dtype == DType::Float64 ? 1e-13 : 1e-6;
  double atol = dtype == DType::Float64 ? 1e-15 : 1e-7;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::abs(got[i] - want[i]), atol + rtol * std::abs(want[i]))
        << what << " element " << i << ": kiln " << got[i] << ", torch " << want[i];
  }
}

Hyperparams hyperparams_of(const json& options) {
  Hyperparams out;
  for (const auto& [key, value] : options.items())
    out[key] = value.get<double>();
  return out;
}

// Group 0's options are the defaults; later groups override them.
std::vector<ParamGroup> groups_of(const json& spec, const std::vector<Tensor>& params) {
  std::vector<ParamGroup> groups;
  Hyperparams first = hyperparams_of(spec["groups"][0]["options"]);
  for (const json& group : spec["groups"]) {
    Hyperparams options = first;
    for (const auto& [key, value] : hyperparams_of(group["options"]))
      options[key] = value;
    std::vector<Tensor> members;
    for (int64_t index : group["params"].get<std::vector<int64_t>>()) {
      members.push_back(params[size_t(index)]);
    }
    groups.push_back({members, options});
  }
  return groups;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& kind, std::vector<ParamGroup> groups) {
  if (kind == "SGD") return std::make_unique<SGD>(std::move(groups));
  if (kind == "Adam") return std::make_unique<Adam>(std::move(groups));
  if (kind == "AdamW") return std::make_unique<AdamW>(std::move(groups));
  if (kind == "RMSprop") return std::make_unique<RMSprop>(std::move(groups));
  if (kind == "Adagrad") return std::make_unique<Adagrad>(std::move(groups));
  if (kind == "Adadelta") return std::make_unique<Adadelta>(std::move(groups));
  if (kind == "Adamax") return std::make_unique<Adamax>(std::move(groups));
  if (kind == "NAdam") return std::make_unique<NAdam>(std::move(groups));
  if (kind == "RAdam") return std::make_unique<RAdam>(std::move(groups));
  throw Error("unknown optimizer kind " + kind);
}

// Replays one reference case: the same initial parameters and gradients,
// the parameters compared after every step and the state at the end.
void replay(const json& spec) {
  SCOPED_TRACE(spec["name"].get<std::string>());
  DType dtype = dtype_from_string(spec["dtype"]);
  std::vector<IntList> shapes = spec["shapes"].get<std::vector<IntList>>();
  std::vector<Tensor> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(from_values(spec["init"][i], shapes[i], dtype));
    requires_grad_(params.back());
  }
  std::unique_ptr<Optimizer> optimizer = make_optimizer(spec["optimizer"], groups_of(spec, params));
  for (size_t step = 0; step < spec["grads"].size(); ++step) {
    for (size_t i = 0; i < params.size(); ++i) {
      const json& g = spec["grads"][step][i];
      set_grad(params[i], g.is_null() ? Tensor() : from_values(g, shapes[i], dtype));
    }
    optimizer->step();
    for (size_t i = 0; i < params.size(); ++i) {
      expect_close(params[i], spec["after"][step][i], dtype,
                   str("param ", i, " after step ", step + 1));
    }
  }
  // torch's state by its names ("step" among them), and the update count.
  for (size_t i = 0; i < params.size(); ++i) {
    const json& want = spec["state"][std::to_string(i)];
    const ParamState& state = optimizer->state(int64_t(i));
    EXPECT_EQ(state.step, want["updates"].get<int64_t>()) << "param " << i;
    EXPECT_EQ(state.buffers.size(), want["buffers"].size()) << "param " << i;
    for (const auto& [name, values] : want["buffers"].items()) {
      auto found = state.buffers.find(name);
      ASSERT_NE(found, state.buffers.end()) << "param " << i << " lacks buffer " << name;
      expect_close(found->second, values, found->second.dtype(),
                   str("buffer ", name, " of param ", i));
    }
  }
}

void replay_cases(const std::string& name_prefix) {
  int replayed = 0;
  for (const json& spec : optim_refs()["optimizers"]) {
    if (spec["name"].get<std::string>().rfind(name_prefix, 0) != 0) continue;
    replay(spec);
    ++replayed;
  }
  EXPECT_GT(replayed, 0) << "no reference cases named " << name_prefix << "*";
}

TEST(Optim, SGDMatchesTorch) {
  replay_cases("sgd_");
}
TEST(Optim, AdamMatchesTorch) {
  replay_cases("adam_");
}
TEST(Optim, AdamWMatchesTorch) {
  replay_cases("adamw");
}
TEST(Optim, RMSpropMatchesTorch) {
  replay_cases("rmsprop_");
}
TEST(Optim, AdagradMatchesTorch) {
  replay_cases("adagrad_");
}
TEST(Optim, AdadeltaMatchesTorch) {
  replay_cases("adadelta_");
}
TEST(Optim, AdamaxMatchesTorch) {
  replay_cases("adamax_");
}
TEST(Optim, NAdamMatchesTorch) {
  replay_cases("nadam_");
}
TEST(Optim, RAdamMatchesTorch) {
  replay_cases("radam_");
}

TEST(Optim, SchedulersMatchTorch) {
  for (const json& spec : optim_refs()["schedulers"]) {
    SCOPED_TRACE(spec["name"].get<std::string>());
    std::vector<double> base = spec["base_lrs"].get<std::vector<double>>();
    Tensor a = zeros({1}), b = zeros({1});
    SGD optimizer(std::vector<ParamGroup>{{{a}, {{"lr", base[0]}}}, {{b}, {{"lr", base[1]}}}});
    const json& args = spec["args"];
    std::unique_ptr<LRScheduler> scheduler;
    if (spec["kind"] == "StepLR") {
      scheduler = std::make_unique<StepLR>(optimizer, args["step_size"].get<int64_t>(),
                                           args["gamma"].get<double>());
    } else {
      scheduler = std::make_unique<CosineAnnealingLR>(optimizer, args["T_max"].get<int64_t>(),
                                                      args.value("eta_min", 0.0));
    }
    const json& history = spec["lrs"];
    for (size_t epoch = 0; epoch < history.size(); ++epoch) {
      if (epoch > 0) scheduler->step();
      std::vector<double> want = history[epoch].get<std::vector<double>>();
      // torch's recursive formulas, evaluated in the same order: equal to
      // the last bit, up to libm's cos.
      for (size_t g = 0; g < want.size(); ++g) {
        EXPECT_NEAR(scheduler->get_last_lr()[g], want[g], 1e-15) << "epoch " << epoch;
        EXPECT_EQ(optimizer.lr(g), scheduler->get_last_lr()[g]);
      }
    }
  }
}

TEST(Optim, StepRunsWithoutRecordingAndKeepsLeaves) {
  Tensor p = requires_grad_(ones({3}));
  SGD optimizer({p}, {.lr = 0.5});
  set_grad(p, full({3}, 2.0));
  ASSERT_TRUE(grad_mode_enabled());
  optimizer.step();
  EXPECT_TRUE(is_leaf(p));
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0, 0, 0}));
}

TEST(Optim, ZeroGradLeavesGradsUndefinedAndStepSkipsThem) {
  Tensor p = requires_grad_(ones({2})), q = requires_grad_(ones({2}));
  SGD optimizer({p, q}, {.lr = 1});
  set_grad(p, ones({2}));
  set_grad(q, ones({2}));
  optimizer.zero_grad();
  EXPECT_FALSE(grad(p).defined());
  EXPECT_FALSE(grad(q).defined());
  set_grad(q, ones({2}));
  optimizer.step();
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(optimizer.state(0).step, 0);
  EXPECT_EQ(optimizer.state(1).step, 1);
}

TEST(Optim, MinimizesAQuadraticThroughBackward) {
  // loss = sum(p * p); d loss / dp = 2p, so each SGD step scales p by 1 - 2 lr.
  Tensor p = requires_grad_(tensor({1.0, -2.0}, DType::Float64));
  SGD optimizer({p}, {.lr = 0.1});
  for (int step = 0; step < 10; ++step) {
    optimizer.zero_grad();
    Tensor loss = mul(p, p);
    backward(loss, ones_like(loss));
    optimizer.step();
  }
  double scale = std::pow(0.8, 10);
  std::vector<double> values = p.to_vector<double>();
  EXPECT_NEAR(values[0], scale, 1e-12);
  EXPECT_NEAR(values[1], -2 * scale, 1e-12);
}

// After the first step made the state buffers, steps allocate only
// temporaries that are freed at once: live bytes stay flat.
TEST(Optim, StepsDoNotGrowMemory) {
  Tensor w = requires_grad_(randn({64, 64})), b = requires_grad_(randn({64}));
  set_grad(w, randn({64, 64}));
  set_grad(b, randn({64}));
  std::vector<std::unique_ptr<Optimizer>> optimizers;
  optimizers.push_back(std::make_unique<SGD>(
      std::vector<Tensor>{w, b},
      SGDOptions{.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4, .nesterov = true}));
  optimizers.push_back(std::make_unique<Adam>(std::vector<Tensor>{w, b},
                                              AdamOptions{.weight_decay = 0.1, .amsgrad = true}));
  optimizers.push_back(std::make_unique<AdamW>(std::vector<Tensor>{w, b}));
  optimizers.push_back(std::make_unique<RMSprop>(
      std::vector<Tensor>{w, b}, RMSpropOptions{.momentum = 0.9, .centered = true}));
  optimizers.push_back(std::make_unique<Adagrad>(std::vector<Tensor>{w, b}));
  optimizers.push_back(std::make_unique<Adadelta>(std::vector<Tensor>{w, b}));
  optimizers.push_back(std::make_unique<Adamax>(std::vector<Tensor>{w, b}));
  optimizers.push_back(std::make_unique<NAdam>(std::vector<Tensor>{w, b}));
  optimizers.push_back(std::make_unique<RAdam>(std::vector<Tensor>{w, b}));
  for (auto& optimizer : optimizers) {
    SCOPED_TRACE(optimizer->name());
    optimizer->step();
    int64_t live_after_first = allocator_stats().live_bytes;
    for (int step = 0; step < 10; ++step) {
      optimizer->step();
      EXPECT_EQ(allocator_stats().live_bytes, live_after_first) << "step " << step + 2;
    }
  }
}

TEST(Optim, StateDictRoundTripContinuesTheSameTrajectory) {
  Tensor grad_w = randn({4, 3}), grad_b = randn({3});
  Tensor w = requires_grad_(randn({4, 3})), b = requires_grad_(randn({3}));
  AdamOptions options{.lr = 0.05, .amsgrad = true};
  Adam original({w, b}, options);
  set_grad(w, grad_w);
  set_grad(b, grad_b);
  for (int i = 0; i < 3; ++i)
    original.step();
  original.set_lr(0.02);
  OptimizerStateDict saved = original.state_dict();
  EXPECT_EQ(saved.state.at(0).step, 3);
  EXPECT_EQ(saved.state.at(0).buffers.at("step").item<double>(), 3);
  EXPECT_EQ(saved.param_groups[0].at("lr"), 0.02);

  Tensor w2 = requires_grad_(clone(w)), b2 = requires_grad_(clone(b));
  Adam restored({w2, b2}, options);
  restored.load_state_dict(saved);
  EXPECT_EQ(restored.lr(), 0.02);
  set_grad(w2, grad_w);
  set_grad(b2, grad_b);
  Tensor snapshot = clone(saved.state.at(0).buffers.at("exp_avg"));
  for (int i = 0; i < 2; ++i) {
    original.step();
    restored.step();
  }
  EXPECT_EQ(w.to_vector<float>(), w2.to_vector<float>());
  EXPECT_EQ(b.to_vector<float>(), b2.to_vector<float>());
  // The dict is a copy: later steps did not change it.
  EXPECT_EQ(saved.state.at(0).buffers.at("exp_avg").to_vector<float>(),
            snapshot.to_vector<float>());
}

TEST(Optim, LoadStateDictRejectsAMismatchAndChangesNothing) {
  Tensor w = requires_grad_(ones({2, 2}));
  SGD optimizer({w}, {.lr = 0.1, .momentum = 0.9});
  set_grad(w, ones({2, 2}));
  optimizer.step();
  OptimizerStateDict good = optimizer.state_dict();

  OptimizerStateDict wrong_shape = optimizer.state_dict();
  wrong_shape.state[0].buffers["momentum_buffer"] = zeros({3});
  wrong_shape.param_groups[0]["lr"] = 5;
  Error shape = error_of([&] { optimizer.load_state_dict(wrong_shape); });
  EXPECT_TRUE(mentions(shape,
                       "buffer 'momentum_buffer' of parameter 0 has shape [3], expected "
                       "[2, 2]"))
      << shape.what();
  EXPECT_EQ(optimizer.lr(), 0.1);  // untouched

  OptimizerStateDict unknown = optimizer.state_dict();
  unknown.state[0].buffers["exp_avg"] = zeros({2, 2});
  EXPECT_TRUE(
      mentions(error_of([&] { optimizer.load_state_dict(unknown); }), "unknown buffer 'exp_avg'"));
  OptimizerStateDict two_groups = good;
  two_groups.param_groups.push_back(good.param_groups[0]);
  EXPECT_TRUE(mentions(error_of([&] { optimizer.load_state_dict(two_groups); }),
                       "the state dict has 2 parameter groups, the optimizer 1"));
  OptimizerStateDict far = good;
  far.state[7] = good.state[0];
  EXPECT_TRUE(mentions(error_of([&] { optimizer.load_state_dict(far); }),
                       "state for parameter 7 but there are only 1"));
}

TEST(Optim, ParamGroupsOverrideDefaultsByName) {
  Tensor a = ones({1}), b = ones({1});
  SGD optimizer(std::vector<ParamGroup>{{{a}, {}}, {{b}, {{"lr", 0.5}}}}, {.lr = 0.1});
  EXPECT_EQ(optimizer.num_param_groups(), 2u);
  EXPECT_EQ(optimizer.lr(0), 0.1);
  EXPECT_EQ(optimizer.lr(1), 0.5);
  EXPECT_EQ(optimizer.option("momentum", 1), 0.0);
  set_grad(a, ones({1}));
  set_grad(b, ones({1}));
  optimizer.step();
  EXPECT_FLOAT_EQ(a.item<float>(), 0.9f);
  EXPECT_FLOAT_EQ(b.item<float>(), 0.5f);
}

TEST(Optim, BadOptionsAndParametersAreErrors) {
  Tensor p = ones({2});
  EXPECT_TRUE(mentions(error_of([&] { SGD({p}, {.lr = -1}); }), "SGD: invalid learning rate: -1"));
  EXPECT_TRUE(mentions(error_of([&] { SGD({p}, {.nesterov = true}); }),
                       "nesterov momentum requires a momentum and zero dampening"));
  EXPECT_TRUE(mentions(error_of([&] { Adam({p}, {.beta2 = 1.0}); }),
                       "Adam: invalid beta parameter at index 1: 1"));
  EXPECT_TRUE(mentions(error_of([&] { AdamW({p}, {.eps = -1}); }), "AdamW: invalid epsilon value"));
  Error unknown = error_of([&] { SGD(std::vector<ParamGroup>{{{p}, {{"betas", 0.9}}}}); });
  EXPECT_TRUE(mentions(unknown, "unknown option 'betas' in parameter group 0")) << unknown.what();
  EXPECT_TRUE(mentions(error_of([&] {
                         SGD(std::vector<ParamGroup>{{{p}, {}}, {{p}, {}}});
                       }),
                       "some parameters appear in more than one parameter group"));
  EXPECT_EQ(error_of([&] { SGD({arange(int64_t(3))}); }).kind(), ErrorKind::Type);
  EXPECT_TRUE(mentions(error_of([&] { SGD(std::vector<Tensor>{}); }), "empty parameter list"));
  SGD optimizer({p});
  set_grad(p, ones({2}, DType::Float64));
  EXPECT_TRUE(mentions(error_of([&] { optimizer.step(); }),
                       "parameter 0 of group 0 is float32 but its grad is float64"));
  EXPECT_TRUE(mentions(error_of([&] { optimizer.set_lr(-2); }), "invalid learning rate: -2"));
  EXPECT_TRUE(mentions(error_of([&] { StepLR(optimizer, 0); }), "step_size must be at least 1"));
}

// The functions the classes (and Python's kiln.optim) call: one update of
// one parameter, its state made as torch makes it.
TEST(Optim, FunctionalUpdatesAreTheClassesUpdates) {
  Tensor g = randn({3, 2});
  Tensor a = requires_grad_(randn({3, 2})), b = requires_grad_(clone(a));
  NAdam optimizer({a}, {.lr = 0.01, .weight_decay = 0.1});
  const OptimizerKind& nadam = optimizer_kind("NAdam");
  Hyperparams options = complete_options(nadam, {{"weight_decay", 0.1}});
  TensorMap state;
  set_grad(a, g);
  for (int i = 0; i < 3; ++i) {
    optimizer.step();
    update_parameter(nadam, b, g, state, options, {.value = 0.01});
  }
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(state.at("step").item<double>(), 3);
  EXPECT_EQ(state.at("mu_product").dtype(), DType::Float32);  // torch's, whatever the param's
  EXPECT_EQ(optimizer.state(0).buffers.at("exp_avg").to_vector<float>(),
            state.at("exp_avg").to_vector<float>());
}

TEST(Optim, FunctionalErrorsNameTheKindAndTheOption) {
  EXPECT_TRUE(mentions(error_of([] { optimizer_kind("Adamm"); }), "no optimizer named 'Adamm'"));
  Error unknown = error_of([] { complete_options(optimizer_kind("RMSprop"), {{"betas", 1}}); });
  EXPECT_TRUE(mentions(unknown, "RMSprop: unknown option 'betas'")) << unknown.what();
  EXPECT_EQ(unknown.kind(), ErrorKind::Value);
  EXPECT_TRUE(mentions(error_of([] {
                         complete_options(optimizer_kind("Adagrad"), {{"lr_decay", -1}});
                       }),
                       "Adagrad: invalid lr_decay value: -1"));
  EXPECT_TRUE(mentions(error_of([] {
                         complete_options(optimizer_kind("Adadelta"), {{"rho", 1.5}});
                       }),
                       "invalid rho value: 1.5"));
  Tensor p = ones({2});
  Error shape = error_of([&] { check_grad(optimizer_kind("SGD"), p, ones({3}), "parameter 1"); });
  EXPECT_TRUE(mentions(shape, "SGD: parameter 1 has shape [2] but its grad has shape [3]"))
      << shape.what();
  // Scalar state ("step") is 0-d in a state dict, not of the parameter's shape.
  Adam adam({requires_grad_(ones({2}))});
  OptimizerStateDict dict;
  dict.state[0].buffers = {
      {"step", full({2}, 1.0)}, {"exp_avg", zeros({2})}, {"exp_avg_sq", zeros({2})}};
  dict.param_groups.push_back(adam.hyperparams());
  EXPECT_TRUE(mentions(error_of([&] { adam.load_state_dict(dict); }),
                       "buffer 'step' of parameter 0 has shape [2], expected []"));
}

// Adagrad makes its state when made, as torch's: a state dict holds it
// before any step.
TEST(Optim, AdagradStartsFromTheInitialAccumulator) {
  Tensor p = requires_grad_(ones({2}));
  Adagrad optimizer({p}, {.initial_accumulator_value = 0.25});
  OptimizerStateDict dict = optimizer.state_dict();
  ASSERT_EQ(dict.state.count(0), 1u);
  EXPECT_EQ(dict.state.at(0).buffers.at("sum").to_vector<float>(), (std::vector<float>{.25, .25}));
  EXPECT_EQ(dict.state.at(0).buffers.at("step").item<double>(), 0);
}

}  // namespace
}  // namespace kiln
