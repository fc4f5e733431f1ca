#include "kiln/ops/einsum_equation.h"

#include <algorithm>

#include "kiln/util/error.h"

namespace kiln::einsum_equation {
namespace {

int label_of_letter(char c) {
  return c <= 'Z' ? c - 'A' : c - 'a' + 26;
}

bool is_letter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

}  // namespace

std::string name_of(int label) {
  if (label >= kLetters) return "... (dim " + std::to_string(label - kLetters) + ")";
  return std::string(1, char(label < 26 ? 'A' + label : 'a' + label - 26));
}

bool contains(const Labels& labels, int label) {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

size_t position_of(const Labels& labels, int label) {
  return size_t(std::find(labels.begin(), labels.end(), label) - labels.begin());
}

// Character by character, with torch's messages.
Equation parse(const std::string& equation) {
  Equation eq;
  eq.inputs.emplace_back();
  Term* term = &eq.inputs.back();
  std::string term_name = "operand 0";
  for (size_t i = 0; i < equation.size(); ++i) {
    const char c = equation[i];
    if (c == ' ') continue;
    if (is_letter(c)) {
      term->letters.push_back(label_of_letter(c));
      continue;
    }
    if (c == '.') {
      KILN_CHECK(term->ellipsis_at < 0, "einsum(): found '.' for ", term_name,
                 " for which an ellipsis was already found");
      KILN_CHECK(equation.compare(i, 3, "...") == 0, "einsum(): found '.' for ", term_name,
                 " that is not part of any ellipsis");
      term->ellipsis_at = int(term->letters.size());
      i += 2;
      continue;
    }
    if (c == ',' && !eq.output) {
      eq.inputs.emplace_back();
      term = &eq.inputs.back();
      term_name = "operand " + std::to_string(eq.inputs.size() - 1);
      continue;
    }
    if (c == '-' && equation.compare(i, 2, "->") == 0 && !eq.output) {
      term = &eq.output.emplace();
      term_name = "the output";
      ++i;
      continue;
    }
    KILN_CHECK(false, "einsum(): invalid subscript given at index ", i,
               " in the equation string, subscripts must be in [a-zA-Z]");
  }
  return eq;
}

// How many dims the term's "..." stands for in an operand of `ndim` dims.
int64_t ellipsis_dims(const Term& term, int64_t ndim, size_t index) {
  const int64_t letters = int64_t(term.letters.size());
  if (term.ellipsis_at < 0) {
    KILN_CHECK(letters == ndim, "einsum(): the number of subscripts in the equation (", letters,
               ") does not match the number of dimensions (", ndim, ") for operand ", index,
               " and no ellipsis was given");
    return 0;
  }
  KILN_CHECK(letters <= ndim, "einsum(): the number of subscripts in the equation (", letters,
             ") is more than the number of dimensions (", ndim, ") for operand ", index);
  return ndim - letters;
}

// The ellipsis dims of every operand line up from the right, as broadcasting does.
Labels labels_of(const Term& term, int64_t own_ellipsis, int64_t all_ellipsis) {
  Labels labels;
  for (size_t j = 0; j <= term.letters.size(); ++j) {
    if (int(j) == term.ellipsis_at) {
      for (int64_t k = all_ellipsis - own_ellipsis; k < all_ellipsis; ++k)
        labels.push_back(kLetters + int(k));
    }
    if (j < term.letters.size()) labels.push_back(term.letters[j]);
  }
  return labels;
}

Labels ellipsis_labels(int64_t all_ellipsis) {
  Labels labels;
  for (int64_t k = 0; k < all_ellipsis; ++k)
    labels.push_back(kLetters + int(k));
  return labels;
}

// Explicit: the output term's letters (each once, each from an input), its
// "..." standing for every ellipsis dim. Implicit: the ellipsis dims, then
// the letters used exactly once, in ASCII order.
Labels output_labels(const Equation& eq, int64_t all_ellipsis) {
  std::vector<int> uses(kLetters, 0);
  for (const Term& term : eq.inputs) {
    for (int label : term.letters)
      ++uses[size_t(label)];
  }
  Labels out;
  if (!eq.output) {
    out = ellipsis_labels(all_ellipsis);
    for (int label = 0; label < kLetters; ++label) {
      if (uses[size_t(label)] == 1) out.push_back(label);
    }
    return out;
  }
  const Term& term = *eq.output;
  for (size_t j = 0; j <= term.letters.size(); ++j) {
    if (int(j) == term.ellipsis_at) {
      for (int label : ellipsis_labels(all_ellipsis))
        out.push_back(label);
    }
    if (j == term.letters.size()) break;
    const int label = term.letters[j];
    KILN_CHECK(!contains(out, label), "einsum(): output subscript ", name_of(label),
               " appears more than once in the output");
    KILN_CHECK(uses[size_t(label)] > 0, "einsum(): output subscript ", name_of(label),
               " does not appear in the equation for any input operand");
    out.push_back(label);
  }
  return out;
}

}  // namespace kiln::einsum_equation
