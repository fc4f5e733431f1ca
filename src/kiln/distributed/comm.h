// The communication thread and its jobs (Note [One communication thread]
// in distributed.h). Internal to the distributed layer: the only header
// that includes mpi.h.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/distributed/distributed.h"
#include "kiln/util/error.h"

namespace kiln::distributed::detail {

// The shared state behind a Work handle: completed by the communication
// thread, waited on by the caller.
class WorkState final : public Work {
 public:
  void wait() override;
  bool is_completed() const override;
  int64_t started_ns() const override { return started_ns_.load(); }
  int64_t finished_ns() const override { return finished_ns_.load(); }

  void mark_started();
  void complete(std::string error, ErrorKind kind = ErrorKind::Runtime);
  // Runs on the caller's thread at the first wait() after a success (copying
  // a contiguous staging buffer back into a strided tensor).
  std::function<void()> after;

 private:
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  bool after_ran_ = false;
  std::string error_;
  ErrorKind kind_ = ErrorKind::Runtime;
  std::atomic<int64_t> started_ns_{0};
  std::atomic<int64_t> finished_ns_{0};
};

// One queued call. A collective holds the queue until it is done (every rank
// must issue collectives in one order); a point-to-point call is started and
// then progressed alongside the calls behind it.
struct Job {
  bool collective = true;
  std::string call;             // "all_reduce(float32 [4, 3], op=sum)"
  int64_t number = 0;           // the collective's call number on this rank (enqueue sets it)
  std::vector<Tensor> tensors;  // waited for in the engine, kept alive
  // Issues the non-blocking MPI calls (into `requests`) on the thread; a
  // non-success MPI code breaks the group.
  std::function<int(MPI_Comm comm, std::vector<MPI_Request>& requests)> start;
  std::function<void()> finish;  // once the requests are done (AVG's division)
  std::shared_ptr<WorkState> work;
};

// Queues a job for the communication thread. Throws (at the call) when the
// group is not initialized or is broken.
void enqueue(Job job);

MPI_Datatype mpi_type_of(DType dtype);  // TypeError for dtypes MPI lacks here

// Lets graphs run all-reduces: installs the hook all_reduce_start's kernel
// calls (ops/collective_ops.h). init() calls it.
void install_graph_collectives();

}  // namespace kiln::distributed::detail
