// TfIdfVectorizer's translation into kiln ops, for integer tokens: per row,
// how often each n-gram of the pool occurs (n-grams with up to
// max_skip_count tokens skipped between their items; unigrams counted once),
// weighted as the mode says (TF: counts, IDF: weight where present, TFIDF:
// counts times weights) and placed at the n-gram's output index.
//
// Each n-gram length and skip is one comparison of shifted copies of the
// row with the pool's n-grams of that length: [B, positions, pool] booleans,
// multiplied across the n items and summed over positions. The row is
// padded at the end with a token no n-gram holds, so every shift has the
// row's length, which may be symbolic.
#include <algorithm>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_context.h"
#include "kiln/onnx/import_util.h"
#include "kiln/util/error.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

Value* reshape_to(ImportContext& c, Value* x, const DimList& shape) {
  if (same_dims(x->shape(), shape)) return x;
  return c.emit("reshape", {x}, {{"shape", shape}});
}

// How often the pool's n-grams `grams` ([M, n], row-major) occur in `rows`
// ([B, C] int64, padded by `pad` never-matching tokens) with `skip` tokens
// between items: int64 [B, M].
Value* count_grams(ImportContext& c, Value* padded, const Dim& length, const IntList& grams,
                   int64_t n, int64_t skip) {
  const int64_t m = int64_t(grams.size()) / n;
  const Dim batch = padded->shape()[0];
  Value* all = nullptr;
  for (int64_t j = 0; j < n; ++j) {
    Value* shifted = c.emit("narrow", {padded},
                            {{"dim", int64_t(1)}, {"start", j * (skip + 1)}, {"length", length}});
    Tensor item = empty({m}, DType::Int64);
    for (int64_t k = 0; k < m; ++k)
      item.data<int64_t>()[k] = grams[size_t(k * n + j)];
    Value* match = c.emit("eq", {reshape_to(c, shifted, {batch, length, Dim(1)}),
                                 reshape_to(c, c.constant(item), {Dim(1), Dim(1), Dim(m)})});
    all = all ? c.emit("mul", {all, match}) : match;
  }
  Value* counts = c.emit("cast", {all}, {{"dtype", DType::Int64}});
  return c.emit("sum", {counts}, {{"dims", IntList{1}}, {"keepdim", false}});
}

void tfidf_vectorizer(const Node& node, ImportContext& c) {
  Value* x = c.input(node, 0);
  const std::string mode = attr_string(node, "mode", "");
  const int64_t min_n = attr_int(node, "min_gram_length", 0),
                max_n = attr_int(node, "max_gram_length", 0),
                max_skip = attr_int(node, "max_skip_count", 0);
  const IntList starts = attr_ints(node, "ngram_counts", {}),
                out_index = attr_ints(node, "ngram_indexes", {}),
                pool = attr_ints(node, "pool_int64s", {});
  KILN_CHECK(find_attr(node, "pool_strings") == nullptr && !pool.empty(),
             "onnx import: TfIdfVectorizer '", node.name(), "' with a pool of strings, which kiln ",
             "does not have (its tensors hold numbers)");
  KILN_CHECK((mode == "TF" || mode == "IDF" || mode == "TFIDF") && min_n >= 1 && max_n >= min_n &&
                 max_skip >= 0 && int64_t(starts.size()) >= max_n && !out_index.empty() &&
                 (rank_of(x) == 1 || rank_of(x) == 2) && !is_floating(x->dtype()),
             "onnx import: TfIdfVectorizer '", node.name(), "' with mode '", mode,
             "', gram lengths ", min_n, "..", max_n, ", ", starts.size(), " ngram_counts and ",
             "input ", to_string(x->shape()), " of ", x->dtype());
  std::vector<float> weights = {};
  if (const pb::AttributeProto* given = find_attr(node, "weights"))
    weights.assign(given->floats().begin(), given->floats().end());
  const bool rows = rank_of(x) == 2;
  const DimList& shape = x->shape();
  const DimList matrix = rows ? shape : DimList{Dim(1), shape[0]};  // [B, C]
  const Dim& batch = matrix[0];
  const Dim& length = matrix[1];
  Value* tokens = reshape_to(c, c.emit("cast", {x}, {{"dtype", DType::Int64}}), matrix);
  // A token no n-gram holds pads the row for the longest shift.
  const int64_t never = *std::min_element(pool.begin(), pool.end()) - 1;
  const int64_t longest = (max_n - 1) * (max_skip + 1);
  Value* padded = c.emit(
      "pad", {tokens},
      {{"pad", IntList{0, longest}}, {"mode", std::string("constant")}, {"value", double(never)}});
  std::vector<Value*> per_length;  // [B, M_n] counts, in the pool's order
  for (int64_t n = 1; n <= int64_t(starts.size()); ++n) {
    const int64_t begin = starts[size_t(n - 1)];
    const int64_t end = n < int64_t(starts.size()) ? starts[size_t(n)] : int64_t(pool.size());
    KILN_CHECK(begin >= 0 && begin <= end && end <= int64_t(pool.size()) && (end - begin) % n == 0,
               "onnx import: TfIdfVectorizer '", node.name(), "' ngram_counts ", starts,
               " do not cut its pool of ", pool.size(), " into ", n, "-grams");
    if (begin == end) continue;
    const IntList grams(pool.begin() + begin, pool.begin() + end);
    Value* counts = nullptr;
    if (n >= min_n && n <= max_n) {
      for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); ++skip) {
        Value* these = count_grams(c, padded, length, grams, n, skip);
        counts = counts ? c.emit("add", {counts, these}) : these;
      }
    } else {  // a length outside [min, max] counts nothing
      counts = c.emit("expand", {c.constant(full({1, 1}, int64_t(0), DType::Int64))},
                      {{"size", DimList{batch, Dim((end - begin) / n)}}});
    }
    per_length.push_back(counts);
  }
  Value* counts =
      per_length.size() == 1 ? per_length[0] : c.emit("cat", per_length, {{"dim", int64_t(1)}});
  const int64_t grams = counts->shape()[1].static_value();
  KILN_CHECK(
      int64_t(out_index.size()) == grams && (weights.empty() || int64_t(weights.size()) == grams),
      "onnx import: TfIdfVectorizer '", node.name(), "' has ", grams, " n-grams, ",
      out_index.size(), " ngram_indexes and ", weights.size(), " weights");
  Value* values = c.emit("cast", {counts}, {{"dtype", DType::Float32}});
  if (mode == "IDF")
    values =
        c.emit("cast", {c.emit("gt", {counts, c.constant(full({}, int64_t(0), DType::Int64))})},
               {{"dtype", DType::Float32}});
  if (mode != "TF" && !weights.empty()) {
    Tensor w = empty({grams}, DType::Float32);
    std::copy(weights.begin(), weights.end(), w.data<float>());
    values = c.emit("mul", {values, c.constant(w)});
  }
  // Each n-gram's value lands at its output index: a product with a 0/1 matrix.
  const int64_t width = *std::max_element(out_index.begin(), out_index.end()) + 1;
  Tensor place = full({grams, width}, 0.0, DType::Float32);
  for (int64_t k = 0; k < grams; ++k) {
    KILN_CHECK(out_index[size_t(k)] >= 0, "onnx import: TfIdfVectorizer '", node.name(),
               "' has a negative ngram_index");
    place.data<float>()[k * width + out_index[size_t(k)]] = 1.f;
  }
  Value* out = c.emit("matmul", {values, c.constant(place)});
  define(node, c, rows ? out : reshape_to(c, out, {Dim(width)}));
}

}  // namespace

void add_tfidf_importers(Table& table) {
  table["TfIdfVectorizer"] = tfidf_vectorizer;
}

}  // namespace kiln::onnx
