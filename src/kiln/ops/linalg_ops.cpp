// matmul, linear, addmm. Inference checks shapes and promotes dtypes; the
// kernel glue turns every case into one batched product (1-D operands gain a
// unit dim, batch dims are broadcast with stride 0) for cpu::matmul, except
// batch-1 float32 linear layers and those with a few output columns, which
// go to cpu::matvec_f32, and float32 products whose a rows are contiguous,
// which go to kiln's GEMM (cpu::gemm_f32; compiled plans keep b packed).
#include "kiln/ops/linalg.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <optional>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/kernels/cpu/gemm_f32.h"
#include "kiln/kernels/cpu/matmul.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/grad_util.h"
#include "kiln/ops/infer_util.h"
#include "kiln/ops/packed_weights.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/view.h"

namespace kiln {
namespace {

std::string dims_x(const Dim& rows, const Dim& cols) {
  return str(rows, "x", cols);
}

// `v` with a size-1 dim inserted at `pos` (its stride never matters).
cpu::StridedView insert_unit_dim(const cpu::StridedView& v, int pos) {
  cpu::StridedView out = v;
  out.ndim = v.ndim + 1;
  for (int d = v.ndim; d > pos; --d) {
    out.shape[d] = v.shape[d - 1];
    out.strides[d] = v.strides[d - 1];
  }
  out.shape[pos] = 1;
  out.strides[pos] = 0;
  return out;
}

// `v` reshaped to `shape` assuming it is contiguous (outputs always are).
cpu::StridedView contiguous_as(const cpu::StridedView& v, const IntList& shape) {
  cpu::StridedView out = v;
  out.ndim = int(shape.size());
  int64_t stride = 1;
  for (int d = out.ndim - 1; d >= 0; --d) {
    out.shape[d] = shape[size_t(d)];
    out.strides[d] = stride;
    stride *= shape[size_t(d)];
  }
  return out;
}

IntList batch_dims(const cpu::StridedView& v) {
  return IntList(v.shape, v.shape + v.ndim - 2);
}

// Benchmarked in bench/kernel_choices.cpp: below this many weights the
// dot-product kernel beats oneDNN's matmul at batch 1.
constexpr int64_t kMatvecMaxWeights = int64_t(1) << 20;

// One product as the kernels take it: out[..., M, N] = alpha a[..., M, K]
// @ b[..., K, N] + beta out + bias, with a and b already broadcast to out's
// batch dims. Every view keeps its tensor's data pointer, so a prepared
// kernel can work this out once and only swap the pointers per call.
struct Product {
  cpu::StridedView out, a, b, bias;
  double alpha = 1, beta = 0;
};

// Products with a few output columns at any batch (W1's last layer: N = 2)
// run as one matrix-vector product per row: oneDNN's GEMM spends far longer
// setting up and packing than computing there (6.6 against 0.7 µs for W1's
// last layer at batch 64).
constexpr int64_t kRowwiseMaxColumns = 4;

// A float32 product with weight rows contiguous in K (b is Wᵀ) at batch 1,
// or a 2-D one with few columns.
bool use_matvec(const Product& p) {
  const cpu::StridedView &out = p.out, &a = p.a, &b = p.b;
  const int64_t K = a.shape[a.ndim - 1], N = out.shape[out.ndim - 1];
  const bool plain = out.dtype == DType::Float32 && p.alpha == 1 && p.beta == 0 && K > 0 &&
                     (a.strides[a.ndim - 1] == 1 || K == 1) &&
                     (b.strides[b.ndim - 2] == 1 || K == 1);
  if (!plain) return false;
  if (out.numel() == N) return N * K <= kMatvecMaxWeights;
  return out.ndim == 2 && N <= kRowwiseMaxColumns && out.strides[1] == 1;
}

// The numbers matvec_f32 needs beside the pointers, and the rows it runs on.
struct Matvec {
  int64_t n = 0, k = 0, w_row_stride = 0, bias_stride = 0;
  int64_t rows = 1, a_row_stride = 0, out_row_stride = 0;
};

Matvec matvec_of(const Product& p) {
  Matvec m{p.out.shape[p.out.ndim - 1], p.a.shape[p.a.ndim - 1], p.b.strides[p.b.ndim - 1],
           p.bias.data ? p.bias.strides[0] : 0};
  if (p.out.numel() == m.n) return m;
  m.rows = p.out.shape[0];
  m.a_row_stride = p.a.strides[0];
  m.out_row_stride = p.out.strides[0];
  return m;
}

void run_matvec(const Matvec& m, void* out, const void* a, const void* b, const void* bias,
                cpu::MatvecOptions options = {}) {
  const auto* w = static_cast<const float*>(b);
  const auto* bias_f32 = static_cast<const float*>(bias);
  if (m.rows == 1) {
    cpu::matvec_f32(static_cast<float*>(out), static_cast<const float*>(a), w, m.w_row_stride,
                    bias_f32, m.bias_stride, m.n, m.k, options);
    return;
  }
  cpu::MatvecRows rows{static_cast<float*>(out), m.out_row_stride, static_cast<const float*>(a),
                       m.a_row_stride, m.rows};
  cpu::matvec_rows_f32(rows, w, m.w_row_stride, bias_f32, m.bias_stride, m.n, m.k, options.relu);
}

// A product kiln's own GEMM runs (cpu::gemm_f32): float32 with rows of a
// contiguous in K and b contiguous along K (a linear layer's Wᵀ) or N, at
// least 2 rows and more columns than the rowwise matvec takes. Batch dims
// fold into the rows when b is shared by all of them (a linear layer over
// [batch, tokens, features]).
struct Gemm {
  cpu::GemmB b;  // data from the product
  int64_t m = 0, a_row_stride = 0, out_row_stride = 0;
};

std::optional<Gemm> gemm_of(const Product& p) {
  const cpu::StridedView &out = p.out, &a = p.a, &b = p.b;
  const int nd = out.ndim;
  const int64_t K = a.shape[nd - 1], N = out.shape[nd - 1];
  const int64_t rows = N == 0 ? 0 : out.numel() / N;
  const bool plain = out.dtype == DType::Float32 && p.alpha == 1 && p.beta == 0 && K > 0 &&
                     rows >= 2 && N > kRowwiseMaxColumns && a.strides[nd - 1] == 1 &&
                     (b.strides[nd - 2] == 1 || b.strides[nd - 1] == 1) &&
                     (!p.bias.data || p.bias.strides[0] == 1);
  if (!plain) return std::nullopt;
  // The stride from one row of a to the next, the batch dims' included: a
  // single row per batch entry (M = 1) steps by the innermost batch stride.
  int64_t row_stride = a.strides[nd - 2];
  for (int d = nd - 3; d >= 0 && a.shape[nd - 2] == 1; --d) {
    if (a.shape[d] == 1) continue;
    row_stride = a.strides[d];
    break;
  }
  int64_t next_batch = row_stride * a.shape[nd - 2];
  for (int d = nd - 3; d >= 0; --d) {
    if (b.strides[d] != 0 && b.shape[d] != 1) return std::nullopt;
    if (a.shape[d] != 1 && a.strides[d] != next_batch) return std::nullopt;
    next_batch *= a.shape[d];
  }
  return Gemm{cpu::GemmB{b.ptr<const float>(), K, N, b.strides[nd - 2], b.strides[nd - 1]}, rows,
              row_stride, N};
}

cpu::GemmRows gemm_rows(const Gemm& g, void* out, const void* a, const void* bias,
                        bool relu = false, bool gelu = false) {
  return cpu::GemmRows{.out = static_cast<float*>(out),
                       .out_row_stride = g.out_row_stride,
                       .a = static_cast<const float*>(a),
                       .a_row_stride = g.a_row_stride,
                       .bias = static_cast<const float*>(bias),
                       .m = g.m,
                       .relu = relu,
                       .gelu = gelu};
}

// a and b broadcast to out's batch dims (stride 0 where they repeat).
Product make_product(const cpu::StridedView& out, const cpu::StridedView& a,
                     const cpu::StridedView& b, const cpu::StridedView& bias, double alpha = 1,
                     double beta = 0) {
  const int nd = out.ndim;
  int64_t a_shape[cpu::kMaxDims], b_shape[cpu::kMaxDims];
  std::copy(out.shape, out.shape + nd, a_shape);
  std::copy(out.shape, out.shape + nd, b_shape);
  a_shape[nd - 1] = a.shape[a.ndim - 1];
  b_shape[nd - 2] = b.shape[b.ndim - 2];
  return Product{
      out, cpu::broadcast_to(a, a_shape, nd), cpu::broadcast_to(b, b_shape, nd), bias, alpha, beta};
}

// `packable`: b's storage as an eager call issued it, whose packed copy may
// be kept (Note [Eager packed weights]) where that pays, when the product
// reads b once (cpu::gemm_reads_b_once); null packs b for this call only.
void run_product(const Product& p, const IssuedStorage* packable = nullptr) {
  if (use_matvec(p)) {
    run_matvec(matvec_of(p), p.out.data, p.a.data, p.b.data, p.bias.data);
    return;
  }
  if (std::optional<Gemm> gemm = gemm_of(p)) {
    const cpu::GemmRows rows = gemm_rows(*gemm, p.out.data, p.a.data, p.bias.data);
    if (packable && cpu::gemm_reads_b_once(rows.m, gemm->b.k)) {
      if (std::shared_ptr<const cpu::PackedB> packed = eager_packed_weight(*packable, gemm->b)) {
        cpu::gemm_f32_packed(rows, *packed);
        return;
      }
    }
    cpu::gemm_f32(rows, gemm->b);
    return;
  }
  cpu::matmul(p.out, p.a, p.b, p.bias, p.alpha, p.beta);
}

// How an op feeds one product: which inputs are a, b and the bias.
struct ProductOp {
  Product (*make)(const KernelArgs&);
  int a, b, bias;                     // bias -1: none
  void (*before)(const KernelArgs&);  // work before the product (addmm's copy), or null
};

// A product whose geometry is fixed: matvec, kiln's GEMM or a
// cpu::MatmulPlan is chosen once, as run_product would choose it per call.
// With kiln's GEMM, b can stay packed across calls (run_packed).
class PreparedProduct final : public PreparedKernel {
 public:
  PreparedProduct(const ProductOp& op, const KernelArgs& args)
      : op_(op),
        product_(op.make(args)),
        matvec_(use_matvec(product_)),
        activation_(args.attrs.has("activation") ? args.attrs.get_string("activation") : "") {
    if (matvec_) {
      matvec_shape_ = matvec_of(product_);
      return;
    }
    gemm_ = gemm_of(product_);
    if (gemm_) return;
    plan_ = std::make_unique<cpu::MatmulPlan>(product_.out, product_.a, product_.b, product_.bias,
                                              product_.alpha, product_.beta);
  }

  void run(const KernelArgs& args) const override {
    if (op_.before) op_.before(args);
    void* out = args.outputs[0].data;
    const void* a = args.inputs[size_t(op_.a)].data;
    const void* b = args.inputs[size_t(op_.b)].data;
    const void* bias = bias_of(args);
    if (matvec_) {
      // Each batch-1 call walks the rows the other way from the last one
      // (see cpu::matvec_f32): W1, whose weights overflow L2, took ~5%
      // less time. Two calls at once may both take the same way; it only
      // moves which rows come from cache, not the results.
      bool bottom_up = false;
      if (matvec_shape_.rows == 1) {
        bottom_up = matvec_bottom_up_.load(std::memory_order_relaxed);
        matvec_bottom_up_.store(!bottom_up, std::memory_order_relaxed);
      }
      run_matvec(matvec_shape_, out, a, b, bias, {.bottom_up = bottom_up, .relu = relu_});
      return;
    }
    if (gemm_) {
      cpu::GemmB gemm_b = gemm_->b;
      gemm_b.data = static_cast<const float*>(b);
      cpu::gemm_f32(gemm_rows(*gemm_, out, a, bias, relu_, gelu_), gemm_b);
      return;
    }
    Product p = product_;
    p.out.data = out;
    p.a.data = const_cast<void*>(a);
    p.b.data = const_cast<void*>(b);
    p.bias.data = const_cast<void*>(bias);
    plan_->run(p.out, p.a, p.b, p.bias);
  }

  int packable_input() const override { return gemm_ ? op_.b : -1; }

  // linear_act (ops/fused_ops.cpp) asks this, prepared with its attributes:
  // true when this kernel applies the fused op's activation as it stores.
  // relu: the matvec and the GEMM; gelu (erf form): the GEMM's epilogue.
  bool take_relu() override {
    if (activation_ == "gelu") {
      gelu_ = gemm_.has_value();
      return gelu_;
    }
    relu_ = matvec_ || gemm_.has_value();
    return relu_;
  }

  void run_packed(const KernelArgs& args, uint64_t version) const override {
    if (op_.before) op_.before(args);
    std::shared_ptr<const PackedWeight> packed = packed_for(args, version);
    cpu::gemm_f32_packed(gemm_rows(*gemm_, args.outputs[0].data, args.inputs[size_t(op_.a)].data,
                                   bias_of(args), relu_, gelu_),
                         packed->b);
  }

 private:
  struct PackedWeight {
    uint64_t version = 0;
    cpu::PackedB b;
  };

  const void* bias_of(const KernelArgs& args) const {
    return product_.bias.data ? args.inputs[size_t(op_.bias)].data : nullptr;
  }

  // b packed at `version`: packed now if the copy is older. A copy that
  // another call is still reading is left to it and a new one made; else
  // the buffer is reused, so a training loop (new weights every step)
  // repacks without allocating.
  std::shared_ptr<const PackedWeight> packed_for(const KernelArgs& args, uint64_t version) const {
    std::lock_guard<std::mutex> lock(packed_mutex_);
    if (packed_ && packed_->version == version) return packed_;
    if (!packed_ || packed_.use_count() > 1) packed_ = std::make_shared<PackedWeight>();
    // use_count() is a relaxed read: order the last reader's reads of the
    // buffer (it dropped its pointer after them) before this repack.
    std::atomic_thread_fence(std::memory_order_acquire);
    cpu::GemmB b = gemm_->b;
    b.data = static_cast<const float*>(args.inputs[size_t(op_.b)].data);
    packed_->b.pack(b);
    packed_->version = version;
    return packed_;
  }

  ProductOp op_;
  Product product_;
  bool matvec_;
  Matvec matvec_shape_;
  mutable std::atomic<bool> matvec_bottom_up_{false};
  std::optional<Gemm> gemm_;
  std::string activation_;  // of the fused op this kernel serves (linear_act), or ""
  bool relu_ = false;       // applied by the matvec's or GEMM's store (take_relu)
  bool gelu_ = false;       // applied by the GEMM's store (take_relu)
  std::unique_ptr<cpu::MatmulPlan> plan_;
  mutable std::mutex packed_mutex_;
  mutable std::shared_ptr<PackedWeight> packed_;
};

// Whether `from` expands to `to` (NumPy rules, `to` fixed).
// Equality is asked first, so that a symbolic size equal to its target
// never needs an example value (which would make size 1 special).
bool broadcasts_to(const DimList& from, const DimList& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != to[lead + d] && from[d] != 1) return false;
  }
  return true;
}

void check_dtypes(const InferArgs& args) {
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.inputs[i].defined) check_not_bool(args, i);
  }
}

InferResult infer_matmul(const InferArgs& args) {
  const TensorMeta &a = args.inputs[0], &b = args.inputs[1];
  KILN_CHECK(a.dim() >= 1 && b.dim() >= 1,
             "matmul: both arguments need to be at least 1D, but they are ", a.dim(), "D and ",
             b.dim(), "D");
  check_dtypes(args);
  const Dim M = a.dim() >= 2 ? a.shape[a.shape.size() - 2] : Dim(1);
  const Dim K = a.shape.back();
  const Dim K2 = b.dim() >= 2 ? b.shape[b.shape.size() - 2] : b.shape[0];
  const Dim N = b.dim() >= 2 ? b.shape.back() : Dim(1);
  if (a.dim() == 1 && b.dim() == 1) {
    KILN_CHECK(K == K2, "matmul: 1D tensors expected to have the same size, but got ", K, " and ",
               K2, " elements");
  }
  KILN_CHECK(K == K2, "matmul: mat1 and mat2 shapes cannot be multiplied (", dims_x(M, K), " and ",
             dims_x(K2, N), ") for shapes ", a.shape, " and ", b.shape);
  DimList a_batch(a.shape.begin(), a.shape.end() - std::min<int64_t>(a.dim(), 2));
  DimList b_batch(b.shape.begin(), b.shape.end() - std::min<int64_t>(b.dim(), 2));
  DimList shape = broadcast_shapes(a_batch, b_batch, "matmul");
  if (a.dim() >= 2) shape.push_back(M);
  if (b.dim() >= 2) shape.push_back(N);
  DType dtype = result_type(args.inputs);
  return InferResult{{TensorMeta{dtype, shape}}, {dtype, dtype}};
}

Product matmul_product(const KernelArgs& args) {
  cpu::StridedView a = args.inputs[0], b = args.inputs[1];
  if (a.ndim == 1) a = insert_unit_dim(a, 0);
  if (b.ndim == 1) b = insert_unit_dim(b, 1);
  IntList shape = broadcast_shapes(batch_dims(a), batch_dims(b), "matmul");
  shape.push_back(a.shape[a.ndim - 2]);
  shape.push_back(b.shape[b.ndim - 1]);
  return make_product(contiguous_as(args.outputs[0], shape), a, b, cpu::StridedView{});
}

const ProductOp kMatmul{matmul_product, 0, 1, -1, nullptr};

InferResult infer_linear(const InferArgs& args) {
  const TensorMeta &x = args.inputs[0], &w = args.inputs[1];
  const TensorMeta& bias = args.inputs.size() > 2 ? args.inputs[2] : TensorMeta{};
  KILN_CHECK(x.dim() >= 1, "linear: input must be at least 1-D, got shape ", x.shape);
  KILN_CHECK(w.dim() == 2, "linear: weight must be 2-D, got shape ", w.shape);
  check_dtypes(args);
  const Dim K = x.shape.back(), N = w.shape[0];
  const Dim rows = numel_of(DimList(x.shape.begin(), x.shape.end() - 1));
  KILN_CHECK(K == w.shape[1], "linear: mat1 and mat2 shapes cannot be multiplied (",
             dims_x(rows, K), " and ", dims_x(w.shape[1], N), ")");
  if (args.inputs.size() > 2 && bias.defined) {
    KILN_CHECK(bias.dim() == 1 && bias.shape[0] == N, "linear: bias must be 1-D of size ", N,
               " (the weight's rows), got shape ", bias.shape);
  }
  DimList shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(N);
  DType dtype = result_type(args.inputs);
  return InferResult{{TensorMeta{dtype, shape}}, std::vector<DType>(args.inputs.size(), dtype)};
}

Product linear_product(const KernelArgs& args) {
  cpu::StridedView x = args.inputs[0], w = args.inputs[1];
  cpu::StridedView bias = args.inputs.size() > 2 ? args.inputs[2] : cpu::StridedView{};
  if (x.ndim == 1) x = insert_unit_dim(x, 0);
  cpu::StridedView w_t = w;  // Wᵀ: [K, N], a view
  std::swap(w_t.shape[0], w_t.shape[1]);
  std::swap(w_t.strides[0], w_t.strides[1]);
  IntList shape(x.shape, x.shape + x.ndim);
  shape.back() = w.shape[0];
  return make_product(contiguous_as(args.outputs[0], shape), x, w_t, bias);
}

const ProductOp kLinear{linear_product, 0, 1, 2, nullptr};

InferResult infer_addmm(const InferArgs& args) {
  const TensorMeta &input = args.inputs[0], &m1 = args.inputs[1], &m2 = args.inputs[2];
  KILN_CHECK(m1.dim() == 2, "addmm: mat1 must be a matrix, got ", m1.dim(), "-D tensor of shape ",
             m1.shape);
  KILN_CHECK(m2.dim() == 2, "addmm: mat2 must be a matrix, got ", m2.dim(), "-D tensor of shape ",
             m2.shape);
  check_dtypes(args);
  KILN_CHECK(m1.shape[1] == m2.shape[0], "addmm: mat1 and mat2 shapes cannot be multiplied (",
             dims_x(m1.shape[0], m1.shape[1]), " and ", dims_x(m2.shape[0], m2.shape[1]), ")");
  DimList shape{m1.shape[0], m2.shape[1]};
  KILN_CHECK(broadcasts_to(input.shape, shape), "addmm: input of shape ", input.shape,
             " can't be broadcast to ", shape);
  DType dtype = result_type(args.inputs);
  if (!is_floating(dtype)) {
    const double beta = args.attrs.get_float("beta"), alpha = args.attrs.get_float("alpha");
    KILN_CHECK(beta == std::trunc(beta) && alpha == std::trunc(alpha),
               "addmm: for integral inputs, beta and alpha must be integers, got beta=", beta,
               " and alpha=", alpha);
  }
  return InferResult{{TensorMeta{dtype, shape}}, {dtype, dtype, dtype}};
}

Product addmm_product(const KernelArgs& args) {
  return make_product(args.outputs[0], args.inputs[1], args.inputs[2], cpu::StridedView{},
                      args.attrs.get_float("alpha"), args.attrs.get_float("beta"));
}

// out = input, which the product then scales by beta. beta == 0 ignores
// input entirely (NaN included), as in PyTorch.
void addmm_copy_input(const KernelArgs& args) {
  const cpu::StridedView& out = args.outputs[0];
  if (args.attrs.get_float("beta") != 0) {
    cpu::copy_convert(out, cpu::broadcast_to(args.inputs[0], out.shape, out.ndim));
  }
}

const ProductOp kAddmm{addmm_product, 1, 2, -1, addmm_copy_input};

void product_kernel(const ProductOp& op, const KernelArgs& args) {
  if (op.before) op.before(args);
  run_product(op.make(args), args.packable);
}

template <const ProductOp& op>
void kernel_of(const KernelArgs& args) {
  product_kernel(op, args);
}

template <const ProductOp& op>
std::unique_ptr<PreparedKernel> prepare_of(const KernelArgs& args) {
  return std::make_unique<PreparedProduct>(op, args);
}

// ---- backward rules ----

Tensor mT(const Tensor& x) {
  return transpose(x, -2, -1);
}

// C = A B gives dA = dC Bᵀ and dB = Aᵀ dC. A 1-D operand is a row (A) or a
// column (B) here, as in the forward, and batch dims that were broadcast are
// summed back with sum_to.
std::vector<Tensor> matmul_grad(const GradContext& ctx) {
  const IntList &a_shape = ctx.input_shape(0), &b_shape = ctx.input_shape(1);
  Tensor a = ctx.input(0), b = ctx.input(1);
  if (a.dim() == 1) a = unsqueeze(a, 0);
  if (b.dim() == 1) b = unsqueeze(b, 1);
  IntList out_shape = broadcast_shapes(IntList(a.shape().begin(), a.shape().end() - 2),
                                       IntList(b.shape().begin(), b.shape().end() - 2), "matmul");
  out_shape.push_back(a.shape()[size_t(a.dim() - 2)]);
  out_shape.push_back(b.shape().back());
  const Tensor g = reshape(ctx.grad_output(0), out_shape);
  Tensor ga, gb;
  if (ctx.needs_input_grad(0)) ga = reshape(sum_to(matmul(g, mT(b)), a.shape()), a_shape);
  if (ctx.needs_input_grad(1)) gb = reshape(sum_to(matmul(mT(a), g), b.shape()), b_shape);
  return {ga, gb};
}

// y = x Wᵀ + b over x's last dim: dx = dy W, dW = dyᵀ x (over all leading
// dims of x flattened into rows), db = dy summed over the rows.
std::vector<Tensor> linear_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const IntList& x_shape = ctx.input_shape(0);
  const int64_t K = x_shape.back(), N = ctx.input_shape(1)[0];
  const int64_t rows = numel_of(IntList(x_shape.begin(), x_shape.end() - 1));
  Tensor gx, gw, gb;
  if (ctx.needs_input_grad(0)) gx = matmul(g, ctx.input(1));
  if (ctx.needs_input_grad(1))
    gw = matmul(t(reshape(g, {rows, N})), reshape(ctx.input(0), {rows, K}));
  if (ctx.num_inputs() > 2 && ctx.needs_input_grad(2)) gb = sum_to(g, {N});
  std::vector<Tensor> grads{gx, gw};
  if (ctx.num_inputs() > 2) grads.push_back(gb);
  return grads;
}

// out = beta input + alpha m1 m2: d input = beta dout (summed over broadcast
// dims), d m1 = alpha dout m2ᵀ, d m2 = alpha m1ᵀ dout.
std::vector<Tensor> addmm_grad(const GradContext& ctx) {
  const Tensor& g = ctx.grad_output(0);
  const double beta = ctx.attrs().get_float("beta"), alpha = ctx.attrs().get_float("alpha");
  auto scaled = [](const Tensor& x, double s) { return s == 1 ? x : mul(x, Scalar(s)); };
  Tensor gi, g1, g2;
  if (ctx.needs_input_grad(0)) gi = sum_to(scaled(g, beta), ctx.input_shape(0));
  if (ctx.needs_input_grad(1)) g1 = scaled(matmul(g, t(ctx.input(2))), alpha);
  if (ctx.needs_input_grad(2)) g2 = scaled(matmul(t(ctx.input(1)), g), alpha);
  return {gi, g1, g2};
}

}  // namespace

void register_linalg_ops(OpRegistry& registry) {
  registry.add(OpDef{.name = "matmul",
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .attrs = {},
                     .infer = infer_matmul,
                     .cpu = kernel_of<kMatmul>,
                     .grad = matmul_grad,
                     .prepare = prepare_of<kMatmul>,
                     .kind = OpKind::Opaque,
                     .packs_input = 1,
                     .onnx = onnx_op("MatMul")});
  // linear(x, w, b?) = x · Wᵀ + b, with W stored [out_features, in_features].
  registry.add(OpDef{.name = "linear",
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .optional_inputs = {2},
                     .attrs = {},
                     .infer = infer_linear,
                     .cpu = kernel_of<kLinear>,
                     .grad = linear_grad,
                     .prepare = prepare_of<kLinear>,
                     .kind = OpKind::Opaque,
                     .packs_input = 1,
                     .onnx = {"Gemm"}});
  registry.add(OpDef{.name = "addmm",
                     .min_inputs = 3,
                     .max_inputs = 3,
                     .attrs = {{"beta", AttrKind::Float, 1.0}, {"alpha", AttrKind::Float, 1.0}},
                     .infer = infer_addmm,
                     .cpu = kernel_of<kAddmm>,
                     .grad = addmm_grad,
                     .prepare = prepare_of<kAddmm>,
                     .kind = OpKind::Opaque,
                     .packs_input = 2,
                     .onnx = {"Gemm"}});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  static const OpDef& matmul_op = op("matmul");
  return dispatch1(matmul_op, {a, b});
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  static const OpDef& linear_op = op("linear");
  return dispatch1(linear_op, {x, w, b});
}

Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta, double alpha) {
  static const OpDef& addmm_op = op("addmm");
  return dispatch1(addmm_op, {input, m1, m2}, {{"beta", beta}, {"alpha", alpha}});
}

}  // namespace kiln
