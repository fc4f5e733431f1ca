// kiln._C.io and the file functions of kiln._C.jit: .kiln model files and
// safetensors state dicts (kiln/io in C++; the Python package wraps them).
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "jit.h"
#include "kiln/io/model_file.h"
#include "kiln/io/npy.h"
#include "kiln/io/safetensors.h"

namespace kiln::python {

void bind_io(nb::module_& io, nb::module_& jit) {
  using Metadata = std::map<std::string, std::string>;
  jit.def(
      "save",
      [](const jit::CompiledFunction& compiled, const std::string& path,
         const std::vector<Tensor>& example_inputs, const Metadata& metadata) {
        nb::gil_scoped_release released;
        jit::save(compiled, path, {.example_inputs = example_inputs, .metadata = metadata});
      },
      nb::arg("compiled"), nb::arg("path"), nb::arg("example_inputs") = std::vector<Tensor>(),
      nb::arg("metadata") = Metadata());
  // The compiled model and the file's metadata.
  jit.def(
      "load",
      [](const std::string& path, bool verify) {
        nb::gil_scoped_release released;
        jit::ModelFile file = jit::read_model_file(path);
        return std::make_pair(jit::compile(file, {.verify = verify}), file.metadata);
      },
      nb::arg("path"), nb::arg("verify") = false);

  io.def(
      "save_safetensors",
      [](const nn::NamedTensors& tensors, const std::string& path, const Metadata& metadata) {
        nb::gil_scoped_release released;
        io::save_safetensors(tensors, path, metadata);
      },
      nb::arg("tensors"), nb::arg("path"), nb::arg("metadata") = Metadata());
  io.def(
      "load_safetensors",
      [](const std::string& path) {
        nb::gil_scoped_release released;
        io::SafeTensors loaded = io::load_safetensors(path);
        return std::make_pair(loaded.tensors, loaded.metadata);
      },
      nb::arg("path"));
  io.def("read_npy", &io::read_npy, nb::arg("path"));
  io.def("write_npy", &io::write_npy, nb::arg("tensor"), nb::arg("path"));
}

}  // namespace kiln::python
