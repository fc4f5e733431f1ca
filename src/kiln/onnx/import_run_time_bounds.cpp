// Note [Bounds at run time]: a bound computed at run time makes the length
// of a Slice or a Range depend on values, which kiln's shapes cannot hold
// (Note [Data-dependent output shapes] in ops/data_dependent.h). Exporters
// often compute the end from the start, though: a Loop that carries its
// step as a tensor slices [i, min(n, i + 1)) and scatters at Range(i,
// min(n, i + 1)) (PaddlePaddle's x[:, i] = v). Walking the kiln nodes that
// computed both bounds back to a value b they share, through additions of
// constants, casts that keep whole numbers and minimums with a constant,
// gives start = b + s and end = min(cap, b + e): the length is e - s
// wherever the cap does not bind. The translation reads start + 0..L-1
// through an index_select, whose check at run time turns every case where
// ONNX would wrap or clamp a bound (a start below 0, a slice past the end
// of the axis or of the cap) into an error naming the index, never into a
// different answer.
#include "kiln/onnx/import_run_time_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "kiln/core/factory.h"

namespace kiln::onnx {
namespace {

using jit::Value;

// float32 holds every whole number up to 2^24.
constexpr int64_t kExactInFloat32 = int64_t(1) << 24;
// The largest cap a Range's values are checked against (an arange of it).
constexpr int64_t kMaxCheckedCap = int64_t(1) << 20;

bool one_element(const Value* value) {
  for (const Dim& size : value->shape())
    if (!size.is_static() || size.static_value() != 1) return false;
  return true;
}

// A constant of one whole number (a float one too: 1.0 added in float).
std::optional<int64_t> whole_constant(const ImportContext& c, const Value* value) {
  if (!c.is_constant(value) || !one_element(value)) return std::nullopt;
  const double number = read_element(value->data(), 0).to<double>();
  if (number != std::trunc(number) || std::abs(number) > 1e15) return std::nullopt;
  return int64_t(number);
}

// value == min(cap, base + shift), `magnitude` the sum of the constants'
// sizes on the way (which bounds every step's value once base is bounded).
struct Offset {
  const Value* base = nullptr;
  int64_t shift = 0;
  std::optional<int64_t> cap;
  int64_t magnitude = 0;
  bool through_float32 = false;
};

Offset offset_of(const ImportContext& c, const Value* value) {
  Offset offset;
  const Value* at = value;
  while (at->producer() && one_element(at)) {
    const jit::Node& node = *at->producer();
    const std::string& op = node.op().name;
    if (op == "reshape" || op == "squeeze" || op == "unsqueeze" || op == "view") {
      at = node.input(0);
      continue;
    }
    if (op == "cast") {  // whole numbers stay whole (float32 up to 2^24, checked by the callers)
      const Value* from = node.input(0);
      if (from->dtype() == DType::Bool || at->dtype() == DType::Bool) break;
      offset.through_float32 = offset.through_float32 || from->dtype() == DType::Float32 ||
                               at->dtype() == DType::Float32;
      at = from;
      continue;
    }
    if ((op != "add" && op != "sub" && op != "minimum") || node.inputs().size() != 2) break;
    std::optional<int64_t> first = whole_constant(c, node.input(0));
    std::optional<int64_t> second = whole_constant(c, node.input(1));
    if (bool(first) == bool(second) || (op == "sub" && first)) break;  // sub: c - x negates x
    const int64_t constant = first ? *first : *second;
    const Value* rest = first ? node.input(1) : node.input(0);
    if (!one_element(rest)) break;
    if (op == "minimum") {  // min(cap, min(k, x) + shift) = min(cap, k + shift, x + shift)
      offset.cap = std::min(offset.cap.value_or(constant + offset.shift), constant + offset.shift);
    } else {  // min(cap, (x + k) + shift): the cap stays
      offset.shift += op == "add" ? constant : -constant;
    }
    offset.magnitude += std::abs(constant);
    at = rest;
  }
  offset.base = at;
  return offset;
}

// The two bounds as offsets of one value computed at run time, or nothing.
std::optional<std::pair<Offset, Offset>> shared_base(const ImportContext& c, const Value* start,
                                                     const Value* end) {
  if (!start || !end || !one_element(start) || !one_element(end)) return std::nullopt;
  if (start->dtype() != DType::Int64 && start->dtype() != DType::Int32) return std::nullopt;
  Offset from = offset_of(c, start), to = offset_of(c, end);
  if (from.base != to.base || from.cap || c.is_constant(from.base) || c.holds_symbols(from.base))
    return std::nullopt;
  return std::make_pair(from, to);
}

// start + 0, 1, ..., length - 1 as int64 of shape [length].
Value* positions(ImportContext& c, Value* start, int64_t length, int64_t step) {
  Value* first = c.emit("reshape", {start}, {{"shape", DimList{}}});
  if (first->dtype() != DType::Int64) first = c.emit("cast", {first}, {{"dtype", DType::Int64}});
  Tensor steps = arange(Scalar(length));
  if (step != 1) steps = arange(Scalar(int64_t(0)), Scalar(length * step), Scalar(step));
  return c.emit("add", {c.constant(steps), first});
}

}  // namespace

Value* slice_at_run_time(ImportContext& c, Value* x, int64_t axis, Value* starts, Value* ends) {
  auto bounds = shared_base(c, starts, ends);
  if (!bounds) return nullptr;
  const auto& [from, to] = *bounds;
  const int64_t length = to.shift - from.shift;
  if (length <= 0) return nullptr;  // ONNX wraps a negative end: not empty for every start
  const Dim& size = x->shape().at(size_t(axis));
  // A cap at or past the axis binds no more than ONNX's clamp to it, past
  // which the index_select fails.
  if (to.cap && !(size.is_static() && *to.cap >= size.static_value())) return nullptr;
  if (from.through_float32 || to.through_float32) {
    // Indices below the axis' size keep every step within 2^24.
    if (!size.is_static() || size.static_value() + from.magnitude + to.magnitude > kExactInFloat32)
      return nullptr;
  }
  return c.emit("index_select", {x, positions(c, starts, length, 1)}, {{"dim", axis}});
}

Value* range_at_run_time(ImportContext& c, Value* start, Value* limit, Value* delta) {
  std::optional<int64_t> step = delta ? whole_constant(c, delta) : std::nullopt;
  if (!step || *step <= 0) return nullptr;
  auto bounds = shared_base(c, start, limit);
  if (!bounds) return nullptr;
  const auto& [from, to] = *bounds;
  const int64_t span = to.shift - from.shift;
  const int64_t length = span <= 0 ? 0 : (span + *step - 1) / *step;
  // Without a cap the values are unbounded: no cast through float32.
  if ((from.through_float32 || to.through_float32) &&
      (!to.cap || *to.cap + from.magnitude + to.magnitude > kExactInFloat32))
    return nullptr;
  if (length == 0) return c.constant(zeros({0}, start->dtype()));
  Value* values = positions(c, start, length, *step);
  if (to.cap) {
    // ONNX's Range stops at the cap: every value must lie below it, which
    // reading them back from 0..cap-1 checks.
    if (*to.cap <= 0 || *to.cap > kMaxCheckedCap) return nullptr;
    values = c.emit("index_select", {c.constant(arange(Scalar(*to.cap))), values},
                    {{"dim", int64_t(0)}});
  }
  if (values->dtype() != start->dtype())
    values = c.emit("cast", {values}, {{"dtype", start->dtype()}});
  return values;
}

}  // namespace kiln::onnx
