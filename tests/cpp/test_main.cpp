// Every test ends with the allocator's live bytes where they started: a test
// that leaks a tensor fails.
#include <gtest/gtest.h>

#include <cstdio>

#include "kiln/autograd/autograd.h"
#include "kiln/core/allocator.h"
#include "kiln/kernels/cpu/parallel.h"
#include "kiln/ops/registry.h"

namespace {

class LeakCheck : public testing::EmptyTestEventListener {
  void OnTestStart(const testing::TestInfo&) override {
    live_at_start_ = kiln::allocator_stats().live_bytes;
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    int64_t live = kiln::allocator_stats().live_bytes;
    if (live == live_at_start_) return;
    std::fprintf(stderr, "LEAK: %s.%s left %lld bytes allocated\n", info.test_suite_name(),
                 info.name(), static_cast<long long>(live - live_at_start_));
    leaked = true;
  }
  int64_t live_at_start_ = 0;

 public:
  bool leaked = false;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  kiln::op_registry();    // fill the table before the first test's baseline
  kiln::init_autograd();  // tests make tensors with TensorOptions::requires_grad
  // Whether a busy machine puts a team on one thread (Note [A busy team])
  // must not depend on the machine the tests run on: tests that compare
  // bits across calls would see different kernels' threads. team_watch_test
  // turns it on where it tests it.
  kiln::cpu::set_team_busy_fallback(false);
  auto* leak_check = new LeakCheck;
  testing::UnitTest::GetInstance()->listeners().Append(leak_check);
  int result = RUN_ALL_TESTS();
  return leak_check->leaked ? 1 : result;
}
