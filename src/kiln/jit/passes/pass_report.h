// The compile report of the pass pipeline: per pass, how many nodes it saw
// and left, which rewrites fired how often, what it chose not to do and why,
// and the time it took. The answer to "what did the compiler do to my model?".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::jit {

// "0.042 ms": seconds as milliseconds with `decimals` decimals.
std::string format_ms(double seconds, int decimals = 3);

struct PassRecord {
  std::string name;
  size_t nodes_before = 0;  // before its first run
  size_t nodes_after = 0;   // after its last run
  int runs = 0;             // one per round of the pipeline
  int runs_changed = 0;     // runs that changed the graph
  double seconds = 0;       // all runs together
  // Rule name -> times it fired, in the order first fired.
  std::vector<std::pair<std::string, int64_t>> rules;
  // Things left undone and why, each once, in the order first noted.
  std::vector<std::string> notes;
};

struct PassReport {
  std::vector<PassRecord> passes;  // in pipeline order
  int rounds = 0;                  // passes through the whole list
  bool reached_fixed_point = false;
  size_t nodes_before = 0, nodes_after = 0;
  double seconds = 0;  // the whole pipeline, verification included

  const PassRecord* find(const std::string& pass) const;
  // How often `rule` fired, over all passes.
  int64_t count(const std::string& rule) const;
  // A table, one pass a line, its rules and notes indented under it:
  //   pass            nodes   runs  time
  //   constant_fold   12 -> 9    2  0.04 ms
  //     fold: add  3
  std::string to_string() const;
};

}  // namespace kiln::jit
