// Eager kiln from C++: bench/run_all.py's runner for the "kiln eager, C++"
// rows. The models are built with kiln::nn as the Python runners build them
// (bench/harness/workloads.py: W1, LeNet, MyModel as a Sequential), load the
// driver's weights (.npy files) and run op by op, with no Python anywhere.
//
//   kiln_bench_eager_cpp --data DIR --out PREFIX --repeats 7 --calls 1000
//       --warmup 200 --repetition-s 0.2 --batch1-repetition-s 1
//       --case W1-b1:W1:infer --case W3a-b64:W1:train ...
//
// Inference runs in eval mode under NoGradGuard. A training step is
// zero_grad, cross_entropy (mean), backward, SGD (lr 0.01, no momentum); the
// first 3 steps from the initial weights are the checked outputs, as in the
// Python runners. Writes PREFIX.json (the runners' record format) and
// PREFIX-outputs/<case>__<mode>__<name>.npy; timing as bench/harness/runner.py
// does it: calls per repetition cut to ~repetition-s, warm-up first.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/io/npy.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/copy.h"
#include "kiln/optim/sgd.h"

namespace {

namespace F = kiln::nn::functional;
using kiln::Tensor;
using kiln::nn::ModulePtr;

constexpr double kLearningRate = 0.01;  // workloads.LEARNING_RATE
constexpr int kStepsChecked = 3;        // workloads.STEPS_CHECKED

struct CaseSpec {
  std::string id, model;
  bool training = false;
};

struct Args {
  std::string data, out;
  int repeats = 7, calls = 1000, warmup = 200;
  double repetition_s = 0.2, batch1_repetition_s = 1.0;
  std::vector<CaseSpec> cases;
};

// "W1-b1:W1:infer" -> {id, model, training}.
CaseSpec parse_case(const std::string& text) {
  const size_t a = text.find(':'), b = text.rfind(':');
  KILN_CHECK(a != std::string::npos && b != a, "--case: expected ID:MODEL:infer|train, got ", text);
  return {text.substr(0, a), text.substr(a + 1, b - a - 1), text.substr(b + 1) == "train"};
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--data")
      args.data = value;
    else if (flag == "--out")
      args.out = value;
    else if (flag == "--repeats")
      args.repeats = std::atoi(value.c_str());
    else if (flag == "--calls")
      args.calls = std::atoi(value.c_str());
    else if (flag == "--warmup")
      args.warmup = std::atoi(value.c_str());
    else if (flag == "--repetition-s")
      args.repetition_s = std::atof(value.c_str());
    else if (flag == "--batch1-repetition-s")
      args.batch1_repetition_s = std::atof(value.c_str());
    else if (flag == "--case")
      args.cases.push_back(parse_case(value));
    else
      KILN_CHECK(false, "unknown flag ", flag);
  }
  KILN_CHECK(!args.data.empty() && !args.out.empty(), "--data and --out are required");
  return args;
}

std::shared_ptr<kiln::nn::Sequential> build_model(const std::string& name) {
  using namespace kiln::nn;
  if (name == "W1")
    return std::make_shared<Sequential>(std::make_shared<Linear>(512, 256),
                                        std::make_shared<ReLU>(),
                                        std::make_shared<Linear>(256, 128),
                                        std::make_shared<ReLU>(), std::make_shared<Linear>(128, 2));
  if (name == "MyModel")
    return std::make_shared<Sequential>(std::make_shared<Linear>(10, 5), std::make_shared<ReLU>(),
                                        std::make_shared<Linear>(5, 2));
  KILN_CHECK(name == "LeNet", "unknown model ", name);
  return std::make_shared<Sequential>(
      std::make_shared<Conv2d>(1, 6, kiln::IntList{5}, kiln::IntList{1}, kiln::IntList{2}),
      std::make_shared<Sigmoid>(), std::make_shared<AvgPool2d>(kiln::IntList{2}),
      std::make_shared<Conv2d>(6, 16, kiln::IntList{5}), std::make_shared<Sigmoid>(),
      std::make_shared<AvgPool2d>(kiln::IntList{2}), std::make_shared<Flatten>(),
      std::make_shared<Linear>(400, 120), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(120, 84), std::make_shared<Sigmoid>(),
      std::make_shared<Linear>(84, 10));
}

// The driver writes npz key "a/b/c" as the file a__b__c.npy.
std::string npy_path(const std::string& dir, std::string key) {
  for (size_t at = key.find('/'); at != std::string::npos; at = key.find('/'))
    key.replace(at, 1, "__");
  return dir + "/" + key + ".npy";
}

std::shared_ptr<kiln::nn::Sequential> load_model(const Args& args, const std::string& name) {
  auto model = build_model(name);
  kiln::nn::StateDict weights;
  for (const auto& [param, _] : model->state_dict())
    weights.emplace_back(param, kiln::io::read_npy(npy_path(args.data, name + "/param/" + param)));
  model->load_state_dict(weights);
  return model;
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double us_per_call(const std::function<void()>& step, int calls) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    step();
  return seconds_since(start) / calls * 1e6;
}

// One timed mode of one case: computes the checked outputs (written as .npy),
// then times `step`. Returns the JSON record.
std::string run_mode(const Args& args, const CaseSpec& spec, int batch, const std::string& mode,
                     const std::string& label,
                     const std::function<kiln::nn::NamedTensors()>& outputs,
                     const std::function<void()>& step) {
  std::ostringstream record;
  record << "{\"case\": " << json_string(spec.id) << ", \"mode\": " << json_string(mode)
         << ", \"label\": " << json_string(label);
  try {
    auto start = std::chrono::steady_clock::now();
    for (const auto& [name, value] : outputs())
      kiln::io::write_npy(value,
                          npy_path(args.out + "-outputs", spec.id + "/" + mode + "/" + name));
    record << ", \"first_call_s\": " << seconds_since(start);
    us_per_call(step, std::min(args.warmup, 20));
    const double target = batch == 1 ? args.batch1_repetition_s : args.repetition_s;
    const double probe_s = us_per_call(step, 3) * 1e-6;
    const int calls =
        int(std::max(5.0, std::min(double(args.calls), std::round(target / probe_s))));
    us_per_call(step, std::min(args.warmup, std::max(2, calls / 5)));
    record << ", \"calls\": " << calls << ", \"status\": \"ok\", \"us_per_call\": [";
    for (int rep = 0; rep < args.repeats; ++rep)
      record << (rep ? ", " : "") << us_per_call(step, calls);
    record << "]}";
  } catch (const std::exception& e) {
    record << ", \"status\": " << json_string(std::string("failed: ") + e.what()) << "}";
  }
  return record.str();
}

std::string run_inference(const Args& args, const CaseSpec& spec) {
  auto model = load_model(args, spec.model);
  model->eval();
  const Tensor x = kiln::io::read_npy(npy_path(args.data, "input/" + spec.id));
  auto outputs = [&] {
    kiln::NoGradGuard no_grad;
    return kiln::nn::NamedTensors{{"out", (*model)(x)}};
  };
  auto step = [&] {
    kiln::NoGradGuard no_grad;
    (*model)(x);
  };
  return run_mode(args, spec, int(x.shape()[0]), "eager-cpp", "kiln eager, C++", outputs, step);
}

std::string run_training(const Args& args, const CaseSpec& spec) {
  auto model = load_model(args, spec.model);
  model->train();
  const Tensor x = kiln::io::read_npy(npy_path(args.data, "input/" + spec.id));
  const Tensor y = kiln::io::read_npy(npy_path(args.data, "target/" + spec.id));
  kiln::SGD opt(model->parameters(), {.lr = kLearningRate});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = F::cross_entropy((*model)(x), y);
    kiln::backward(loss);
    opt.step();
    return loss;
  };
  auto outputs = [&] {
    std::vector<float> losses;
    for (int i = 0; i < kStepsChecked; ++i)
      losses.push_back(step().item<float>());
    kiln::nn::NamedTensors out{{"losses", kiln::tensor(losses, {int64_t(losses.size())})}};
    for (const auto& [name, value] : model->state_dict())
      out.emplace_back("param/" + name, kiln::clone(kiln::detach(value)));
    return out;
  };
  return run_mode(args, spec, int(x.shape()[0]), "eager-cpp", "kiln eager, C++", outputs,
                  [&] { step(); });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    std::filesystem::create_directories(args.out + "-outputs");
    std::vector<std::string> records;
    for (const CaseSpec& spec : args.cases) {
      records.push_back(spec.training ? run_training(args, spec) : run_inference(args, spec));
      std::fprintf(stderr, "  kiln C++: %s done\n", spec.id.c_str());
    }
    std::ofstream out(args.out + ".json");
    out << "{\"framework\": \"kiln-cpp\", \"versions\": {}, \"records\": [\n";
    for (size_t i = 0; i < records.size(); ++i)
      out << (i ? ",\n" : "") << records[i];
    out << "\n]}\n";
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_eager_cpp: %s\n", e.what());
    return 1;
  }
}
