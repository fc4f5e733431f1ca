// NumPy's .npy files, the inputs and outputs of `kiln run`:
//
//   "\x93NUMPY" major minor | header length (u16 in 1.0, u32 in 2.0/3.0) |
//   header: a Python dict literal {'descr': '<f4', 'fortran_order': False,
//   'shape': (1, 512), } padded with spaces to a multiple of 64 | raw data
//
// Reads float32/64, int32/64 and bool in either byte order and in C or
// Fortran order; writes version 1.0, C order, little-endian. A bad file
// raises kiln::Error naming it and what is wrong.
#pragma once

#include <string>

#include "kiln/core/tensor.h"

namespace kiln::io {

Tensor read_npy(const std::string& path);
// Parses .npy bytes already in memory; `name` names them in messages.
Tensor parse_npy(std::string_view bytes, const std::string& name);
void write_npy(const Tensor& tensor, const std::string& path);

}  // namespace kiln::io
