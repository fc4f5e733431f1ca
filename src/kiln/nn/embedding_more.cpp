// embedding_bag and embedding_renorm_ of layers_more.h. PyTorch's
// reference: torch/nn/functional.py (embedding_bag's checks) and
// aten/src/ATen/native/{EmbeddingBag,Embedding}.cpp.
//
// A bag's sum and mean are an index_add of its rows into the bag's slot
// (entries in no bag, or equal to padding_idx, go to one spare slot that is
// dropped); a bag's max is a max over [bags, entries, dim] with the entries
// of other bags at -inf. The bag of each entry comes from comparing its
// position with the offsets, so nothing reads offsets on the host and a
// traced bag layout stays general.
#include <cmath>
#include <limits>

#include "kiln/autograd/autograd.h"
#include "kiln/core/factory.h"
#include "kiln/core/trace_hook.h"
#include "kiln/nn/layers_more.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/norms.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/view.h"

namespace kiln::nn::functional {

namespace {

void check_embedding_bag_arguments(const Tensor& input, const Tensor& weight,
                                   const EmbeddingBagOptions& o) {
  KILN_CHECK_VALUE(weight.dim() == 2,
                   "embedding_bag: weight has to be a 2D Tensor, but got "
                   "Tensor of dimension ",
                   weight.dim());
  KILN_CHECK(input.dtype() == DType::Int64 || input.dtype() == DType::Int32,
             "embedding_bag: expected input of dtype int64 or int32 (indices), got ",
             input.dtype());
  KILN_CHECK_VALUE(!o.per_sample_weights.defined() || o.per_sample_weights.shape() == input.shape(),
                   "embedding_bag: If per_sample_weights (",
                   o.per_sample_weights.defined() ? o.per_sample_weights.shape() : IntList{},
                   ") is not None, then it must have the same shape as the input (", input.shape(),
                   ")");
  KILN_CHECK_VALUE(o.mode == "sum" || o.mode == "mean" || o.mode == "max",
                   "embedding_bag: mode has to be one of sum, mean or max, got ", o.mode);
  KILN_CHECK_KIND(ErrorKind::NotImplemented, !o.per_sample_weights.defined() || o.mode == "sum",
                  "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                  "supported for mode='sum' (got mode='",
                  o.mode, "'). Please open a feature request on GitHub.");
  if (input.dim() == 2) {
    KILN_CHECK_VALUE(!o.offsets.defined(),
                     "embedding_bag: if input is 2D, then offsets has to be None, as input is "
                     "treated is a mini-batch of fixed length sequences.");
    return;
  }
  KILN_CHECK_VALUE(input.dim() == 1,
                   "embedding_bag: input has to be 1D or 2D Tensor, but got "
                   "Tensor of dimension ",
                   input.dim());
  KILN_CHECK_VALUE(o.offsets.defined(),
                   "embedding_bag: offsets has to be a 1D Tensor but got None");
  KILN_CHECK_VALUE(o.offsets.dim() == 1, "embedding_bag: offsets has to be a 1D Tensor");
  KILN_CHECK(!o.include_last_offset || o.offsets.numel() >= 1,
             "embedding_bag: include_last_offset: number of offsets should be at least 1");
}

// PyTorch's checks of the offsets' values, made in eager calls only: in a
// trace they would read a value the graph must keep as an input.
void check_offset_values(const Tensor& offsets, int64_t entries) {
  if (trace_hook() != nullptr || offsets.numel() == 0) return;
  const std::vector<int64_t> values = to(offsets, DType::Int64).to_vector<int64_t>();
  KILN_CHECK(values.front() == 0,
             "embedding_bag: offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
             "has to start from position 0. However, got ",
             values.front());
  KILN_CHECK(values.back() <= entries,
             "embedding_bag: offsets[-1] can not be greater than "
             "input's length ",
             entries, ", but got offsets[-1] of ", values.back());
}

// The bag of each entry of a 1-d input ([n], int64), `bags` (the spare
// slot) for entries in no bag or left out.
Tensor bag_of_entries(const Tensor& input, const EmbeddingBagOptions& o, int64_t bags) {
  const int64_t n = input.size(0);
  Tensor positions = arange(n);
  Tensor starts = to(narrow(o.offsets, 0, 0, bags), DType::Int64);
  // The number of bags that start at or before each position, minus one.
  Tensor started = to(le(unsqueeze(starts, 0), unsqueeze(positions, 1)), DType::Int64);
  Tensor bag = sum(started, {1}) - int64_t(1);
  Tensor counted = ge(bag, int64_t(0));
  if (o.include_last_offset) {
    Tensor end = to(select(o.offsets, 0, bags), DType::Int64);
    counted = counted & lt(positions, end);
  }
  if (o.padding_idx) counted = counted & ne(input, *o.padding_idx);
  return where(counted, bag, Scalar(bags));
}

// Sum, mean or max of each bag of rows [n, D] by their bag ([n], with
// `bags` for the entries counted in none).
Tensor reduce_bags(const Tensor& rows, const Tensor& bag, int64_t bags, const std::string& mode) {
  const int64_t dim = rows.size(1);
  Tensor counts =
      narrow(index_add(zeros({bags + 1}, rows.dtype()), 0, bag, ones({rows.size(0)}, rows.dtype())),
             0, 0, bags);
  // With no entries at all every bag is empty: the zero sums below.
  if (mode == "max" && rows.size(0) > 0) {
    Tensor member = unsqueeze(eq(unsqueeze(bag, 0), unsqueeze(arange(bags), 1)), 2);  // [B, n, 1]
    Tensor candidates = where(member, unsqueeze(rows, 0), -std::numeric_limits<double>::infinity());
    Tensor maxima = std::get<0>(max(candidates, 1));
    return where(unsqueeze(gt(counts, 0.0), 1), maxima, 0.0);  // an empty bag gives 0
  }
  Tensor sums = narrow(index_add(zeros({bags + 1, dim}, rows.dtype()), 0, bag, rows), 0, 0, bags);
  if (mode != "mean") return sums;
  return sums / unsqueeze(clamp(counts, 1.0, std::nullopt), 1);
}

}  // namespace

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagOptions& o) {
  check_embedding_bag_arguments(input, weight, o);
  std::optional<int64_t> padding_idx = o.padding_idx;
  if (padding_idx) {
    const int64_t rows = weight.size(0);
    KILN_CHECK(*padding_idx >= -rows && *padding_idx < rows,
               "embedding_bag: padding_idx must be within the number of embeddings, -", rows,
               " through ", rows - 1, ", but got ", *padding_idx);
    if (*padding_idx < 0) padding_idx = *padding_idx + rows;
  }
  EmbeddingBagOptions options = o;
  options.padding_idx = padding_idx;
  Tensor flat_input = input, bag;
  int64_t bags = 0;
  if (input.dim() == 2) {
    // B bags of L entries each: entry i is in bag i / L.
    bags = input.size(0);
    flat_input = flatten(input);
    bag = floor_divide(arange(flat_input.numel()), input.size(1));
    if (padding_idx) bag = where(ne(flat_input, *padding_idx), bag, Scalar(bags));
  } else {
    bags = o.offsets.size(0) - (o.include_last_offset ? 1 : 0);
    check_offset_values(o.offsets, input.numel());
    bag = bag_of_entries(input, options, bags);
  }
  Tensor rows = embedding(weight, flat_input);  // [n, D]
  if (o.per_sample_weights.defined()) rows = rows * unsqueeze(flatten(o.per_sample_weights), 1);
  return reduce_bags(rows, bag, bags, o.mode);
}

// PyTorch: embedding_renorm_cpu_. A row named several times is scaled once.
void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                       double norm_type) {
  KILN_CHECK(weight.dim() == 2, "embedding_renorm_: weight must be 2-D, got shape ",
             weight.shape());
  NoGradGuard no_grad;
  Tensor norms = vector_norm(weight, norm_type, {1});
  const int64_t rows = weight.size(0);
  Tensor named = gt(index_add(zeros({rows}, weight.dtype()), 0, flatten(to(indices, DType::Int64)),
                              ones({indices.numel()}, weight.dtype())),
                    0.0);
  Tensor scale = where(named & gt(norms, max_norm), max_norm / (norms + 1e-7), 1.0);
  copy_(weight, weight * unsqueeze(scale, 1));
}

}  // namespace kiln::nn::functional
