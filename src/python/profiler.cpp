// kiln._C.profiler: the recorder's sessions, events, averages and table
// (kiln/profiler in C++); kiln/profiler.py shapes them as torch.profiler.
// Times cross as microseconds (floats), as PyTorch's events give them.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "kiln/profiler/profiler.h"

namespace kiln::python {

namespace nb = nanobind;

namespace {

double us(int64_t ns) {
  return double(ns) / 1e3;
}

}  // namespace

void bind_profiler(nb::module_& m) {
  using profiler::Event;
  using profiler::EventAverage;
  using profiler::Profile;

  nb::class_<Event>(m, "Event")
      .def_ro("name", &Event::name)
      .def_prop_ro("kind", [](const Event& e) { return std::string(to_string(e.kind)); })
      .def_ro("thread", &Event::thread)
      .def_ro("depth", &Event::depth)
      .def_prop_ro("start_us", [](const Event& e) { return us(e.start_ns); })
      .def_prop_ro("duration_us", [](const Event& e) { return us(e.duration_ns); })
      .def_prop_ro("self_cpu_time_total", [](const Event& e) { return us(e.self_ns); })
      .def_prop_ro("cpu_time_total", [](const Event& e) { return us(e.duration_ns); })
      .def_ro("self_cpu_memory_usage", &Event::self_bytes)
      .def_ro("cpu_memory_usage", &Event::total_bytes)
      .def_ro("input_shapes", &Event::shapes)
      .def_ro("attributes", &Event::attributes)
      .def_ro("threads", &Event::threads)  // a compiled step's threads; 0: not recorded
      .def_prop_ro("queued_us",            // a queued op's kernel: when it was queued; else None
                   [](const Event& e) -> std::optional<double> {
                     if (e.queued_ns < 0) return std::nullopt;
                     return us(e.queued_ns);
                   });

  nb::class_<EventAverage>(m, "EventAverage")
      .def_ro("key", &EventAverage::name)
      .def_prop_ro("kind", [](const EventAverage& a) { return std::string(to_string(a.kind)); })
      .def_ro("input_shapes", &EventAverage::input_shapes)
      .def_ro("count", &EventAverage::calls)
      .def_prop_ro("self_cpu_time_total", [](const EventAverage& a) { return us(a.self_ns); })
      .def_prop_ro("cpu_time_total", [](const EventAverage& a) { return us(a.total_ns); })
      .def_prop_ro("cpu_time",
                   [](const EventAverage& a) { return us(a.total_ns) / double(a.calls); })
      .def_ro("self_cpu_memory_usage", &EventAverage::self_bytes)
      .def_ro("cpu_memory_usage", &EventAverage::total_bytes)
      .def_ro("threads_min", &EventAverage::threads_min)  // compiled steps; 0: not recorded
      .def_ro("threads_max", &EventAverage::threads_max);

  nb::class_<Profile>(m, "Profile")
      .def(
          "__init__",
          [](Profile* self, bool record_shapes, bool profile_memory) {
            new (self) Profile(profiler::RecorderOptions{record_shapes, profile_memory});
          },
          nb::arg("record_shapes") = false, nb::arg("profile_memory") = false)
      .def("stop", &Profile::stop)
      .def_prop_ro("stopped", &Profile::stopped)
      .def_prop_ro("events", &Profile::events, nb::rv_policy::reference_internal)
      .def("key_averages", &Profile::key_averages, nb::arg("group_by_input_shape") = false)
      .def("chrome_trace", &Profile::chrome_trace)
      .def("export_chrome_trace", &Profile::export_chrome_trace, nb::arg("path"));

  m.def(
      "table",
      [](const std::vector<EventAverage>& rows, const std::string& sort_by, int row_limit,
         bool profile_memory, size_t max_name_column_width, size_t max_shapes_column_width) {
        return profiler::table(rows, {sort_by, row_limit, profile_memory, max_name_column_width,
                                      max_shapes_column_width});
      },
      nb::arg("rows"), nb::arg("sort_by"), nb::arg("row_limit"), nb::arg("profile_memory"),
      nb::arg("max_name_column_width"), nb::arg("max_shapes_column_width"));
  m.def("recording", &profiler::recording);
  m.def("push_range", &profiler::push_range, nb::arg("name"));
  m.def("pop_range", &profiler::pop_range);
}

}  // namespace kiln::python
