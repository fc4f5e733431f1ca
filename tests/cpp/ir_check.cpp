#include "ir_check.h"

#include <fstream>
#include <sstream>

#include "kiln/util/error.h"

namespace kiln::jit {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::string trim(std::string_view s) {
  size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  size_t end = s.find_last_not_of(" \t\r");
  return std::string(s.substr(begin, end - begin + 1));
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

// The directive after '#' on `line` ("RUN", "CHECK", ...) and its text.
bool directive_of(const std::string& line, std::string& name, std::string& rest) {
  std::string t = trim(line);
  if (!t.starts_with("#")) return false;
  t = trim(std::string_view(t).substr(1));
  size_t colon = t.find(':');
  if (colon == std::string::npos) return false;
  name = t.substr(0, colon);
  rest = trim(std::string_view(t).substr(colon + 1));
  return name == "RUN" || name == "CHECK" || name == "CHECK-NEXT" || name == "CHECK-NOT";
}

std::string describe(const CheckLine& check) {
  const char* kind = check.kind == CheckKind::Check       ? "CHECK"
                     : check.kind == CheckKind::CheckNext ? "CHECK-NEXT"
                                                          : "CHECK-NOT";
  return str(kind, " '", check.text, "' (line ", check.line, ")");
}

// The first line in [from, to) containing `text`, or `to`.
size_t find_line(const std::vector<std::string>& lines, const std::string& text, size_t from,
                 size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (lines[i].find(text) != std::string::npos) return i;
  }
  return to;
}

// "" when no CHECK-NOT of `nots` occurs in output lines [from, to).
std::string check_nots(const std::vector<std::string>& lines, std::vector<CheckLine>& nots,
                       size_t from, size_t to) {
  for (const CheckLine& no : nots) {
    size_t hit = find_line(lines, no.text, from, to);
    if (hit != to) return str(describe(no), " matched output line ", hit + 1, ": ", lines[hit]);
  }
  nots.clear();
  return "";
}

}  // namespace

IrTestFile parse_ir_test(std::string text, std::string path) {
  IrTestFile file{.path = std::move(path), .text = std::move(text)};
  bool has_run = false;
  std::vector<std::string> lines = lines_of(file.text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string name, rest;
    if (!directive_of(lines[i], name, rest)) continue;
    const int line = int(i + 1);
    if (name == "RUN") {
      KILN_CHECK_VALUE(!has_run, file.path, ":", line, ": a second RUN line");
      has_run = true;
      file.args = split_words(rest);
      if (!file.args.empty() && file.args[0] == "kiln-opt") file.args.erase(file.args.begin());
      continue;
    }
    KILN_CHECK_VALUE(!rest.empty(), file.path, ":", line, ": ", name, " with nothing to match");
    CheckKind kind = name == "CHECK"        ? CheckKind::Check
                     : name == "CHECK-NEXT" ? CheckKind::CheckNext
                                            : CheckKind::CheckNot;
    file.checks.push_back({kind, rest, line});
  }
  KILN_CHECK_VALUE(has_run, file.path, ": no '# RUN:' line");
  KILN_CHECK_VALUE(!file.checks.empty(), file.path, ": no CHECK line");
  return file;
}

IrTestFile read_ir_test(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK_VALUE(in.good(), "cannot read IR test file ", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_ir_test(text.str(), path);
}

std::string match_checks(const std::string& output, const std::vector<CheckLine>& checks) {
  const std::vector<std::string> lines = lines_of(output);
  std::vector<CheckLine> nots;  // CHECK-NOTs waiting for the next match
  size_t next = 0;              // the first output line not yet passed
  for (const CheckLine& check : checks) {
    if (check.kind == CheckKind::CheckNot) {
      nots.push_back(check);
      continue;
    }
    size_t hit = check.kind == CheckKind::CheckNext
                     ? (next < lines.size() && lines[next].find(check.text) != std::string::npos
                            ? next
                            : lines.size())
                     : find_line(lines, check.text, next, lines.size());
    if (hit == lines.size()) {
      return str(describe(check), " not found from output line ", next + 1,
                 next < lines.size() ? ": " + lines[next] : std::string(" (the end)"));
    }
    if (std::string failed = check_nots(lines, nots, next, hit); !failed.empty()) return failed;
    next = hit + 1;
  }
  return check_nots(lines, nots, next, lines.size());
}

}  // namespace kiln::jit
