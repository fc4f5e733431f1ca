#include "kiln/nn/conv_layers.h"

#include <cmath>

#include "kiln/core/factory.h"
#include "kiln/nn/init.h"
#include "kiln/ops/resample.h"
#include "kiln/ops/view.h"

namespace kiln::nn {
namespace functional {
namespace {

// PyTorch's _single: a 1-D convolution's attributes are one number.
int64_t single(const IntList& v, const char* op, const char* name) {
  KILN_CHECK(v.size() == 1, op, ": expected ", name,
             " to be a single integer value or a list of 1 values to match the convolution "
             "dimensions, but got ",
             name, "=", v);
  return v[0];
}

void check_padding_string(const std::string& padding, const IntList& stride, const char* op) {
  KILN_CHECK(padding == "same" || padding == "valid", op, ": invalid padding string: '", padding,
             "'");
  for (int64_t s : stride) {
    KILN_CHECK(padding != "same" || s == 1, op,
               ": padding='same' is not supported for strided convolutions");
  }
}

// padding="same": each spatial dim of x padded by dilation * (kernel - 1)
// in all, half on the left; an odd total puts the extra element on the
// right, which the convolution's symmetric padding cannot, so x is padded
// by that element first. Returns x (maybe padded) and the symmetric padding.
std::pair<Tensor, IntList> same_padding(const Tensor& x, const Tensor& w, const IntList& dilation) {
  const size_t dims = size_t(w.dim() - 2);
  IntList symmetric(dims), extra;  // extra: F.pad's pairs, last dim first
  bool any_extra = false;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t d = dilation.size() == 1 ? dilation[0] : dilation[i];
    const int64_t total = d * (w.shape()[2 + i] - 1);
    symmetric[i] = total / 2;
    any_extra = any_extra || total % 2 != 0;
  }
  if (!any_extra) return {x, symmetric};
  for (size_t i = dims; i-- > 0;) {
    const int64_t d = dilation.size() == 1 ? dilation[0] : dilation[i];
    extra.push_back(0);
    extra.push_back(d * (w.shape()[2 + i] - 1) % 2);
  }
  return {pad(x, extra), symmetric};
}

void check_1d_input(const Tensor& x, const Tensor& w, const char* op) {
  KILN_CHECK(x.dim() == 2 || x.dim() == 3, op,
             ": expected 2-D (unbatched) or 3-D (batched) input, got shape ", x.shape());
  KILN_CHECK(w.dim() == 3, op, ": expected a 3-D weight, got shape ", w.shape());
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride, IntList padding,
              IntList dilation, int64_t groups) {
  check_1d_input(x, w, "conv1d");
  const int64_t channels = x.shape()[size_t(x.dim() - 2)];
  KILN_CHECK(groups > 0, "conv1d: non-positive groups is not supported, got ", groups);
  KILN_CHECK(channels == w.shape()[1] * groups, "conv1d: given groups=", groups,
             ", weight of size ", w.shape(), ", expected input", x.shape(), " to have ",
             w.shape()[1] * groups, " channels, but got ", channels, " channels instead");
  Tensor y =
      kiln::conv2d(unsqueeze(x, -2), unsqueeze(w, -2), b, {1, single(stride, "conv1d", "stride")},
                   {0, single(padding, "conv1d", "padding")},
                   {1, single(dilation, "conv1d", "dilation")}, groups);
  return squeeze(y, -2);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
              const std::string& padding, IntList dilation, int64_t groups) {
  check_padding_string(padding, stride, "conv1d");
  if (padding == "valid") return conv1d(x, w, b, stride, IntList{0}, dilation, groups);
  check_1d_input(x, w, "conv1d");
  single(dilation, "conv1d", "dilation");
  auto [input, symmetric] = same_padding(x, w, dilation);
  return conv1d(input, w, b, stride, symmetric, dilation, groups);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
              const std::string& padding, IntList dilation, int64_t groups) {
  check_padding_string(padding, stride, "conv2d");
  if (padding == "valid") return conv2d(x, w, b, stride, IntList{0, 0}, dilation, groups);
  KILN_CHECK(w.dim() == 4, "conv2d: expected a 4-D weight, got shape ", w.shape());
  KILN_CHECK(dilation.size() == 1 || dilation.size() == 2,
             "conv2d: expected dilation to have 1 or 2 values, got ", dilation);
  auto [input, symmetric] = same_padding(x, w, dilation);
  return conv2d(input, w, b, stride, symmetric, dilation, groups);
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, IntList stride,
                        IntList padding, IntList output_padding, int64_t groups, IntList dilation) {
  const char* op = "conv_transpose1d";
  check_1d_input(x, w, op);
  const int64_t channels = x.shape()[size_t(x.dim() - 2)];
  KILN_CHECK(channels == w.shape()[0], op, ": given transposed=1, weight of size ", w.shape(),
             ", expected input", x.shape(), " to have ", w.shape()[0], " channels, but got ",
             channels, " channels instead");
  Tensor y = conv_transpose2d(
      unsqueeze(x, -2), unsqueeze(w, -2), b, {1, single(stride, op, "stride")},
      {0, single(padding, op, "padding")}, {0, single(output_padding, op, "output_padding")},
      groups, {1, single(dilation, op, "dilation")});
  return squeeze(y, -2);
}

IntList conv_transpose_output_padding(const Tensor& x, const IntList& output_size,
                                      const IntList& stride, const IntList& padding,
                                      const IntList& kernel_size, const IntList& dilation,
                                      int64_t spatial_dims) {
  const int64_t leading = x.dim() == spatial_dims + 2 ? 2 : 1;
  IntList size = output_size;
  if (int64_t(size.size()) == leading + spatial_dims)
    size.erase(size.begin(), size.begin() + leading);
  KILN_CHECK_VALUE(int64_t(size.size()) == spatial_dims, "ConvTranspose", spatial_dims, "D: for ",
                   x.dim(), "D input, output_size must have ", spatial_dims, " or ",
                   leading + spatial_dims, " elements (got ", output_size.size(), ")");
  IntList min_sizes, max_sizes, result;
  for (int64_t d = 0; d < spatial_dims; ++d) {
    const size_t i = size_t(d);
    const int64_t in = x.shape()[size_t(leading + d)];
    min_sizes.push_back((in - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1) +
                        1);
    max_sizes.push_back(min_sizes[i] + stride[i] - 1);
  }
  for (size_t i = 0; i < size.size(); ++i) {
    KILN_CHECK_VALUE(size[i] >= min_sizes[i] && size[i] <= max_sizes[i],
                     "requested an output size of ", size, ", but valid sizes range from ",
                     min_sizes, " to ", max_sizes, " (for an input of ",
                     IntList(x.shape().end() - spatial_dims, x.shape().end()), ")");
    result.push_back(size[i] - min_sizes[i]);
  }
  return result;
}

}  // namespace functional

namespace {

namespace F = functional;

// A Python tuple: "(3,)" or "(3, 3)".
std::string py_tuple(const IntList& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + (v.size() == 1 ? ",)" : ")");
}

// PyTorch's _ConvNd.reset_parameters: kaiming_uniform_(a=sqrt(5)) on the
// weight, U(±1/sqrt(fan_in)) on the bias.
void reset_conv(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (!bias.defined()) return;
  const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0;
  init::uniform_(bias, -bound, bound);
}

void check_channels(const char* type, int64_t in_channels, int64_t out_channels, int64_t groups) {
  KILN_CHECK_VALUE(groups > 0, type, ": groups must be a positive integer, got ", groups);
  KILN_CHECK_VALUE(in_channels % groups == 0, type, ": in_channels must be divisible by groups");
  KILN_CHECK_VALUE(out_channels % groups == 0, type, ": out_channels must be divisible by groups");
}

// One value for each of `dims` dims, from one value or one per dim.
IntList per_dim(const IntList& v, int64_t dims, const char* type, const char* name) {
  KILN_CHECK_VALUE(v.size() == 1 || int64_t(v.size()) == dims, type, ": ", name, " must have 1 or ",
                   dims, " values, got ", v);
  return v.size() == 1 ? IntList(size_t(dims), v[0]) : v;
}

}  // namespace

// ---- Conv1d ----------------------------------------------------------------

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, int64_t dilation, int64_t groups, bool with_bias,
               std::string padding_mode)
    : Module("Conv1d"),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(kernel_size),
      stride(stride),
      padding(padding),
      dilation(dilation),
      groups(groups),
      padding_mode(std::move(padding_mode)) {
  init(with_bias);
}

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               std::string padding_, int64_t dilation, int64_t groups, bool with_bias,
               std::string padding_mode)
    : Conv1d(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, with_bias,
             std::move(padding_mode)) {
  KILN_CHECK_VALUE(padding_ == "same" || padding_ == "valid", "Conv1d: invalid padding string '",
                   padding_, "', should be one of {'valid', 'same'}");
  KILN_CHECK_VALUE(padding_ != "same" || stride == 1,
                   "Conv1d: padding='same' is not supported for strided convolutions");
  padding_string = std::move(padding_);
}

void Conv1d::init(bool with_bias) {
  check_channels("Conv1d", in_channels, out_channels, groups);
  const bool known = padding_mode == "zeros" || padding_mode == "reflect" ||
                     padding_mode == "replicate" || padding_mode == "circular";
  KILN_CHECK_VALUE(known,
                   "Conv1d: padding_mode must be one of {'zeros', 'reflect', 'replicate', "
                   "'circular'}, but got padding_mode='",
                   padding_mode, "'");
  weight = register_parameter("weight", empty({out_channels, in_channels / groups, kernel_size}));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void Conv1d::reset_parameters() {
  reset_conv(weight, bias);
}

Tensor Conv1d::forward(const Tensor& x) {
  if (padding_mode == "zeros") {
    if (!padding_string.empty()) {
      return F::conv1d(x, weight, bias, {stride}, padding_string, {dilation}, groups);
    }
    return F::conv1d(x, weight, bias, {stride}, IntList{padding}, {dilation}, groups);
  }
  // PyTorch's _reversed_padding_repeated_twice, for a "same" padding too.
  int64_t left = padding, right = padding;
  if (padding_string == "same") {
    const int64_t total = dilation * (kernel_size - 1);
    left = total / 2;
    right = total - left;
  } else if (padding_string == "valid") {
    left = right = 0;
  }
  return F::conv1d(pad(x, {left, right}, padding_mode), weight, bias, {stride}, IntList{0},
                   {dilation}, groups);
}

std::string Conv1d::extra_repr() const {
  std::string out = str(in_channels, ", ", out_channels, ", kernel_size=", py_tuple({kernel_size}),
                        ", stride=", py_tuple({stride}));
  if (!padding_string.empty()) out += ", padding=" + padding_string;
  if (padding_string.empty() && padding != 0) out += ", padding=" + py_tuple({padding});
  if (dilation != 1) out += ", dilation=" + py_tuple({dilation});
  if (groups != 1) out += str(", groups=", groups);
  if (!bias.defined()) out += ", bias=False";
  if (padding_mode != "zeros") out += ", padding_mode=" + padding_mode;
  return out;
}

// ---- ConvTranspose1d / ConvTranspose2d --------------------------------------

ConvTranspose::ConvTranspose(const char* type_name, int64_t spatial_dims, int64_t in_channels,
                             int64_t out_channels, IntList kernel_size_, IntList stride_,
                             IntList padding_, IntList output_padding_, int64_t groups,
                             bool with_bias, IntList dilation_, const std::string& padding_mode)
    : Module(type_name),
      in_channels(in_channels),
      out_channels(out_channels),
      kernel_size(per_dim(kernel_size_, spatial_dims, type_name, "kernel_size")),
      stride(per_dim(stride_, spatial_dims, type_name, "stride")),
      padding(per_dim(padding_, spatial_dims, type_name, "padding")),
      output_padding(per_dim(output_padding_, spatial_dims, type_name, "output_padding")),
      dilation(per_dim(dilation_, spatial_dims, type_name, "dilation")),
      groups(groups),
      spatial_dims(spatial_dims) {
  KILN_CHECK_VALUE(padding_mode == "zeros", "Only \"zeros\" padding mode is supported for ",
                   type_name);
  check_channels(type_name, in_channels, out_channels, groups);
  IntList shape{in_channels, out_channels / groups};
  shape.insert(shape.end(), kernel_size.begin(), kernel_size.end());
  weight = register_parameter("weight", empty(shape));
  bias = register_parameter("bias", with_bias ? empty({out_channels}) : Tensor());
  reset_parameters();
}

void ConvTranspose::reset_parameters() {
  reset_conv(weight, bias);
}

IntList ConvTranspose::output_padding_for(const Tensor& x, const IntList& output_size) const {
  if (output_size.empty()) return output_padding;
  return F::conv_transpose_output_padding(x, output_size, stride, padding, kernel_size, dilation,
                                          spatial_dims);
}

std::string ConvTranspose::extra_repr() const {
  const IntList zeros(size_t(spatial_dims), 0), ones(size_t(spatial_dims), 1);
  std::string out = str(in_channels, ", ", out_channels, ", kernel_size=", py_tuple(kernel_size),
                        ", stride=", py_tuple(stride));
  if (padding != zeros) out += ", padding=" + py_tuple(padding);
  if (dilation != ones) out += ", dilation=" + py_tuple(dilation);
  if (output_padding != zeros) out += ", output_padding=" + py_tuple(output_padding);
  if (groups != 1) out += str(", groups=", groups);
  if (!bias.defined()) out += ", bias=False";
  return out;
}

ConvTranspose1d::ConvTranspose1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                                 int64_t stride, int64_t padding, int64_t output_padding,
                                 int64_t groups, bool bias, int64_t dilation,
                                 const std::string& padding_mode)
    : ConvTranspose("ConvTranspose1d", 1, in_channels, out_channels, {kernel_size}, {stride},
                    {padding}, {output_padding}, groups, bias, {dilation}, padding_mode) {}

Tensor ConvTranspose1d::forward(const Tensor& x, const IntList& output_size) {
  return F::conv_transpose1d(x, weight, bias, stride, padding, output_padding_for(x, output_size),
                             groups, dilation);
}

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, IntList kernel_size,
                                 IntList stride, IntList padding, IntList output_padding,
                                 int64_t groups, bool bias, IntList dilation,
                                 const std::string& padding_mode)
    : ConvTranspose("ConvTranspose2d", 2, in_channels, out_channels, std::move(kernel_size),
                    std::move(stride), std::move(padding), std::move(output_padding), groups, bias,
                    std::move(dilation), padding_mode) {}

Tensor ConvTranspose2d::forward(const Tensor& x, const IntList& output_size) {
  return F::conv_transpose2d(x, weight, bias, stride, padding, output_padding_for(x, output_size),
                             groups, dilation);
}

}  // namespace kiln::nn
