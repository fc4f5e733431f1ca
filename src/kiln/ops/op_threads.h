// Whether an op's kernel runs on one thread or on the caller's team: a
// compiled plan's step (decided when lowering) and an eager op (decided per
// call) alike, so both run the same kernel on the same threads.
//
// Note [Threads per step]
// A second thread pays only when a kernel's work outweighs handing half of
// it over: libgomp's fork and join cost about 0.5 us with both threads hot,
// and splitting small work costs more again in imbalance and shared cache
// lines, so at batch 1 many steps of a small CNN ran slower on two threads
// than on one (oneDNN splits every convolution over the whole team, however
// small). lower() estimates each step's time on one thread from its shapes
// (multiply-adds for convolutions, matmuls, linear layers and attention;
// bytes moved for elementwise ops, reductions, norms, pooling and copies)
// and marks the steps under kTwoThreadMinNs to run on one thread: the
// executor runs them under cpu::OneThread, so they enter no OpenMP region,
// and their oneDNN primitives are created for one thread (a primitive keeps
// the thread count it was created with). Eager dispatch makes the same
// choice per call (ops/dispatch.cpp), so a compiled step and the eager op
// still give the same bits where a kernel's bits depend on its threads
// (oneDNN's Winograd convolution does). Ops the model does not know run on
// the team as before, their kernels deciding.
//
// The choice depends on the op and its shapes only, never on timings, so a
// plan runs the same kernels on the same threads every call and every run:
// results are as deterministic as before. A kernel whose bits depend on its
// thread count (a reduction summing per-thread partials) gives on a
// one-thread step what it gives under kiln.set_num_threads(1).
// The profiler shows each step's threads (the table's Threads column).
// KILN_STEP_THREADS=all (or set_step_threads(StepThreads::All)) turns the
// choice off: every op on the team, as before.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/kernels/cpu/strided.h"
#include "kiln/ops/op.h"

namespace kiln {

enum class StepThreads : uint8_t {
  Choose,  // small steps on one thread (the default)
  All,     // every step on the caller's team
};

// For eager ops and for plans lowered from now on. The default:
// KILN_STEP_THREADS ("choose" or "all") when set, else Choose.
void set_step_threads(StepThreads mode);
StepThreads step_threads();

// A step estimated to take less than this on one thread runs on one: with
// the team's second thread spinning for work (libgomp's default), handing
// it half costs a few us, and at 10 us small CNNs ran as fast as with every
// step on the team (bench/threads.py, 2026-11-29). When the team's thread
// sleeps instead (GOMP_SPINCOUNT or OMP_WAIT_POLICY=passive set low),
// waking it costs 20-50 us on the VM the benchmarks run on, and fewer
// steps would pay.
inline constexpr int64_t kTwoThreadMinNs = 10'000;

// The estimated nanoseconds on one thread of a step of `op` over these
// views, or -1 when the model does not know the op.
int64_t estimate_one_thread_ns(const OpDef& op, std::span<const cpu::StridedView> inputs,
                               std::span<const cpu::StridedView> outputs);

// Whether such a step runs on one thread under the current mode.
bool runs_on_one_thread(const OpDef& op, std::span<const cpu::StridedView> inputs,
                        std::span<const cpu::StridedView> outputs);

}  // namespace kiln
