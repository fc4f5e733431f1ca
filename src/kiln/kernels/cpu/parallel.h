// OpenMP, the one threading runtime (oneDNN in Debian uses it too). Kernels
// ask here rather than calling omp_* directly, so the runtime is named once.
#pragma once

#include <cstdint>

namespace kiln::cpu {

int omp_threads_in_region();
int omp_thread_id_in_region();
int max_threads();
void set_num_threads(int n);
// Whether a parallel region here would get more than one thread: the team
// size is above 1 and this thread is not inside a region already (regions
// do not nest).
bool can_split();

// While it lives, this thread's OpenMP team size is 1 (Note [Threads per
// step], ops/op_threads.h): parallel_for and the kernels that ask
// max_threads() run as plain loops, and a oneDNN primitive created and run
// under it is a one-thread primitive, entering no region. A primitive made
// earlier for the whole team asks for its threads itself; it gets one too,
// as no region of this thread may be active meanwhile (OpenMP's
// max-active-levels is 0), and oneDNN's kernels then split their work for
// the one thread they got. Restores what it found.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_;
  int previous_levels_;
};

// Note [A busy team]
// A team of two pays only when both threads get a core. While other
// programs keep the cores busy, a thread of the team waits for one, and
// every region waits for it at its end: two threads ran a call 1.4-10x
// slower than one beside a busy loop (bench/threads.py --load), the more
// so the longer libgomp lets an idle thread spin. So the team watches how
// long its threads wait for a core (kiln/util/thread_wait.h): once per
// kWindowNs of a calling thread's use, it reads each team thread's wait;
// when one waited a quarter of the window or more, that caller's plans and
// eager ops run on one thread (OneThread) for the next second, and then
// the team is tried again. Results are those of one thread: where a
// kernel's bits depend on its threads, they differ in the last bits from
// the team's. kiln.set_team_busy_fallback(False) or
// KILN_TEAM_BUSY_FALLBACK=0 turns it off.

// Whether the calling thread's team should run as one thread now, its
// cores being busy. Cheap: a clock read, and once per window a read of its
// threads' waits.
bool team_busy();
void set_team_busy_fallback(bool on);
bool team_busy_fallback();
// How many times a team has run as one thread for a while, since the start.
int64_t team_busy_fallbacks();
// Makes the calling thread's team run as one for `ns` from now (0: ends
// it), as a busy machine would: for tests.
void prefer_one_thread_for(int64_t ns);

// Calls body(i) for every i in [0, n): split across OpenMP threads when
// `split` and a region would have more than one thread, else a plain loop.
// A region with `if (false)`, or of a team of one, would still cost libgomp
// a team setup, microseconds per call on batch-1 shapes.
// Declared and never defined: a file built without OpenMP (the layers
// above the kernels include this header for OneThread and the thread
// counts) that calls parallel_for fails to link, rather than splitting
// nothing unnoticed.
void parallel_for_needs_openmp();

template <typename Body>
void parallel_for(int64_t n, bool split, const Body& body) {
  if (!split || !can_split()) {
    for (int64_t i = 0; i < n; ++i)
      body(i);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i)
    body(i);
#else
  parallel_for_needs_openmp();
#endif
}

// Runs task(i) for every i in [0, n) on up to `threads` OpenMP threads
// (independent tasks: a compiled plan's concurrent steps). Kernels inside a
// task run on one thread, as OpenMP regions do not nest: tasks times
// threads per task stay within `threads`. The first exception a task
// throws is rethrown here once every task has ended.
void run_concurrently(int64_t n, int threads, void (*task)(void* context, int64_t i),
                      void* context);

template <typename Task>
void run_concurrently(int64_t n, int threads, const Task& task) {
  run_concurrently(
      n, threads, [](void* c, int64_t i) { (*static_cast<const Task*>(c))(i); },
      const_cast<Task*>(&task));
}

}  // namespace kiln::cpu
