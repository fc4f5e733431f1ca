#include "ir_check.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

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
  // A misspelled directive (CHECK-NOTE, RUNS) is one, so that it is refused
  // rather than read as a comment and a check silently lost.
  return name.starts_with("RUN") || name.starts_with("CHECK");
}

bool is_known_directive(const std::string& name) {
  return name == "RUN" || name == "CHECK" || name == "CHECK-NEXT" || name == "CHECK-NOT";
}

const char* kind_name(CheckKind kind) {
  return kind == CheckKind::Check       ? "CHECK"
         : kind == CheckKind::CheckNext ? "CHECK-NEXT"
                                        : "CHECK-NOT";
}

// "tests/passes/a.ir:12", or "line 12" without a path.
std::string where(const std::string& path, int line) {
  return path.empty() ? str("line ", line) : str(path, ":", line);
}

// ---- patterns: a CHECK line's text split at [[...]] and {{...}}

struct Piece {
  enum class Kind { Literal, Regex, Define, Use } kind;
  std::string text;     // Literal: the text; Regex, Define: the regex
  std::string name;     // Define, Use
  unsigned groups = 0;  // Regex, Define: the capture groups inside the regex
};

// Where the regex starting at `from` ends: the first `close` ("]]" or
// "}}") that is not escaped, inside a bracket expression, or closing a
// {n,m} count, so `[[N:[0-9]]]` and `{{x{2}}}` end where they should.
size_t regex_end(std::string_view text, size_t from, std::string_view close) {
  bool in_class = false;
  int braces = 0;
  for (size_t i = from; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (braces == 0 && text.substr(i, 2) == close) {
      return i;
    } else if (c == '[') {
      in_class = true;
    } else if (c == '{') {
      ++braces;
    } else if (c == '}' && braces > 0) {
      --braces;
    }
  }
  return std::string_view::npos;
}

bool is_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// The capture groups in `regex`; throws naming `pattern` when it is no regex.
unsigned groups_of(const std::string& regex, std::string_view pattern) {
  KILN_CHECK_VALUE(!regex.empty(), "empty regex in '", pattern, "'");
  try {
    return unsigned(std::regex(regex).mark_count());
  } catch (const std::regex_error& e) {
    KILN_CHECK_VALUE(false, "bad regex '", regex, "' in '", pattern, "': ", e.what());
  }
  return 0;
}

// [[NAME:regex]] or [[NAME]], the text between the brackets.
Piece name_piece(std::string_view inner, std::string_view pattern) {
  size_t colon = inner.find(':');
  std::string_view name = inner.substr(0, colon);
  KILN_CHECK_VALUE(is_name(name), "bad name '", name, "' in '", pattern,
                   "' (letters, digits and '_', not starting with a digit)");
  if (colon == std::string_view::npos) return {Piece::Kind::Use, "", std::string(name)};
  std::string regex(inner.substr(colon + 1));
  unsigned groups = groups_of(regex, pattern);
  return {Piece::Kind::Define, regex, std::string(name), groups};
}

// Throws kiln::Error (without the line: the caller adds it) when `text` is
// not well formed.
std::vector<Piece> pieces_of(std::string_view text) {
  std::vector<Piece> pieces;
  std::string literal;
  size_t i = 0;
  while (i < text.size()) {
    std::string_view open = text.substr(i, 2);
    if (open != "[[" && open != "{{") {
      literal += text[i++];
      continue;
    }
    std::string_view close = open == "[[" ? "]]" : "}}";
    size_t end = regex_end(text, i + 2, close);
    KILN_CHECK_VALUE(end != std::string_view::npos, "'", open, "' without a closing '", close,
                     "' in '", text.substr(i), "'");
    std::string_view pattern = text.substr(i, end + 2 - i);
    std::string_view inner = text.substr(i + 2, end - i - 2);
    if (!literal.empty()) pieces.push_back({Piece::Kind::Literal, std::exchange(literal, "")});
    if (open == "[[") {
      pieces.push_back(name_piece(inner, pattern));
    } else {
      std::string regex(inner);
      unsigned groups = groups_of(regex, pattern);
      pieces.push_back({Piece::Kind::Regex, regex, "", groups});
    }
    i = end + 2;
  }
  if (!literal.empty()) pieces.push_back({Piece::Kind::Literal, literal});
  return pieces;
}

// What one check looks for, its names resolved.
struct Compiled {
  std::regex regex;
  std::vector<std::pair<std::string, size_t>> defines;  // name, capture group
  std::string used;  // ", with F = '%0'": the names it used and what they held
};

std::string escape_regex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// `captures`: what each name defined on an earlier line captured last.
Compiled compile(const CheckLine& check, const std::map<std::string, std::string>& captures) {
  Compiled compiled;
  std::string source;
  std::map<std::string, size_t> here;  // names defined earlier on this line
  size_t group = 0;
  for (const Piece& piece : pieces_of(check.text)) {
    switch (piece.kind) {
      case Piece::Kind::Literal:
        source += escape_regex(piece.text);
        break;
      case Piece::Kind::Regex:
        source += "(?:" + piece.text + ")";
        group += piece.groups;
        break;
      case Piece::Kind::Define:
        here[piece.name] = ++group;
        compiled.defines.emplace_back(piece.name, group);
        source += "(" + piece.text + ")";
        group += piece.groups;
        break;
      case Piece::Kind::Use: {
        if (auto it = here.find(piece.name); it != here.end()) {
          source += str("(?:\\", it->second, ")");  // a backreference
          break;
        }
        auto it = captures.find(piece.name);
        KILN_ASSERT(it != captures.end(), "line ", check.line, ": '[[", piece.name,
                    "]]' uses a name no earlier CHECK line defines");
        source += escape_regex(it->second);
        compiled.used += str(", with ", piece.name, " = '", it->second, "'");
        break;
      }
    }
  }
  compiled.regex = std::regex(source);
  return compiled;
}

std::string describe(const CheckLine& check, const Compiled& compiled) {
  return str(kind_name(check.kind), " '", check.text, "' (line ", check.line, compiled.used, ")");
}

// A check compiled with the names captured so far; the matcher's state.
class Matcher {
 public:
  explicit Matcher(const std::vector<std::string>& lines) : lines_(lines) {}

  // The first line in [from, to) that `check` matches, or `to`; a match
  // records the names it defines.
  size_t find(const CheckLine& check, size_t from, size_t to) {
    Compiled compiled = compile(check, captures_);
    for (size_t i = from; i < to; ++i) {
      std::smatch match;
      if (!std::regex_search(lines_[i], match, compiled.regex)) continue;
      for (const auto& [name, group] : compiled.defines)
        captures_[name] = match[group].str();
      return i;
    }
    return to;
  }

  // Queues a CHECK-NOT, its names resolved now (a later line may capture
  // them again before it is checked).
  void expect_none(const CheckLine& check) { nots_.push_back({check, compile(check, captures_)}); }

  // "" when no queued CHECK-NOT matches a line in [from, to); clears them.
  std::string check_nots(size_t from, size_t to) {
    for (const auto& [check, compiled] : nots_) {
      for (size_t i = from; i < to; ++i) {
        if (std::regex_search(lines_[i], compiled.regex)) {
          return str(describe(check, compiled), " matched output line ", i + 1, ": ", lines_[i]);
        }
      }
    }
    nots_.clear();
    return "";
  }

  // For a failure message.
  std::string describe_check(const CheckLine& check) const {
    return describe(check, compile(check, captures_));
  }

 private:
  const std::vector<std::string>& lines_;
  std::map<std::string, std::string> captures_;
  std::vector<std::pair<CheckLine, Compiled>> nots_;  // waiting for the next match
};

}  // namespace

void check_patterns(const std::vector<CheckLine>& checks, const std::string& path) {
  std::set<std::string> defined;  // by the lines so far
  for (const CheckLine& check : checks) {
    std::vector<Piece> pieces;
    try {
      pieces = pieces_of(check.text);
    } catch (const Error& e) {
      throw Error(e.kind(), str(where(path, check.line), ": ", e.what()));
    }
    std::set<std::string> here;
    for (const Piece& piece : pieces) {
      if (piece.kind == Piece::Kind::Define) {
        KILN_CHECK_VALUE(check.kind != CheckKind::CheckNot, where(path, check.line),
                         ": a CHECK-NOT cannot define a name ('[[", piece.name, ":", piece.text,
                         "]]'): it matches no line to capture from");
        here.insert(piece.name);
      }
      if (piece.kind == Piece::Kind::Use) {
        KILN_CHECK_VALUE(defined.contains(piece.name) || here.contains(piece.name),
                         where(path, check.line), ": '[[", piece.name,
                         "]]' uses a name no earlier CHECK line defines");
      }
    }
    defined.insert(here.begin(), here.end());
  }
}

IrTestFile parse_ir_test(std::string text, std::string path) {
  IrTestFile file{.path = std::move(path), .text = std::move(text)};
  bool has_run = false;
  std::vector<std::string> lines = lines_of(file.text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string name, rest;
    if (!directive_of(lines[i], name, rest)) continue;
    const int line = int(i + 1);
    KILN_CHECK_VALUE(is_known_directive(name), where(file.path, line), ": unknown directive '",
                     name, "' (RUN, CHECK, CHECK-NEXT or CHECK-NOT)");
    if (name == "RUN") {
      KILN_CHECK_VALUE(!has_run, where(file.path, line), ": a second RUN line");
      has_run = true;
      file.args = split_words(rest);
      if (!file.args.empty() && file.args[0] == "kiln-opt") file.args.erase(file.args.begin());
      continue;
    }
    KILN_CHECK_VALUE(!rest.empty(), where(file.path, line), ": ", name, " with nothing to match");
    CheckKind kind = name == "CHECK"        ? CheckKind::Check
                     : name == "CHECK-NEXT" ? CheckKind::CheckNext
                                            : CheckKind::CheckNot;
    file.checks.push_back({kind, rest, line});
  }
  KILN_CHECK_VALUE(has_run, file.path, ": no '# RUN:' line");
  KILN_CHECK_VALUE(!file.checks.empty(), file.path, ": no CHECK line");
  check_patterns(file.checks, file.path);
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
  check_patterns(checks);
  const std::vector<std::string> lines = lines_of(output);
  Matcher matcher(lines);
  size_t next = 0;  // the first output line not yet passed
  for (const CheckLine& check : checks) {
    if (check.kind == CheckKind::CheckNot) {
      matcher.expect_none(check);
      continue;
    }
    size_t to =
        check.kind == CheckKind::CheckNext ? std::min(next + 1, lines.size()) : lines.size();
    size_t hit = matcher.find(check, next, to);
    if (hit == to) {
      return str(matcher.describe_check(check), " not found from output line ", next + 1,
                 next < lines.size() ? ": " + lines[next] : std::string(" (the end)"));
    }
    if (std::string failed = matcher.check_nots(next, hit); !failed.empty()) return failed;
    next = hit + 1;
  }
  return matcher.check_nots(next, lines.size());
}

}  // namespace kiln::jit
