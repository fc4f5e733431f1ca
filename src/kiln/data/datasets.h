// Loaders for real data sets that packages ship on disk (nothing is
// downloaded): scikit-learn's 8x8 digits and Debian's Fashion-MNIST. Every
// problem with a file (missing, truncated, wrong magic, bad gzip, bad values)
// is a kiln::Error that names it.
#pragma once

#include <string>

#include "kiln/core/tensor.h"

namespace kiln {

struct LabeledImages {
  Tensor images;  // float32
  Tensor labels;  // int64 [N]
};

// scikit-learn's digits table (sklearn/datasets/data/digits.csv.gz, plain or
// gzip): 1797 rows of 64 pixel values 0..16 and a label 0..9. Images are
// float32 [N, 64] holding pixel * scale: 1.0 keeps scikit-learn's values,
// 1.0 / 16 maps them to [0, 1].
LabeledImages load_digits(const std::string& path, double scale = 1.0);

// Fashion-MNIST from its IDX files in `dir` ({train,t10k}-{images-idx3,
// labels-idx1}-ubyte, each plain or with .gz). Images are float32
// [N, 1, 28, 28] in [0, 1]; labels 0..9.
LabeledImages load_fashion_mnist(const std::string& dir, bool train = true);

// Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* kDebianFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// One IDX file of unsigned bytes (magic 0x0000 08 <ndim>): its dims and the
// values as float32 scaled by `scale`. Exposed for tests and other MNISTs.
Tensor load_idx_ubyte(const std::string& path, double scale = 1.0);

}  // namespace kiln
