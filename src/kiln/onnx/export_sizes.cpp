// Symbolic sizes in an exported ONNX graph (issue 21): a size such as
// `batch`, `seq // 2` or `2*batch*seq` is computed in the graph from the
// shapes of the inputs, as torch.onnx does for dynamic axes:
//
//   batch      -> Gather(Shape(x), [0])                    (x : f32[batch, seq, 16])
//   seq // 2   -> Div(Sub(s, Mod(s, 2)), 2)  with s = Gather(Shape(x), [1])
//
// Every size is a 1-D int64 tensor of one element, so that sizes Concat into
// a Reshape or Expand target and serve as Slice bounds as they are.
//
// The expression is read from its text (SizeExpr::to_string, which
// parse_size_expr reads back): core/size_expr.h keeps the canonical form to
// itself, and the text is its documented, stable form.
#include <cctype>

#include "kiln/onnx/export_context.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

// Python's grammar for the text form (core/size_expr.h): sums of products of
// unary terms; integers, symbols, max(...), min(...) and parentheses.
// Each rule writes the nodes computing its part and returns their output.
class SizeWriter {
 public:
  SizeWriter(ExportContext& c, std::string_view text) : c_(c), text_(text) {}

  std::string write() {
    std::string result = sum();
    skip_space();
    expect(at_ == text_.size(), "trailing text");
    return result;
  }

 private:
  std::string sum() {
    std::string left = product();
    for (;;) {
      if (take("+")) {
        left = c_.temp("Add", {left, product()});
      } else if (take("-")) {
        left = c_.temp("Sub", {left, product()});
      } else {
        return left;
      }
    }
  }

  std::string product() {
    std::string left = unary();
    for (;;) {
      if (take("*")) {
        left = c_.temp("Mul", {left, unary()});
      } else if (take("//")) {
        left = floor_divide(left, unary());
      } else if (take("%")) {
        left = c_.temp("Mod", {left, unary()});  // fmod=0: the sign of the divisor, as Python
      } else {
        return left;
      }
    }
  }

  std::string unary() {
    if (take("-")) return c_.temp("Neg", {unary()});
    return primary();
  }

  std::string primary() {
    skip_space();
    expect(at_ < text_.size(), "unexpected end");
    if (take("(")) {
      std::string inner = sum();
      expect(take(")"), "expected ')'");
      return inner;
    }
    char first = text_[at_];
    if (std::isdigit(static_cast<unsigned char>(first))) return c_.ints({number()});
    std::string name = identifier();
    expect(!name.empty(), "unexpected character");
    if (name != "max" && name != "min") return c_.symbol_size(name);
    expect(take("("), "expected '(' after " + name);
    std::vector<std::string> operands = {sum()};
    while (take(","))
      operands.push_back(sum());
    expect(take(")"), "expected ')'");
    return c_.temp(name == "max" ? "Max" : "Min", operands);
  }

  // ONNX's integer Div truncates; Python's // floors: a // b = (a - a % b) / b.
  std::string floor_divide(const std::string& a, const std::string& b) {
    std::string remainder = c_.temp("Mod", {a, b});
    return c_.temp("Div", {c_.temp("Sub", {a, remainder}), b});
  }

  int64_t number() {
    int64_t value = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      expect(value <= (INT64_MAX - 9) / 10, "number out of range");
      value = value * 10 + (text_[at_++] - '0');
    }
    return value;
  }

  std::string identifier() {
    size_t begin = at_;
    while (at_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[at_])) || text_[at_] == '_'))
      ++at_;
    return std::string(text_.substr(begin, at_ - begin));
  }

  void skip_space() {
    while (at_ < text_.size() && text_[at_] == ' ')
      ++at_;
  }

  bool take(std::string_view token) {
    skip_space();
    if (text_.substr(at_, token.size()) != token) return false;
    at_ += token.size();
    return true;
  }

  void expect(bool ok, const std::string& what) const {
    KILN_CHECK(ok, "onnx export: cannot read the size expression '", text_, "' (", what,
               " at position ", at_, ")");
  }

  ExportContext& c_;
  std::string_view text_;
  size_t at_ = 0;
};

}  // namespace

void ExportContext::add_symbol_source(const std::string& symbol, const std::string& input,
                                      int64_t dim) {
  symbol_sources_.try_emplace(symbol, SymbolSource{input, dim});
}

std::string ExportContext::symbol_size(const std::string& symbol) {
  auto known = size_names_.find(symbol);  // a size's text: a lone symbol is its name
  if (known != size_names_.end()) return known->second;
  auto source = symbol_sources_.find(symbol);
  KILN_CHECK(source != symbol_sources_.end(), "onnx export: the size ", symbol,
             " is no input's dim by itself, so the exported graph cannot compute it");
  std::string& shape = input_shapes_[source->second.input];
  if (shape.empty()) shape = temp("Shape", {source->second.input});
  std::string out = temp("Gather", {shape, ints({source->second.dim})});
  size_names_.emplace(symbol, out);
  return out;
}

std::string ExportContext::size(const Dim& dim) {
  if (dim.is_static()) return ints({dim.static_value()});
  std::string text = dim.to_string();
  auto found = size_names_.find(text);
  if (found != size_names_.end()) return found->second;
  std::string name = SizeWriter(*this, text).write();
  size_names_.emplace(text, name);
  return name;
}

std::string ExportContext::sizes(const DimList& dims) {
  std::vector<std::string> pieces;
  std::vector<int64_t> run;  // static sizes not yet written
  for (const Dim& dim : dims) {
    if (dim.is_static()) {
      run.push_back(dim.static_value());
      continue;
    }
    if (!run.empty()) pieces.push_back(ints(run));
    run.clear();
    pieces.push_back(size(dim));
  }
  if (!run.empty() || pieces.empty()) pieces.push_back(ints(run));
  if (pieces.size() == 1) return pieces[0];
  pb::NodeProto* made = nullptr;
  std::string out = temp("Concat", pieces, &made);
  set_attr(*made, "axis", int64_t(0));
  return out;
}

}  // namespace kiln::onnx
