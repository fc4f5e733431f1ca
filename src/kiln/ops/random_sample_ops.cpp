// Random sampling ops: bernoulli (a 0/1 draw per element with the input's
// probabilities), multinomial (category indices drawn by weight) and
// randperm (a permutation of 0..n-1). As the ops of random_ops.cpp, their
// kernels draw from the default generator when they run, so a compiled graph
// draws new numbers on every call; the API functions below take an optional
// generator of their own, with which they draw at once through the same
// sampling code. Their outputs carry no gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kiln/core/trace_hook.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/random.h"

namespace kiln {
namespace {

// One uniform double in [0, 1) per element: the blocks are reserved up front,
// so the draw is the same whichever code path asks for it.
std::vector<double> uniform_doubles(Generator& gen, int64_t n) {
  std::vector<double> u(size_t(std::max<int64_t>(n, 0)));
  if (n > 0) fill_uniform(gen, u.data(), n, 0.0, 1.0);
  return u;
}

template <typename T>
double probability_at(const cpu::StridedView& p, int64_t i) {
  return double(p.ptr<T>()[cpu::offset_of(p, i)]);
}

void sample_bernoulli(Generator& gen, const cpu::StridedView& p, const cpu::StridedView& out) {
  int64_t n = out.numel();
  std::vector<double> u = uniform_doubles(gen, n);
  visit_floating(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      double prob = probability_at<T>(p, i);
      KILN_CHECK_VALUE(prob >= 0.0 && prob <= 1.0,
                       "bernoulli: expected all probabilities in [0, 1], got ", prob,
                       " at flat index ", i);
      o[i] = T(u[size_t(i)] < prob ? 1 : 0);
    }
  });
}

// Rows of category weights -> num_samples indices per row. With
// replacement: inverse CDF of each uniform draw. Without: each category gets
// the key -log(u) / w (an exponential race); the num_samples smallest keys
// are a draw without replacement in order of selection.
void sample_multinomial(Generator& gen, const cpu::StridedView& weights,
                        const cpu::StridedView& out, int64_t num_samples, bool replacement) {
  int64_t categories = weights.shape[weights.ndim - 1];
  int64_t rows = weights.ndim == 1 ? 1 : weights.shape[0];
  std::vector<double> u = uniform_doubles(gen, rows * (replacement ? num_samples : categories));
  int64_t* o = out.ptr<int64_t>();
  std::vector<double> row(static_cast<size_t>(categories));
  std::vector<int64_t> order(static_cast<size_t>(categories));
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0.0;
    int64_t positive = 0;
    visit_floating(weights.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t c = 0; c < categories; ++c) {
        double w = probability_at<T>(weights, r * categories + c);
        KILN_CHECK(std::isfinite(w) && w >= 0.0,
                   "multinomial: probability tensor contains either inf, nan or an "
                   "element < 0 (row ",
                   r, ", category ", c, ": ", w, ")");
        row[size_t(c)] = w;
        total += w;
        positive += w > 0.0;
      }
    });
    KILN_CHECK(total > 0.0,
               "multinomial: invalid probability distribution (sum of "
               "probabilities <= 0) in row ",
               r);
    KILN_CHECK(replacement || num_samples <= positive,
               "multinomial: cannot sample num_samples=", num_samples,
               " > the number of categories with a non-zero probability (", positive,
               ") without replacement (row ", r, ")");
    if (replacement) {
      std::partial_sum(row.begin(), row.end(), row.begin());
      for (int64_t s = 0; s < num_samples; ++s) {
        double target = u[size_t(r * num_samples + s)] * total;
        auto it = std::upper_bound(row.begin(), row.end(), target);
        int64_t c = std::min<int64_t>(it - row.begin(), categories - 1);
        while (c > 0 && row[size_t(c)] == row[size_t(c - 1)])
          --c;  // never pick a zero-weight category at the upper edge
        o[r * num_samples + s] = c;
      }
      continue;
    }
    for (int64_t c = 0; c < categories; ++c) {
      double w = row[size_t(c)];
      row[size_t(c)] = w > 0.0 ? -std::log1p(-u[size_t(r * categories + c)]) / w
                               : std::numeric_limits<double>::infinity();
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + num_samples, order.end(),
                      [&](int64_t a, int64_t b) { return row[size_t(a)] < row[size_t(b)]; });
    std::copy(order.begin(), order.begin() + num_samples, o + r * num_samples);
  }
}

// Fisher-Yates over 0..n-1 with one uniform draw per position.
void sample_randperm(Generator& gen, const cpu::StridedView& out) {
  int64_t n = out.numel();
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<double> u = uniform_doubles(gen, n);
  for (int64_t i = n - 1; i > 0; --i) {
    auto j = std::min<int64_t>(int64_t(u[size_t(i)] * double(i + 1)), i);
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::transform(perm.begin(), perm.end(), out.ptr<T>(), [](int64_t v) { return T(v); });
  });
}

InferResult infer_bernoulli(const InferArgs& args) {
  const TensorMeta& p = args.inputs[0];
  KILN_CHECK_TYPE(is_floating(p.dtype), "bernoulli: expected floating probabilities, got ",
                  p.dtype);
  return InferResult{{TensorMeta{p.dtype, p.shape}}, {}};
}

InferResult infer_multinomial(const InferArgs& args) {
  const TensorMeta& w = args.inputs[0];
  int64_t num_samples = args.attrs.get_int("num_samples");
  KILN_CHECK_VALUE(w.dim() == 1 || w.dim() == 2,
                   "multinomial: prob_dist must be 1 or 2 dim, got shape ", w.shape);
  KILN_CHECK_TYPE(is_floating(w.dtype), "multinomial: expected floating weights, got ", w.dtype);
  KILN_CHECK_VALUE(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (got ",
                   num_samples, ")");
  const Dim& categories = w.shape.back();
  KILN_CHECK_VALUE(categories.is_symbolic() || categories.static_value() > 0,
                   "multinomial: the number of categories cannot be 0 (shape ", w.shape, ")");
  bool replacement = args.attrs.get_bool("replacement");
  KILN_CHECK_VALUE(
      replacement || categories.is_symbolic() || num_samples <= categories.static_value(),
      "multinomial: cannot sample n_sample=", num_samples, " > prob_dist.size(-1)=", categories,
      " samples without replacement");
  DimList shape = w.shape;
  shape.back() = Dim(num_samples);
  return InferResult{{TensorMeta{DType::Int64, std::move(shape)}}, {}};
}

InferResult infer_randperm(const InferArgs& args) {
  int64_t n = args.attrs.get_int("n");
  KILN_CHECK_VALUE(n >= 0, "randperm: n must be non-negative, got ", n);
  DType dtype = args.attrs.get_dtype("dtype");
  KILN_CHECK_TYPE(dtype != DType::Bool, "randperm: expected a numeric dtype, got ", dtype);
  return InferResult{{TensorMeta{dtype, DimList{Dim(n)}}}, {}};
}

void bernoulli_kernel(const KernelArgs& args) {
  sample_bernoulli(default_generator(), args.inputs[0], args.outputs[0]);
}

void multinomial_kernel(const KernelArgs& args) {
  sample_multinomial(default_generator(), args.inputs[0], args.outputs[0],
                     args.attrs.get_int("num_samples"), args.attrs.get_bool("replacement"));
}

void randperm_kernel(const KernelArgs& args) {
  sample_randperm(default_generator(), args.outputs[0]);
}

OpDef sampling_op(std::string name, int num_inputs) {
  return OpDef{.name = std::move(name),
               .min_inputs = num_inputs,
               .max_inputs = num_inputs,
               .kind = OpKind::Opaque,
               .is_random = true,
               .differentiable = false};
}

bool own_generator(Generator* gen) {
  return gen != nullptr && gen != &default_generator();
}

// A draw with a generator of the caller's: the op's own shape rules, then
// its sampling code over that generator, at once.
template <typename Sample>
Tensor draw_now(const char* name, std::vector<Tensor> inputs, const Attrs& attrs,
                std::source_location where, Sample sample) {
  report_random_draw(name, where);
  std::vector<TensorMeta> metas;
  std::vector<cpu::StridedView> views;  // the samplers read strided inputs
  for (const Tensor& t : inputs) {
    metas.push_back(TensorMeta{t.dtype(), to_dims(t.shape())});
    views.push_back(view_of(t));
  }
  const OpDef& def = op(name);
  InferResult inferred = def.infer(InferArgs{def, metas, attrs});
  Tensor out = empty(to_static(inferred.outputs[0].shape, name), inferred.outputs[0].dtype);
  sample(views, view_of(out));
  return out;
}

}  // namespace

void register_random_sample_ops(OpRegistry& registry) {
  // ONNX: Bernoulli and Multinomial exist, but draw with ONNX Runtime's own
  // generator; randperm has no ONNX form.
  OpDef bernoulli = sampling_op("bernoulli", 1);
  bernoulli.infer = infer_bernoulli;
  bernoulli.cpu = bernoulli_kernel;
  bernoulli.onnx = {""};
  registry.add(std::move(bernoulli));

  OpDef multinomial = sampling_op("multinomial", 1);
  multinomial.attrs = {{"num_samples", AttrKind::Int, std::monostate{}},
                       {"replacement", AttrKind::Bool, false}};
  multinomial.infer = infer_multinomial;
  multinomial.cpu = multinomial_kernel;
  multinomial.onnx = {""};
  registry.add(std::move(multinomial));

  OpDef randperm = sampling_op("randperm", 0);
  randperm.attrs = {{"n", AttrKind::Int, std::monostate{}},
                    {"dtype", AttrKind::DType, DType::Int64}};
  randperm.infer = infer_randperm;
  randperm.cpu = randperm_kernel;
  randperm.onnx = {""};
  registry.add(std::move(randperm));
}

Tensor bernoulli(const Tensor& p, Generator* gen, std::source_location where) {
  if (!own_generator(gen)) return dispatch1(op("bernoulli"), {p}, {});
  return draw_now("bernoulli", {p}, {}, where,
                  [&](const auto& in, const auto& out) { sample_bernoulli(*gen, in[0], out); });
}

Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement, Generator* gen,
                   std::source_location where) {
  Attrs attrs{{"num_samples", num_samples}, {"replacement", replacement}};
  if (!own_generator(gen)) return dispatch1(op("multinomial"), {weights}, attrs);
  return draw_now("multinomial", {weights}, attrs, where, [&](const auto& in, const auto& out) {
    sample_multinomial(*gen, in[0], out, num_samples, replacement);
  });
}

Tensor randperm(int64_t n, TensorOptions options, Generator* gen, std::source_location where) {
  Attrs attrs{{"n", n}, {"dtype", options.dtype}};
  Tensor out = own_generator(gen)
                   ? draw_now("randperm", {}, attrs, where,
                              [&](const auto&, const auto& view) { sample_randperm(*gen, view); })
                   : dispatch1(op("randperm"), {}, attrs);
  out.impl()->requires_grad = options.requires_grad;
  return out;
}

}  // namespace kiln
