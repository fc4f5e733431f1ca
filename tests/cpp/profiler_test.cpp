// The profiler: ranges nest per thread, self time is the duration less the
// children's, calls and bytes are counted, compiled calls hold their steps,
// and nothing is recorded while no session records.
#include "kiln/profiler/profiler.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include <nlohmann/json.hpp>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kiln/core/factory.h"
#include "kiln/jit/compile/trace.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"

namespace kiln::profiler {
namespace {

using Events = std::vector<Event>;

int64_t end_of(const Event& e) {
  return e.start_ns + e.duration_ns;
}

// Every thread's events form a forest: each lies inside the one open
// around it, at that one's depth + 1, and self time adds up.
testing::AssertionResult well_nested(const Events& events) {
  std::map<uint32_t, std::vector<const Event*>> open;  // per thread, the stack
  std::map<const Event*, int64_t> children_ns;
  for (const Event& e : events) {
    std::vector<const Event*>& stack = open[e.thread];
    while (!stack.empty() && end_of(*stack.back()) <= e.start_ns)
      stack.pop_back();
    if (e.depth != stack.size()) {
      return testing::AssertionFailure()
             << e.name << " at depth " << e.depth << ", inside " << stack.size() << " open ranges";
    }
    if (!stack.empty()) {
      if (end_of(e) > end_of(*stack.back())) {
        return testing::AssertionFailure() << e.name << " ends after " << stack.back()->name;
      }
      children_ns[stack.back()] += e.duration_ns;
    }
    if (e.self_ns < 0 || e.self_ns > e.duration_ns) {
      return testing::AssertionFailure()
             << e.name << ": self " << e.self_ns << " ns of " << e.duration_ns;
    }
    stack.push_back(&e);
  }
  for (const Event& e : events) {
    if (e.self_ns != e.duration_ns - children_ns[&e]) {
      return testing::AssertionFailure() << e.name << ": self time is not duration - children";
    }
  }
  return testing::AssertionSuccess();
}

int64_t count_named(const Events& events, const std::string& name) {
  return std::count_if(events.begin(), events.end(),
                       [&](const Event& e) { return e.name == name; });
}

const Event& first_named(const Events& events, const std::string& name) {
  auto it =
      std::find_if(events.begin(), events.end(), [&](const Event& e) { return e.name == name; });
  EXPECT_NE(it, events.end()) << "no event named " << name;
  return *it;
}

TEST(Profiler, EagerOpsNestInUserRangesWithSelfTimeAndCounts) {
  Tensor a = randn({8, 8}), b = randn({8, 8});
  Profile prof;
  {
    Range outer(EventKind::User, "outer");
    for (int i = 0; i < 3; ++i)
      (void)(a + b);
    for (int i = 0; i < 2; ++i)
      (void)matmul(a, b);
  }
  prof.stop();
  const Events& events = prof.events();
  EXPECT_TRUE(well_nested(events));
  EXPECT_EQ(count_named(events, "add"), 3);
  EXPECT_EQ(count_named(events, "matmul") + count_named(events, "mm"), 2);
  const Event& outer = first_named(events, "outer");
  EXPECT_EQ(outer.depth, 0u);
  EXPECT_EQ(outer.kind, EventKind::User);
  EXPECT_LT(outer.self_ns, outer.duration_ns);
  EXPECT_EQ(first_named(events, "add").depth, 1u);

  std::map<std::string, EventAverage> rows;
  for (const EventAverage& row : prof.key_averages())
    rows[row.name] = row;
  EXPECT_EQ(rows.at("add").calls, 3);
  EXPECT_EQ(rows.at("outer").calls, 1);
  EXPECT_LE(rows.at("add").self_ns, rows.at("add").total_ns);
  EXPECT_EQ(rows.at("outer").total_ns, outer.duration_ns);
}

TEST(Profiler, NothingIsRecordedWhileNoSessionRecords) {
  Tensor a = randn({4});
  {
    Range r(EventKind::User, "before");
    EXPECT_FALSE(r.active());
    (void)(a + a);
  }
  EXPECT_FALSE(recording());
  Profile prof;
  prof.stop();
  EXPECT_TRUE(prof.events().empty());
  (void)(a + a);  // after stop
  Profile again;
  again.stop();
  EXPECT_TRUE(again.events().empty());
}

TEST(Profiler, OneSessionAtATime) {
  Profile prof;
  EXPECT_THROW(start(), Error);
  prof.stop();
  EXPECT_THROW(stop(), Error);
}

TEST(Profiler, InputShapesOnlyWhenAsked) {
  Tensor a = randn({2, 3}), b = randn({3, 5});
  Profile with_shapes({.record_shapes = true});
  (void)matmul(a, b);
  with_shapes.stop();
  const Event& mm = with_shapes.events().front();
  EXPECT_EQ(mm.shapes, (std::vector<std::vector<int64_t>>{{2, 3}, {3, 5}}));
  std::vector<EventAverage> rows = with_shapes.key_averages(/*group_by_input_shape=*/true);
  EXPECT_EQ(rows.front().input_shapes, "[[2, 3], [3, 5]]");

  Profile attributes({.record_shapes = true});
  (void)softmax(a, 1);
  attributes.stop();
  EXPECT_EQ(attributes.events().front().attributes, "dim=1");

  Profile without;
  (void)matmul(a, b);
  (void)softmax(a, 1);
  without.stop();
  EXPECT_TRUE(without.events().front().shapes.empty());
  EXPECT_TRUE(without.events().back().attributes.empty());
}

TEST(Profiler, MemoryCountsBytesAllocatedLessFreedPerRange) {
  Tensor a = randn({64, 64}), b = randn({64, 64});
  const int64_t bytes = 64 * 64 * 4;
  Profile prof({.profile_memory = true});
  Tensor sum;
  {
    Range keep(EventKind::User, "keep");
    sum = a + b;  // its result outlives the range
  }
  {
    Range drop(EventKind::User, "drop");
    sum = Tensor();
  }
  prof.stop();
  const Events& events = prof.events();
  EXPECT_EQ(first_named(events, "add").self_bytes, bytes);
  EXPECT_EQ(first_named(events, "keep").total_bytes, bytes);
  EXPECT_EQ(first_named(events, "keep").self_bytes, 0);
  EXPECT_EQ(first_named(events, "drop").self_bytes, -bytes);

  Profile no_memory;
  (void)(a + b);
  no_memory.stop();
  EXPECT_EQ(no_memory.events().front().self_bytes, 0);
}

TEST(Profiler, ThreadsRecordSideBySide) {
  Tensor a = randn({16});
  Profile prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Range range(EventKind::User, "worker");
      for (int i = 0; i < 10; ++i)
        (void)(a * a);
    });
  }
  for (std::thread& t : threads)
    t.join();
  prof.stop();
  const Events& events = prof.events();
  EXPECT_TRUE(well_nested(events));
  std::map<uint32_t, int> muls;
  for (const Event& e : events)
    if (e.name == "mul") muls[e.thread] += 1;
  ASSERT_EQ(muls.size(), 4u);
  for (const auto& [thread, n] : muls)
    EXPECT_EQ(n, 10) << "thread " << thread;
}

// Ops inside an OpenMP region (as a kernel's worker threads, or a caller's
// parallel loop) record on their own threads, nested in their own ranges.
TEST(Profiler, OpenMPThreadsRecordTheirOwnRanges) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  Tensor a = randn({16});
  Profile prof;
  int team = 0;
#pragma omp parallel num_threads(3)
  {
#pragma omp single
    team = omp_get_num_threads();
    Range range(EventKind::User, "omp worker");
    for (int i = 0; i < 5; ++i)
      (void)(a + a);
  }
  prof.stop();
  const Events& events = prof.events();
  EXPECT_TRUE(well_nested(events));
  ASSERT_EQ(team, 3);
  EXPECT_EQ(count_named(events, "omp worker"), 3);
  EXPECT_EQ(count_named(events, "add"), 15);
  std::map<uint32_t, int> adds;
  for (const Event& e : events) {
    if (e.name != "add") continue;
    adds[e.thread] += 1;
    EXPECT_EQ(e.depth, 1u);
  }
  EXPECT_EQ(adds.size(), 3u);
#endif
}

TEST(Profiler, CompiledCallHoldsItsSteps) {
  Tensor w = randn({4, 4});
  jit::CompiledFunction f = jit::trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0] * 2) + w}; },
      {randn({4, 4})});
  Tensor x = randn({4, 4});
  f({x});  // the first call prepares what it needs outside the profile
  Profile prof({.record_shapes = true});
  f({x});
  f({x});
  prof.stop();
  const Events& events = prof.events();
  EXPECT_TRUE(well_nested(events));
  EXPECT_EQ(count_named(events, "CompiledFunction"), 2);
  int64_t steps = 0;
  for (const Event& e : events) {
    if (e.kind != EventKind::Step) continue;
    ++steps;
    EXPECT_EQ(e.depth, 1u) << e.name;
    EXPECT_EQ(e.shapes.front(), (std::vector<int64_t>{4, 4})) << e.name;
  }
  EXPECT_GT(steps, 0);
  EXPECT_EQ(steps % 2, 0);  // the same steps each call
}

TEST(Profiler, TableHasPyTorchsColumnsSortedBySelfTime) {
  std::vector<EventAverage> rows = {
      {.name = "small", .calls = 2, .self_ns = 1000, .total_ns = 1000},
      {.name = "big", .calls = 1, .self_ns = 3000, .total_ns = 4000},
  };
  const std::string text = table(rows, {.profile_memory = true});
  for (const char* header : {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                             "CPU time avg", "CPU Mem", "Self CPU Mem", "# of Calls"}) {
    EXPECT_NE(text.find(header), std::string::npos) << header;
  }
  EXPECT_LT(text.find("big"), text.find("small"));
  EXPECT_NE(text.find("75.00%"), std::string::npos);  // big's share of the self time
  EXPECT_NE(text.find("Self CPU time total: 4.000us"), std::string::npos);
  EXPECT_EQ(table(rows, {.row_limit = 1}).find("small"), std::string::npos);
  EXPECT_LT(table(rows, {.sort_by = "count"}).find("small"),
            table(rows, {.sort_by = "count"}).find("big"));
  EXPECT_THROW(table(rows, {.sort_by = "speed"}), Error);
}

TEST(Profiler, ChromeTraceIsCompleteEventsInMicroseconds) {
  Tensor a = randn({3});
  Profile prof({.record_shapes = true});
  {
    Range r(EventKind::User, "quote \" and \\ backslash");
    (void)(a + a);
  }
  prof.stop();
  nlohmann::json trace = nlohmann::json::parse(prof.chrome_trace());
  ASSERT_TRUE(trace["traceEvents"].is_array());
  int complete = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") continue;
    ++complete;
    EXPECT_EQ(e["ph"], "X");
    EXPECT_TRUE(e["ts"].is_number() && e["dur"].is_number() && e["pid"].is_number() &&
                e["tid"].is_number());
  }
  EXPECT_EQ(complete, int(prof.events().size()));
  const nlohmann::json& user = trace["traceEvents"][2];  // after the process and thread names
  EXPECT_EQ(user["name"], "quote \" and \\ backslash");
  const Event& add = prof.events()[1];
  const nlohmann::json& op = trace["traceEvents"][3];
  EXPECT_DOUBLE_EQ(op["dur"].get<double>(), double(add.duration_ns) / 1e3);
  EXPECT_EQ(op["args"]["Input Dims"], nlohmann::json::parse("[[3], [3]]"));
}

}  // namespace
}  // namespace kiln::profiler
