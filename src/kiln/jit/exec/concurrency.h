// A plan's independent branches as concurrent steps: which steps may run at
// the same time, and when running them so pays.
//
// Note [Concurrent steps]
// Two steps conflict when one writes memory the other reads or writes (the
// bytes their arguments span, arena reuse included: a buffer placed where
// a dead one was is a write after that one's last read), when both draw
// random numbers (draws keep the plan's order, so results stay bitwise those
// of a serial run), when both are collectives (all_reduce_start/_wait keep
// the plan's order: every rank must issue its all-reduces in one order, and
// a wait hoisted above a later start would block before backward goes on),
// or when one is a control-flow step (a barrier). A
// step's wave is one more than the latest wave of the earlier steps it
// conflicts with; steps of one wave are independent, so the waves run in
// order and the steps of a wave in any order or side by side. Waves are
// found before the arena is placed (each buffer as if it had its own
// bytes), the steps reordered by wave, and each buffer kept alive for whole
// waves, so the placement's reuse never serializes the branches. A plan
// with a placer of its own (symbolic sizes) runs in order.
//
// The cost model: a wave runs side by side only when at least two of its
// steps touch kConcurrentStepBytes or more (smaller kernels cost less than
// a thread hand-over), on at most as many threads as the running thread's
// intra-op count, each kernel then on one thread (OpenMP regions do not
// nest): concurrent steps times threads per step never pass the cores the
// caller gave (kiln.set_num_threads, and set_num_interop_threads for an
// engine worker).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/jit/exec/plan.h"

namespace kiln::jit {

inline constexpr int64_t kConcurrentStepBytes = int64_t(64) << 10;
inline constexpr size_t kMaxPlannedSteps = 4096;  // larger plans run serially

// Before placement (the default placer only): groups the steps by wave,
// waves in order (a valid order of the steps: every conflict goes forward),
// fills plan.waves, and widens each arena buffer's lifetime to whole waves
// so the placement never puts two buffers of one wave on the same bytes.
void order_by_waves(Plan& plan);

// After placement: asserts no two steps of a wave conflict on the bytes
// they were given.
void check_waves(const Plan& plan);

}  // namespace kiln::jit
