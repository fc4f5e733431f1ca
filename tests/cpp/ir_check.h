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
// the input graph. CHECK lines match output lines in order (each somewhere
// in a later line than the previous match); CHECK-NEXT must match the line
// right after the previous match; a CHECK-NOT must match no line between
// the matches around it (or, last, up to the end).
//
// A CHECK line is literal text except for FileCheck's patterns:
//   [[NAME:regex]]  matches the regex and captures what it matched as NAME
//   [[NAME]]        matches exactly what NAME captured (on an earlier line,
//                   or earlier on the same line)
//   {{regex}}       matches the regex, capturing nothing
// (ECMAScript regexes), so a test names the values the printer numbers
// without pinning the numbers:
//   # CHECK: [[F:%[0-9]+]] : f32[4, 5] = fused_elementwise(%x, %c)
//   # CHECK: return ([[F]])
// Names hold for the rest of the file, until captured again; a CHECK-NOT
// may use a name but never defines one (it matches no line to capture
// from). A literal `[[` or `{{` is written `{{\[\[}}` or `{{\{\{}}`.
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
// line is missing or repeated, when there is no CHECK line, or when a
// CHECK line's pattern is malformed, holds a bad regex, uses a name no
// earlier line defines, or is a CHECK-NOT defining one (naming the line).
IrTestFile parse_ir_test(std::string text, std::string path = "");
IrTestFile read_ir_test(const std::string& path);

// Throws kiln::Error, as parse_ir_test does, for the first check whose
// pattern is not well formed; `path` is for the message.
void check_patterns(const std::vector<CheckLine>& checks, const std::string& path = "");

// "" when `output` satisfies `checks`, else what failed: the check, its
// line, the names it used with what they held, and where in the output the
// search started. Checks `checks` first, as check_patterns does.
std::string match_checks(const std::string& output, const std::vector<CheckLine>& checks);

}  // namespace kiln::jit
