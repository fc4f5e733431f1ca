#include "kiln/core/sym_shape.h"

#include "kiln/core/shape.h"
#include "kiln/core/tensor.h"
#include "kiln/core/trace_hook.h"

namespace kiln {

DimList sym_shape(const Tensor& t) {
  if (TraceHook* hook = trace_hook()) {
    if (std::optional<DimList> dims = hook->symbolic_shape(t)) return std::move(*dims);
  }
  return to_dims(t.shape());
}

Dim sym_size(const Tensor& t, int64_t dim) {
  DimList dims = sym_shape(t);
  int64_t d = wrap_dim(dim, int64_t(dims.size()), "size", t.shape());
  return dims[size_t(d)];
}

Dim sym_numel(const Tensor& t) {
  return numel_of(sym_shape(t));
}

int64_t size_as_int(const Dim& size, const char* what, std::source_location where) {
  if (size.is_static()) return size.static_value();
  ShapeEnv* env = current_shape_env();
  KILN_CHECK(env != nullptr, what, ": the symbolic size ", size,
             " has no value outside a trace with dynamic shapes");
  std::vector<std::string> missing;
  for (const std::string& s : size.expr().symbols()) {
    if (!env->hint(s)) missing.push_back(s);
  }
  KILN_CHECK(missing.empty(), what, ": the symbolic size ", size, " has no value (",
             missing.empty() ? "" : missing[0], " is not a size of this trace)");
  int64_t value = size.expr().evaluate(env->hints());
  env->add_guard(ShapeGuard{size.expr(), SizeExpr(value), ShapeGuard::Relation::Eq, what});
  if (TraceHook* hook = trace_hook()) hook->on_size_specialized(size, value, what, where);
  return value;
}

}  // namespace kiln
