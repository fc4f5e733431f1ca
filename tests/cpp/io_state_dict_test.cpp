// safetensors state dicts and .npy files: round trips, the bytes other tools
// expect, and malformed files refused with a clear error.
#include <gtest/gtest.h>

#include "io_test_util.h"
#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/io/npy.h"
#include "kiln/io/safetensors.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/view.h"

namespace kiln::io {
namespace {

using io_test::TempDir;

#define EXPECT_MENTIONS(message, text) \
  EXPECT_NE((message).find(text), std::string::npos) << (message)

nn::NamedTensors every_dtype() {
  manual_seed(7);
  return {{"f32", randn({3, 4})},
          {"f64", randn({5}, DType::Float64)},
          {"i32", reshape(to(arange(6), DType::Int32), {2, 3})},
          {"i64", arange(7)},
          {"b", gt(randn({3}), 0.0)},
          {"scalar", full({}, 2.5)},
          {"empty", zeros({0, 3})},
          {"view", transpose(randn({2, 3}), 0, 1)}};
}

TEST(SafeTensors, RoundTripsEveryDtypeAndKeepsOrderAndMetadata) {
  TempDir dir;
  nn::NamedTensors tensors = every_dtype();
  save_safetensors(tensors, dir.file("w.safetensors"), {{"format", "pt"}});
  SafeTensors loaded = load_safetensors(dir.file("w.safetensors"));
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(loaded.tensors[i].first, tensors[i].first);
    EXPECT_TRUE(bitwise_equal(loaded.tensors[i].second, tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(loaded.metadata.at("format"), "pt");
}

TEST(SafeTensors, TheLayoutIsTheOneOtherToolsRead) {
  TempDir dir;
  save_safetensors({{"a", full({2}, 1.0)}}, dir.file("a.safetensors"));
  std::string bytes = io_test::read_bytes(dir.file("a.safetensors"));
  uint64_t length;
  std::memcpy(&length, bytes.data(), 8);
  EXPECT_EQ(length % 8, 0u);
  auto header = nlohmann::json::parse(bytes.substr(8, length));
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json({2}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({0, 8}));
  EXPECT_EQ(bytes.size(), 8 + length + 8);
  float first;
  std::memcpy(&first, bytes.data() + 8 + length, 4);
  EXPECT_EQ(first, 1.0f);
}

TEST(SafeTensors, LoadedTensorsAreViewsOfTheFile) {
  TempDir dir;
  save_safetensors({{"w", randn({64, 64})}}, dir.file("w.safetensors"));
  SafeTensors loaded = load_safetensors(dir.file("w.safetensors"));
  EXPECT_FALSE(loaded.tensors[0].second.storage()->owned_by_kiln());
}

TEST(SafeTensors, NamesMustBeUnique) {
  TempDir dir;
  EXPECT_THROW_WITH(save_safetensors({{"a", zeros({1})}, {"a", zeros({1})}}, dir.file("x")),
                    "used twice");
  EXPECT_THROW_WITH(save_safetensors({{"__metadata__", zeros({1})}}, dir.file("x")), "reserved");
}

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  uint64_t length = header.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + header + data;
}

TEST(SafeTensors, MalformedFilesAreRefused) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  auto error_of_file = [&](const std::string& bytes) {
    io_test::write_bytes(path, bytes);
    return error_text([&] { load_safetensors(path); });
  };
  std::string eight(8, '\0');
  EXPECT_MENTIONS(error_of_file("abc"), "not a safetensors file");
  EXPECT_MENTIONS(error_of_file(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}"),
                  "the header claims");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes("{bad", "")), "not valid JSON");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", eight)),
                  "dtype \"F16\" is not one kiln has");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", eight)),
                  "but its record says 8 bytes");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight)),
                  "lie outside the data");
  EXPECT_MENTIONS(
      error_of_file(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                      eight)),
      "overlap");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)),
                  "starts at byte 4 of the data, not at 0");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight)),
                  "4 bytes after the last tensor belong to none");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(
                      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", eight)),
                  "holds 1 numbers, not 2");
  EXPECT_MENTIONS(error_of_file(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2,-1],)"
                                                  R"("data_offsets":[0,8]}})",
                                                  eight)),
                  "non-negative integer");
}

TEST(SafeTensors, UnalignedTensorsAreCopied) {
  TempDir dir;
  // An f64 after one f32: its bytes start 4 bytes into the data.
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"F64","shape":[1],"data_offsets":[4,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  float a = 1.5f;
  double b = -2.25;
  std::string data(reinterpret_cast<const char*>(&a), 4);
  data += std::string(reinterpret_cast<const char*>(&b), 8);
  io_test::write_bytes(dir.file("u.safetensors"), safetensors_bytes(header, data));
  SafeTensors loaded = load_safetensors(dir.file("u.safetensors"));
  EXPECT_EQ(loaded.tensors[1].second.item<double>(), -2.25);
  EXPECT_TRUE(loaded.tensors[1].second.storage()->owned_by_kiln());
}

TEST(Npy, RoundTripsEveryDtype) {
  TempDir dir;
  for (const auto& [name, tensor] : every_dtype()) {
    write_npy(tensor, dir.file(name + ".npy"));
    EXPECT_TRUE(bitwise_equal(read_npy(dir.file(name + ".npy")), tensor)) << name;
  }
}

TEST(Npy, HeaderIsNumpys) {
  TempDir dir;
  write_npy(zeros({3}), dir.file("z.npy"));
  std::string bytes = io_test::read_bytes(dir.file("z.npy"));
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ((bytes.size() - 12) % 64, 0u);  // header padded; 12 bytes of data
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
            std::string::npos);
}

std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  uint16_t length = uint16_t(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) +
         std::string(reinterpret_cast<const char*>(&length), 2) + header + data;
}

TEST(Npy, ReadsFortranOrderAndBigEndian) {
  int32_t column_major[6] = {1, 4, 2, 5, 3, 6};  // [[1, 2, 3], [4, 5, 6]]
  Tensor fortran = parse_npy(
      npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                std::string(reinterpret_cast<const char*>(column_major), sizeof column_major)),
      "f.npy");
  EXPECT_EQ(fortran.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  std::string big_endian_two("\x40\x00\x00\x00\x00\x00\x00\x00", 8);  // 2.0 as >f8
  Tensor big = parse_npy(
      npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (), }", big_endian_two), "b");
  EXPECT_EQ(big.dtype(), DType::Float64);
  EXPECT_EQ(big.item<double>(), 2.0);
}

TEST(Npy, MalformedFilesAreRefused) {
  std::string four(4, '\0');
  EXPECT_THROW_WITH(parse_npy("hello", "x.npy"), "not a .npy file");
  EXPECT_THROW_WITH(
      parse_npy(npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", four),
                "x.npy"),
      "dtype '<f2' is not one kiln has");
  EXPECT_THROW_WITH(
      parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", four),
                "x.npy"),
      "needs 8 bytes of data, the file holds 4");
  EXPECT_THROW_WITH(
      parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }", four),
                "x.npy"),
      "not a size");
  EXPECT_THROW_WITH(parse_npy(npy_bytes("{'descr': '<f4', 'shape': (1,), }", four), "x.npy"),
                    "no 'fortran_order'");
  EXPECT_THROW_WITH(parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': "
                                        "(4294967296, 4294967296, 4294967296), }",
                                        four),
                              "x.npy"),
                    "more bytes than any file can");
  std::string cut = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", four);
  EXPECT_THROW_WITH(parse_npy(cut.substr(0, 30), "x.npy"), "the header claims");
}

}  // namespace
}  // namespace kiln::io
