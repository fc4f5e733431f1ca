// The pass pipeline: named graph-to-graph rewrites run in order, to a fixed
// point, with the verifier after each one (in tests and debug builds) and a
// report of what each did.
//
//   jit::PassReport report = jit::optimize(graph);              // the default pipeline
//   jit::optimize(graph, {.frozen = true});                     // inference: fold weights too
//   jit::optimize(graph, {.frozen = true, .exact = true});      // ... keeping eager's rounding
//   jit::optimize(graph, {.passes = {"peephole", "dce"}});      // just these, in this order
//   std::cerr << report.to_string();
//
// A pass is a free function `bool pass(Graph&, PassContext&)` returning
// whether it changed the graph; it is registered once by name with a flag
// saying whether it may change floating-point rounding. The default pipeline
// is an explicit list (default_pipeline_steps); its passes that may change
// rounding are marked fast-math only, so by default optimized graphs give
// eager's results bit for bit. One exception, for inference: frozen graphs
// fold batch-norm into the convolution or linear before it (as PyTorch's
// freeze and ONNX Runtime do), which may change the last bits; the report
// lists each fold, and `exact` keeps eager's rounding there too.
//
// Environment:
//   KILN_DUMP_IR=<pass>[,<pass>...]  print the IR after each run of these
//                                    passes to stderr ("all": after every pass)
//   KILN_VERIFY_PASSES=1 (or 0)      verify after every pass (or never); the
//                                    default verifies in builds without NDEBUG
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/jit/ir/graph.h"
#include "kiln/jit/passes/pass_report.h"

namespace kiln::jit {

struct PassOptions {
  // The passes to run, in order; empty: the default pipeline.
  std::vector<std::string> passes;
  // Fast-math: the default pipeline also holds the passes (and peephole
  // rules) that may change floating-point rounding. Passes named in
  // `passes` always run, but their rounding-changing rules only with this.
  bool fast_math = false;
  // For inference: parameters are read-only constants, so subgraphs of
  // parameters and constants fold (the state_dict keeps its parameters).
  bool frozen = false;
  // Frozen graphs keep eager's rounding: no pass that may change it runs
  // unless fast_math asks for it (batch-norm folding is then off).
  bool exact = false;
  // Rerun the whole list until no pass changes anything, at most this many
  // rounds (one rewrite often enables another: a fold makes a peephole match).
  int max_rounds = 8;
  // Constant folding leaves a node alone when its result would be larger
  // than this and larger than its inputs together (see constant_fold.cpp).
  int64_t fold_size_limit_bytes = int64_t(1) << 16;
  // Verify after every pass; the default comes from KILN_VERIFY_PASSES or,
  // without it, from the build (on without NDEBUG).
  bool verify = verify_passes_by_default();
  // The passes after which the IR is printed (KILN_DUMP_IR by default), and
  // where to (null: stderr).
  std::vector<std::string> dump_after = dump_ir_from_environment();
  std::ostream* dump_stream = nullptr;

  static bool verify_passes_by_default();
  static std::vector<std::string> dump_ir_from_environment();
};

// What a running pass may read and record.
class PassContext {
 public:
  explicit PassContext(const PassOptions& options) : options_(options) {}

  const PassOptions& options() const { return options_; }
  bool frozen() const { return options_.frozen; }
  bool fast_math() const { return options_.fast_math; }
  bool exact() const { return options_.exact; }

  // Counts one firing of a named rewrite under the pass now running.
  void count_rule(std::string_view rule, int64_t times = 1);
  // Notes something the pass chose not to do, with the reason (a fold
  // refused for size, ...); the report lists each distinct note once.
  void note(std::string_view text);

  // Used by the pipeline.
  void begin_pass(const std::string& name, size_t nodes_before);
  void end_pass(size_t nodes_after, double seconds, bool changed);
  PassReport& report() { return report_; }

 private:
  PassRecord& current();

  const PassOptions& options_;
  PassReport report_;
  size_t current_ = 0;
};

using PassFn = bool (*)(Graph& graph, PassContext& context);

struct PassInfo {
  std::string name;
  PassFn run = nullptr;
  std::string summary;  // one line, for --help and the report
  // Whether the pass may give results that differ from eager in the last
  // bits (reassociation, a reciprocal for a division).
  bool may_change_rounding = false;
};

class PassRegistry {
 public:
  // Checks the entry is complete and its name unused.
  void add(PassInfo info);
  const PassInfo* find(std::string_view name) const;
  // Throws naming the pass and listing the known ones.
  const PassInfo& get(std::string_view name) const;
  // In registration order (the default pipeline's order is its own list).
  const std::vector<PassInfo>& all() const { return passes_; }

 private:
  std::vector<PassInfo> passes_;
};

// The process-wide registry, holding the builtin passes (passes.h) on first
// use; another layer may add its own.
PassRegistry& pass_registry();

// One place in the default pipeline.
struct PipelineStep {
  std::string pass;
  // A pass that may change rounding: it runs only with fast_math...
  bool fast_math_only = false;
  // ...or, with this, also in frozen graphs that are not `exact`.
  bool frozen_unless_exact = false;
};

// The default pipeline, in order; pipeline.cpp says why each pass stands
// where it does.
const std::vector<PipelineStep>& default_pipeline_steps();

// The default pipeline's pass names, in order: its steps, the fast-math-only
// ones only with `fast_math` (or, frozen_unless_exact ones, frozen and not
// exact).
std::vector<std::string> default_pipeline(bool fast_math = false);
std::vector<std::string> default_pipeline(const PassOptions& options);

// Runs the passes of `options` over `graph`, in place. Throws kiln::Error
// when a pass name is unknown, or (naming the pass) when verification fails
// after a pass.
PassReport optimize(Graph& graph, const PassOptions& options = {});

// Runs these passes as optimize() does (the passes of `options` are not
// read): for passes that are not registered, and for tests.
PassReport run_passes(Graph& graph, const std::vector<const PassInfo*>& passes,
                      const PassOptions& options);

// Reads pass options from command-line style arguments, as kiln-opt and the
// IR test files' RUN lines write them:
//   --passes=a,b,c  --fast-math  --frozen  --exact  --max-rounds=N
// Throws kiln::Error naming an argument it does not know.
PassOptions pass_options_from_args(const std::vector<std::string>& args);

}  // namespace kiln::jit
