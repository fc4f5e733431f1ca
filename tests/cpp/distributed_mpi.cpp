// kiln::distributed from C++, run by ctest under mpirun on 2 ranks (and by
// hand on more): every rank runs every test; a failure on any rank fails the
// launch. Expected values are sums of rank-dependent numbers (rank + 1),
// worked out here in closed form, not by kiln.
#include <gtest/gtest.h>

#include <string>

#include "kiln/core/factory.h"
#include "kiln/distributed/distributed.h"
#include "kiln/engine/engine.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/view.h"

namespace dist = kiln::distributed;
using kiln::Tensor;

namespace {

int world() {
  return dist::world_size();
}
// Sum over ranks of (rank + 1).
double rank_sum() {
  return world() * (world() + 1) / 2.0;
}

TEST(Distributed, RankAndSize) {
  EXPECT_TRUE(dist::is_initialized());
  EXPECT_GE(world(), 1);
  EXPECT_GE(dist::rank(), 0);
  EXPECT_LT(dist::rank(), world());
  dist::barrier();
}

TEST(Distributed, AllReduceOps) {
  double r = dist::rank() + 1;
  Tensor sum = kiln::full({3, 2}, r);
  dist::all_reduce(sum);
  Tensor avg = kiln::full({5}, r, kiln::DType::Float64);
  dist::all_reduce(avg, dist::ReduceOp::Avg);
  Tensor max = kiln::full({4}, int64_t(r), kiln::DType::Int64);
  dist::all_reduce(max, dist::ReduceOp::Max);
  Tensor min = kiln::full({4}, int64_t(r), kiln::DType::Int32);
  dist::all_reduce(min, dist::ReduceOp::Min);
  for (float v : sum.to_vector<float>())
    EXPECT_EQ(v, rank_sum());
  for (double v : avg.to_vector<double>())
    EXPECT_DOUBLE_EQ(v, rank_sum() / world());
  for (int64_t v : max.to_vector<int64_t>())
    EXPECT_EQ(v, world());
  for (int32_t v : min.to_vector<int32_t>())
    EXPECT_EQ(v, 1);
}

TEST(Distributed, AsyncAllReduceWhileComputing) {
  Tensor flat = kiln::full({1 << 16}, double(dist::rank() + 1));
  dist::WorkPtr work = dist::all_reduce(flat, dist::ReduceOp::Sum, /*async_op=*/true);
  ASSERT_NE(work, nullptr);
  Tensor a = kiln::ones({128, 128});
  for (int i = 0; i < 20; ++i)
    a = kiln::matmul(a, kiln::full({128, 128}, 1.0 / 128));
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_GT(work->finished_ns(), 0);
  EXPECT_EQ(flat.to_vector<float>().back(), rank_sum());
  EXPECT_NEAR(a.to_vector<float>()[0], 1.0, 1e-4);
}

TEST(Distributed, BroadcastGatherScatter) {
  Tensor b = kiln::full({3}, double(dist::rank() + 1));
  dist::broadcast(b, world() - 1);
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(3, float(world())));

  Tensor mine = kiln::full({2}, double(dist::rank() + 1));
  std::vector<Tensor> outs;
  for (int i = 0; i < world(); ++i)
    outs.push_back(kiln::zeros({2}));
  dist::all_gather(outs, mine);
  for (int i = 0; i < world(); ++i)
    EXPECT_EQ(outs[size_t(i)].to_vector<float>(), std::vector<float>(2, float(i + 1)));

  // Input i on rank r holds (r + 1) * (i + 1): output on rank r is
  // sum over ranks of (r' + 1) * (r + 1).
  std::vector<Tensor> inputs;
  for (int i = 0; i < world(); ++i)
    inputs.push_back(kiln::full({2}, double((dist::rank() + 1) * (i + 1))));
  Tensor out = kiln::zeros({2});
  dist::reduce_scatter(out, inputs);
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(2, float(rank_sum() * (dist::rank() + 1))));
}

TEST(Distributed, SendRecvRing) {
  if (world() < 2) GTEST_SKIP() << "needs two ranks";
  int right = (dist::rank() + 1) % world();
  int left = (dist::rank() + world() - 1) % world();
  Tensor got = kiln::zeros({4});
  dist::WorkPtr receiving = dist::irecv(got, left);
  dist::send(kiln::full({4}, double(dist::rank())), right);
  receiving->wait();
  EXPECT_EQ(got.to_vector<float>(), std::vector<float>(4, float(left)));
}

TEST(Distributed, AsyncExecutionOrdersCollectivesWithOps) {
  kiln::set_execution(kiln::Execution::Async);
  Tensor x = kiln::zeros({64});
  for (int i = 0; i < 30; ++i)
    x = kiln::add(x, double(dist::rank() + 1));  // queued: all_reduce waits for them
  dist::all_reduce(x);
  Tensor y = kiln::mul(x, 2.0);  // queued after: sees the sum
  kiln::set_execution(kiln::Execution::Sync);
  kiln::synchronize();
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(64, float(2 * 30 * rank_sum())));
}

TEST(Distributed, DesyncRaisesNamingBothCalls) {
  if (world() < 2) GTEST_SKIP() << "needs two ranks";
  bool last = dist::rank() == world() - 1;
  Tensor t = kiln::ones({last ? 5 : 4});
  try {
    dist::all_reduce(t);
    FAIL() << "no error on a desync";
  } catch (const kiln::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("all_reduce(float32 [4], op=sum)"), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce(float32 [5], op=sum)"), std::string::npos) << message;
  }
  Tensor after = kiln::ones({2});
  dist::all_reduce(after);  // the group still works
  EXPECT_EQ(after.to_vector<float>(), std::vector<float>(2, float(world())));
}

TEST(Distributed, BadArgumentsRaiseAtTheCall) {
  EXPECT_THROW(dist::broadcast(kiln::ones({2}), world()), kiln::Error);
  EXPECT_THROW(dist::all_reduce(kiln::ones({2}, kiln::DType::Int64), dist::ReduceOp::Avg),
               kiln::Error);
  EXPECT_THROW(dist::all_gather({kiln::ones({2})}, kiln::ones({3})), kiln::Error);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist::init({.timeout_s = 60});
  int failed = RUN_ALL_TESTS();
  dist::destroy();
  return failed;
}
