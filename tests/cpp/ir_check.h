// LLVM-style IR tests: one file holds the input graph in the IR text form,
// a RUN line with kiln-opt's arguments, and CHECK lines the optimized
// graph's text must contain, in order:
//
//   # RUN: kiln-opt --passes=peephole,dce
//   graph(%x : f32[2]) {
//     %one : f32[] = const 1
//     %y = mul(%x, %one)
//     return (%y)
//   }
//   # CHECK:     graph(%x : f32[2])
//   # CHECK-NOT: mul
//   # CHECK:     return (%x)
//
// Every `#` line is a comment to the IR parser, so the whole file parses as
// the input graph. CHECK lines match output lines in order (each a
// substring of a later line than the previous match); CHECK-NEXT must match
// the line right after the previous match; a CHECK-NOT must match no line
// between the matches around it (or, last, up to the end).
#pragma once

#include <string>
#include <vector>

namespace kiln::jit {

enum class CheckKind { Check, CheckNext, CheckNot };

struct CheckLine {
  CheckKind kind;
  std::string text;
  int line = 0;  // in the test file, for messages
};

struct IrTestFile {
  std::string path;
  std::string text;               // the whole file: the parser skips the comments
  std::vector<std::string> args;  // the RUN line's arguments after "kiln-opt"
  std::vector<CheckLine> checks;
};

// Reads the RUN and CHECK lines of `text`; throws kiln::Error when the RUN
// line is missing or repeated, or when there is no CHECK line.
IrTestFile parse_ir_test(std::string text, std::string path = "");
IrTestFile read_ir_test(const std::string& path);

// "" when `output` satisfies `checks`, else what failed: the check, its
// line, and where in the output the search started.
std::string match_checks(const std::string& output, const std::vector<CheckLine>& checks);

}  // namespace kiln::jit
