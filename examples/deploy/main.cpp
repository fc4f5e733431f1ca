// SCENARIOS.md section 3 in C++, with no Python anywhere: load a model that
// Python traced and saved, run it, print the output.
//
//   deploy my_mlp.kiln            # on a random input of the model's shape
//   deploy my_mlp.kiln x.npy      # on this input (NumPy's .npy)
#include <iostream>

#include <kiln/kiln.h>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: deploy model.kiln [input.npy]\n";
    return 2;
  }
  try {
    kiln::jit::CompiledFunction model = kiln::jit::load(argv[1]);
    kiln::Tensor x =
        argc == 3 ? kiln::io::read_npy(argv[2])
                  : kiln::randn(kiln::to_static(model.graph().inputs().at(0)->shape(), "deploy"));
    std::vector<kiln::Tensor> y = model({x});
    std::cout << y[0] << "\n";
  } catch (const kiln::Error& e) {
    std::cerr << "deploy: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
