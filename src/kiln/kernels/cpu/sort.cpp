#include "kiln/kernels/cpu/sort.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/kernels/cpu/lines.h"
#include "kiln/kernels/cpu/loops.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/util/error.h"

namespace kiln::cpu {
namespace {

// Whether a comes before b in ascending order: NaN after every number, NaNs
// equal among themselves (a strict weak order, which std::sort needs).
template <typename T>
bool ascending_before(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a < b || (!std::isnan(a) && std::isnan(b));
  } else {
    return a < b;
  }
}

template <typename T>
using Items = std::vector<std::pair<T, int64_t>>;

// The views in the order Lines walks them: indices (the output every call
// has), input, values (null data for argsort).
using SortLines = Lines<3>;
constexpr int kIndices = 0, kInput = 1, kValues = 2;

template <typename T>
void read_line(const SortLines& lines, int64_t line, Items<T>& items) {
  const T* src = lines.start<const T>(kInput, line);
  const int64_t n = lines.length(kInput), stride = lines.stride(kInput);
  items.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    items[size_t(i)] = {src[i * stride], i};
}

// The first `count` items into the line of the outputs.
template <typename T>
void write_line(const SortLines& lines, int64_t line, const Items<T>& items, int64_t count,
                bool with_values) {
  int64_t* index = lines.start<int64_t>(kIndices, line);
  const int64_t index_stride = lines.stride(kIndices);
  for (int64_t i = 0; i < count; ++i)
    index[i * index_stride] = items[size_t(i)].second;
  if (!with_values) return;
  T* value = lines.start<T>(kValues, line);
  const int64_t value_stride = lines.stride(kValues);
  for (int64_t i = 0; i < count; ++i)
    value[i * value_stride] = items[size_t(i)].first;
}

// Calls body(first, last) on ranges of lines, one per thread when the work
// is worth a parallel region; each range reuses one buffer.
template <typename Body>
void for_line_ranges(const SortLines& lines, const Body& body) {
  const int64_t count = lines.count();
  const bool split = count > 1 && count * lines.length(kInput) >= kParallelGrain;
  const int64_t ranges = split ? std::min<int64_t>(count, max_threads()) : 1;
  parallel_for(ranges, split,
               [&](int64_t r) { body(count * r / ranges, count * (r + 1) / ranges); });
}

SortLines lines_of(const StridedView& values, const StridedView& indices, const StridedView& in,
                   int dim) {
  KILN_ASSERT(indices.dtype == DType::Int64, "sort: indices must be int64");
  KILN_ASSERT(values.data == nullptr || values.dtype == in.dtype,
              "sort: values must have the input's dtype");
  return SortLines({indices, in, values}, dim);
}

}  // namespace

void sort(const StridedView& values, const StridedView& indices, const StridedView& in, int dim,
          bool descending) {
  const SortLines lines = lines_of(values, indices, in, dim);
  const bool with_values = values.data != nullptr;
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_line_ranges(lines, [&](int64_t first, int64_t last) {
      Items<T> items;
      for (int64_t line = first; line < last; ++line) {
        read_line(lines, line, items);
        if (descending) {
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
            return ascending_before(b.first, a.first);
          });
        } else {
          std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
            return ascending_before(a.first, b.first);
          });
        }
        write_line(lines, line, items, int64_t(items.size()), with_values);
      }
    });
  });
}

void topk(const StridedView& values, const StridedView& indices, const StridedView& in, int dim,
          bool largest) {
  const SortLines lines = lines_of(values, indices, in, dim);
  const int64_t k = lines.length(kIndices);
  KILN_CHECK_INDEX(k <= lines.length(kInput), "topk: selected index k out of range (k = ", k,
                   ", dim ", dim, " has size ", lines.length(kInput), ")");
  visit_dtype(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    // Best first; equal values by index, so the order is total and the
    // result does not depend on the algorithm.
    auto best_first = [largest](const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) {
      const bool a_first =
          largest ? ascending_before(b.first, a.first) : ascending_before(a.first, b.first);
      const bool b_first =
          largest ? ascending_before(a.first, b.first) : ascending_before(b.first, a.first);
      return a_first || (!b_first && a.second < b.second);
    };
    for_line_ranges(lines, [&](int64_t first, int64_t last) {
      Items<T> items;
      for (int64_t line = first; line < last; ++line) {
        read_line(lines, line, items);
        std::partial_sort(items.begin(), items.begin() + k, items.end(), best_first);
        write_line(lines, line, items, k, values.data != nullptr);
      }
    });
  });
}

}  // namespace kiln::cpu
