// Memory planning: buffers whose lifetimes do not overlap share arena
// memory, an elementwise op overwrites an input nothing reads afterwards, and
// the plan (offset and size per value) is golden-tested as text.
#include "kiln/jit/exec/memory_plan.h"
#include "kiln/ops/random.h"

#include <gtest/gtest.h>

#include <random>

#include "jit_test_util.h"
#include "kiln/core/factory.h"
#include "kiln/jit/exec/executable.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"

namespace kiln::jit {
namespace {

// No two buffers live at the same step overlap in the arena, and every
// buffer fits inside it.
void expect_no_live_overlap(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  for (size_t a = 0; a < requests.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % 64, 0) << "buffer " << a;
    EXPECT_LE(plan.offsets[a] + requests[a].nbytes, plan.arena_bytes) << "buffer " << a;
    for (size_t b = a + 1; b < requests.size(); ++b) {
      const bool live_together = requests[a].first_step <= requests[b].last_step &&
                                 requests[b].first_step <= requests[a].last_step;
      const bool overlap = plan.offsets[a] < plan.offsets[b] + requests[b].nbytes &&
                           plan.offsets[b] < plan.offsets[a] + requests[a].nbytes;
      EXPECT_FALSE(live_together && overlap) << "buffers " << a << " and " << b;
    }
  }
}

TEST(JitMemoryPlan, BuffersThatAreNeverLiveTogetherShareMemory) {
  // A chain: each buffer is written by one step and read by the next.
  std::vector<BufferRequest> chain = {{1024, 0, 1}, {512, 1, 2}, {1024, 2, 3}, {100, 3, 4}};
  MemoryPlan plan = plan_memory(chain);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 1024, 0, 1024}));
  EXPECT_EQ(plan.arena_bytes, 1536);
  EXPECT_EQ(plan.unshared_bytes, 1024 + 512 + 1024 + 128);
  expect_no_live_overlap(chain, plan);
}

TEST(JitMemoryPlan, AGapBetweenLiveBuffersIsFilled) {
  // 0 and 2 live throughout; 1 dies early, so 3 fits where 1 was.
  std::vector<BufferRequest> requests = {{256, 0, 9}, {256, 0, 2}, {256, 0, 9}, {192, 5, 6}};
  MemoryPlan plan = plan_memory(requests);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 256, 512, 256}));
  EXPECT_EQ(plan.arena_bytes, 768);
  expect_no_live_overlap(requests, plan);
}

TEST(JitMemoryPlan, RandomLifetimesNeverOverlapWhileLive) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<BufferRequest> requests;
    const int count = 1 + int(rng() % 30);
    for (int i = 0; i < count; ++i) {
      const size_t first = rng() % 20;
      requests.push_back(BufferRequest{int64_t(1 + rng() % 5000), first, first + rng() % 6});
    }
    MemoryPlan plan = plan_memory(requests);
    expect_no_live_overlap(requests, plan);
    EXPECT_LE(plan.arena_bytes, plan.unshared_bytes);
  }
}

TEST(JitMemoryPlan, W1LikeChainReusesBuffersAndOverwritesInPlace) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({1, 8}), "x");
  Value* w0 = g->add_param("0.weight", f32({16, 8}), randn({16, 8}));
  Value* w1 = g->add_param("2.weight", f32({16, 16}), randn({16, 16}));
  Value* w2 = g->add_param("4.weight", f32({2, 16}), randn({2, 16}));
  Value* h0 = g->append(op("linear"), {x, w0})->output();
  Value* r0 = g->append(op("relu"), {h0})->output();
  Value* h1 = g->append(op("linear"), {r0, w1})->output();
  Value* r1 = g->append(op("relu"), {h1})->output();
  Value* y = g->append(op("linear"), {r1, w2})->output();
  g->set_outputs({y});
  Executable exe(g);
  // relu writes over the linear before it (buffer 0, then buffer 1); the
  // second linear's buffer is placed beside the first, which is still read.
  EXPECT_EQ(exe.plan().to_string(),
            "slots:\n"
            "  s0 %0 float32[1, 8]: input 0 +0\n"
            "  s1 %1 float32[16, 8]: fixed 0 +0\n"
            "  s2 %2 float32[16, 16]: fixed 1 +0\n"
            "  s3 %3 float32[2, 16]: fixed 2 +0\n"
            "  s4 %4 float32[1, 16]: arena buffer 0 +0 (bytes [0, 64), steps 0..2)\n"
            "  s5 %5 float32[1, 16]: arena buffer 0 +0 (bytes [0, 64), steps 0..2)\n"
            "  s6 %6 float32[1, 16]: arena buffer 1 +0 (bytes [64, 128), steps 2..4)\n"
            "  s7 %7 float32[1, 16]: arena buffer 1 +0 (bytes [64, 128), steps 2..4)\n"
            "  s8 %8 float32[1, 2]: output 0 +0\n"
            "steps:\n"
            "  0 linear(s0, s1) -> s4 [prepared]\n"
            "  1 relu(s4) -> s5\n"
            "  2 linear(s5, s2) -> s6 [prepared]\n"
            "  3 relu(s6) -> s7\n"
            "  4 linear(s7, s3) -> s8 [prepared]\n"
            "arena: 128 bytes (unshared: 128 bytes)\n");
  Tensor input = randn({1, 8});
  Tensor expected =
      linear(relu(linear(relu(linear(input, w0->data(), Tensor())), w1->data(), Tensor())),
             w2->data(), Tensor());
  EXPECT_TRUE(bitwise_equal(exe.run({input})[0], expected));
}

TEST(JitMemoryPlan, AValueReadTwiceIsNotOverwritten) {
  auto g = std::make_shared<Graph>();
  Value* x = g->add_input(f32({4}), "x");
  Value* a = g->append(op("exp"), {x})->output();
  Value* b = g->append(op("neg"), {a})->output();  // may run in place, but `a` is read again
  Value* c = g->append(op("add"), {b, a})->output();
  Value* d = g->append(op("sin"), {c})->output();
  Value* e = g->append(op("cos"), {d})->output();
  g->set_outputs({e});
  Executable exe(g);
  const Plan& plan = exe.plan();
  // exp's and neg's buffers are both live when add reads them.
  EXPECT_NE(plan.slots[1].root_index, plan.slots[2].root_index);
  EXPECT_NE(plan.memory.offsets[plan.slots[1].root_index],
            plan.memory.offsets[plan.slots[2].root_index]);
  Tensor input = randn({4});
  Tensor ea = exp(input);
  EXPECT_TRUE(bitwise_equal(exe.run({input})[0], cos(sin(neg(ea) + ea))));
}

}  // namespace
}  // namespace kiln::jit
