// The .kiln model file: a compiled graph and its weights in one file that a
// C++ program loads and runs with no Python.
//
//   jit::save(traced, "mlp.kiln", {.example_inputs = {x}});   // C++ or traced.save() in Python
//   jit::CompiledFunction model = jit::load("mlp.kiln");       // callable from any thread
//   std::vector<Tensor> y = model({x});
//
// A graph with symbolic sizes (traced with dynamic shapes: `%x : f32[batch,
// 512]`) keeps them: the loaded model runs at any size its inputs bind, one
// plan per size (jit/compile/per_size_runner.h), and a call that breaks the
// graph's guards or shares a symbol inconsistently is an error naming the
// input, the dim and the values.
//
// Layout (little-endian; format version 1 or 2, see below):
//
//   offset 0   8 bytes  magic "\x89KILN\r\n\x1a\n" (PNG's trick: a text-mode
//                       transfer or a truncated first line changes it)
//          8   u32      format version
//         12   u32      reserved, 0
//         16   u64      header length H
//         24   u64      XXH3-64 of bytes [0, 24) followed by the header
//         32   H bytes  header, JSON: kiln_version, op_schema_version, the
//                       graph as IR text (printer.h), num_outputs,
//                       state_updates, metadata, one record per tensor
//                       (role, name, dtype, shape, offset, nbytes, xxh3),
//                       and from version 2 the graph's guards
//                       ({lhs, relation, rhs, reason}, sizes as IR text)
//   then, each at a multiple of 64 bytes: the raw tensors (parameters,
//   constants too large to print inline, the example inputs and outputs)
//
// Loading maps the file copy-on-write and the parameters are views of the
// mapping: nothing is copied, and peak memory is the file plus a small
// constant. Every length, offset, dtype, shape, element count, checksum, op
// name and attribute is checked before it is used; a bad file raises
// kiln::Error saying what is wrong and never crashes or over-allocates.
//
// Versions: 1 holds static graphs; 2 (issue 21) adds symbolic sizes in the
// graph text and the guards. A file is written in the oldest version that
// holds its graph, so a static model saved today still loads in a kiln that
// reads version 1 only; this kiln reads both.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/jit/compile/compiled.h"

namespace kiln::jit {

// The newest format version this kiln reads and writes.
inline constexpr uint32_t kModelFormatVersion = 2;

struct SaveOptions {
  // An input the file keeps with the outputs the model gives for it, which
  // load(path, {.verify = true}) replays and compares.
  std::vector<Tensor> example_inputs = {};
  // Free-form key/value pairs kept in the header (front ends keep the shape
  // of their outputs here, under keys starting with their name).
  std::map<std::string, std::string> metadata = {};
};

// Writes `compiled`'s graph (as optimized) and weights to `path`, atomically:
// on failure a file already at `path` stays as it was.
void save(const CompiledFunction& compiled, const std::string& path,
          const SaveOptions& options = {});

// A model file read and checked, with its weights mapped (not copied).
struct ModelFile {
  std::string path;
  uint32_t format_version = 0;
  int op_schema_version = 0;
  std::string kiln_version;  // of the kiln that wrote it
  std::shared_ptr<Graph> graph;
  size_t num_outputs = 0;
  std::vector<StateUpdate> state_updates;
  std::vector<Tensor> example_inputs, example_outputs;
  std::map<std::string, std::string> metadata;
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;  // parameters and constants
};

ModelFile read_model_file(const std::string& path);

struct LoadOptions {
  // Replay the example the file keeps and check the outputs match (within
  // rtol 1e-4, atol 1e-5: another machine's kernels may round differently).
  bool verify = false;
};

CompiledFunction load(const std::string& path, const LoadOptions& options = {});
// The same from a file already read.
CompiledFunction compile(const ModelFile& file, const LoadOptions& options = {});

}  // namespace kiln::jit
