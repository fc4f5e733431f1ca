// How a recorded graph is compiled. The same names are the keyword
// arguments of Python's kiln.jit.trace, @kiln.compile and hybridize().
//
//   jit::trace(net, x, {}, {.frozen = true});         // inference: weights fold
//   jit::trace(net, x, {}, {.frozen = true, .exact = true});  // ... eager's bits
//   jit::hybridize(net, {}, {.fast_math = true});     // rounding may change
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/jit/passes/pipeline.h"

namespace kiln::jit {

struct CompileOptions {
  // Run the pass pipeline; off, the graph runs as recorded.
  bool optimize = true;
  // Parameters are read-only constants, so subgraphs of weights fold
  // (inference), and batch-norm folds into the convolution or linear
  // before it, which may change the last bits (the compile report lists
  // each fold) unless `exact`.
  bool frozen = false;
  // Keep eager's rounding in frozen graphs too (no batch-norm folding).
  bool exact = false;
  // Also the passes and rules that may change floating-point rounding.
  bool fast_math = false;
  // The passes to run, in order, instead of the default pipeline.
  std::vector<std::string> passes = {};

  // What the pass pipeline is given; nullopt when `optimize` is off.
  std::optional<PassOptions> pass_options() const {
    if (!optimize) return std::nullopt;
    PassOptions options;
    options.passes = passes;
    options.frozen = frozen;
    options.exact = exact;
    options.fast_math = fast_math;
    return options;
  }
};

}  // namespace kiln::jit
