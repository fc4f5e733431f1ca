// The dependency engine from Python (kiln/_engine.py wraps it): the mode,
// synchronize, limits and stats, and the two hooks the engine asks of the
// bindings: the user's file and line for each async push (errors name it),
// and releasing the GIL while a sync point blocks (a worker freeing a NumPy
// array's memory, or running a Python callback, needs it; other Python
// threads go on).
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "convert.h"
#include "kiln/engine/engine.h"

namespace kiln::python {
namespace {

// The kiln package's directory, whose frames are not the user's.
PyObject* kiln_dir() {
  static PyObject* dir = [] {
    std::string file = nb::cast<std::string>(nb::module_::import_("kiln").attr("__file__"));
    return PyUnicode_FromString(file.substr(0, file.find_last_of('/') + 1).c_str());
  }();
  return dir;
}

struct SiteKey {
  PyCodeObject* code;
  int lasti;
  bool operator==(const SiteKey&) const = default;
};
struct SiteKeyHash {
  size_t operator()(const SiteKey& k) const {
    return std::hash<const void*>()(k.code) ^ (size_t(k.lasti) * 0x9E3779B97F4A7C15ull);
  }
};

// "train.py:42" for the frame's (code, instruction), made once per site and
// kept for the life of the process (the code object too, so its address is
// never reused for another). Keyed by the instruction, not the line: the
// line number is a walk of the line table, the dearest part of a push.
// Only called with the GIL held, which guards the map.
const char* interned_site(PyFrameObject* frame, PyCodeObject* code) {
  static auto* sites = new std::unordered_map<SiteKey, std::string, SiteKeyHash>();
  SiteKey key{code, PyFrame_GetLasti(frame)};
  auto it = sites->find(key);
  if (it != sites->end()) return it->second.c_str();
  Py_INCREF(code);
  std::string file = nb::cast<std::string>(nb::handle(code->co_filename));
  std::string site =
      file.substr(file.find_last_of('/') + 1) + ":" + std::to_string(PyFrame_GetLineNumber(frame));
  return sites->emplace(key, std::move(site)).first->second.c_str();
}

// The innermost Python frame outside kiln; "" on a thread without the GIL
// (autograd's backward, C++ threads).
const char* python_site() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return "";
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame) Py_INCREF(frame);
  const char* site = "";
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    bool is_kiln = PyUnicode_Tailmatch(code->co_filename, kiln_dir(), 0, PY_SSIZE_T_MAX, -1) == 1;
    if (!is_kiln) {
      site = interned_site(frame, code);
      Py_DECREF(code);
      Py_DECREF(frame);
      return site;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  return site;
}

void* release_gil() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return nullptr;
  return PyEval_SaveThread();
}

void restore_gil(void* token) {
  if (token) PyEval_RestoreThread(static_cast<PyThreadState*>(token));
}

nb::dict stats_dict() {
  engine::Stats s = engine::stats();
  nb::dict d;
  d["pushed"] = s.pushed;
  d["in_flight"] = s.in_flight;
  d["peak_in_flight"] = s.peak_in_flight;
  d["in_flight_bytes"] = s.in_flight_bytes;
  d["peak_in_flight_bytes"] = s.peak_in_flight_bytes;
  d["ran_inline"] = s.ran_inline;
  d["ran_by_waiting_caller"] = s.ran_by_waiting_caller;
  d["ran_with_every_thread"] = s.ran_with_every_thread;
  d["sync_waits"] = s.sync_waits;
  d["waiter_wakeups"] = s.waiter_wakeups;
  d["busy_fallbacks"] = s.busy_fallbacks;
  return d;
}

}  // namespace

void bind_engine(nb::module_& m) {
  engine::set_site_hook(python_site);
  engine::set_blocking_hooks({release_gil, restore_gil});
  m.def(
      "set_execution",
      [](const std::string& mode) { engine::set_execution(engine::parse_execution(mode)); },
      nb::arg("mode"));
  m.def("get_execution", [] { return std::string(engine::to_string(engine::execution())); });
  m.def("execution_in_effect",
        [] { return std::string(engine::to_string(engine::effective_execution())); });
  m.def("engine_usable_cores", &engine::usable_cores);
  m.def("set_engine_busy_fallback", &engine::set_busy_fallback, nb::arg("on"));
  m.def("engine_busy_fallback", &engine::busy_fallback);
  m.def("_engine_prefer_caller_for", &engine::prefer_caller_for, nb::arg("ms"));
  m.def("synchronize", &engine::synchronize);
  // At exit: let queued ops finish (their errors are no longer anyone's).
  m.def("_drain", [] {
    try {
      engine::synchronize();
    } catch (const std::exception&) {
    }
  });
  m.def("_wait_to_read", [](const Tensor& t) { t.wait_for_engine(); });
  m.def("set_num_interop_threads", &engine::set_num_interop_threads, nb::arg("num"));
  m.def("get_num_interop_threads", &engine::num_interop_threads);
  m.def(
      "set_engine_limits",
      [](int64_t max_ops, int64_t max_bytes, int64_t inline_bytes) {
        engine::set_limits({max_ops, max_bytes, inline_bytes});
      },
      nb::arg("max_ops"), nb::arg("max_bytes"), nb::arg("inline_bytes"));
  m.def("engine_limits", [] {
    engine::Limits l = engine::limits();
    return std::make_tuple(l.max_ops, l.max_bytes, l.inline_bytes);
  });
  m.def("engine_stats", &stats_dict);
  m.def("reset_engine_peak_stats", &engine::reset_peak_stats);
}

}  // namespace kiln::python
