#include <iostream>

#include "kiln/core/factory.h"

int main() {
  kiln::manual_seed(0);
  std::cout << kiln::randn({2, 3}) << "\n";
}
