// nuvec tests: array construction, metadata, item/data, zero-copy buffers, siblings and
// printing.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>

#include "primitives/primitives.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

TEST(Array, ScalarConstructors) {
  array a(3.5f);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.ndim(), 0u);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.item<float>(), 3.5f);
  array b(7);
  EXPECT_EQ(b.dtype(), int32);
  EXPECT_EQ(b.item<int>(), 7);
  array c(true);
  EXPECT_EQ(c.dtype(), bool_);
  EXPECT_TRUE(c.item<bool>());
  array d(2.5, float16);
  EXPECT_EQ(d.dtype(), float16);
  EXPECT_EQ(d.item<float>(), 2.5f);
  array z(std::complex<float>(1.0f, -2.0f));
  EXPECT_EQ(z.dtype(), complex64);
  EXPECT_EQ(z.item<complex64_t>(), complex64_t(1.0f, -2.0f));
  // item converts between element types.
  EXPECT_EQ(array(-3.75f).item<int>(), -3);
  EXPECT_EQ(array(int64_t(1) << 40).item<double>(), std::ldexp(1.0, 40));
}

TEST(Array, ListAndShapeConstructors) {
  array a({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.strides(), (Strides{3, 1}));
  EXPECT_EQ(a.shape(-1), 3);
  EXPECT_EQ(a.nbytes(), 24u);
  EXPECT_EQ(a.itemsize(), 4u);
  EXPECT_EQ(a.data<float>()[4], 5.0f);
  array b({1, 2, 3}, int8);
  EXPECT_EQ(b.dtype(), int8);
  EXPECT_EQ(b.data<int8_t>()[2], 3);
  array c({1.5f, -2.5f});
  EXPECT_EQ(c.dtype(), float32);
  array d({true, false, true});
  EXPECT_EQ(d.dtype(), bool_);
  EXPECT_FALSE(d.data<bool>()[1]);
  std::vector<double> v{1, 2, 3, 4};
  array e(v.begin(), {2, 2});
  EXPECT_EQ(e.dtype(), float32); // double elements default to float32, as MLX
  array f(v.begin(), {4}, int16);
  EXPECT_EQ(f.data<int16_t>()[3], 4);
  EXPECT_THROW(array({1.0f, 2.0f}, {3}), std::invalid_argument);
  EXPECT_THROW(array(v.begin(), {-1}), std::invalid_argument);
  EXPECT_THROW(a.shape(2), std::out_of_range);
  EXPECT_THROW(array({1.0f, 2.0f}).item<float>(), std::invalid_argument);
}

TEST(Array, ZeroCopyPointerWithDeleter) {
  static std::atomic<int> freed{0};
  freed = 0;
  float* buf = new float[6]{0, 1, 2, 3, 4, 5};
  {
    array a(buf, {2, 3}, float32, [](void* p) {
      delete[] static_cast<float*>(p);
      freed++;
    });
    EXPECT_EQ(a.data<float>(), buf); // no copy
    array t = transpose(a);
    eval(t);
    EXPECT_EQ(t.data<float>(), buf); // a view shares it
    a = array(0.0f);
    EXPECT_EQ(freed.load(), 0); // t still holds the buffer
  }
  EXPECT_EQ(freed.load(), 1);
}

TEST(Array, LazyUntilEval) {
  array a({1.0f, 2.0f});
  array b = exp(a);
  EXPECT_EQ(b.status(), array::Status::unscheduled);
  EXPECT_TRUE(b.has_primitive());
  EXPECT_EQ(std::string(b.primitive().name()), "Exp");
  eval(b);
  EXPECT_FALSE(b.has_primitive()); // detached once evaluated
  EXPECT_NEAR(b.data<float>()[1], std::exp(2.0), 1e-5);
}

TEST(Array, SiblingsShareANode) {
  array a({7, -7, 9}, int32);
  array b({2, 2, -4}, int32);
  auto qr = divmod(a, b);
  ASSERT_EQ(qr.size(), 2u);
  EXPECT_EQ(qr[0].siblings().size(), 1u);
  EXPECT_EQ(qr[0].primitive_id(), qr[1].primitive_id());
  EXPECT_EQ(qr[1].outputs()[0].id(), qr[0].id());
  eval(qr[1]); // evaluating one evaluates both
  EXPECT_NE(qr[0].status(), array::Status::unscheduled);
  expect_close(qr[0], {3}, {3, -4, -3});
  expect_close(qr[1], {3}, {1, 1, -3});
}

TEST(Array, Printing) {
  std::ostringstream os;
  os << array({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(os.str(), "array([[1, 2],\n       [3, 4]], dtype=int32)");
  std::ostringstream os2;
  os2 << array(true) << " " << Shape{2, 3} << " " << Shape{4} << " " << Device(Device::cpu);
  EXPECT_EQ(os2.str(), "array(true, dtype=bool) (2, 3) (4,) Device(cpu, 0)");
  std::ostringstream os3;
  os3 << array({0.5f, 1.25f});
  EXPECT_EQ(os3.str(), "array([0.5, 1.25], dtype=float32)");
}

TEST(Array, IteratorOverFirstAxis) {
  array a({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {3, 2});
  int row = 0;
  for (auto r : a) {
    expect_close(r, {2}, {2.0 * row + 1, 2.0 * row + 2});
    ++row;
  }
  EXPECT_EQ(row, 3);
  EXPECT_THROW(array(1.0f).begin(), std::invalid_argument);
}
