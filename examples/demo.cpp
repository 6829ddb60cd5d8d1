// nuvec-demo: a first look at the API (build/examples/nuvec-demo). Builds a
// small graph, evaluates it, differentiates it and prints the results.
#include <iostream>

#include "nuvec/nuvec.h"

namespace nx = nuvec;

int main() {
  auto x = nx::array({1.0f, 2.0f, 3.0f, 4.0f}, {2, 2});
  auto y = nx::exp(x) + nx::matmul(x, nx::transpose(x));
  std::cout << "x = " << x << "\n";
  std::cout << "exp(x) + x @ x.T = " << y << "\n";
  auto loss = [](const nx::array& a) { return nx::sum(nx::sin(a) * a); };
  std::cout << "d/dx sum(sin(x) * x) = " << nx::grad(loss)(x) << "\n";
  std::cout << "active memory: " << nx::get_active_memory() << " bytes\n";
  return 0;
}
