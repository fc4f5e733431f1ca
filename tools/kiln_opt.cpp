// kiln-opt: IR text in, passes, IR text out.
//
//   kiln-opt model.ir                          # the default pipeline
//   kiln-opt --passes=peephole,dce model.ir    # these passes, in this order
//   cat model.ir | kiln-opt --report -         # and what each pass did
//
// The pass options are the ones the IR test files' RUN lines use
// (pass_options_from_args), so a RUN line is a kiln-opt command. Output
// parses back: constants print in full and the report is '#' comments.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/jit/ir/parser.h"
#include "kiln/jit/ir/printer.h"
#include "kiln/jit/ir/verifier.h"
#include "kiln/jit/passes/pipeline.h"

namespace {

using kiln::jit::PassInfo;
using kiln::jit::PassOptions;
using kiln::jit::PipelineStep;

void print_help(std::ostream& os) {
  os << "usage: kiln-opt [options] [file | -]\n"
        "Reads a graph in kiln's IR text form (a file, or stdin for '-' or no\n"
        "file), runs graph passes over it, and prints the result as IR text.\n"
        "\n"
        "options:\n"
        "  --passes=a,b,c   run these passes in this order (default: the default pipeline)\n"
        "  --fast-math      allow passes and rules that may change floating-point rounding\n"
        "  --frozen         parameters are read-only: subgraphs of them fold\n"
        "                   (a graph read from text has no weights, so little folds)\n"
        "  --max-rounds=N   rerun the pass list at most N times (default 8)\n"
        "  --report         print what each pass did, as '#' comments after the graph\n"
        "  --help           print this help\n"
        "\n"
        "passes:\n";
  for (const PassInfo& pass : kiln::jit::pass_registry().all()) {
    os << "  " << pass.name << std::string(pass.name.size() < 18 ? 18 - pass.name.size() : 1, ' ')
       << pass.summary << (pass.may_change_rounding ? " (may change rounding)" : "") << "\n";
  }
  os << "\nthe default pipeline, in order (passes marked fast-math run only with --fast-math):\n  ";
  const char* separator = "";
  for (const PipelineStep& step : kiln::jit::default_pipeline_steps()) {
    os << std::exchange(separator, ", ") << step.pass
       << (step.fast_math_only ? " (fast-math)" : "");
  }
  os << "\n";
  os << "\nenvironment: KILN_DUMP_IR=<pass> prints the IR after that pass to stderr\n";
}

struct Command {
  std::vector<std::string> pass_args;  // for pass_options_from_args
  std::string input = "-";
  bool report = false;
  bool help = false;
};

Command parse_command(int argc, char** argv) {
  Command command;
  bool have_input = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      command.help = true;
    } else if (arg == "--report") {
      command.report = true;
    } else if (arg.starts_with("-") && arg != "-") {
      command.pass_args.push_back(arg);  // checked by pass_options_from_args
    } else {
      KILN_CHECK_VALUE(!have_input, "more than one input file ('", command.input, "' and '", arg,
                       "')");
      command.input = arg;
      have_input = true;
    }
  }
  return command;
}

std::string read_input(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream file(path);
  KILN_CHECK_VALUE(file.good(), "cannot read '", path, "'");
  text << file.rdbuf();
  return text.str();
}

void print_report_as_comments(const std::string& report) {
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);)
    std::cout << "# " << line << "\n";
}

int run(int argc, char** argv) {
  Command command = parse_command(argc, argv);
  if (command.help) {
    print_help(std::cout);
    return 0;
  }
  PassOptions options = kiln::jit::pass_options_from_args(command.pass_args);
  options.verify = true;  // a tool for looking at passes: always check their work
  std::unique_ptr<kiln::jit::Graph> graph = kiln::jit::parse_graph(read_input(command.input));
  kiln::jit::verify(*graph);
  kiln::jit::PassReport report = kiln::jit::optimize(*graph, options);
  std::cout << kiln::jit::to_text(*graph, {.full = true});
  if (command.report) print_report_as_comments(report.to_string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln-opt: error: " << e.what() << "\n(kiln-opt --help lists the options)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln-opt: error: " << e.what() << "\n";
    return 1;
  }
}
