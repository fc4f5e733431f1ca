// kiln: look at, run and time .kiln model files from the shell.
//
//   kiln info mlp.kiln [--graph]                 # what the file holds, its memory plan
//   kiln run mlp.kiln -i x.npy -o y.npy          # inputs and outputs as .npy files
//                                                # (another batch size re-batches a static
//                                                # graph; a symbolic one runs at any size)
//   kiln run mlp.kiln --example --verify         # replay the stored example, print it
//   kiln bench mlp.kiln --threads 4              # latency percentiles and throughput
//   kiln bench mlp.kiln --batch 64               # at another batch than the saved one
//   kiln bench bert.kiln --size seq=128          # a symbolic model at chosen sizes
//   kiln bench mlp.kiln --profile [--trace t.json] # then the per-step profile table
//   kiln dot mlp.kiln -o mlp.dot                 # then: dot -Tsvg mlp.dot -o mlp.svg
//   kiln --version
//
// Every subcommand takes --help. A usage mistake exits with CLI11's code; any
// other failure prints "kiln: error: <message>" to stderr and exits 1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kiln/core/factory.h"
#include "kiln/io/model_file.h"
#include "kiln/io/npy.h"
#include "kiln/jit/ir/dot.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/rebatch.h"
#include "kiln/jit/ir/specialize.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/random.h"
#include "kiln/ops/registry.h"
#include "kiln/profiler/profiler.h"

namespace {

using kiln::DimList;
using kiln::DType;
using kiln::IntList;
using kiln::Tensor;
using kiln::jit::CompiledFunction;
using kiln::jit::Graph;
using kiln::jit::ModelFile;
using kiln::jit::SymbolBindings;
using kiln::jit::Value;

// The version model_save.cpp writes into every header (there is no constant
// for it in the library yet).
constexpr const char* kKilnVersion = "0.1.0";
// How long `kiln bench` spends when no --warmup / --iterations is given.
constexpr double kWarmupBudgetUs = 2e6;
constexpr double kBenchBudgetUs = 10e6;

std::string version_text() {
  return kiln::str("kiln ", kKilnVersion, " (model format ", kiln::jit::kModelFormatVersion,
                   ", op schema ", kiln::kOpSchemaVersion, ")");
}

// "float32[1, 512]", "float32[batch, 512]"
std::string type_text(DType dtype, const DimList& shape) {
  return kiln::to_string(dtype) + kiln::to_string(shape);
}
std::string type_text(DType dtype, const IntList& shape) {
  return kiln::to_string(dtype) + kiln::to_string(shape);
}
std::string type_text(const Value& value) {
  return type_text(value.dtype(), value.shape());
}

// "1.50 MiB (1572864 bytes)"
std::string bytes_text(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB"};
  double scaled = double(bytes);
  int unit = 0;
  for (; scaled >= 1024 && unit < 3; ++unit)
    scaled /= 1024;
  if (unit == 0) return kiln::str(bytes, " bytes");
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f %s", scaled, units[unit]);
  return kiln::str(buffer, " (", bytes, " bytes)");
}

std::string input_name(const Graph& graph, size_t i) {
  const std::string& name = graph.inputs()[i]->name();
  return name.empty() ? kiln::str("in", i) : name;
}

// "x: float32[1, 512], mask: bool[1, 16]"
std::string expected_inputs_text(const Graph& graph) {
  std::string text;
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    text += kiln::str(i ? ", " : "", input_name(graph, i), ": ", type_text(*graph.inputs()[i]));
  return text;
}

// ---- info ----

struct InfoArgs {
  std::string model;
  bool graph = false;
};

void print_inputs_outputs(const ModelFile& file) {
  const Graph& graph = *file.graph;
  std::cout << "inputs       " << graph.inputs().size() << "\n";
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    std::cout << "  " << input_name(graph, i) << "  " << type_text(*graph.inputs()[i]) << "\n";
  std::cout << "outputs      " << file.num_outputs << " (and " << file.state_updates.size()
            << " state updates)\n";
  for (size_t i = 0; i < file.num_outputs && i < graph.outputs().size(); ++i)
    std::cout << "  " << i << "  " << type_text(*graph.outputs()[i]) << "\n";
  for (const kiln::jit::StateUpdate& update : file.state_updates) {
    std::string target = update.target == kiln::jit::ValueKind::Param
                             ? "parameter " + update.param
                             : "input " + input_name(graph, update.input);
    std::cout << "  output " << update.output << " writes " << target << "\n";
  }
}

// Parameters have static shapes (a weight is a tensor).
uint64_t param_bytes(const Value& param) {
  return uint64_t(kiln::numel_of(kiln::to_static(param.shape(), "kiln info"))) *
         kiln::element_size(param.dtype());
}

void print_parameters(const ModelFile& file) {
  const Graph& graph = *file.graph;
  uint64_t total = 0;
  for (const Value* param : graph.params())
    total += param_bytes(*param);
  std::cout << "parameters   " << graph.params().size() << ", " << bytes_text(total) << "\n";
  for (const Value* param : graph.params()) {
    uint64_t bytes = param_bytes(*param);
    std::cout << "  " << param->name() << "  " << type_text(*param) << "  " << bytes << " bytes\n";
  }
  std::cout << "weights      " << bytes_text(file.weight_bytes) << " (parameters and "
            << graph.constants().size() << " constants)\n";
}

void print_nodes(const Graph& graph) {
  std::map<std::string, size_t> per_op;  // sorted: the listing is deterministic
  for (const kiln::jit::Node* node : graph.nodes())
    ++per_op[node->op().name];
  std::cout << "nodes        " << graph.num_nodes() << "\n";
  for (const auto& [name, count] : per_op)
    std::cout << "  " << name << "  " << count << "\n";
}

// A symbolic graph's sizes and the guards a call must satisfy.
void print_symbols(const Graph& graph) {
  if (!graph.is_symbolic()) return;
  std::string names;
  for (const std::string& symbol : graph.symbols())
    names += (names.empty() ? "" : ", ") + symbol;
  std::cout << "sizes        " << names << " (runs at any size; one plan per size)\n";
  for (const kiln::ShapeGuard& guard : graph.guards()) {
    std::cout << "  guard " << guard.to_string();
    if (!guard.reason.empty()) std::cout << "  (" << guard.reason << ")";
    std::cout << "\n";
  }
}

// A symbolic graph is planned per size, from one placement whose peak is a
// formula over the symbols: printed with the plan at the stored example's
// sizes, when there is one.
void print_memory_plan(const ModelFile& file) {
  CompiledFunction compiled(file.graph, file.num_outputs, file.state_updates);
  std::string at;
  if (file.graph->is_symbolic()) {
    if (file.example_inputs.empty()) {
      std::cout << "memory       planned per size (no example stored to plan one)\n";
      return;
    }
    std::vector<IntList> shapes;
    for (const Tensor& input : file.example_inputs)
      shapes.push_back(input.shape());
    compiled.prepare(kiln::jit::bind_symbols(*file.graph, shapes));
    at = " at the example's sizes";
  }
  const kiln::jit::CompileReport& report = compiled.compile_report();
  if (report.planned_bytes < 0) {
    std::cout << "memory       no plan (the model runs on another runner)\n";
    return;
  }
  std::cout << "memory       planned " << bytes_text(uint64_t(report.planned_bytes)) << " per call"
            << at << ", " << bytes_text(uint64_t(report.unshared_bytes)) << " unshared; "
            << report.steps << " steps\n";
  if (report.memory)
    std::cout << "             at any size: " << report.memory->to_string() << "\n";
}

int run_info(const InfoArgs& args) {
  ModelFile file = kiln::jit::read_model_file(args.model);
  std::cout << "file         " << file.path << ", " << bytes_text(file.file_bytes) << "\n"
            << "format       " << file.format_version << ", written by kiln " << file.kiln_version
            << ", op schema " << file.op_schema_version << "\n";
  print_inputs_outputs(file);
  print_symbols(*file.graph);
  print_parameters(file);
  print_nodes(*file.graph);
  print_memory_plan(file);
  if (file.example_inputs.empty())
    std::cout << "example      none stored\n";
  else
    std::cout << "example      stored (" << file.example_inputs.size() << " inputs, "
              << file.example_outputs.size() << " outputs)\n";
  if (args.graph) std::cout << "\n" << kiln::jit::to_text(*file.graph);
  return 0;
}

// ---- run ----

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs, outputs;
  bool verify = false;
  bool example = false;
};

std::vector<Tensor> read_inputs(const ModelFile& file, const RunArgs& args) {
  if (args.example) {
    KILN_CHECK_VALUE(!file.example_inputs.empty(), args.model,
                     ": no example input is stored (save with SaveOptions::example_inputs)");
    return file.example_inputs;
  }
  const Graph& graph = *file.graph;
  KILN_CHECK_VALUE(args.inputs.size() == graph.inputs().size(), "the model takes ",
                   graph.inputs().size(), " inputs (", expected_inputs_text(graph), ") but ",
                   args.inputs.size(), " --input files were given");
  std::vector<Tensor> inputs;
  for (const std::string& path : args.inputs)
    inputs.push_back(kiln::io::read_npy(path));
  return inputs;
}

// Names the file and the expected type when an input does not fit the graph.
// A symbolic graph takes any sizes that bind its symbols consistently and
// keep its guards (jit::bind_symbols says which input and dim do not).
void check_input_types(const Graph& graph, const std::vector<Tensor>& inputs,
                       const std::vector<std::string>& paths) {
  bool symbolic = graph.is_symbolic();
  for (size_t i = 0; i < inputs.size() && i < graph.inputs().size(); ++i) {
    const Value& expected = *graph.inputs()[i];
    bool fits = inputs[i].dtype() == expected.dtype() &&
                (symbolic ? inputs[i].dim() == int64_t(expected.shape().size())
                          : kiln::same_dims(kiln::to_dims(inputs[i].shape()), expected.shape()));
    if (fits) continue;
    std::string source = i < paths.size() ? "'" + paths[i] + "'" : "the example";
    kiln::throw_error(kiln::ErrorKind::Value,
                      kiln::str("input ", i, " (", input_name(graph, i), ", from ", source,
                                "): the model expects ", type_text(expected), ", got ",
                                type_text(inputs[i].dtype(), inputs[i].shape())));
  }
  if (!symbolic) return;
  std::vector<IntList> shapes;
  for (const Tensor& input : inputs)
    shapes.push_back(input.shape());
  try {
    kiln::jit::bind_symbols(graph, shapes);
  } catch (const kiln::Error& e) {
    kiln::throw_error(e.kind(), kiln::str("the inputs do not fit the model's sizes (",
                                          expected_inputs_text(graph), "): ", e.what()));
  }
}

void check_output_paths(const ModelFile& file, const RunArgs& args) {
  if (args.outputs.empty()) return;  // printed to stdout
  KILN_CHECK_VALUE(args.outputs.size() == file.num_outputs, "the model has ", file.num_outputs,
                   " outputs but ", args.outputs.size(), " --output paths were given");
}

void write_outputs(const std::vector<Tensor>& outputs, const std::vector<std::string>& paths) {
  if (paths.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i)
      std::cout << "output " << i << ": " << type_text(outputs[i].dtype(), outputs[i].shape())
                << "\n"
                << outputs[i] << "\n";
    return;
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    kiln::io::write_npy(outputs[i], paths[i]);
}

// The model at another batch size (jit::rebatch); its stored example, made
// for the saved batch, is dropped.
void use_batch(ModelFile& file, int64_t batch) {
  if (batch == kiln::jit::batch_size_of(*file.graph)) return;
  file.graph = kiln::jit::rebatch(*file.graph, batch);
  file.example_inputs.clear();
  file.example_outputs.clear();
}

// Inputs whose first dimension differs from the saved batch (and agree
// among themselves) run a static model re-batched to theirs; a symbolic
// model runs at their sizes as it is.
void follow_input_batch(ModelFile& file, const std::vector<Tensor>& inputs) {
  const Graph& graph = *file.graph;
  if (graph.is_symbolic()) return;
  if (inputs.empty() || inputs.size() != graph.inputs().size()) return;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dim() != int64_t(graph.inputs()[i]->shape().size())) return;
    if (inputs[i].dim() > 0 && inputs[i].shape()[0] != inputs[0].shape()[0]) return;
  }
  if (inputs[0].dim() == 0) return;
  use_batch(file, inputs[0].shape()[0]);
}

int run_model(const RunArgs& args) {
  ModelFile file = kiln::jit::read_model_file(args.model);
  check_output_paths(file, args);
  std::vector<Tensor> inputs = read_inputs(file, args);
  if (args.verify) kiln::jit::compile(file, {.verify = true});
  follow_input_batch(file, inputs);
  check_input_types(*file.graph, inputs, args.example ? std::vector<std::string>{} : args.inputs);
  CompiledFunction model = kiln::jit::compile(file);
  write_outputs(model(inputs), args.outputs);
  return 0;
}

// ---- bench ----

struct BenchArgs {
  std::string model;
  int64_t batch = 0;
  std::vector<std::string> sizes;  // NAME=VALUE, for a symbolic model
  int threads = 1;
  int iterations = 1000;
  int warmup = 100;
  bool profile = false;
  std::string trace;  // a Chrome trace of the profiled calls
  bool batch_given = false, iterations_given = false, warmup_given = false;
};

// The first input's leading dimension; 1 when there is none.
int64_t saved_batch(const Graph& graph, const SymbolBindings& sizes) {
  if (graph.inputs().empty() || graph.inputs()[0]->shape().empty()) return 1;
  return kiln::evaluate({graph.inputs()[0]->shape()[0]}, sizes)[0];
}

// The sizes a symbolic model is timed at: --size NAME=VALUE, --batch for
// the symbol that is the first input's first dim, the rest from the stored
// example. Empty for a static model.
SymbolBindings bench_sizes(const ModelFile& file, const BenchArgs& args) {
  const Graph& graph = *file.graph;
  SymbolBindings sizes;
  if (!graph.is_symbolic()) {
    KILN_CHECK_VALUE(args.sizes.empty(), "--size is for models with symbolic sizes; ", args.model,
                     " has none (use --batch to re-batch it)");
    return sizes;
  }
  for (const std::string& item : args.sizes) {
    size_t eq = item.find('=');
    KILN_CHECK_VALUE(eq != std::string::npos && eq > 0, "--size takes NAME=VALUE, got '", item,
                     "'");
    std::string name = item.substr(0, eq);
    int64_t value = 0;
    try {
      value = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      kiln::throw_error(
          kiln::ErrorKind::Value,
          kiln::str("--size ", name, ": '", item.substr(eq + 1), "' is not an integer"));
    }
    sizes[name] = value;
  }
  const kiln::DimList& first =
      graph.inputs().empty() ? kiln::DimList{} : graph.inputs()[0]->shape();
  if (args.batch_given) {
    KILN_CHECK_VALUE(
        !first.empty() && first[0].is_symbolic() && first[0].expr().symbols().size() == 1,
        "--batch: the model's first input dim is ",
        first.empty() ? std::string("absent") : first[0].to_string(),
        ", not a size symbol; use --size NAME=VALUE");
    sizes[first[0].expr().symbols()[0]] = args.batch;
  }
  if (!file.example_inputs.empty()) {
    std::vector<IntList> shapes;
    for (const Tensor& input : file.example_inputs)
      shapes.push_back(input.shape());
    for (const auto& [name, value] : kiln::jit::bind_symbols(graph, shapes))
      sizes.try_emplace(name, value);
  }
  std::string missing;
  for (const std::string& symbol : graph.symbols())
    if (!sizes.count(symbol)) missing += (missing.empty() ? "" : ", ") + symbol;
  KILN_CHECK_VALUE(missing.empty(), args.model, " has symbolic sizes (",
                   expected_inputs_text(graph),
                   ") and no stored example to take them from: give --size for ", missing);
  return sizes;
}

std::vector<Tensor> random_inputs(const Graph& graph, const SymbolBindings& sizes) {
  std::vector<Tensor> inputs;
  for (const Value* input : graph.inputs()) {
    IntList shape = kiln::evaluate(input->shape(), sizes);
    if (kiln::is_floating(input->dtype()))
      inputs.push_back(kiln::randn(shape, input->dtype()));
    else
      inputs.push_back(kiln::zeros(shape, input->dtype()));
  }
  return inputs;
}

// Microseconds per call; stops early once `budget_us` is spent (0: never).
std::vector<double> time_calls(const CompiledFunction& model, const std::vector<Tensor>& inputs,
                               int count, double budget_us) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  double spent = 0;
  for (int i = 0; i < count && (budget_us <= 0 || spent < budget_us); ++i) {
    Clock::time_point start = Clock::now();
    model(inputs);
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    spent += times.back();
  }
  return times;
}

// As many calls as fit in the budget, at most 1000, judged by the warm-up
// (its first call, which pays for first-touch work, is left out).
int pick_iterations(const std::vector<double>& warm) {
  if (warm.empty()) return 1000;
  std::vector<double> steady(warm.size() > 1 ? warm.begin() + 1 : warm.begin(), warm.end());
  std::sort(steady.begin(), steady.end());
  double estimate = std::max(steady[steady.size() / 2], 1e-3);
  return int(std::clamp(kBenchBudgetUs / estimate, 1.0, 1000.0));
}

// Nearest-rank percentile of sorted times.
double percentile(const std::vector<double>& sorted, double q) {
  size_t rank = size_t(std::ceil(q * double(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

void print_latency(std::vector<double> times, int64_t batch) {
  KILN_CHECK(!times.empty(), "bench: no calls were timed (--iterations must be at least 1)");
  std::sort(times.begin(), times.end());
  double mean = 0;
  for (double t : times)
    mean += t / double(times.size());
  char line[160];
  std::snprintf(line, sizeof line, "p50 %.1f  p90 %.1f  p99 %.1f  min %.1f  mean %.1f",
                percentile(times, 0.5), percentile(times, 0.9), percentile(times, 0.99),
                times.front(), mean);
  double calls_per_s = 1e6 / mean;
  std::cout << "latency      " << line << " us (" << times.size() << " calls)\n"
            << "throughput   " << calls_per_s << " calls/s, " << double(batch) * calls_per_s
            << " samples/s\n";
}

// The per-step table of `calls` more calls (after the timed ones, which
// ran without the profiler), sorted by self time.
void print_profile(const CompiledFunction& model, const std::vector<Tensor>& inputs, int calls,
                   const std::string& trace) {
  kiln::profiler::Profile profile({.record_shapes = false, .profile_memory = true});
  for (int i = 0; i < calls; ++i)
    model(inputs);
  profile.stop();
  std::cout << "\nprofile of " << calls << " calls\n"
            << kiln::profiler::table(profile.key_averages(),
                                     {.row_limit = -1, .profile_memory = true});
  if (!trace.empty()) profile.export_chrome_trace(trace);
}

int run_bench(const BenchArgs& args) {
  KILN_CHECK_VALUE(args.threads >= 1, "--threads must be at least 1, got ", args.threads);
  ModelFile file = kiln::jit::read_model_file(args.model);
  if (args.batch_given && !file.graph->is_symbolic()) use_batch(file, args.batch);
  SymbolBindings sizes = bench_sizes(file, args);
  int64_t batch = saved_batch(*file.graph, sizes);
  kiln::cpu::set_num_threads(args.threads);
  CompiledFunction model = kiln::jit::compile(file);
  std::vector<Tensor> inputs = random_inputs(*file.graph, sizes);
  std::vector<double> warm =
      time_calls(model, inputs, args.warmup, args.warmup_given ? 0 : kWarmupBudgetUs);
  int iterations = args.iterations_given ? args.iterations : pick_iterations(warm);
  std::vector<double> times =
      time_calls(model, inputs, iterations, args.iterations_given ? 0 : kBenchBudgetUs);
  std::string at;
  for (const auto& [name, value] : sizes)
    at += kiln::str(", ", name, "=", value);
  std::cout << "model        " << args.model << " (batch " << batch << at << ", " << args.threads
            << " threads, " << warm.size() << " warm-up calls)\n";
  print_latency(std::move(times), batch);
  KILN_CHECK_VALUE(args.profile || args.trace.empty(), "--trace needs --profile");
  if (args.profile) print_profile(model, inputs, std::clamp(iterations, 1, 100), args.trace);
  return 0;
}

// ---- dot ----

struct DotArgs {
  std::string model;
  std::string output;  // empty or "-": stdout
};

int run_dot(const DotArgs& args) {
  ModelFile file = kiln::jit::read_model_file(args.model);
  std::string dot = kiln::jit::to_dot(*file.graph);
  if (args.output.empty() || args.output == "-") {
    std::cout << dot;
    return 0;
  }
  std::ofstream out(args.output);
  KILN_CHECK_VALUE(out.good(), "cannot write '", args.output, "'");
  out << dot;
  out.close();
  KILN_CHECK(!out.fail(), "writing '", args.output, "' failed");
  return 0;
}

// ---- the command line ----

struct Commands {
  CLI::App* info = nullptr;
  CLI::App* run = nullptr;
  CLI::App* bench = nullptr;
  CLI::App* dot = nullptr;
  InfoArgs info_args;
  RunArgs run_args;
  BenchArgs bench_args;
  DotArgs dot_args;
  CLI::Option* batch = nullptr;
  CLI::Option* iterations = nullptr;
  CLI::Option* warmup = nullptr;
};

void add_info(CLI::App& app, Commands& c) {
  c.info = app.add_subcommand("info", "Print what a model file holds and its memory plan");
  c.info->add_option("model", c.info_args.model, "the .kiln file")->required();
  c.info->add_flag("--graph", c.info_args.graph, "also print the graph as IR text");
}

void add_run(CLI::App& app, Commands& c) {
  c.run = app.add_subcommand("run", "Run a model on .npy inputs");
  RunArgs& a = c.run_args;
  c.run->add_option("model", a.model, "the .kiln file")->required();
  CLI::Option* input = c.run->add_option("-i,--input", a.inputs, "an input .npy file, in order")
                           ->allow_extra_args(false);
  c.run
      ->add_option("-o,--output", a.outputs,
                   "where to write an output (.npy), in order; "
                   "none: print the outputs")
      ->allow_extra_args(false);
  c.run->add_flag("--verify", a.verify, "replay the stored example and check it on load");
  c.run->add_flag("--example", a.example, "run the stored example input")->excludes(input);
}

void add_bench(CLI::App& app, Commands& c) {
  c.bench = app.add_subcommand("bench", "Time a model on random inputs");
  BenchArgs& a = c.bench_args;
  c.bench->add_option("model", a.model, "the .kiln file")->required();
  c.batch = c.bench->add_option("--batch", a.batch,
                                "batch size (default: the saved one; another re-batches a static "
                                "graph, and sets a symbolic one's first input dim)");
  c.bench
      ->add_option("--size", a.sizes,
                   "NAME=VALUE: a symbolic model's size symbol (default: the stored example's)")
      ->allow_extra_args(false);
  c.bench->add_option("--threads", a.threads, "intra-op threads")->capture_default_str();
  c.iterations = c.bench->add_option("--iterations", a.iterations,
                                     "timed calls (default: up to 1000, about 10 s at most)");
  c.warmup = c.bench->add_option("--warmup", a.warmup,
                                 "untimed calls first (default: up to 100, about 2 s at most)");
  c.bench->add_flag("--profile", a.profile,
                    "then profile up to 100 more calls and print the per-step table");
  c.bench->add_option("--trace", a.trace, "with --profile: write a Chrome trace (JSON) here");
}

void add_dot(CLI::App& app, Commands& c) {
  c.dot = app.add_subcommand("dot", "Print the graph in Graphviz DOT");
  c.dot->add_option("model", c.dot_args.model, "the .kiln file")->required();
  c.dot->add_option("-o,--output", c.dot_args.output, "write to this file (default: stdout)");
}

int dispatch(Commands& c) {
  if (*c.info) return run_info(c.info_args);
  if (*c.run) return run_model(c.run_args);
  if (*c.dot) return run_dot(c.dot_args);
  c.bench_args.batch_given = c.batch->count() > 0;
  c.bench_args.iterations_given = c.iterations->count() > 0;
  c.bench_args.warmup_given = c.warmup->count() > 0;
  return run_bench(c.bench_args);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: inspect, run and time .kiln model files", "kiln"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  Commands commands;
  add_info(app, commands);
  add_run(app, commands);
  add_bench(app, commands);
  add_dot(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return dispatch(commands);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
}
