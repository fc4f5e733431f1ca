#include "op_refs.h"

#include <fstream>
#include <type_traits>

#include "kiln/core/factory.h"
#include "kiln/ops/copy.h"

namespace kiln {

using nlohmann::json;

const json& op_refs() {
  static const json refs = [] {
    const char* path = std::getenv("KILN_OP_REFS");
    std::ifstream in(path ? path : KILN_OP_REFS);
    if (!in) {
      throw Error(str("cannot open the op reference file ", path ? path : KILN_OP_REFS,
                      "; run tests/oracle/gen_refs.py (make test does)"));
    }
    return json::parse(in);
  }();
  return refs;
}

double json_number(const json& v) {
  if (v.is_string()) return std::stod(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return v.get<double>();
}

namespace {

Tensor contiguous_from_json(const json& spec) {
  DType dtype = dtype_from_string(spec["dtype"]);
  IntList shape = spec["shape"].get<IntList>();
  Tensor t = empty(shape, dtype);
  const json& data = spec["data"];
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const json& v = data[size_t(i)];
      // Through a double, int64's extremes (2^63 - 1) would round.
      if constexpr (std::is_integral_v<T>) {
        if (v.is_number_integer()) {
          p[i] = T(v.get<int64_t>());
          continue;
        }
      }
      p[i] = T(json_number(v));
    }
  });
  return t;
}

// Same values, other strides: the storage is laid out differently and a view
// presents it in the logical shape.
Tensor relayout(const Tensor& src, const std::string& layout) {
  const IntList& shape = src.shape();
  int64_t nd = src.dim();
  if (layout == "contiguous" || nd == 0) return src;
  if (layout == "transposed") {
    IntList reversed(shape.rbegin(), shape.rend());
    Tensor storage = empty(reversed, src.dtype());
    IntList reversed_strides = contiguous_strides(reversed);
    IntList strides(reversed_strides.rbegin(), reversed_strides.rend());
    Tensor view = make_view(storage, shape, strides, 0);
    copy_(view, src);
    return view;
  }
  if (layout == "strided") {
    IntList doubled = shape;
    doubled.back() *= 2;
    Tensor storage = zeros(doubled, src.dtype());
    IntList strides = contiguous_strides(doubled);
    strides.back() = 2;
    Tensor view = make_view(storage, shape, strides, 0);
    copy_(view, src);
    return view;
  }
  if (layout == "expanded") {
    IntList row_shape(shape.begin() + 1, shape.end());
    Tensor row = empty(row_shape, src.dtype());
    copy_(row,
          make_view(src, row_shape, IntList(src.strides().begin() + 1, src.strides().end()), 0));
    IntList strides = contiguous_strides(shape);
    strides[0] = 0;
    return make_view(row, shape, strides, 0);
  }
  throw Error(str("unknown layout '", layout, "' in the op reference file"));
}

}  // namespace

Tensor tensor_from_json(const json& spec) {
  if (spec.value("absent", false)) return Tensor();
  Tensor t = relayout(contiguous_from_json(spec), spec.value("layout", "contiguous"));
  t.impl()->wrapped_number = spec.value("wrapped", false);
  return t;
}

Attrs attrs_from_json(const OpDef& def, const json& attrs) {
  Attrs out;
  for (const auto& [name, value] : attrs.items()) {
    auto spec = std::find_if(def.attrs.begin(), def.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    if (value.is_null()) {
      out.set(name, std::monostate{});
    } else if (spec != def.attrs.end() && spec->kind == AttrKind::DType) {
      out.set(name, dtype_from_string(value.get<std::string>()));
    } else if (value.is_boolean()) {
      out.set(name, value.get<bool>());
    } else if (value.is_number_integer()) {
      out.set(name, value.get<int64_t>());
    } else if (value.is_number()) {
      out.set(name, value.get<double>());
    } else if (value.is_array()) {
      out.set(name, value.get<IntList>());
    } else {
      out.set(name, value.get<std::string>());
    }
  }
  return out;
}

std::string test_name_of(const std::string& case_id) {
  std::string name;
  for (char ch : case_id)
    name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

}  // namespace kiln
