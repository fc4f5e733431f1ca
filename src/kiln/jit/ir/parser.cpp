#include "kiln/jit/ir/parser.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "kiln/core/factory.h"
#include "kiln/jit/ir/lexer.h"
#include "kiln/jit/ir/text_format.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

// Deep enough for any tensor kiln can run; bounds the parser's recursion
// over constant data.
constexpr size_t kMaxRank = 64;

struct OutputDecl {
  Token ref;
  std::optional<TensorMeta> type;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(tokenize(text)) {}

  std::unique_ptr<Graph> run() {
    parse_graph();
    if (peek().kind != TokenKind::End) {
      fail(peek(), "expected the end of text after the graph, got ", peek().describe());
    }
    return std::move(graph_);
  }

 private:
  struct Definition {
    Value* value;
    int line, column;
  };

  // ---- tokens ----
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& token = peek();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  template <typename... Args>
  [[noreturn]] void fail(const Token& at, const Args&... message) const {
    throw_text_error(at.line, at.column, str(message...));
  }
  bool accept(char punct) {
    if (!peek().is(punct)) return false;
    next();
    return true;
  }
  void expect(char punct, const std::string& context) {
    if (accept(punct)) return;
    fail(peek(), "expected '", punct, "' ", context, ", got ", peek().describe());
  }
  const Token& expect_ref(const std::string& context) {
    if (peek().kind != TokenKind::Ref) {
      fail(peek(), "expected a value (%name) ", context, ", got ", peek().describe());
    }
    return next();
  }
  // Runs a Graph call, giving its error the position of `at`.
  template <typename Fn>
  auto at(const Token& token, Fn&& fn) {
    try {
      return fn();
    } catch (const Error& e) {
      fail(token, e.what());
    }
  }

  // ---- names ----
  // A quoted name that needs no quotes is the same value as the bare one;
  // a bare name of a generated form (%c0) never meets a quoted one (%"c0").
  static std::string key_of(const Token& ref) {
    if (!ref.quoted) return ref.text;
    return is_bare_name(ref.text) ? ref.text : quote(ref.text);
  }
  void define(const Token& ref, Value* value) {
    auto [it, inserted] = values_.emplace(key_of(ref), Definition{value, ref.line, ref.column});
    if (!inserted) {
      fail(ref, "redefinition of ", ref.describe(), " (first defined at ", it->second.line, ":",
           it->second.column, ")");
    }
  }
  Value* lookup(const Token& ref) const {
    auto it = values_.find(key_of(ref));
    if (it == values_.end()) fail(ref, "unknown value ", ref.describe());
    return it->second.value;
  }

  // ---- numbers and types ----
  int64_t expect_int(const std::string& what) {
    const Token& token = next();
    std::optional<int64_t> value;
    if (token.kind == TokenKind::Number) value = parse_int(token.text);
    if (!value) fail(token, "expected an integer for ", what, ", got ", token.describe());
    return *value;
  }
  static bool is_number_token(const Token& token) {
    return token.kind == TokenKind::Number || token.is_ident("nan") || token.is_ident("inf");
  }
  double expect_double(const std::string& what) {
    const Token& token = next();
    std::optional<double> value;
    if (is_number_token(token)) value = parse_double(token.text);
    if (!value) fail(token, "expected a number for ", what, ", got ", token.describe());
    return *value;
  }
  bool expect_bool(const std::string& what) {
    const Token& token = next();
    if (token.is_ident("true")) return true;
    if (token.is_ident("false")) return false;
    fail(token, "expected true or false for ", what, ", got ", token.describe());
  }
  DType expect_dtype(const std::string& what) {
    const Token& token = next();
    std::optional<DType> dtype;
    if (token.kind == TokenKind::Ident) dtype = dtype_from_name(token.text);
    if (!dtype) {
      fail(token, "expected a dtype (f32, f64, i32, i64, bool) for ", what, ", got ",
           token.describe());
    }
    return *dtype;
  }
  // A shape's dims are integers or size expressions: f32[batch, 2*seq, 512].
  TensorMeta parse_type() {
    TensorMeta type;
    type.dtype = expect_dtype("a value's type");
    expect('[', "to open the shape");
    if (accept(']')) return type;
    int64_t numel = 1;  // of the static dims
    do {
      const Token& at_dim = peek();
      Dim dim = parse_size("a dimension size");
      if (type.shape.size() == kMaxRank) fail(at_dim, "more than ", kMaxRank, " dimensions");
      if (dim.is_static()) {
        int64_t size = dim.static_value();
        if (size < 0) fail(at_dim, "a dimension size cannot be negative (got ", size, ")");
        if (__builtin_mul_overflow(numel, size, &numel)) fail(at_dim, "the shape is too large");
      }
      type.shape.push_back(std::move(dim));
    } while (accept(','));
    expect(']', "to close the shape");
    return type;
  }

  // ---- sizes ----
  // Whether `token` can continue a size expression with `depth` parentheses
  // open: a ',' or ')' then belongs to the expression (`max(a, b)`), at
  // depth 0 to what holds it (a shape, a list, the attributes).
  static bool continues_size(const Token& token, int depth) {
    if (token.kind == TokenKind::Ident || token.kind == TokenKind::Number) return true;
    if (token.kind != TokenKind::Punct) return false;
    if (token.is(',') || token.is(')')) return depth > 0;
    return std::string_view("(*/+-%").find(token.text[0]) != std::string_view::npos;
  }
  // Words of the text form that are never size symbols, so `dim=true` and
  // f32[nan] read as the mistakes they are.
  static bool is_reserved_word(const Token& token) {
    std::string_view word = token.text;
    if (token.kind == TokenKind::Number && (word[0] == '-' || word[0] == '+'))
      word.remove_prefix(1);
    return word == "true" || word == "false" || word == "None" || word == "none" || word == "nan" ||
           word == "inf";
  }
  // A Number token that is a number (`3`, `-1`, `0.5`) rather than a sign
  // before a name (`-batch`, which the lexer reads as one token).
  static bool is_numeral(const Token& token) {
    if (token.kind != TokenKind::Number) return false;
    size_t digit = token.text[0] == '-' || token.text[0] == '+' ? 1 : 0;
    return digit < token.text.size() && token.text[digit] >= '0' && token.text[digit] <= '9';
  }

  // One size: an integer, or a size expression over named symbols (`batch`,
  // `2*seq`, `(h - 3) // 2 + 1`, `max(a, b)`). The expression is read by
  // parse_size_expr from the source text its tokens cover; its errors point
  // at their line:column here.
  Dim parse_size(const std::string& what) {
    const Token& first = peek();
    size_t count = 0;
    for (int depth = 0; continues_size(peek(count), depth); ++count) {
      if (is_reserved_word(peek(count))) {
        fail(peek(count), "expected an integer or a size expression for ", what, ", got ",
             peek(count).describe());
      }
      depth += peek(count).is('(') ? 1 : peek(count).is(')') ? -1 : 0;
    }
    if (count == 1 && is_numeral(first)) {
      if (parse_int(first.text)) return expect_int(what);
      // `2-h` lexes as one Number; what is no expression either is a bad integer.
      try {
        Dim size(parse_size_expr(first.text));
        next();
        return size;
      } catch (const Error&) {
        return expect_int(what);
      }
    }
    if (count == 0) {
      fail(first, "expected an integer or a size expression for ", what, ", got ",
           first.describe());
    }
    const Token& last = peek(count - 1);
    std::string_view source = text_.substr(first.begin, last.end - first.begin);
    try {
      Dim size(parse_size_expr(source));
      pos_ += count;
      return size;
    } catch (const Error& e) {
      fail_in_size(first, source, e.what(), what);
    }
  }

  // Re-throws an error of parse_size_expr ("... at position 4 in 'h - '")
  // at the line:column of that position in `source`, which starts at `first`.
  [[noreturn]] void fail_in_size(const Token& first, std::string_view source,
                                 std::string_view message, const std::string& what) const {
    constexpr std::string_view kPrefix = "parse_size_expr: ", kAt = " at position ";
    if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
    size_t at = 0;
    // The first: the expression quoted after it cannot hold one before it.
    if (size_t p = message.find(kAt); p != std::string_view::npos) {
      for (size_t i = p + kAt.size(); i < message.size() && message[i] >= '0' && message[i] <= '9';
           ++i)
        at = at * 10 + size_t(message[i] - '0');
    }
    int line = first.line, column = first.column;
    for (size_t i = 0; i < std::min(at, source.size()); ++i) {
      if (source[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw_text_error(line, column, str("bad size expression for ", what, ": ", message));
  }

  // ---- graph(...) { ----
  void parse_header() {
    if (!peek().is_ident("graph")) fail(peek(), "expected 'graph', got ", peek().describe());
    next();
    expect('(', "after 'graph'");
    if (!accept(')')) {
      do {
        const Token& ref = expect_ref("as a graph input");
        expect(':', "after the input " + ref.describe());
        TensorMeta type = parse_type();
        // %in0 is how the printer shows an input without a name.
        std::string name = !ref.quoted && is_generated_name(ref.text) ? "" : ref.text;
        define(ref, graph_->add_input(type, name));
      } while (accept(','));
      expect(')', "after the graph inputs");
    }
    expect('{', "to open the graph body");
  }

  void parse_graph() {
    parse_header();
    while (!peek().is_ident("return"))
      parse_statement();
    parse_return();
  }

  // A control-flow node's sub-graph: a graph text of its own, with its own
  // names (a block is closed: it sees nothing of the enclosing graph).
  std::unique_ptr<Graph> parse_block(const OpDef& op, const std::string& block_name) {
    const Token& word = next();
    if (!word.is_ident(block_name)) {
      fail(word, "expected block '", block_name, "' of ", op.name, ", got ", word.describe());
    }
    std::unique_ptr<Graph> outer = std::move(graph_);
    auto outer_values = std::move(values_);
    graph_ = std::make_unique<Graph>();
    values_.clear();
    parse_graph();
    std::unique_ptr<Graph> block = std::move(graph_);
    graph_ = std::move(outer);
    values_ = std::move(outer_values);
    return block;
  }

  // ---- one line of the body ----
  void parse_statement() {
    if (peek().kind == TokenKind::End) fail(peek(), "expected 'return' before the end of text");
    if (peek().is_ident("guard") && !peek(1).is('(')) {
      next();
      return parse_guard();
    }
    if (peek().kind == TokenKind::Ident) return parse_node({});  // a node without outputs
    std::vector<OutputDecl> outputs;
    do {
      OutputDecl decl{expect_ref("at the start of a statement"), std::nullopt};
      if (accept(':')) decl.type = parse_type();
      outputs.push_back(std::move(decl));
    } while (accept(','));
    expect('=', "after the value names");
    const Token& word = peek();
    bool declaration = word.is_ident("param") || word.is_ident("const") || word.is_ident("number");
    if (declaration && !peek(1).is('(')) return parse_declaration(outputs, next());
    parse_node(std::move(outputs));
  }

  // `guard seq <= 128 "reason"`: == != < <= > >= between size expressions.
  void parse_guard() {
    SizeExpr lhs = parse_size("the left side of a guard").expr();
    const Token& first = next();
    std::string relation = first.text;
    if (peek().is('=') && (first.is('=') || first.is('!') || first.is('<') || first.is('>')))
      relation += next().text;
    using Relation = ShapeGuard::Relation;
    static const std::map<std::string, std::pair<Relation, bool>> kRelations = {
        {"==", {Relation::Eq, false}}, {"!=", {Relation::Ne, false}}, {"<", {Relation::Lt, false}},
        {"<=", {Relation::Le, false}}, {">", {Relation::Lt, true}},   {">=", {Relation::Le, true}}};
    auto found = kRelations.find(relation);
    if (first.kind != TokenKind::Punct || found == kRelations.end())
      fail(first, "expected == != < <= > or >= in a guard, got ", first.describe());
    SizeExpr rhs = parse_size("the right side of a guard").expr();
    auto [kind, swapped] = found->second;
    ShapeGuard guard{swapped ? rhs : lhs, swapped ? lhs : rhs, kind, ""};
    if (peek().kind == TokenKind::String) guard.reason = next().text;
    graph_->add_guard(std::move(guard));
  }

  void parse_declaration(const std::vector<OutputDecl>& outputs, const Token& word) {
    const OutputDecl& decl = outputs.front();
    if (outputs.size() != 1 || !decl.type) {
      fail(word, "a ", word.text, " declares one value with its type (%name : f32[2] = ", word.text,
           " ...)");
    }
    if (word.text == "param") {
      define(decl.ref, at(decl.ref, [&] { return graph_->add_param(decl.ref.text, *decl.type); }));
      return;
    }
    if (!is_static(decl.type->shape)) {
      fail(word, "a ", word.text, " has data, so its shape cannot be symbolic (",
           type_to_text(*decl.type), ")");
    }
    Tensor data = parse_data(*decl.type);
    define(decl.ref, graph_->add_constant(std::move(data), word.text == "number"));
  }

  // ---- constant data ----
  Tensor parse_data(const TensorMeta& type) {
    if (peek().is('<')) {
      fail(peek(),
           "this constant's data was elided when printed; print the graph with "
           "PrintOptions::full to parse it back");
    }
    const IntList shape = to_static(type.shape);  // checked static by the caller
    std::vector<char> bytes;
    parse_elements(type, shape, 0, bytes);
    Tensor data = empty(shape, type.dtype);
    if (!bytes.empty()) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
    return data;
  }

  // Messages are built only on failure: a constant may have millions of
  // elements.
  void parse_elements(const TensorMeta& type, const IntList& shape, size_t dim,
                      std::vector<char>& bytes) {
    if (dim == shape.size()) return parse_element(type.dtype, bytes);
    const int64_t size = shape[dim];
    if (!accept('[')) {
      fail(peek(), "expected '[' to open dimension ", dim, " of a constant of type ",
           type_to_text(type), ", got ", peek().describe());
    }
    for (int64_t i = 0; i < size; ++i) {
      if (i > 0 && !accept(',')) {
        fail(peek(), "dimension ", dim, " of a constant of type ", type_to_text(type), " has ",
             size, " elements, got ", i);
      }
      parse_elements(type, shape, dim + 1, bytes);
    }
    if (!accept(']')) {
      fail(peek(), "dimension ", dim, " of a constant of type ", type_to_text(type), " has ", size,
           " elements; expected ']', got ", peek().describe());
    }
  }

  // The element `token` holds, if it is one of type T (in range).
  template <typename T>
  static std::optional<T> element_of(const Token& token) {
    if constexpr (std::is_same_v<T, bool>) {
      if (token.is_ident("true")) return true;
      if (token.is_ident("false")) return false;
      return std::nullopt;
    } else if constexpr (std::is_same_v<T, float>) {
      return is_number_token(token) ? parse_float(token.text) : std::nullopt;
    } else if constexpr (std::is_same_v<T, double>) {
      return is_number_token(token) ? parse_double(token.text) : std::nullopt;
    } else {
      std::optional<int64_t> value;
      if (token.kind == TokenKind::Number) value = parse_int(token.text);
      if (!value || *value != int64_t(T(*value))) return std::nullopt;
      return T(*value);
    }
  }

  void parse_element(DType dtype, std::vector<char>& bytes) {
    const Token& token = next();
    bool ok = visit_dtype(dtype, [&](auto tag) {
      std::optional<decltype(tag)> value = element_of<decltype(tag)>(token);
      if (!value) return false;
      const char* p = reinterpret_cast<const char*>(&*value);
      bytes.insert(bytes.end(), p, p + sizeof(*value));
      return true;
    });
    if (!ok) {
      fail(token, "expected a constant element of type ", short_name(dtype), ", got ",
           token.describe());
    }
  }

  // ---- nodes ----
  void parse_node(std::vector<OutputDecl> outputs) {
    const Token& name = next();
    if (name.kind != TokenKind::Ident) fail(name, "expected an op name, got ", name.describe());
    const OpDef* op = op_registry().find(name.text);
    if (!op) fail(name, "unknown op '", name.text, "'");
    std::vector<Value*> inputs = parse_inputs(*op);
    Attrs attrs = peek().is('{') ? parse_attrs(*op) : Attrs();
    Node* node = op->blocks.empty()
                     ? build_node(name, *op, std::move(inputs), attrs, outputs)
                     : build_control_flow(name, *op, std::move(inputs), attrs, outputs);
    for (size_t i = 0; i < outputs.size(); ++i)
      define(outputs[i].ref, node->output(i));
  }

  std::vector<Value*> parse_inputs(const OpDef& op) {
    std::vector<Value*> inputs;
    expect('(', "after the op name " + op.name);
    if (accept(')')) return inputs;
    do {
      if (peek().is_ident("none")) {
        next();
        inputs.push_back(nullptr);
      } else {
        inputs.push_back(lookup(expect_ref("or none as an input of " + op.name)));
      }
    } while (accept(','));
    expect(')', "after the inputs of " + op.name);
    return inputs;
  }

  Node* build_node(const Token& name, const OpDef& op, std::vector<Value*> inputs,
                   const Attrs& attrs, const std::vector<OutputDecl>& outputs) {
    size_t typed = 0;
    for (const OutputDecl& decl : outputs)
      typed += decl.type.has_value();
    // A node printed without outputs reads back without outputs (the
    // verifier says whether the op allows that).
    if (typed == outputs.size()) {
      std::vector<TensorMeta> types;
      for (const OutputDecl& decl : outputs)
        types.push_back(*decl.type);
      return at(name, [&] { return graph_->append_typed(op, std::move(inputs), attrs, types); });
    }
    if (typed != 0) fail(name, "give a type to every output of ", op.name, " or to none");
    Node* node = at(name, [&] { return graph_->append(op, std::move(inputs), attrs); });
    if (node->outputs().size() != outputs.size()) {
      fail(name, op.name, " gives ", node->outputs().size(), " outputs, the text names ",
           outputs.size());
    }
    return node;
  }

  // Its output types are written out: they come from the blocks, which the
  // verifier checks them against.
  Node* build_control_flow(const Token& name, const OpDef& op, std::vector<Value*> inputs,
                           const Attrs& attrs, const std::vector<OutputDecl>& outputs) {
    std::vector<TensorMeta> types;
    for (const OutputDecl& decl : outputs) {
      if (!decl.type) fail(decl.ref, "give a type to every output of ", op.name);
      types.push_back(*decl.type);
    }
    std::vector<std::unique_ptr<Graph>> blocks;
    for (const std::string& block_name : op.blocks)
      blocks.push_back(parse_block(op, block_name));
    return at(name, [&] {
      return graph_->append_with_blocks(op, std::move(inputs), attrs, types, std::move(blocks));
    });
  }

  Attrs parse_attrs(const OpDef& op) {
    Attrs attrs;
    expect('{', "to open the attributes of " + op.name);
    if (accept('}')) return attrs;
    do {
      const Token& name = next();
      if (name.kind != TokenKind::Ident) {
        fail(name, "expected an attribute name of ", op.name, ", got ", name.describe());
      }
      auto spec = std::find_if(op.attrs.begin(), op.attrs.end(),
                               [&](const AttrSpec& s) { return s.name == name.text; });
      if (spec == op.attrs.end()) fail(name, op.name, " has no attribute '", name.text, "'");
      for (const auto& item : attrs.items()) {
        if (item.first == name.text) fail(name, "attribute '", name.text, "' given twice");
      }
      expect('=', "after the attribute name " + name.text);
      attrs.set(name.text, parse_attr_value(op, *spec));
    } while (accept(','));
    expect('}', "after the attributes of " + op.name);
    return attrs;
  }

  AttrValue parse_attr_value(const OpDef& op, const AttrSpec& spec) {
    const std::string what = str("attribute '", spec.name, "' of ", op.name);
    if (peek().is_ident("None")) {
      if (!spec.optional) fail(peek(), what, " cannot be None");
      next();
      return std::monostate{};
    }
    switch (spec.kind) {
      case AttrKind::Bool:
        return expect_bool(what);
      case AttrKind::Int:  // `end=seq // 2` in a graph with symbolic sizes
        return canonical_attr(parse_size(what));
      case AttrKind::Float:
        return expect_double(what);
      case AttrKind::Ints:  // `shape=[batch, -1]`
        return canonical_attr(parse_size_list(what));
      case AttrKind::DType:
        return expect_dtype(what);
      case AttrKind::String:
        break;
    }
    const Token& token = next();
    if (token.kind != TokenKind::String) {
      fail(token, "expected a quoted string for ", what, ", got ", token.describe());
    }
    return token.text;
  }

  DimList parse_size_list(const std::string& what) {
    DimList values;
    expect('[', "to open the list of " + what);
    if (accept(']')) return values;
    do {
      values.push_back(parse_size(what));
    } while (accept(','));
    expect(']', "to close the list of " + what);
    return values;
  }

  // ---- return (...) } ----
  void parse_return() {
    const Token& word = next();
    std::vector<Value*> outputs;
    expect('(', "after 'return'");
    if (!accept(')')) {
      do {
        outputs.push_back(lookup(expect_ref("as a graph output")));
      } while (accept(','));
      expect(')', "after the graph outputs");
    }
    at(word, [&] { graph_->set_outputs(std::move(outputs)); });
    expect('}', "to close the graph body");
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::unique_ptr<Graph> graph_ = std::make_unique<Graph>();
  std::unordered_map<std::string, Definition> values_;  // lookups only, never iterated
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text) {
  return Parser(text).run();
}

}  // namespace kiln::jit
