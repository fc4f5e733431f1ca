// State dicts in the safetensors layout, so other tools (the `safetensors`
// package, Hugging Face libraries, PyTorch through them) read kiln's weights
// and kiln reads theirs:
//
//   u64 N (little-endian) | N bytes of JSON header | raw tensor bytes
//   header: {"fc1.weight": {"dtype": "F32", "shape": [256, 512],
//            "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//
// Offsets count from the end of the header; tensors are packed in order
// without gaps, as the format requires. Loading maps the file and returns
// views of it where a tensor is aligned for its dtype (a copy otherwise).
#pragma once

#include <map>
#include <string>

#include "kiln/nn/module.h"

namespace kiln::io {

// Writes atomically: on failure a file already at `path` stays as it was.
// Names must be unique; tensors may be views (they are written contiguous).
void save_safetensors(const nn::NamedTensors& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});

struct SafeTensors {
  nn::NamedTensors tensors;  // in the order of their offsets
  std::map<std::string, std::string> metadata;
};

// Checks every record (dtype, shape, offsets in range, sizes matching, no
// overlap, no gap) and throws kiln::Error naming the file and what is wrong.
SafeTensors load_safetensors(const std::string& path);

}  // namespace kiln::io
