#include "kiln/jit/ir/lexer.h"

#include <charconv>
#include <cmath>

#include "kiln/jit/ir/text_format.h"
#include "kiln/util/error.h"

namespace kiln::jit {

void throw_text_error(int line, int column, const std::string& message) {
  throw_error(ErrorKind::Value, str("IR text ", line, ":", column, ": ", message));
}

std::string Token::describe() const {
  switch (kind) {
    case TokenKind::End:
      return "end of text";
    case TokenKind::Ref:
      return "'%" + (quoted ? quote(text) : text) + "'";
    case TokenKind::String:
      return quote(text);
    default:
      return "'" + text + "'";
  }
}

namespace {

bool is_name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.';
}
bool is_digit(char ch) {
  return ch >= '0' && ch <= '9';
}
bool is_ident_start(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
bool is_number_char(char ch) {
  return is_name_char(ch) || ch == '+' || ch == '-';
}

int hex_value(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    for (;;) {
      skip_space_and_comments();
      Token token;
      token.line = line_;
      token.column = column_;
      token.begin = token.end = pos_;
      if (pos_ == text_.size()) {
        tokens.push_back(token);
        return tokens;
      }
      read_token(token);
      token.end = pos_;
      tokens.push_back(std::move(token));
    }
  }

 private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  char advance() {
    char ch = text_[pos_++];
    if (ch == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return ch;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw_text_error(line_, column_, message);
  }
  [[noreturn]] void fail_at(int line, int column, const std::string& message) const {
    throw_text_error(line, column, message);
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      char ch = peek();
      if (ch == '#') {
        while (pos_ < text_.size() && peek() != '\n')
          advance();
      } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
        advance();
      } else {
        return;
      }
    }
  }

  // `%` is the modulo of a size expression (`seq % 4`, `seq % (2)`) when its
  // divisor follows, after spaces unless it opens with '('; otherwise it
  // starts a Ref (`%4` is the value named 4).
  bool is_mod_operator() const {
    size_t ahead = 1;
    while (peek(ahead) == ' ' || peek(ahead) == '\t')
      ++ahead;
    return peek(ahead) == '(' || (ahead > 1 && is_digit(peek(ahead)));
  }

  void read_token(Token& token) {
    char ch = peek();
    if (ch == '%' && !is_mod_operator()) return read_ref(token);
    if (ch == '"') {
      token.kind = TokenKind::String;
      token.text = read_string();
      return;
    }
    bool signed_number = (ch == '-' || ch == '+') && is_name_char(peek(1));
    if (is_digit(ch) || signed_number) return read_run(token, TokenKind::Number, is_number_char);
    if (is_ident_start(ch)) return read_run(token, TokenKind::Ident, is_name_char);
    if (std::string_view("(){}[],:=<>!*/+-%").find(ch) != std::string_view::npos) {
      token.kind = TokenKind::Punct;
      token.text = std::string(1, advance());
      return;
    }
    fail("unexpected character " + quote(std::string(1, ch)));
  }

  void read_run(Token& token, TokenKind kind, bool (*accepts)(char)) {
    token.kind = kind;
    token.text += advance();
    while (pos_ < text_.size() && accepts(peek()))
      token.text += advance();
  }

  void read_ref(Token& token) {
    advance();  // '%'
    token.kind = TokenKind::Ref;
    if (peek() == '"') {
      token.quoted = true;
      token.text = read_string();
      return;
    }
    while (pos_ < text_.size() && is_name_char(peek()))
      token.text += advance();
    if (token.text.empty()) fail("expected a value name after '%'");
  }

  std::string read_string() {
    const int line = line_, column = column_;
    advance();  // opening quote
    std::string out;
    for (;;) {
      if (pos_ == text_.size() || peek() == '\n') fail_at(line, column, "unterminated string");
      if (peek() == '\\') {
        out += read_escape();
        continue;
      }
      char ch = advance();
      if (ch == '"') return out;
      out += ch;
    }
  }

  char read_escape() {
    const int line = line_, column = column_;
    advance();  // the backslash
    if (pos_ == text_.size()) fail("unterminated string");
    char ch = advance();
    switch (ch) {
      case '"':
      case '\\':
        return ch;
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'x': {
        int high = hex_value(peek()), low = hex_value(peek(1));
        if (high < 0 || low < 0) fail_at(line, column, "expected two hex digits after \\x");
        advance();
        advance();
        return char(high * 16 + low);
      }
    }
    fail_at(line, column, "unknown escape \\" + std::string(1, ch) + " in a string");
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

template <typename T>
std::optional<T> parse_exact(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::vector<Token> tokenize(std::string_view text) {
  return Lexer(text).run();
}

std::optional<int64_t> parse_int(std::string_view text) {
  return parse_exact<int64_t>(text);
}

std::optional<double> parse_double(std::string_view text) {
  return parse_exact<double>(text);
}

std::optional<float> parse_float(std::string_view text) {
  return parse_exact<float>(text);
}

}  // namespace kiln::jit
