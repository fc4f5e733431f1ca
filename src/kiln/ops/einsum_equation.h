// einsum's equation (torch.einsum's and ONNX Einsum's form): subscripts
// parsed into labels per dim, the ellipsis lined up across operands, and
// the output's labels. Shared by kiln::einsum (ops/einsum.cpp, on tensors)
// and the ONNX importer (onnx/import_einsum.cpp, on graph values). Errors
// are kiln::Error with torch's messages ("einsum(): ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::einsum_equation {

// A label per dim: 0..51 the letters in ASCII order (A-Z, then a-z), so that
// sorted labels are torch's implicit output order; kLetters + k the k-th dim
// of the broadcast ellipsis.
constexpr int kLetters = 52;
using Labels = std::vector<int>;
using LabelSet = std::vector<bool>;  // indexed by label

struct Term {
  Labels letters;
  int ellipsis_at = -1;  // where "..." stands among the letters, or -1
};

struct Equation {
  std::vector<Term> inputs;
  std::optional<Term> output;  // absent: no "->"
};

bool contains(const Labels& labels, int label);
size_t position_of(const Labels& labels, int label);
// "A".."z", or "... (dim k)" for the k-th ellipsis dim.
std::string name_of(int label);
// Character by character, with torch's messages.
Equation parse(const std::string& equation);
// How many dims the term's "..." stands for in operand `index` of `ndim` dims.
int64_t ellipsis_dims(const Term& term, int64_t ndim, size_t index);
// The labels of an operand: its "..." stands for its own count of dims,
// lined up from the right across operands (as broadcasting does).
Labels labels_of(const Term& term, int64_t own_ellipsis, int64_t all_ellipsis);
Labels ellipsis_labels(int64_t all_ellipsis);
// Explicit: the output term's letters (each once, each from an input), its
// "..." standing for every ellipsis dim. Implicit: the ellipsis dims, then
// the letters used exactly once, in ASCII order.
Labels output_labels(const Equation& eq, int64_t all_ellipsis);

}  // namespace kiln::einsum_equation
