// Uses nuvec through its installed headers and library: a gradient, printed.
#include <iostream>

#include "nuvec/nuvec.h"

int main() {
  namespace nx = nuvec;
  auto f = [](const nx::array& x) { return nx::sum(nx::square(x)); };
  auto g = nx::grad(f)(nx::array({1.0f, -2.0f, 3.0f}));
  std::cout << g << std::endl; // array([2, -4, 6], dtype=float32)
  return nx::allclose(g, nx::array({2.0f, -4.0f, 6.0f})).item<bool>() ? 0 : 1;
}
