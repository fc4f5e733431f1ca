// all_reduce_start / all_reduce_wait (collective_ops.h). The pending calls
// live in a process-wide table keyed by the token the start node outputs;
// each entry owns the buffer the communication thread reduces.
#include "kiln/ops/collective_ops.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "kiln/kernels/cpu/copy.h"
#include "kiln/ops/dispatch.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

struct PendingAllReduce {
  Tensor buffer;               // flat, the inputs packed in order
  std::function<void()> wait;  // from the hook: blocks, raises the call's error
};

struct CollectiveState {
  std::mutex mutex;
  AsyncAllReduce start;
  int64_t next_token = 0;
  std::unordered_map<int64_t, PendingAllReduce> pending;
};

CollectiveState& state() {
  static CollectiveState* s = new CollectiveState();  // never destroyed: plans outlive statics
  return *s;
}

bool is_reduce_op(const std::string& op) {
  return op == "sum" || op == "avg" || op == "max" || op == "min";
}

InferResult infer_all_reduce_start(const InferArgs& args) {
  const std::string& op = args.attrs.get_string("op");
  KILN_CHECK_VALUE(is_reduce_op(op), "all_reduce_start: op must be sum, avg, max or min, got '", op,
                   "'");
  const DType dtype = args.inputs[0].dtype;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorMeta& in = args.inputs[i];
    KILN_CHECK_TYPE(in.dtype == dtype,
                    "all_reduce_start: every input must have one dtype; input 0 is ", dtype,
                    ", input ", i, " is ", in.dtype);
    KILN_CHECK(is_static(in.shape), "all_reduce_start: input ", i, " has symbolic shape ", in.shape,
               "; a bucket of gradients has the parameters' static shapes");
  }
  KILN_CHECK_VALUE(op != "avg" || is_floating(dtype),
                   "all_reduce_start: op avg needs a floating-point dtype, got ", dtype);
  return InferResult{{TensorMeta{.dtype = DType::Int64, .shape = {}}}, {}};
}

InferResult infer_all_reduce_wait(const InferArgs& args) {
  const TensorMeta& token = args.inputs[0];
  KILN_CHECK_TYPE(token.dtype == DType::Int64 && token.shape.empty(),
                  "all_reduce_wait: input 0 must be all_reduce_start's int64 token of shape [], "
                  "got ",
                  token.dtype, token.shape);
  const int64_t numel = args.attrs.get_int("numel");
  KILN_CHECK_VALUE(numel >= 0, "all_reduce_wait: numel must be >= 0, got ", numel);
  return InferResult{{TensorMeta{.dtype = args.attrs.get_dtype("dtype"), .shape = {Dim(numel)}}},
                     {}};
}

// A contiguous view of `count` elements of `base` from element `offset`,
// shaped as `like`.
cpu::StridedView packed_part(const Tensor& base, int64_t offset, const cpu::StridedView& like) {
  cpu::StridedView part = like;
  part.data = static_cast<char*>(base.data_ptr()) + offset * int64_t(base.itemsize());
  part.dtype = base.dtype();
  int64_t stride = 1;
  for (int d = like.ndim - 1; d >= 0; --d) {
    part.strides[d] = stride;
    stride *= like.shape[d];
  }
  return part;
}

void all_reduce_start_kernel(const KernelArgs& args) {
  CollectiveState& s = state();
  AsyncAllReduce start;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    start = s.start;
  }
  KILN_CHECK(start != nullptr,
             "all_reduce_start: no process group is initialized in this process; call "
             "kiln.distributed.init_process_group() (kiln::distributed::init() in C++) before "
             "running a graph that holds collectives");
  int64_t total = 0;
  for (const cpu::StridedView& in : args.inputs)
    total += in.numel();
  Tensor buffer = make_tensor({total}, args.inputs[0].dtype);
  int64_t offset = 0;
  for (const cpu::StridedView& in : args.inputs) {
    if (in.numel() > 0) cpu::copy_convert(packed_part(buffer, offset, in), in);
    offset += in.numel();
  }
  std::function<void()> wait = start(buffer, args.attrs.get_string("op"));
  int64_t token = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    token = s.next_token++;
    s.pending.emplace(token, PendingAllReduce{std::move(buffer), std::move(wait)});
  }
  std::memcpy(args.outputs[0].data, &token, sizeof(token));
}

void all_reduce_wait_kernel(const KernelArgs& args) {
  int64_t token = 0;
  std::memcpy(&token, args.inputs[0].data, sizeof(token));
  PendingAllReduce call;
  {
    CollectiveState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto found = s.pending.find(token);
    KILN_CHECK(found != s.pending.end(), "all_reduce_wait: no all-reduce is in flight under token ",
               token, "; each all_reduce_start's token is waited for exactly once");
    call = std::move(found->second);
    s.pending.erase(found);
  }
  call.wait();  // the collective's error (desync, timeout, broken group) raises here
  const cpu::StridedView& out = args.outputs[0];
  KILN_CHECK(call.buffer.numel() == out.numel() && call.buffer.dtype() == out.dtype,
             "all_reduce_wait: the all-reduce of token ", token, " holds ", call.buffer.dtype(),
             "[", call.buffer.numel(), "], but the node expects ", out.dtype, "[", out.numel(),
             "]");
  if (out.numel() > 0) cpu::copy_convert(out, view_of(call.buffer));
}

}  // namespace

void set_async_all_reduce(AsyncAllReduce hook) {
  CollectiveState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.start = std::move(hook);
}

void register_collective_ops(OpRegistry& registry) {
  // Side effects: the ranks must run every call, in the same order, so no
  // pass may fold, merge, remove or reorder them. Their outputs carry no
  // gradient (an all-reduce of gradients is not differentiated again).
  registry.add(OpDef{
      .name = "all_reduce_start",
      .min_inputs = 1,
      .max_inputs = -1,
      .attrs = {{"op", AttrKind::String, std::string("sum")}},
      .infer = infer_all_reduce_start,
      .cpu = all_reduce_start_kernel,
      .has_side_effects = true,
      .differentiable = false,
      .runs_where_issued = true,
      .onnx = onnx_not_exportable(
          "a collective over the ranks of kiln.distributed: ONNX graphs run on one process")});
  registry.add(OpDef{
      .name = "all_reduce_wait",
      .attrs = {{"numel", AttrKind::Int, AttrValue()}, {"dtype", AttrKind::DType, AttrValue()}},
      .infer = infer_all_reduce_wait,
      .cpu = all_reduce_wait_kernel,
      .has_side_effects = true,
      .differentiable = false,
      .runs_where_issued = true,
      .onnx = onnx_not_exportable(
          "it waits for a collective over the ranks of kiln.distributed: ONNX graphs run on "
          "one process")});
}

}  // namespace kiln
