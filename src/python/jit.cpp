// kiln._C.jit: tracing, compiled functions, the hybridize cache and the
// trace-warning handler, for kiln/jit (the Python package). The Python side
// only flattens a function's outputs to a list of tensors and rebuilds them:
// recording, compiling, the cache, its guards and strict mode are C++'s.
#include <chrono>

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "jit.h"
#include "kiln/jit/compile/compiled.h"
#include "kiln/jit/compile/hybridize.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/trace/recorder.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/op_threads.h"

namespace kiln::python {
namespace {

using jit::CompiledFunction;
using jit::HybridCache;

// (input, dim, symbol, min, max): a dim traced as a symbol, from
// kiln.jit.trace(..., dynamic_shapes=...).
using DynamicDimTuple =
    std::tuple<size_t, int64_t, std::string, std::optional<int64_t>, std::optional<int64_t>>;

std::vector<jit::DynamicDim> dynamic_dims_of(const std::vector<DynamicDimTuple>& tuples) {
  std::vector<jit::DynamicDim> dims;
  for (const auto& [input, dim, symbol, min, max] : tuples)
    dims.push_back(jit::DynamicDim{input, dim, symbol, min, max});
  return dims;
}

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

jit::CompileOptions compile_options(bool optimize, bool frozen, bool fast_math, bool exact,
                                    std::vector<std::string> passes) {
  return jit::CompileOptions{.optimize = optimize,
                             .frozen = frozen,
                             .exact = exact,
                             .fast_math = fast_math,
                             .passes = std::move(passes)};
}

// Calls a Python function taking a list of tensors and returning a list of
// tensors, with the GIL whichever thread calls it (a TracedFn's body).
std::vector<Tensor> call_traced(const nb::object& fn, const std::vector<Tensor>& inputs) {
  nb::gil_scoped_acquire gil;
  KILN_CHECK(!fn.is_none(), "compiled function: its Python function was cleared");
  return nb::cast<std::vector<Tensor>>(fn(inputs));
}

// The hybridize cache as Python holds it: the function and the parameter
// getter are Python objects the cache calls, kept here rather than inside
// the cache's std::functions so that Python's garbage collector can see them
// (tp_traverse below). A module's cache holds its bound forward, which holds
// the module: without that, the cycle module -> cache -> forward -> module
// would never be collected.
struct PythonHybridCache {
  nb::object fn;
  nb::object params;                   // None: no parameters
  std::unique_ptr<HybridCache> cache;  // its callables point at this object: never moved
  PythonHybridCache(nb::object f, nb::object p) : fn(std::move(f)), params(std::move(p)) {}
  PythonHybridCache(const PythonHybridCache&) = delete;
  PythonHybridCache& operator=(const PythonHybridCache&) = delete;
};

int hybrid_cache_traverse(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  PythonHybridCache* h = nb::inst_ptr<PythonHybridCache>(self);
  Py_VISIT(h->fn.ptr());
  Py_VISIT(h->params.ptr());
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int hybrid_cache_clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  PythonHybridCache* h = nb::inst_ptr<PythonHybridCache>(self);
  h->fn = nb::none();
  h->params = nb::none();
  return 0;
}

PyType_Slot hybrid_cache_slots[] = {{Py_tp_traverse, (void*)hybrid_cache_traverse},
                                    {Py_tp_clear, (void*)hybrid_cache_clear},
                                    {0, nullptr}};

HybridCache& cache_of(PythonHybridCache& h) {
  KILN_CHECK(h.cache != nullptr, "HybridCache: not initialized");
  return *h.cache;
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
// trace). Called with (kind, message, file, line, is_divergence, fatal); for
// a fatal one (strict mode) it raises, and the recording stops with that error.
void set_python_warning_handler(nb::object handler) {
  if (handler.is_none()) {
    jit::set_warning_handler({});
    return;
  }
  // The last copy of the handler may be dropped on a thread that released
  // the GIL (a compiled call warning while the handler is replaced): the
  // Python object is released with the GIL held.
  std::shared_ptr<nb::object> shared(new nb::object(std::move(handler)), [](nb::object* o) {
    nb::gil_scoped_acquire gil;
    delete o;
  });
  jit::set_warning_handler([shared](const jit::TraceWarning& w) {
    nb::gil_scoped_acquire gil;
    (*shared)(jit::to_string(w.kind), w.message, w.file, w.line, jit::is_divergence(w.kind),
              w.fatal);
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
            new (self) jit::Recorder(jit::RecordOptions{.strict = strict,
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

  nb::class_<jit::MemoryFormula>(m, "MemoryFormula")
      .def_prop_ro("peak", [](const jit::MemoryFormula& f) { return f.peak().to_string(); })
      .def_prop_ro("intermediates",
                   [](const jit::MemoryFormula& f) { return f.intermediates.to_string(); })
      .def_prop_ro("outputs", [](const jit::MemoryFormula& f) { return f.outputs.to_string(); })
      .def_ro("weights", &jit::MemoryFormula::weights)
      .def_prop_ro("symbols", [](const jit::MemoryFormula& f) { return f.peak().symbols(); })
      .def(
          "evaluate",
          [](const jit::MemoryFormula& f, const std::map<std::string, int64_t>& sizes) {
            return f.peak().evaluate(sizes);
          },
          nb::arg("sizes"), "The peak bytes (intermediates + outputs) at these sizes.")
      .def("__str__", &jit::MemoryFormula::to_string)
      .def("__repr__", &jit::MemoryFormula::to_string);

  nb::class_<CompiledFunction>(m, "CompiledFunction")
      .def(
          "__init__",
          [](CompiledFunction* self, jit::Capture capture, bool optimize, bool frozen,
             bool fast_math, bool exact, std::vector<std::string> passes) {
            // The passes rewrite the graph in place: a copy, so the Python
            // Capture (and what else was compiled from it) keeps its own.
            capture.graph = capture.graph->clone();
            new (self) CompiledFunction(
                std::move(capture), compile_options(optimize, frozen, fast_math, exact, passes));
          },
          nb::arg("capture"), nb::arg("optimize") = true, nb::arg("frozen") = false,
          nb::arg("fast_math") = false, nb::arg("exact") = false,
          nb::arg("passes") = std::vector<std::string>())
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
      .def_prop_ro("lowered_graph",
                   [](const CompiledFunction& f) {
                     return GraphRef{std::const_pointer_cast<jit::Graph>(f.lowered_graph()), true};
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
      .def_prop_ro("symbolic", &CompiledFunction::symbolic)
      .def("memory_formula", &CompiledFunction::memory_formula)
      .def("max_size_for", &CompiledFunction::max_size_for, nb::arg("bytes"),
           nb::arg("symbol") = "", nb::arg("others") = std::map<std::string, int64_t>())
      .def_prop_ro("warnings", [](const CompiledFunction& f) {
        std::vector<std::string> out;
        for (const jit::TraceWarning& w : f.warnings())
          out.push_back(w.message);
        return out;
      });

  nb::class_<jit::CacheInfo>(m, "CacheInfo")
      .def_ro("entries", &jit::CacheInfo::entries)
      .def_ro("hits", &jit::CacheInfo::hits)
      .def_ro("misses", &jit::CacheInfo::misses)
      .def("__str__", &jit::CacheInfo::to_string)
      .def("__repr__", &jit::CacheInfo::to_string);

  // The options of tracing and hybridize, as keyword arguments: the
  // recording's (strict, bind_outside_state, input_names) and the
  // compiler's (optimize, frozen, fast_math, exact, passes).
  m.def(
      "trace",
      [](nb::object fn, std::vector<Tensor> inputs, nn::NamedTensors params, bool strict,
         bool bind_outside_state, std::vector<std::string> input_names, bool optimize, bool frozen,
         bool fast_math, bool exact, std::vector<std::string> passes,
         std::vector<DynamicDimTuple> dynamic) {
        jit::RecordOptions record{.strict = strict,
                                  .params = std::move(params),
                                  .bind_outside_state = bind_outside_state,
                                  .input_names = std::move(input_names),
                                  .dynamic_dims = dynamic_dims_of(dynamic)};
        jit::TraceRun run = jit::trace_and_run(
            [&fn](const std::vector<Tensor>& in) { return call_traced(fn, in); }, std::move(inputs),
            std::move(record),
            compile_options(optimize, frozen, fast_math, exact, std::move(passes)));
        return std::make_pair(std::move(run.compiled), std::move(run.outputs));
      },
      nb::arg("fn"), nb::arg("inputs"), nb::arg("params"), nb::arg("strict") = false,
      nb::arg("bind_outside_state") = false, nb::arg("input_names") = std::vector<std::string>(),
      nb::arg("optimize") = true, nb::arg("frozen") = false, nb::arg("fast_math") = false,
      nb::arg("exact") = false, nb::arg("passes") = std::vector<std::string>(),
      nb::arg("dynamic_dims") = std::vector<DynamicDimTuple>());

  nb::class_<PythonHybridCache>(m, "HybridCache", nb::type_slots(hybrid_cache_slots))
      .def(
          "__init__",
          [](PythonHybridCache* self, std::string owner, nb::object fn, nb::object params,
             bool strict, bool bind_outside_state, std::vector<std::string> input_names,
             bool optimize, bool frozen, bool fast_math, bool exact,
             std::vector<std::string> passes, std::optional<bool> dynamic) {
            PythonHybridCache* h = new (self) PythonHybridCache(std::move(fn), std::move(params));
            jit::RecordOptions record{.strict = strict,
                                      .bind_outside_state = bind_outside_state,
                                      .input_names = std::move(input_names)};
            // The callables reach the Python objects through `h`, which
            // lives as long as the cache it owns.
            auto call_fn = [h](const std::vector<Tensor>& inputs) {
              return call_traced(h->fn, inputs);
            };
            HybridCache::ParamsFn call_params;
            if (!h->params.is_none()) {
              call_params = [h] {
                nb::gil_scoped_acquire gil;
                if (h->params.is_none()) return nn::NamedTensors();
                return nb::cast<nn::NamedTensors>(h->params());
              };
            }
            h->cache = std::make_unique<HybridCache>(
                std::move(owner), std::move(call_fn), std::move(record),
                compile_options(optimize, frozen, fast_math, exact, std::move(passes)),
                std::move(call_params),
                !dynamic ? jit::DynamicShapes::Automatic
                         : (*dynamic ? jit::DynamicShapes::Always : jit::DynamicShapes::Never));
          },
          nb::arg("owner"), nb::arg("fn"), nb::arg("params").none() = nb::none(),
          nb::arg("strict") = false, nb::arg("bind_outside_state") = false,
          nb::arg("input_names") = std::vector<std::string>(), nb::arg("optimize") = true,
          nb::arg("frozen") = false, nb::arg("fast_math") = false, nb::arg("exact") = false,
          nb::arg("passes") = std::vector<std::string>(), nb::arg("dynamic").none() = nb::none())
      // The hot path of a hybridized call: lookup and run in one call; None
      // on a miss, or when an argument is not a tensor.
      .def(
          "run",
          [](PythonHybridCache& h, nb::handle args,
             bool training) -> std::optional<std::vector<Tensor>> {
            std::optional<std::vector<Tensor>> inputs = tensors_of(args);
            if (!inputs) return std::nullopt;
            HybridCache& cache = cache_of(h);
            nb::gil_scoped_release no_gil;
            return cache.run_cached(*inputs, training);
          },
          nb::arg("args"), nb::arg("training"))
      // The miss: records the function on these inputs (runs it eagerly
      // inside another trace) and returns its flat outputs.
      .def(
          "record",
          [](PythonHybridCache& h, const std::vector<Tensor>& inputs, bool training) {
            return cache_of(h).record(inputs, training);
          },
          nb::arg("inputs"), nb::arg("training"))
      .def("info", [](PythonHybridCache& h) { return cache_of(h).info(); })
      .def("__len__", [](PythonHybridCache& h) { return cache_of(h).size(); })
      .def("clear", [](PythonHybridCache& h) { cache_of(h).clear(); })
      // A Python value the entries were recorded with changed: drop them.
      .def(
          "invalidate",
          [](PythonHybridCache& h, std::string reason) {
            cache_of(h).invalidate(std::move(reason));
          },
          nb::arg("reason"));

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

  // Note [Threads per step] (kiln/ops/op_threads.h): "choose" (small
  // steps on one thread) or "all", for graphs compiled from now on.
  m.def(
      "set_step_threads",
      [](const std::string& mode) {
        KILN_CHECK_VALUE(mode == "choose" || mode == "all", "set_step_threads: mode '", mode,
                         "' is not 'choose' or 'all'");
        set_step_threads(mode == "all" ? StepThreads::All : StepThreads::Choose);
      },
      nb::arg("mode"));
  m.def("get_step_threads",
        [] { return std::string(step_threads() == StepThreads::All ? "all" : "choose"); });

  bind_jit_graph(m);
}

}  // namespace kiln::python
