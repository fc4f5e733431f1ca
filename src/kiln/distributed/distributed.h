// kiln::distributed: several processes (ranks) that exchange tensors, over
// MPI. PyTorch's torch.distributed names and semantics; docs/distributed.md
// is the user's guide.
//
//   mpirun -np 2 ./train          (rank and world size come from mpirun)
//   kiln::distributed::init();
//   kiln::distributed::all_reduce(grad);              // in place, sum
//   auto work = kiln::distributed::all_reduce(flat, ReduceOp::Sum, true);
//   ... compute ...; work->wait();                    // raises its error
//
// Note [One communication thread]
// Every MPI call after init runs on one thread per process, in the order
// the calls were issued (MPI_THREAD_SERIALIZED). OpenMPI only progresses a
// non-blocking operation inside MPI calls, so an async collective needs a
// thread that keeps calling MPI_Test while the caller computes: this one.
// It also gives every blocking wait a deadline (MPI itself has none): a
// collective that outlives the timeout fails, on each rank that waits.
//
// Note [Collectives and the engine]
// A collective reads and writes its tensors' storages. Before it starts,
// the communication thread waits for the ops already pushed on them (async
// execution mode, docs/engine.md), so it sees their values. A synchronous
// call returns once the collective is done, so ops issued afterwards see
// its result; with async_op=true, as in PyTorch, the tensors belong to the
// collective until wait() returns.
//
// Note [Failures]
// Before each collective the ranks compare a hash of (call number, op,
// shapes, dtypes, root, reduce op) in one small all-reduce; on a mismatch
// every rank raises an error naming its own call and the other rank's, and
// the group stays usable. A collective that exceeds the timeout, or an MPI
// error (a peer that died), breaks the group: that call and every later one
// raise, and destroy_process_group() then skips MPI_Finalize (which would
// wait for the dead peer) so the process can exit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/core/tensor.h"

namespace kiln::distributed {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* to_string(ReduceOp op);

struct InitOptions {
  std::string backend = "mpi";
  // Seconds a collective may take; <= 0 takes the default: KILN_DIST_TIMEOUT
  // (seconds) from the environment, else 1800 (PyTorch's 30 minutes).
  double timeout_s = 0;
};

// A collective in flight. wait() blocks until it is done and raises its
// error (each time it is called); then the tensors hold the result.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() const = 0;
  // When the communication thread started and finished the call, in
  // steady_clock nanoseconds (0 until then): what DDP's overlap is measured
  // from. The profiler also records each collective as a range
  // "kiln.distributed.<name>" on the communication thread.
  virtual int64_t started_ns() const = 0;
  virtual int64_t finished_ns() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

bool is_available();  // built with MPI: always true in this build
void init(const InitOptions& options = {});
bool is_initialized();
int rank();
int world_size();
double timeout_seconds();
void set_timeout(double seconds);  // for the calls issued from now on
void barrier();
// Waits for the queued calls, stops the communication thread and finalizes
// MPI (unless the group is broken, see Note [Failures]). A no-op when not
// initialized. MPI cannot be initialized again in the same process.
void destroy();
// Marks the group broken (the calls after it raise; destroy() skips
// MPI_Finalize), so a rank that fails exits at once and mpirun ends the
// others, rather than finalizing while they wait for it (Python does it for
// an uncaught exception).
void abandon(const std::string& reason);
// True once a timeout or an MPI error broke the group; the first error.
bool is_broken();
std::string broken_reason();

// Collectives: in place, on every rank, in the same order. With async_op
// they return a Work at once; otherwise they return nullptr when done.
WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum, bool async_op = false);
WorkPtr broadcast(const Tensor& t, int src, bool async_op = false);
// outputs[i] receives rank i's `input`; every rank passes the same shapes.
WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op = false);
// output: world_size inputs stacked along dim 0 (or concatenated, when
// output's first dim is world_size times input's).
WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op = false);
// output = reduction over ranks of inputs[rank]; inputs has world_size tensors
// of output's shape.
WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                       ReduceOp op = ReduceOp::Sum, bool async_op = false);

// Point to point (tag 0 unless given): blocking and Work-returning forms.
void send(const Tensor& t, int dst, int tag = 0);
void recv(const Tensor& t, int src, int tag = 0);
WorkPtr isend(const Tensor& t, int dst, int tag = 0);
WorkPtr irecv(const Tensor& t, int src, int tag = 0);

// Counters for tests and the DDP benchmark.
struct Stats {
  int64_t collectives = 0;  // collectives issued (the call number)
  int64_t completed = 0;    // collectives done on the communication thread
};
Stats stats();

}  // namespace kiln::distributed
