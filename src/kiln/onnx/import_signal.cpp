// DFT, STFT and MelWeightMatrix (Det is kiln's det, one to one: OnnxInfo).
//
//   DFT              -> dft (opset 17: axis an attribute, default 1; opset
//                       20: an input, default -2); dft_length must be known
//                       at import
//   STFT             -> the frames gathered by index_select ([B, frames,
//                       frame_length, 1 or 2]), times the window, then dft
//                       along the frame; frame_step and frame_length must be
//                       known at import, and the signal's length static
//   MelWeightMatrix  -> a constant, computed at import from its five scalar
//                       inputs (which must be known then) as ONNX's
//                       reference does
#include <cmath>
#include <numbers>
#include <vector>

#include "kiln/core/factory.h"
#include "kiln/onnx/import_util.h"
#include "kiln/ops/copy.h"

namespace kiln::onnx {
namespace {

using jit::Value;
using Node = pb::NodeProto;

int64_t known_int(ImportContext& c, const Node& node, int input, const std::string& what) {
  const IntList values = c.constant_ints(c.input(node, input), node.op_type() + "'s " + what);
  KILN_CHECK(values.size() == 1, "onnx import: ", node.op_type(), " '", node.name(), "': ", what,
             " must be a scalar, got ", values.size(), " values");
  return values[0];
}

double known_float(ImportContext& c, const Node& node, int input, const std::string& what) {
  const Tensor& data = c.constant_data(c.input(node, input), node.op_type() + "'s " + what);
  KILN_CHECK(data.numel() == 1, "onnx import: ", node.op_type(), " '", node.name(), "': ", what,
             " must be a scalar, got shape ", data.shape());
  return to(data, DType::Float64).data<double>()[0];
}

void dft(const Node& node, ImportContext& c) {
  int64_t length = 0;
  if (c.input(node, 1)) {
    length = known_int(c, node, 1, "dft_length");
    KILN_CHECK_VALUE(length >= 1, "onnx import: DFT '", node.name(),
                     "': dft_length must be at least 1, got ", length);
  }
  int64_t axis = attr_int(node, "axis", 1);
  if (c.opset() >= 20) axis = c.input(node, 2) ? known_int(c, node, 2, "axis") : -2;
  define(node, c,
         c.emit("dft", {c.input(node, 0)},
                {{"axis", axis},
                 {"length", length},
                 {"inverse", attr_int(node, "inverse", 0) != 0},
                 {"onesided", attr_int(node, "onesided", 0) != 0}}));
}

// The sample indices of every frame, frame after frame: f * step + j.
Tensor frame_indices(int64_t frames, int64_t frame_length, int64_t step) {
  std::vector<int64_t> indices;
  indices.reserve(size_t(frames * frame_length));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < frame_length; ++j)
      indices.push_back(f * step + j);
  return tensor(indices, {frames * frame_length}, DType::Int64);
}

void stft(const Node& node, ImportContext& c) {
  Value* signal = c.input(node, 0);
  Value* window = c.input(node, 2);
  KILN_CHECK(rank_of(signal) == 3, "onnx import: STFT '", node.name(),
             "' expects a signal [batch, length, 1 or 2], got shape ", to_string(signal->shape()));
  const int64_t signal_length = concrete_size(node, 0, signal, 1, "STFT's frame count");
  const int64_t step = known_int(c, node, 1, "frame_step");
  int64_t frame_length = signal_length;
  if (c.input(node, 3)) frame_length = known_int(c, node, 3, "frame_length");
  if (window) {
    KILN_CHECK(rank_of(window) == 1, "onnx import: STFT '", node.name(),
               "' expects a 1-D window, got shape ", to_string(window->shape()));
    const int64_t window_length = concrete_size(node, 2, window, 0, "STFT's frame length");
    KILN_CHECK(!c.input(node, 3) || window_length == frame_length, "onnx import: STFT '",
               node.name(), "': the window's length ", window_length, " differs from frame_length ",
               frame_length);
    frame_length = window_length;
  }
  KILN_CHECK_VALUE(step >= 1, "onnx import: STFT '", node.name(),
                   "': frame_step must be at least 1, got ", step);
  KILN_CHECK_VALUE(frame_length >= 1 && frame_length <= signal_length, "onnx import: STFT '",
                   node.name(), "': frame_length ", frame_length,
                   " must be in [1, the signal's length ", signal_length, "]");
  const int64_t frames = (signal_length - frame_length) / step + 1;
  Value* gathered =
      c.emit("index_select", {signal, c.constant(frame_indices(frames, frame_length, step))},
             {{"dim", int64_t(1)}});
  const DimList& shape = signal->shape();
  Value* framed =
      c.emit("reshape", {gathered}, {{"shape", DimList{shape[0], frames, frame_length, shape[2]}}});
  if (window) {
    Value* column = c.emit("reshape", {window}, {{"shape", DimList{frame_length, 1}}});
    framed = c.emit("mul", {framed, column});
  }
  define(node, c,
         c.emit("dft", {framed},
                {{"axis", int64_t(2)},
                 {"length", frame_length},
                 {"inverse", false},
                 {"onesided", attr_int(node, "onesided", 1) != 0}}));
}

double hertz_to_mel(double hertz) {
  return 2595 * std::log1p(hertz / 700) / std::numbers::ln10;
}

double mel_to_hertz(double mel) {
  return 700 * std::expm1(mel / 2595 * std::numbers::ln10);
}

// [dft_length / 2 + 1, num_mel_bins]: triangles rising from one band edge's
// spectrogram bin to the next and falling to the one after, the edges
// equally spaced in mel from lower_edge_hertz (ONNX's reference, whose step
// divides the mel range by num_mel_bins + 2).
void mel_weight_matrix(const Node& node, ImportContext& c) {
  const int64_t mel_bins = known_int(c, node, 0, "num_mel_bins");
  const int64_t dft_length = known_int(c, node, 1, "dft_length");
  const int64_t sample_rate = known_int(c, node, 2, "sample_rate");
  const double lower = known_float(c, node, 3, "lower_edge_hertz");
  const double upper = known_float(c, node, 4, "upper_edge_hertz");
  KILN_CHECK_VALUE(mel_bins >= 1 && dft_length >= 1 && sample_rate >= 1,
                   "onnx import: ", "MelWeightMatrix '", node.name(),
                   "' needs positive num_mel_bins, dft_length ", "and sample_rate, got ", mel_bins,
                   ", ", dft_length, " and ", sample_rate);
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  const double low_mel = hertz_to_mel(lower);
  const double mel_step = (hertz_to_mel(upper) - low_mel) / double(mel_bins + 2);
  std::vector<int64_t> edges;
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hertz = mel_to_hertz(double(i) * mel_step + low_mel);
    edges.push_back(int64_t(std::floor(double(dft_length + 1) * hertz / double(sample_rate))));
    KILN_CHECK_VALUE(edges.back() >= 0 && edges.back() < spectrogram_bins,
                     "onnx import: ", "MelWeightMatrix '", node.name(), "': band edge ", i,
                     " falls in bin ", edges.back(), ", outside the ", spectrogram_bins,
                     " bins of the spectrum (is upper_edge_hertz above sample_rate / 2?)");
  }
  std::vector<double> weights(size_t(spectrogram_bins * mel_bins), 0.0);
  auto at = [&](int64_t bin, int64_t band) -> double& {
    return weights[size_t(bin * mel_bins + band)];
  };
  for (int64_t band = 0; band < mel_bins; ++band) {
    const int64_t low = edges[size_t(band)], center = edges[size_t(band + 1)];
    const int64_t high = edges[size_t(band + 2)];
    if (center == low) at(center, band) = 1;
    for (int64_t j = low; center > low && j <= center; ++j)
      at(j, band) = double(j - low) / double(center - low);
    for (int64_t j = center; j < high; ++j)
      at(j, band) = double(high - j) / double(high - center);
  }
  const DType dtype =
      dtype_from_onnx(attr_int(node, "output_datatype", 1), "MelWeightMatrix's output_datatype");
  define(node, c,
         c.constant(to(tensor(weights, {spectrogram_bins, mel_bins}, DType::Float64), dtype)));
}

}  // namespace

void add_signal_importers(Table& table) {
  table["DFT"] = dft;
  table["STFT"] = stft;
  table["MelWeightMatrix"] = mel_weight_matrix;
}

}  // namespace kiln::onnx
