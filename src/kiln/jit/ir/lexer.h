// Tokens of the IR text form (printer.h describes it). `#` starts a comment
// that runs to the end of the line, so pass tests can keep notes in IR text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jit {

enum class TokenKind {
  Ref,     // %name, %0, %"quoted name"; text holds the name, unescaped
  Ident,   // graph, relu, f32, true, None, nan, ...
  Number,  // 3, -2.5, 1e-05, -inf
  String,  // "text", unescaped
  // One of ( ) { } [ ] , : = < >, or an operator of a size expression
  // (`2*batch`, `(h - 3) // 2`, `seq % 4`): * / + - %. A + or - before a
  // name character starts a Number instead, and a % a Ref unless spaces and
  // then a digit or '(' follow it.
  Punct,
  End,
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;
  bool quoted = false;  // a Ref written %"..."
  int line = 1, column = 1;
  // Where the token lies in the text, as byte offsets [begin, end): the parser
  // reads a symbolic size from the source text the tokens of a dim cover.
  size_t begin = 0, end = 0;

  bool is(char punct) const {
    return kind == TokenKind::Punct && text.size() == 1 && text[0] == punct;
  }
  bool is_ident(std::string_view word) const { return kind == TokenKind::Ident && text == word; }
  // How the token reads in an error message: 'relu', '%x', end of text.
  std::string describe() const;
};

// Throws kiln::Error "IR text <line>:<column>: <message>".
[[noreturn]] void throw_text_error(int line, int column, const std::string& message);

// Splits `text` into tokens, ending with one End token. Throws kiln::Error
// naming line:column on a character or string that cannot start a token.
std::vector<Token> tokenize(std::string_view text);

// Exact conversions of a Number (or nan/inf Ident) token's text; nullopt when
// the text is not such a number or does not fit.
std::optional<int64_t> parse_int(std::string_view text);
std::optional<double> parse_double(std::string_view text);
std::optional<float> parse_float(std::string_view text);

}  // namespace kiln::jit
