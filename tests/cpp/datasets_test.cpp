// The real-data loaders: smoke tests on the files packages ship, and every
// kind of broken file (written here into a temp dir) is a kiln::Error that
// names the file.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "kiln/data/file_io.h"
#include "kiln/kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

class DataFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("kiln_data_test_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
  }
  std::string write_text(const std::string& name, const std::string& text) {
    return write(name, Bytes(text.begin(), text.end()));
  }
  std::string write_gzip(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    gzwrite(file, bytes.data(), unsigned(bytes.size()));
    gzclose(file);
    return path;
  }
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
};

Bytes read_plain_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes be32(uint32_t v) {
  return {Bytes::value_type(v >> 24), Bytes::value_type(v >> 16), Bytes::value_type(v >> 8),
          Bytes::value_type(v)};
}

// An IDX file of unsigned bytes with `dims` and values 0, 1, 2, ...
Bytes idx_file(const IntList& dims, int64_t value_count = -1) {
  Bytes out = be32(0x800 | uint32_t(dims.size()));
  int64_t count = 1;
  for (int64_t d : dims) {
    Bytes b = be32(uint32_t(d));
    out.insert(out.end(), b.begin(), b.end());
    count *= d;
  }
  if (value_count >= 0) count = value_count;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(Bytes::value_type(i % 10));
  return out;
}

std::string digits_row(int label, int pixel = 3) {
  std::string row;
  for (int i = 0; i < 64; ++i)
    row += std::to_string(pixel) + ",";
  return row + std::to_string(label) + "\n";
}

TEST(Datasets, LoadsScikitLearnDigits) {
  std::string path = KILN_DIGITS_PATH;
  if (path.empty() || !file_exists(path)) {
    GTEST_SKIP() << "scikit-learn's digits.csv.gz not found (pip install -r "
                    "scripts/requirements-dev.txt, then reconfigure)";
  }
  LabeledImages digits = load_digits(path);
  EXPECT_EQ(digits.images.shape(), (IntList{1797, 64}));
  EXPECT_EQ(digits.images.dtype(), DType::Float32);
  EXPECT_EQ(digits.labels.shape(), (IntList{1797}));
  EXPECT_EQ(digits.labels.dtype(), DType::Int64);
  EXPECT_EQ(min(digits.labels).item<int64_t>(), 0);
  EXPECT_EQ(max(digits.labels).item<int64_t>(), 9);
  EXPECT_EQ(min(digits.images).item<double>(), 0.0);
  EXPECT_EQ(max(digits.images).item<double>(), 16.0);
  // The first row of the file: 0,0,5,13,9,1,... labelled 0.
  EXPECT_EQ(digits.labels.to_vector<int64_t>()[0], 0);
  EXPECT_EQ(read_element(digits.images, 2).to<double>(), 5.0);
  LabeledImages unit = load_digits(path, 1.0 / 16);
  EXPECT_EQ(max(unit.images).item<double>(), 1.0);
}

TEST(Datasets, LoadsDebianFashionMnist) {
  if (!file_exists(std::string(kDebianFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist (scripts/setup.sh does)";
  }
  LabeledImages test = load_fashion_mnist(kDebianFashionMnistDir, /*train=*/false);
  EXPECT_EQ(test.images.shape(), (IntList{10000, 1, 28, 28}));
  EXPECT_EQ(test.labels.shape(), (IntList{10000}));
  // Fashion-MNIST is balanced: 1000 test images of each of the 10 classes.
  Tensor counts = sum(one_hot(test.labels, 10), {0});
  EXPECT_EQ(counts.to_vector<int64_t>(), std::vector<int64_t>(10, 1000));
  EXPECT_EQ(min(test.images).item<double>(), 0.0);
  EXPECT_EQ(max(test.images).item<double>(), 1.0);
  LabeledImages train = load_fashion_mnist(kDebianFashionMnistDir, /*train=*/true);
  EXPECT_EQ(train.images.shape(), (IntList{60000, 1, 28, 28}));
  EXPECT_EQ(max(train.labels).item<int64_t>(), 9);
}

TEST_F(DataFiles, ReadsPlainAndGzipIdxFiles) {
  write("t10k-images-idx3-ubyte", idx_file({3, 28, 28}));
  write_gzip("t10k-labels-idx1-ubyte.gz", idx_file({3}));
  LabeledImages data = load_fashion_mnist(dir(), /*train=*/false);
  EXPECT_EQ(data.images.shape(), (IntList{3, 1, 28, 28}));
  EXPECT_EQ(data.labels.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_FLOAT_EQ(read_element(data.images, 1).to<float>(), 1.0f / 255);
}

TEST_F(DataFiles, MissingFilesAreNamed) {
  Error missing = error_of([&] { load_fashion_mnist(dir()); });
  EXPECT_TRUE(mentions(missing, dir() + "/train-images-idx3-ubyte")) << missing.what();
  EXPECT_TRUE(mentions(missing, "dataset-fashion-mnist")) << missing.what();
  Error no_digits = error_of([&] { load_digits(dir() + "/nope.csv.gz"); });
  EXPECT_TRUE(mentions(no_digits, "cannot open " + dir() + "/nope.csv.gz")) << no_digits.what();
}

TEST_F(DataFiles, WrongMagicIsNamed) {
  Bytes bad = idx_file({2});
  bad[2] = 0x09;  // a type code that is not unsigned bytes
  std::string path = write("labels", bad);
  Error e = error_of([&] { load_idx_ubyte(path); });
  EXPECT_TRUE(mentions(e, path + " is not an IDX file of unsigned bytes: magic 0x00000901"))
      << e.what();
}

TEST_F(DataFiles, TruncatedIdxIsNamed) {
  std::string short_data = write("short", idx_file({4, 28, 28}, 100));
  Error e = error_of([&] { load_idx_ubyte(short_data); });
  EXPECT_TRUE(mentions(e, short_data + " holds 100 data bytes but its header says [4, 28, 28]"))
      << e.what();
  EXPECT_TRUE(mentions(e, "truncated")) << e.what();
  Bytes header_only = idx_file({4, 28, 28});
  header_only.resize(9);
  std::string cut_header = write("cut_header", header_only);
  EXPECT_TRUE(mentions(error_of([&] { load_idx_ubyte(cut_header); }),
                       cut_header + " is truncated inside its IDX header"));
  std::string tiny = write("tiny", {0, 0});
  EXPECT_TRUE(mentions(error_of([&] { load_idx_ubyte(tiny); }), tiny + " is too short"));
}

TEST_F(DataFiles, CorruptAndTruncatedGzipAreNamed) {
  Bytes garbage = {0x1f, 0x8b, 0x08, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::string corrupt = write("corrupt.gz", garbage);
  Error bad = error_of([&] { load_idx_ubyte(corrupt); });
  EXPECT_TRUE(mentions(bad, corrupt + " is not valid gzip data")) << bad.what();

  std::string whole = write_gzip("whole.gz", idx_file({50, 28, 28}));
  Bytes compressed = read_plain_bytes(whole);
  compressed.resize(compressed.size() / 2);
  std::string cut = write("cut.gz", compressed);
  Error truncated = error_of([&] { load_idx_ubyte(cut); });
  EXPECT_TRUE(mentions(truncated, cut + " is truncated")) << truncated.what();
}

TEST_F(DataFiles, DigitsRowsAreChecked) {
  std::string good = write_gzip("good.csv.gz", [] {
    std::string text = digits_row(7) + digits_row(2, 16);
    return Bytes(text.begin(), text.end());
  }());
  LabeledImages digits = load_digits(good, 0.5);
  EXPECT_EQ(digits.images.shape(), (IntList{2, 64}));
  EXPECT_EQ(digits.labels.to_vector<int64_t>(), (std::vector<int64_t>{7, 2}));
  EXPECT_EQ(read_element(digits.images, 64).to<double>(), 8.0);

  std::string short_row = write_text("short.csv", digits_row(1) + "1,2,3\n");
  Error columns = error_of([&] { load_digits(short_row); });
  EXPECT_TRUE(mentions(columns, short_row + " line 2 has 3 values, expected 65")) << columns.what();
  std::string words = write_text("words.csv", "pixel,label\n");
  EXPECT_TRUE(mentions(error_of([&] { load_digits(words); }),
                       words + " line 1 is not a row of comma-separated integers"));
  std::string big_pixel = write_text("big.csv", digits_row(1, 17));
  EXPECT_TRUE(mentions(error_of([&] { load_digits(big_pixel); }), "pixel value 17 outside 0..16"));
  std::string empty_file = write_text("empty.csv", "");
  EXPECT_TRUE(mentions(error_of([&] { load_digits(empty_file); }), empty_file + " holds no rows"));
}

TEST_F(DataFiles, MismatchedImageAndLabelCountsAreNamed) {
  write("train-images-idx3-ubyte", idx_file({3, 28, 28}));
  std::string labels = write("train-labels-idx1-ubyte", idx_file({4}));
  Error e = error_of([&] { load_fashion_mnist(dir()); });
  EXPECT_TRUE(mentions(e, labels + " holds labels of shape [4] for 3 images")) << e.what();
}

}  // namespace
}  // namespace kiln
