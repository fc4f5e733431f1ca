// kiln._C.jit: the recorder, compiled functions, the signature cache and the
// trace-warning handler, for kiln/jit (the Python package), which drives
// them: it records a Python forward with Recorder, wraps the capture in a
// CompiledFunction and keeps one per input signature in a SignatureCache.
#include <chrono>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "jit.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/trace/cache.h"
#include "kiln/jit/trace/compiled.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/ops/dispatch.h"

namespace kiln::python {
namespace {

using jit::CompiledFunction;
using jit::SignatureCache;

// The positional arguments of a call, when all are tensors.
std::optional<std::vector<Tensor>> tensors_of(nb::handle args) {
  std::vector<Tensor> out;
  for (nb::handle item : args) {
    if (!nb::isinstance<Tensor>(item)) return std::nullopt;
    out.push_back(nb::cast<const Tensor&>(item));
  }
  return out;
}

std::vector<Tensor> run_compiled(const CompiledFunction& f, const std::vector<Tensor>& inputs) {
  nb::gil_scoped_release no_gil;
  return f.run(inputs);
}

jit::PassOptions pass_options(bool frozen, bool fast_math, const std::vector<std::string>& passes) {
  jit::PassOptions options;
  options.frozen = frozen;
  options.allow_rounding_changes = fast_math;
  options.passes = passes;
  return options;
}

// A compiled function from a graph built or rewritten in Python: a copy, so
// that later edits of the Python graph do not reach it; verified first.
CompiledFunction from_graph(const GraphRef& ref, std::optional<size_t> num_outputs,
                            const CompiledFunction* like) {
  std::shared_ptr<jit::Graph> graph = ref.graph->clone();
  jit::verify(*graph);
  if (like) {
    KILN_CHECK_VALUE(graph->outputs().size() == like->graph().outputs().size(),
                     "with_graph: the graph has ", graph->outputs().size(),
                     " outputs, the compiled function's has ", like->graph().outputs().size());
    return CompiledFunction(graph, like->num_outputs(), like->state_updates());
  }
  size_t outputs = num_outputs.value_or(graph->outputs().size());
  KILN_CHECK_VALUE(outputs <= graph->outputs().size(), "from_graph: num_outputs ", outputs,
                   " but the graph has ", graph->outputs().size(), " outputs");
  // The first `outputs` are returned; the rest are dropped from the copy.
  std::vector<jit::Value*> kept(graph->outputs().begin(), graph->outputs().begin() + outputs);
  graph->set_outputs(std::move(kept));
  return CompiledFunction(graph, outputs);
}

nb::list pass_records(const jit::PassReport& report) {
  nb::list out;
  for (const jit::PassRecord& pass : report.passes) {
    nb::dict rules;
    for (const auto& [rule, count] : pass.rules)
      rules[rule.c_str()] = count;
    nb::dict record;
    record["name"] = pass.name;
    record["nodes_before"] = pass.nodes_before;
    record["nodes_after"] = pass.nodes_after;
    record["runs"] = pass.runs;
    record["runs_changed"] = pass.runs_changed;
    record["seconds"] = pass.seconds;
    record["rules"] = rules;
    record["notes"] = pass.notes;
    out.append(record);
  }
  return out;
}

// Hands trace warnings to a Python callable, taking the GIL: a warning may
// come from a thread that released it (a compiled call replayed inside a
// trace). Called with (kind, message, file, line, is_divergence).
void set_python_warning_handler(nb::object handler) {
  if (handler.is_none()) {
    jit::set_warning_handler({});
    return;
  }
  auto shared = std::make_shared<nb::object>(std::move(handler));
  jit::set_warning_handler([shared](const jit::TraceWarning& w) {
    nb::gil_scoped_acquire gil;
    (*shared)(jit::to_string(w.kind), w.message, w.file, w.line, jit::is_divergence(w.kind));
  });
}

}  // namespace

void bind_jit(nb::module_& m) {
  nb::class_<jit::Capture>(m, "Capture")
      .def_ro("num_outputs", &jit::Capture::num_outputs)
      .def_prop_ro("graph", [](const jit::Capture& c) {
        return GraphRef{c.graph, true};
      });

  nb::class_<jit::Recorder>(m, "Recorder")
      .def(
          "__init__",
          [](jit::Recorder* self, bool strict, std::vector<std::string> input_names,
             bool bind_outside_state) {
            new (self) jit::Recorder(jit::TraceOptions{.strict = strict,
                                                       .bind_outside_state = bind_outside_state,
                                                       .input_names = std::move(input_names)});
          },
          nb::arg("strict") = false, nb::arg("input_names") = std::vector<std::string>(),
          nb::arg("bind_outside_state") = false)
      .def("begin", &jit::Recorder::begin, nb::arg("inputs"), nb::arg("params"))
      .def("end", &jit::Recorder::end, nb::arg("outputs"))
      .def("abort", &jit::Recorder::abort)
      .def_prop_ro("recording", &jit::Recorder::recording);

  nb::class_<jit::CompileReport>(m, "CompileReport")
      .def_prop_ro("passes", [](const jit::CompileReport& r) { return pass_records(r.passes); })
      .def_prop_ro("rounds", [](const jit::CompileReport& r) { return r.passes.rounds; })
      .def_prop_ro("nodes_before",
                   [](const jit::CompileReport& r) { return r.passes.nodes_before; })
      .def_prop_ro("nodes_after", [](const jit::CompileReport& r) { return r.passes.nodes_after; })
      .def_prop_ro("reached_fixed_point",
                   [](const jit::CompileReport& r) { return r.passes.reached_fixed_point; })
      .def(
          "count",
          [](const jit::CompileReport& r, const std::string& rule) { return r.passes.count(rule); },
          nb::arg("rule"))
      .def_ro("planned_bytes", &jit::CompileReport::planned_bytes)
      .def_ro("unshared_bytes", &jit::CompileReport::unshared_bytes)
      .def_ro("steps", &jit::CompileReport::steps)
      .def_ro("record_seconds", &jit::CompileReport::record_seconds)
      .def_prop_ro("pass_seconds", [](const jit::CompileReport& r) { return r.passes.seconds; })
      .def_ro("lower_seconds", &jit::CompileReport::lower_seconds)
      .def_prop_ro("total_seconds", &jit::CompileReport::total_seconds)
      .def("__str__", &jit::CompileReport::to_string)
      .def("__repr__", &jit::CompileReport::to_string);

  nb::class_<CompiledFunction>(m, "CompiledFunction")
      .def(
          "__init__",
          [](CompiledFunction* self, jit::Capture capture, bool optimize, bool frozen,
             bool fast_math, std::vector<std::string> passes) {
            std::optional<jit::PassOptions> options;
            if (optimize) options = pass_options(frozen, fast_math, passes);
            // The passes rewrite the graph in place: a copy, so the Python
            // Capture (and what else was compiled from it) keeps its own.
            capture.graph = capture.graph->clone();
            new (self) CompiledFunction(std::move(capture), options);
          },
          nb::arg("capture"), nb::arg("optimize") = true, nb::arg("frozen") = false,
          nb::arg("fast_math") = false, nb::arg("passes") = std::vector<std::string>())
      .def_static(
          "from_graph",
          [](const GraphRef& graph, std::optional<size_t> num_outputs) {
            return from_graph(graph, num_outputs, nullptr);
          },
          nb::arg("graph"), nb::arg("num_outputs").none() = nb::none())
      .def(
          "with_graph",
          [](const CompiledFunction& self, const GraphRef& graph) {
            return from_graph(graph, std::nullopt, &self);
          },
          nb::arg("graph"))
      .def("run", &run_compiled, nb::arg("inputs"))
      .def_prop_ro("graph",
                   [](const CompiledFunction& f) {
                     return GraphRef{std::const_pointer_cast<jit::Graph>(f.shared_graph()), true};
                   })
      .def(
          "grad_graphs",
          [](const CompiledFunction& f, std::vector<Tensor> inputs) -> nb::object {
            std::shared_ptr<const jit::GradPlan> plan = f.grad_plan(inputs);
            if (!plan) return nb::none();
            auto ref = [](const std::shared_ptr<jit::Graph>& g) { return GraphRef{g, true}; };
            return nb::make_tuple(ref(plan->graphs.forward), ref(plan->graphs.backward));
          },
          nb::arg("inputs"))
      .def_prop_ro("num_outputs", &CompiledFunction::num_outputs)
      .def_prop_ro("report", &CompiledFunction::compile_report)
      .def_prop_ro("warnings", [](const CompiledFunction& f) {
        std::vector<std::string> out;
        for (const jit::TraceWarning& w : f.warnings())
          out.push_back(w.message);
        return out;
      });

  nb::class_<jit::Signature>(m, "Signature")
      .def("__str__", &jit::Signature::to_string)
      .def("__repr__", &jit::Signature::to_string);

  nb::class_<jit::CacheInfo>(m, "CacheInfo")
      .def_ro("entries", &jit::CacheInfo::entries)
      .def_ro("hits", &jit::CacheInfo::hits)
      .def_ro("misses", &jit::CacheInfo::misses)
      .def("__str__", &jit::CacheInfo::to_string)
      .def("__repr__", &jit::CacheInfo::to_string);

  nb::class_<SignatureCache>(m, "SignatureCache")
      .def(nb::init<std::string>(), nb::arg("owner"))
      // The hot path of a hybridized call: lookup and run in one call; None
      // on a miss, or when an argument is not a tensor.
      .def(
          "run",
          [](SignatureCache& cache, nb::handle args,
             bool training) -> std::optional<std::vector<Tensor>> {
            std::optional<std::vector<Tensor>> inputs = tensors_of(args);
            if (!inputs) return std::nullopt;
            nb::gil_scoped_release no_gil;
            return cache.run(*inputs, training);
          },
          nb::arg("args"), nb::arg("training"))
      .def(
          "insert",
          [](SignatureCache& cache, const jit::Signature& signature,
             const CompiledFunction& compiled) { cache.insert(signature, compiled); },
          nb::arg("signature"), nb::arg("compiled"))
      .def("info", &SignatureCache::info)
      .def("__len__", &SignatureCache::size)
      .def("clear", &SignatureCache::clear);

  m.def(
      "signature_of",
      [](const std::vector<Tensor>& inputs, bool training) {
        return jit::signature_of(inputs, training);
      },
      nb::arg("inputs"), nb::arg("training"));
  m.def("is_recording", [] { return dispatch_observer() != nullptr; });
  m.def("set_warning_handler", &set_python_warning_handler, nb::arg("handler").none());
  // For bench/: the same compiled function called `calls` times from a C++
  // loop, in seconds per call, to set beside the time per call from Python.
  m.def(
      "_seconds_per_call_from_cpp",
      [](const CompiledFunction& f, const std::vector<Tensor>& inputs, int64_t calls) {
        nb::gil_scoped_release no_gil;
        auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < calls; ++i)
          f.run(inputs);
        std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        return elapsed.count() / double(calls);
      },
      nb::arg("compiled"), nb::arg("inputs"), nb::arg("calls"));

  bind_jit_graph(m);
}

}  // namespace kiln::python
