// The program of a fused_elementwise op (fused_elementwise.cpp): elementwise
// ops of the table in order, each reading the fused op's inputs or earlier
// results. Text form: "sigmoid(%0) mul($0, %1)".
#pragma once

#include <string>
#include <vector>

#include "kiln/ops/op.h"

namespace kiln {

struct Operand {
  bool is_result = false;  // $index: an earlier instruction's result; else %index: an input
  size_t index = 0;
};

struct Instruction {
  const OpDef* op = nullptr;
  std::vector<Operand> operands;
  Attrs attrs;  // the op's defaults (only ops without attributes are fused)
};

struct Program {
  std::vector<Instruction> instructions;  // the last one's result is the output
};

// Parses (and caches, per thread) a program; errors name the program and
// what is wrong with it.
const Program& parse_program(const std::string& text);

}  // namespace kiln
