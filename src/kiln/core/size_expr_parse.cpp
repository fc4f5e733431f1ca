// parse_size_expr: the text form of size_expr.h, a recursive descent over
// Python's grammar for the operators it keeps:
//
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '//' | '%') unary)*
//   unary   := '-' unary | primary                 (-a // 2 is (-a) // 2)
//   primary := integer | identifier | '(' sum ')'
//            | ('max' | 'min') '(' sum (',' sum)+ ')'
//
// Every error names the text and a 0-based position; no input crashes it
// (nesting is bounded, integer literals are range checked).
#include <cstdint>
#include <string>

#include "kiln/core/size_expr.h"
#include "kiln/util/error.h"

namespace kiln {
namespace {

// Deeper nesting than any real size has; keeps hostile input off the stack limit.
constexpr int kMaxDepth = 200;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_ident_head(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  SizeExpr parse() {
    SizeExpr e = sum();
    skip_space();
    if (pos_ < text_.size()) fail(str("unexpected ", describe(pos_)), pos_);
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t at) const {
    throw_error(ErrorKind::Value,
                str("parse_size_expr: ", what, " at position ", at, " in '", text_, "'"));
  }

  std::string describe(size_t at) const {
    if (at >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[at]);
    const char* hex = "0123456789abcdef";
    if (c < 0x20 || c >= 0x7f) return str("byte 0x", hex[c >> 4], hex[c & 15]);
    return str("'", text_[at], "'");
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
  }

  // Consumes `token` (after spaces) when it comes next.
  bool eat(std::string_view token) {
    skip_space();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }

  void expect(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return;
    }
    fail(str("expected '", c, "' but found ", describe(pos_)), pos_);
  }

  SizeExpr sum() {
    SizeExpr e = product();
    while (true) {
      if (eat("+")) {
        e = e + product();
      } else if (eat("-")) {
        e = e - product();
      } else {
        return e;
      }
    }
  }

  SizeExpr product() {
    SizeExpr e = unary();
    while (true) {
      skip_space();
      if (eat("//")) {
        e = floordiv(e, divisor("//"));
      } else if (eat("/")) {
        fail("'/' is true division; sizes use floor division '//'", pos_ - 1);
      } else if (eat("**")) {
        fail("'**' is not supported in a size expression", pos_ - 2);
      } else if (eat("*")) {
        e = e * unary();
      } else if (eat("%")) {
        e = mod(e, divisor("%"));
      } else {
        return e;
      }
    }
  }

  // The right operand of // or %, which must be a positive constant.
  int64_t divisor(std::string_view op) {
    skip_space();
    size_t at = pos_;
    SizeExpr d = unary();
    if (!d.is_constant() || d.constant() <= 0) {
      fail(str("the divisor of '", op, "' must be a positive integer constant, got ", d), at);
    }
    return d.constant();
  }

  SizeExpr unary() {
    skip_space();
    if (++depth_ > kMaxDepth) fail(str("expression nested deeper than ", kMaxDepth), pos_);
    SizeExpr e = eat("-") ? -unary() : primary();
    --depth_;
    return e;
  }

  SizeExpr primary() {
    skip_space();
    size_t start = pos_;
    if (pos_ == text_.size()) fail("expected a size but found end of input", pos_);
    if (eat("(")) {
      SizeExpr e = sum();
      expect(')');
      return e;
    }
    if (is_digit(text_[pos_])) return integer();
    if (!is_ident_head(text_[pos_])) fail(str("expected a size but found ", describe(pos_)), pos_);
    while (pos_ < text_.size() && (is_ident_head(text_[pos_]) || is_digit(text_[pos_])))
      ++pos_;
    std::string_view name = text_.substr(start, pos_ - start);
    if (name != "max" && name != "min") return SizeExpr::symbol(name);
    return call(name, start);
  }

  // max(a, b, ...) or min(a, b, ...).
  SizeExpr call(std::string_view name, size_t start) {
    skip_space();
    if (pos_ >= text_.size() || text_[pos_] != '(') {
      fail(str("'", name, "' is a function: write ", name, "(a, b)"), start);
    }
    ++pos_;
    SizeExpr e = sum();
    int args = 1;
    while (eat(",")) {
      SizeExpr next = sum();
      e = name == "max" ? max(e, next) : min(e, next);
      ++args;
    }
    if (args < 2) fail(str("'", name, "' needs at least two arguments"), start);
    expect(')');
    return e;
  }

  SizeExpr integer() {
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && is_digit(text_[pos_])) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value)) {
        fail("integer literal is out of int64 range", start);
      }
      ++pos_;
    }
    if (pos_ < text_.size() && (is_ident_head(text_[pos_]))) {
      fail(str("unexpected ", describe(pos_), " after the number"), pos_);
    }
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

SizeExpr parse_size_expr(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace kiln
