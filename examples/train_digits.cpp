// Trains an MLP (64 -> 128 -> 10) on scikit-learn's 8x8 digits, eagerly in
// C++: DataLoader, cross-entropy, backward, SGD with momentum. Prints a
// progress bar per epoch and the held-out accuracy; exits non-zero when the
// accuracy is below --min-accuracy (CI runs a short version that way).
//
//   kiln_train_digits [--epochs N] [--min-accuracy A] [--digits PATH]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/kiln.h"

namespace {

struct Args {
  int epochs = 30;
  double min_accuracy = 0.0;
  std::string digits_path = KILN_DIGITS_CSV;  // found in the venv's scikit-learn by CMake
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--epochs"))
      args.epochs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--min-accuracy"))
      args.min_accuracy = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--digits"))
      args.digits_path = argv[i + 1];
  }
  return args;
}

double accuracy(kiln::nn::Module& model, const kiln::Tensor& x, const kiln::Tensor& y) {
  kiln::NoGradGuard no_grad;
  model.eval();
  kiln::Tensor predicted = kiln::argmax(model(x), 1);
  model.train();
  return kiln::mean(kiln::to(kiln::eq(predicted, y), kiln::DType::Float32)).item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  namespace nn = kiln::nn;
  namespace F = kiln::nn::functional;
  Args args = parse_args(argc, argv);
  try {
    kiln::manual_seed(0);
    kiln::LabeledImages digits = kiln::load_digits(args.digits_path, 1.0 / 16);
    const int64_t n = digits.images.size(0), n_test = n / 5;
    // A seeded shuffle, then the last fifth is held out.
    kiln::Generator split_gen(42);
    kiln::Tensor order = kiln::randperm(n, kiln::DType::Int64, &split_gen);
    kiln::Tensor train_idx = kiln::narrow(order, 0, 0, n - n_test);
    kiln::Tensor test_idx = kiln::narrow(order, 0, n - n_test, n_test);
    kiln::Tensor x_train = kiln::index_select(digits.images, 0, train_idx);
    kiln::Tensor y_train = kiln::index_select(digits.labels, 0, train_idx);
    kiln::Tensor x_test = kiln::index_select(digits.images, 0, test_idx);
    kiln::Tensor y_test = kiln::index_select(digits.labels, 0, test_idx);

    auto model = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 128),
                                                  std::make_shared<nn::ReLU>(),
                                                  std::make_shared<nn::Linear>(128, 10));
    kiln::SGD optimizer(model->parameters(), {.lr = 0.05, .momentum = 0.9});
    kiln::DataLoader loader(std::make_shared<kiln::TensorDataset>(x_train, y_train),
                            {.batch_size = 32, .shuffle = true, .seed = 0});
    std::printf("digits: %lld train, %lld test images\n", static_cast<long long>(n - n_test),
                static_cast<long long>(n_test));
    for (int epoch = 1; epoch <= args.epochs; ++epoch) {
      kiln::ProgressBar bar(loader.num_batches(), kiln::str("epoch ", epoch, "/", args.epochs));
      for (kiln::Example batch : loader) {
        kiln::Tensor loss = F::cross_entropy((*model)(batch.data), batch.target);
        optimizer.zero_grad();
        kiln::backward(loss);
        optimizer.step();
        bar.set_postfix(kiln::str("loss ", loss.item<double>()));
        bar.update();
      }
      bar.close();
    }
    double acc = accuracy(*model, x_test, y_test);
    std::printf("held-out accuracy: %.2f%%\n", 100 * acc);
    if (acc < args.min_accuracy) {
      std::fprintf(stderr, "accuracy %.4f is below the required %.4f\n", acc, args.min_accuracy);
      return 1;
    }
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
