// Random tensors: rand, randn, randint and their _like forms, bernoulli,
// multinomial and randperm. Each dispatches a random op of the table
// (ops/random_ops.cpp, ops/random_sample_ops.cpp), which draws from the
// default generator when it runs, so a traced or compiled function draws new
// numbers on every call, eager and compiled code draw the same numbers from
// one seed (kiln::manual_seed), and `randn_like(x)` keeps x's symbolic shape.
//
// Given a generator of its own, a factory draws at once instead (no op can
// name a generator): inside a trace those numbers are frozen into the graph,
// which the recording reports at the caller's line.
#pragma once

#include <source_location>
#include <span>

#include "kiln/core/factory.h"

namespace kiln {

Tensor rand(const IntList& shape, TensorOptions options = {}, Generator* gen = nullptr,
            std::source_location where = std::source_location::current());
Tensor randn(const IntList& shape, TensorOptions options = {}, Generator* gen = nullptr,
             std::source_location where = std::source_location::current());
// Integers uniform in [low, high), converted to options.dtype.
Tensor randint(int64_t low, int64_t high, const IntList& shape,
               TensorOptions options = DType::Int64, Generator* gen = nullptr,
               std::source_location where = std::source_location::current());

// The same with sizes that may be symbolic (core/sym_shape.h), so a trace
// with dynamic shapes records them as expressions: randn(DimList{sym_size(x,
// 0), 4}). A span, so that braces of plain ints stay IntList.
Tensor rand(std::span<const Dim> shape, TensorOptions options = {});
Tensor randn(std::span<const Dim> shape, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, std::span<const Dim> shape,
               TensorOptions options = DType::Int64);

// Shaped like t (symbolic dims included), of t's dtype or options.dtype.
Tensor rand_like(const Tensor& t);
Tensor rand_like(const Tensor& t, TensorOptions options);
Tensor randn_like(const Tensor& t);
Tensor randn_like(const Tensor& t, TensorOptions options);

// 1 with probability p[i], else 0, shaped and typed like p (floating).
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr,
                 std::source_location where = std::source_location::current());
// num_samples category indices (int64) per row of non-negative weights
// (1-D or 2-D; they need not sum to 1), as torch.multinomial.
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false,
                   Generator* gen = nullptr,
                   std::source_location where = std::source_location::current());
// A random permutation of 0..n-1.
Tensor randperm(int64_t n, TensorOptions options = DType::Int64, Generator* gen = nullptr,
                std::source_location where = std::source_location::current());

}  // namespace kiln
