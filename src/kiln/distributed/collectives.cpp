// The collectives and point-to-point calls: each checks its arguments on the
// caller's thread, stages strided tensors through contiguous buffers, and
// queues one job for the communication thread (comm.cpp).
#include <cstring>

#include "kiln/distributed/comm.h"
#include "kiln/ops/collective_ops.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/view.h"

namespace kiln::distributed {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

namespace {

using detail::Job;
using detail::WorkState;

std::string describe(const Tensor& t) {
  return str(t.dtype(), " ", t.shape());
}

// The MPI reduction for `op` on `dtype`: bool sums and maxima are a logical
// or, minima a logical and (PyTorch's semantics); AVG sums, then divides.
MPI_Op mpi_op_of(ReduceOp op, DType dtype, const char* name) {
  KILN_CHECK_VALUE(op != ReduceOp::Avg || is_floating(dtype), name,
                   ": ReduceOp.AVG needs a floating-point tensor, got ", dtype);
  if (dtype == DType::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// Divides a contiguous float buffer by the world size (AVG after SUM).
std::function<void()> divide_by_world(const Tensor& buffer, ReduceOp op) {
  if (op != ReduceOp::Avg) return nullptr;
  return [buffer] {
    double n = world_size();
    int64_t count = buffer.numel();
    if (buffer.dtype() == DType::Float32) {
      auto* p = static_cast<float*>(buffer.unsynced_data_ptr());
      for (int64_t i = 0; i < count; ++i)
        p[i] = float(p[i] / n);
      return;
    }
    auto* p = static_cast<double*>(buffer.unsynced_data_ptr());
    for (int64_t i = 0; i < count; ++i)
      p[i] /= n;
  };
}

void check_tensor(const Tensor& t, const char* name) {
  KILN_CHECK(t.defined(), name, ": got an undefined tensor");
  detail::mpi_type_of(t.dtype());  // TypeError for a dtype MPI cannot carry
}

// The contiguous buffer the job works on: `t` itself, or a copy of it that
// the caller copies back at wait() when `write_back`.
Tensor staged(const Tensor& t, const std::shared_ptr<WorkState>& work, bool write_back) {
  if (t.is_contiguous()) {
    // Written in place, as an in-place op would be: autograd's check of
    // saved tensors sees the write.
    if (write_back) t.bump_version();
    return t;
  }
  Tensor buffer = clone(t);
  if (write_back) work->after = [t, buffer] { copy_(t, buffer); };
  return buffer;
}

// Rows of a contiguous [n * k, ...] buffer as views of `shape`.
Tensor slice_of(const Tensor& flat, int64_t index, const IntList& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return view(narrow(flat, 0, index * n, n), shape);
}

WorkPtr submit(Job job, bool async_op) {
  auto work = job.work;
  detail::enqueue(std::move(job));
  if (async_op) return work;
  work->wait();
  return nullptr;
}

int count_of(const Tensor& t) {
  KILN_CHECK_VALUE(t.numel() <= int64_t(INT32_MAX), "kiln.distributed: a tensor of ", t.numel(),
                   " elements is over MPI's int count; split it");
  return int(t.numel());
}

}  // namespace

WorkPtr all_reduce(const Tensor& t, ReduceOp op, bool async_op) {
  check_tensor(t, "all_reduce");
  MPI_Op mpi_op = mpi_op_of(op, t.dtype(), "all_reduce");
  Job job;
  job.work = std::make_shared<WorkState>();
  Tensor buffer = staged(t, job.work, true);
  job.call = str("all_reduce(", describe(t), ", op=", to_string(op), ")");
  job.tensors = {buffer};
  MPI_Datatype type = detail::mpi_type_of(t.dtype());
  int count = count_of(t);
  job.start = [buffer, type, count, mpi_op](MPI_Comm comm, std::vector<MPI_Request>& requests) {
    requests.resize(1);
    return MPI_Iallreduce(MPI_IN_PLACE, buffer.unsynced_data_ptr(), count, type, mpi_op, comm,
                          requests.data());
  };
  job.finish = divide_by_world(buffer, op);
  return submit(std::move(job), async_op);
}

WorkPtr broadcast(const Tensor& t, int src, bool async_op) {
  check_tensor(t, "broadcast");
  KILN_CHECK_VALUE(src >= 0 && src < world_size(), "broadcast: src ", src,
                   " is not a rank of the group (world size ", world_size(), ")");
  Job job;
  job.work = std::make_shared<WorkState>();
  Tensor buffer = staged(t, job.work, true);
  job.call = str("broadcast(", describe(t), ", src=", src, ")");
  job.tensors = {buffer};
  MPI_Datatype type = detail::mpi_type_of(t.dtype());
  int count = count_of(t);
  job.start = [buffer, type, count, src](MPI_Comm comm, std::vector<MPI_Request>& requests) {
    requests.resize(1);
    return MPI_Ibcast(buffer.unsynced_data_ptr(), count, type, src, comm, requests.data());
  };
  return submit(std::move(job), async_op);
}

WorkPtr all_gather_into_tensor(const Tensor& output, const Tensor& input, bool async_op) {
  check_tensor(input, "all_gather_into_tensor");
  check_tensor(output, "all_gather_into_tensor");
  KILN_CHECK_TYPE(output.dtype() == input.dtype(), "all_gather_into_tensor: output dtype ",
                  output.dtype(), " differs from input dtype ", input.dtype());
  KILN_CHECK_VALUE(output.numel() == input.numel() * world_size(),
                   "all_gather_into_tensor: output of shape ", output.shape(), " must hold ",
                   world_size(), " inputs of shape ", input.shape());
  Job job;
  job.work = std::make_shared<WorkState>();
  Tensor out = staged(output, job.work, true);
  Tensor in = input.is_contiguous() ? input : clone(input);
  job.call = str("all_gather(", describe(input), ")");
  job.tensors = {out, in};
  MPI_Datatype type = detail::mpi_type_of(input.dtype());
  int count = count_of(input);
  job.start = [out, in, type, count](MPI_Comm comm, std::vector<MPI_Request>& requests) {
    requests.resize(1);
    return MPI_Iallgather(in.unsynced_data_ptr(), count, type, out.unsynced_data_ptr(), count, type,
                          comm, requests.data());
  };
  return submit(std::move(job), async_op);
}

WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op) {
  check_tensor(input, "all_gather");
  KILN_CHECK_VALUE(int64_t(outputs.size()) == world_size(), "all_gather: got ", outputs.size(),
                   " output tensors for a world size of ", world_size());
  for (const Tensor& o : outputs) {
    check_tensor(o, "all_gather");
    KILN_CHECK_VALUE(o.shape() == input.shape() && o.dtype() == input.dtype(),
                     "all_gather: every output must be ", describe(input), " like the input, got ",
                     describe(o));
  }
  IntList gathered_shape = {world_size() * input.numel()};
  Tensor gathered = make_tensor(gathered_shape, input.dtype());
  WorkPtr work = all_gather_into_tensor(gathered, input, true);
  auto copy_out = [outputs, gathered, shape = input.shape()] {
    for (size_t i = 0; i < outputs.size(); ++i)
      copy_(outputs[i], slice_of(gathered, int64_t(i), shape));
  };
  static_cast<WorkState&>(*work).after = copy_out;
  if (async_op) return work;
  work->wait();
  return nullptr;
}

WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                       bool async_op) {
  check_tensor(output, "reduce_scatter");
  KILN_CHECK_VALUE(int64_t(inputs.size()) == world_size(), "reduce_scatter: got ", inputs.size(),
                   " input tensors for a world size of ", world_size());
  for (const Tensor& in : inputs) {
    check_tensor(in, "reduce_scatter");
    KILN_CHECK_VALUE(in.shape() == output.shape() && in.dtype() == output.dtype(),
                     "reduce_scatter: every input must be ", describe(output),
                     " like the output, got ", describe(in));
  }
  MPI_Op mpi_op = mpi_op_of(op, output.dtype(), "reduce_scatter");
  IntList packed_shape = {world_size() * output.numel()};
  Tensor packed = make_tensor(packed_shape, output.dtype());
  for (size_t i = 0; i < inputs.size(); ++i)
    copy_(slice_of(packed, int64_t(i), output.shape()), inputs[i]);
  Job job;
  job.work = std::make_shared<WorkState>();
  Tensor out = staged(output, job.work, true);
  job.call = str("reduce_scatter(", describe(output), ", op=", to_string(op), ")");
  job.tensors = {out, packed};
  MPI_Datatype type = detail::mpi_type_of(output.dtype());
  int count = count_of(output);
  job.start = [out, packed, type, count, mpi_op](MPI_Comm comm,
                                                 std::vector<MPI_Request>& requests) {
    requests.resize(1);
    return MPI_Ireduce_scatter_block(packed.unsynced_data_ptr(), out.unsynced_data_ptr(), count,
                                     type, mpi_op, comm, requests.data());
  };
  job.finish = divide_by_world(out, op);
  return submit(std::move(job), async_op);
}

void barrier() {
  Job job;
  job.work = std::make_shared<WorkState>();
  job.call = "barrier()";
  job.start = [](MPI_Comm comm, std::vector<MPI_Request>& requests) {
    requests.resize(1);
    return MPI_Ibarrier(comm, requests.data());
  };
  submit(std::move(job), false);
}

namespace {

WorkPtr point_to_point(const Tensor& t, int peer, int tag, bool sending) {
  const char* name = sending ? "send" : "recv";
  check_tensor(t, name);
  KILN_CHECK_VALUE(peer >= 0 && peer < world_size(), name, ": rank ", peer,
                   " is not in the group (world size ", world_size(), ")");
  KILN_CHECK_VALUE(peer != rank(), name, ": rank ", peer, " cannot ", name, " to itself");
  KILN_CHECK_VALUE(tag >= 0, name, ": the tag must be non-negative, got ", tag);
  Job job;
  job.collective = false;
  job.work = std::make_shared<WorkState>();
  Tensor buffer = staged(t, job.work, !sending);
  job.call = str(name, "(", describe(t), sending ? ", dst=" : ", src=", peer, ", tag=", tag, ")");
  job.tensors = {buffer};
  MPI_Datatype type = detail::mpi_type_of(t.dtype());
  int count = count_of(t);
  job.start = [buffer, type, count, peer, tag, sending](MPI_Comm comm,
                                                        std::vector<MPI_Request>& requests) {
    requests.resize(1);
    void* data = buffer.unsynced_data_ptr();
    if (sending) return MPI_Isend(data, count, type, peer, tag, comm, requests.data());
    return MPI_Irecv(data, count, type, peer, tag, comm, requests.data());
  };
  WorkPtr work = job.work;
  detail::enqueue(std::move(job));
  return work;
}

}  // namespace

void send(const Tensor& t, int dst, int tag) {
  point_to_point(t, dst, tag, true)->wait();
}

void recv(const Tensor& t, int src, int tag) {
  point_to_point(t, src, tag, false)->wait();
}

WorkPtr isend(const Tensor& t, int dst, int tag) {
  return point_to_point(t, dst, tag, true);
}

WorkPtr irecv(const Tensor& t, int src, int tag) {
  return point_to_point(t, src, tag, false);
}

}  // namespace kiln::distributed

namespace kiln::distributed::detail {

// What all_reduce_start's kernel calls (ops/collective_ops.h): the ops layer
// sits below this one, so it reaches the communication thread through this
// hook, installed once the first process group is initialized.
void install_graph_collectives() {
  set_async_all_reduce([](const Tensor& buffer, const std::string& name) {
    ReduceOp op = ReduceOp::Sum;
    for (ReduceOp candidate : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      if (name == to_string(candidate)) op = candidate;
    }
    WorkPtr work = all_reduce(buffer, op, /*async_op=*/true);
    return std::function<void()>([work] { work->wait(); });
  });
}

}  // namespace kiln::distributed::detail
