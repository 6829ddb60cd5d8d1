// The single-process group (every process its own group of size 1) and its collectives,
// which must be exact identities; send/recv have no peer and must say so.
#include <gtest/gtest.h>

#include "nuvec/nuvec.h"
#include "test_utils.h"

using namespace nuvec;
using namespace nuvec::testing;

TEST(Distributed, SingleProcessGroup) {
  EXPECT_TRUE(distributed::is_available());
  EXPECT_TRUE(distributed::is_available("any"));
  EXPECT_FALSE(distributed::is_available("mpi"));
  EXPECT_THROW(distributed::is_available("carrier-pigeon"), std::invalid_argument);
  auto g = distributed::init();
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.split(3).size(), 1);
  EXPECT_THROW(distributed::init(true), std::runtime_error);
}

TEST(Distributed, CollectivesOverOneProcessAreIdentities) {
  array x = randn({3, 5}, float32);
  auto g = distributed::init();
  expect_allclose(distributed::all_sum(x, g), x, 0, 0);
  expect_allclose(distributed::all_max(x), x, 0, 0);
  expect_allclose(distributed::all_min(x), x, 0, 0);
  expect_allclose(distributed::all_gather(x), x, 0, 0);
  expect_allclose(distributed::sum_scatter(x), x, 0, 0);
  expect_throws_naming<std::invalid_argument>([&] { distributed::send(x, 1, g); }, "[send]");
  expect_throws_naming<std::invalid_argument>(
      [&] { distributed::recv({3}, float32, 0, g); }, "[recv]");
}
