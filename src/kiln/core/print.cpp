// Tensor printing in PyTorch's format: tensor([[1., 2.]]), four decimals or
// scientific notation chosen from the values, summarized past 1000 elements.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kiln/core/tensor.h"

namespace kiln {
namespace {

constexpr int64_t kThreshold = 1000;  // numel above which output is summarized
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

std::string format_with(const char* pattern, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), pattern, v);
  return buf;
}

// Chooses one notation for all printed values, as PyTorch's _Formatter does.
class Formatter {
 public:
  Formatter(DType dtype, const std::vector<Scalar>& values) : dtype_(dtype) {
    if (!is_floating(dtype)) return;
    double lo = INFINITY, hi = 0;
    bool all_integers = true;
    for (const Scalar& s : values) {
      double v = std::fabs(s.to_double());
      if (!std::isfinite(v) || v == 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      all_integers &= v == std::ceil(v);
    }
    if (hi == 0) {  // only zeros and non-finite values
      integer_mode_ = true;
      return;
    }
    integer_mode_ = all_integers;
    sci_mode_ = hi / lo > 1000 || hi > 1e8 || (!all_integers && lo < 1e-4);
  }

  std::string format(const Scalar& s) const {
    if (dtype_ == DType::Bool) return s.to_bool() ? "True" : "False";
    if (!is_floating(dtype_)) return std::to_string(s.to_int());
    double v = s.to_double();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode_) return format_with("%.4e", v);
    if (integer_mode_) return format_with("%.0f", v) + ".";
    return format_with("%.4f", v);
  }

 private:
  DType dtype_;
  bool integer_mode_ = false;
  bool sci_mode_ = false;
};

// The indices along one dim that get printed: all, or the edges when summarizing.
std::vector<int64_t> shown_indices(int64_t size, bool summarize) {
  std::vector<int64_t> out;
  if (!summarize || size <= 2 * kEdgeItems) {
    for (int64_t i = 0; i < size; ++i)
      out.push_back(i);
    return out;
  }
  for (int64_t i = 0; i < kEdgeItems; ++i)
    out.push_back(i);
  out.push_back(-1);  // the "..." marker
  for (int64_t i = size - kEdgeItems; i < size; ++i)
    out.push_back(i);
  return out;
}

class Printer {
 public:
  Printer(const Tensor& t, bool summarize) : t_(t), summarize_(summarize) {}

  // Collects every value that will be printed so the formatter sees them all.
  void collect(int64_t dim, int64_t offset, std::vector<Scalar>& out) const {
    if (dim == t_.dim()) {
      out.push_back(element(offset));
      return;
    }
    for (int64_t i : shown_indices(t_.shape()[dim], summarize_)) {
      if (i >= 0) collect(dim + 1, offset + i * t_.strides()[dim], out);
    }
  }

  std::string render(int64_t dim, int64_t offset, int64_t indent, const Formatter& fmt,
                     size_t width) const {
    std::vector<int64_t> shown = shown_indices(t_.shape()[dim], summarize_);
    std::string out = "[";
    if (dim == t_.dim() - 1) {
      int64_t per_line = std::max<int64_t>((kLineWidth - indent) / int64_t(width + 2), 1);
      for (size_t k = 0; k < shown.size(); ++k) {
        if (k > 0) out += k % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
        if (shown[k] < 0) {
          out += " ...";  // PyTorch pads the marker by one space in the last dim
          continue;
        }
        std::string s = fmt.format(element(offset + shown[k] * t_.strides()[dim]));
        out += std::string(width - s.size(), ' ') + s;
      }
      return out + "]";
    }
    std::string separator = ",";
    separator.append(size_t(t_.dim() - dim - 1), '\n');
    separator.append(size_t(indent + 1), ' ');
    for (size_t k = 0; k < shown.size(); ++k) {
      if (k > 0) out += separator;
      if (shown[k] < 0) {
        out += "...";
        continue;
      }
      out += render(dim + 1, offset + shown[k] * t_.strides()[dim], indent + 1, fmt, width);
    }
    return out + "]";
  }

 private:
  Scalar element(int64_t elem_offset) const {
    // read_element walks a row-major index; here the offset is already known,
    // so view the single element directly.
    Tensor one = make_view(t_, {}, {}, t_.offset() + elem_offset);
    return read_element(one, 0);
  }

  const Tensor& t_;
  bool summarize_;
};

}  // namespace

std::string Tensor::to_string(std::source_location where) const {
  if (defined()) report_host_read(*this, "to_string()", where);
  return detail::render(*this);
}

std::string detail::render(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  std::string body;
  bool show_dtype =
      t.dtype() != DType::Float32 && t.dtype() != DType::Int64 && t.dtype() != DType::Bool;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) {
      std::string size = "(";
      for (int64_t d = 0; d < t.dim(); ++d)
        size += (d ? ", " : "") + std::to_string(t.shape()[d]);
      if (t.dim() == 1) size += ",";
      body += ", size=" + size + ")";
    }
  } else {
    Printer printer(t, t.numel() > kThreshold);
    std::vector<Scalar> values;
    printer.collect(0, 0, values);
    Formatter fmt(t.dtype(), values);
    size_t width = 0;
    for (const Scalar& v : values)
      width = std::max(width, fmt.format(v).size());
    body = t.dim() == 0 ? fmt.format(values[0])
                        : printer.render(0, 0, int64_t(prefix.size()), fmt, width);
  }
  if (show_dtype) body += ", dtype=kiln." + kiln::to_string(t.dtype());
  return prefix + body + ")";
}

std::string to_string(const Scalar& s) {
  if (s.kind() == DType::Bool) return s.to_bool() ? "True" : "False";
  if (s.kind() == DType::Int64) return std::to_string(s.to_int());
  return format_with("%g", s.to_double());
}

}  // namespace kiln
