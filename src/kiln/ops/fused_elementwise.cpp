// fused_elementwise: a chain of elementwise ops as one op, written by the
// fusion pass (jit/passes/fuse_elementwise.cpp). Its `program` attribute
// lists the ops in order, each reading the fused op's inputs (%k) or an
// earlier op's result ($j); the last result is the output:
//
//   fused_elementwise(%x, %c) {program="sigmoid(%0) mul($0, %1) neg($1)"}
//     = neg(sigmoid(x) * c)
//
// The output is computed a block of elements at a time: every op of the
// program runs its own kernel over the block, the intermediate results stay
// in small per-thread buffers that stay in cache, and the output is written
// once. Inputs are read once. Each op's own infer, kernel and backward rule
// run, so the bits are those of the ops one after the other.
#include <cctype>
#include <sstream>

#include "kiln/ops/dispatch.h"
#include "kiln/ops/fused.h"
#include "kiln/ops/registry.h"

namespace kiln {
namespace {

// Elements per block: a few buffers of it stay in L2, and the per-block cost
// (a kernel call per op) is small against the work.
constexpr int64_t kBlock = 8192;

void check_program(bool ok, const std::string& program, const std::string& why) {
  KILN_CHECK_VALUE(ok, "fused_elementwise: bad program \"", program, "\": ", why);
}

Operand parse_operand(const std::string& token, const std::string& program, size_t instruction) {
  check_program(token.size() >= 2 && (token[0] == '%' || token[0] == '$'), program,
                "operand '" + token + "' is neither %input nor $result");
  size_t index = 0;
  for (size_t i = 1; i < token.size(); ++i) {
    check_program(std::isdigit(static_cast<unsigned char>(token[i])), program,
                  "operand '" + token + "' is not a number");
    index = index * 10 + size_t(token[i] - '0');
    check_program(index < 4096, program, "operand '" + token + "' is out of range");
  }
  const bool is_result = token[0] == '$';
  check_program(!is_result || index < instruction, program,
                "operand '" + token + "' reads a result not computed yet");
  return Operand{is_result, index};
}

// What one op computes from its operands' types: the op's own inference.
TensorMeta infer_instruction(const Instruction& ins, const std::vector<TensorMeta>& operands) {
  InferResult result = ins.op->infer(InferArgs{*ins.op, operands, ins.attrs});
  KILN_CHECK_VALUE(result.outputs.size() == 1, "fused_elementwise: ", ins.op->name,
                   " has more than one output");
  for (size_t i = 0; i < result.input_dtypes.size() && i < operands.size(); ++i) {
    KILN_CHECK_TYPE(result.input_dtypes[i] == operands[i].dtype,
                    "fused_elementwise: ", ins.op->name, " takes its input ", i, " as ",
                    result.input_dtypes[i], ", not ", operands[i].dtype,
                    " (the fusion pass keeps casts outside)");
  }
  return result.outputs[0];
}

template <typename T, typename Fn>
std::vector<T> gather_operands(const Instruction& ins, const std::vector<T>& inputs,
                               const std::vector<T>& results, Fn&& check) {
  std::vector<T> out;
  for (const Operand& o : ins.operands) {
    check(o);
    out.push_back(o.is_result ? results[o.index] : inputs[o.index]);
  }
  return out;
}

InferResult infer_fused(const InferArgs& args) {
  const Program& program = parse_program(args.attrs.get_string("program"));
  std::vector<TensorMeta> results;
  for (const Instruction& ins : program.instructions) {
    auto operands =
        gather_operands(ins, std::vector<TensorMeta>(args.inputs.begin(), args.inputs.end()),
                        results, [&](const Operand& o) {
                          KILN_CHECK_VALUE(o.is_result || o.index < args.inputs.size(),
                                           "fused_elementwise: the program reads %", o.index,
                                           " but the op has ", args.inputs.size(), " inputs");
                        });
    results.push_back(infer_instruction(ins, operands));
  }
  const TensorMeta& out = results.back();
  // Intermediate results live in buffers typed like the output.
  for (size_t j = 0; j + 1 < results.size(); ++j) {
    KILN_CHECK_TYPE(results[j].dtype == out.dtype,
                    "fused_elementwise: ", program.instructions[j].op->name, " (instruction ", j,
                    ") gives ", results[j].dtype, " but the output is ", out.dtype,
                    "; every intermediate result must have the output's dtype");
  }
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorMeta& in = args.inputs[i];
    // A static single element first: comparing [1, 1] with [n, 3] by `==`
    // would ask the shape environment whether 1 == n, which it may not know.
    const Dim numel = numel_of(in.shape);
    const bool single = numel.is_static() && numel.static_value() == 1;
    KILN_CHECK_VALUE(single || in.shape == out.shape, "fused_elementwise: input ", i, " of shape ",
                     in.shape, " is neither the output's shape ", out.shape,
                     " nor a single element");
  }
  return InferResult{{TensorMeta{out.dtype, out.shape}}, {}};
}

// ---- the kernel ----

// A view of `count` elements from element `start` of a dense or one-element
// view (a single element is repeated with stride 0).
cpu::StridedView block_of(const cpu::StridedView& v, int64_t start, int64_t count) {
  cpu::StridedView out = v;
  out.ndim = 1;
  out.shape[0] = count;
  if (v.numel() == 1) {
    out.strides[0] = 0;
    return out;
  }
  out.strides[0] = 1;
  out.data = static_cast<char*>(v.data) + start * int64_t(element_size(v.dtype));
  return out;
}

bool is_dense(const cpu::StridedView& v) {
  int64_t expected = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return true;
}

// Per-thread buffers for the blocks, reused from block to block and call to
// call: the per-block cost is what limits a large fused update.
struct BlockScratch {
  std::vector<char> results;
  std::vector<cpu::StridedView> inputs, outputs, operands;
};

void run_block(const Program& program, const KernelArgs& args, int64_t start, int64_t count,
               BlockScratch& scratch) {
  const cpu::StridedView& out = args.outputs[0];
  const int64_t itemsize = int64_t(element_size(out.dtype));
  const size_t steps = program.instructions.size();
  scratch.inputs.clear();
  for (const cpu::StridedView& in : args.inputs)
    scratch.inputs.push_back(block_of(in, start, count));
  scratch.outputs.clear();
  for (size_t j = 0; j < steps; ++j) {
    const bool last = j + 1 == steps;
    cpu::StridedView r = block_of(out, start, count);
    if (!last) r.data = scratch.results.data() + size_t(kBlock * itemsize) * j;
    scratch.outputs.push_back(r);
    const Instruction& ins = program.instructions[j];
    scratch.operands.clear();
    for (const Operand& o : ins.operands)
      scratch.operands.push_back(o.is_result ? scratch.outputs[o.index] : scratch.inputs[o.index]);
    ins.op->cpu(KernelArgs{scratch.operands, std::span(&scratch.outputs[j], 1), ins.attrs});
  }
}

void fused_kernel(const KernelArgs& args) {
  const Program& program = parse_program(args.attrs.get_string("program"));
  const cpu::StridedView& out = args.outputs[0];
  bool blockable = is_dense(out);
  for (const cpu::StridedView& in : args.inputs)
    blockable = blockable && (in.numel() == 1 || is_dense(in));
  if (blockable) {
    thread_local BlockScratch scratch;
    const size_t intermediates = program.instructions.size() - 1;
    scratch.results.resize(size_t(kBlock) * element_size(out.dtype) * intermediates);
    for (int64_t start = 0; start < out.numel(); start += kBlock)
      run_block(program, args, start, std::min(kBlock, out.numel() - start), scratch);
    return;
  }
  // Inputs with other strides: the ops one after the other over whole
  // tensors (the same results, unfused).
  const int64_t itemsize = int64_t(element_size(out.dtype));
  std::vector<std::vector<char>> buffers(program.instructions.size());
  std::vector<cpu::StridedView> inputs, results;
  for (const cpu::StridedView& in : args.inputs)
    inputs.push_back(cpu::broadcast_to(in, out.shape, out.ndim));
  for (size_t j = 0; j < program.instructions.size(); ++j) {
    cpu::StridedView r = out;  // outputs are contiguous: a buffer takes the same strides
    if (j + 1 < program.instructions.size()) {
      buffers[j].resize(size_t(out.numel() * itemsize));
      r.data = buffers[j].data();
    }
    results.push_back(r);
    const Instruction& ins = program.instructions[j];
    auto operands = gather_operands(ins, inputs, results, [](const Operand&) {});
    ins.op->cpu(KernelArgs{operands, std::span(&results[j], 1), ins.attrs});
  }
}

// ---- backward: each op's own rule, walked in reverse ----

class InstructionGradContext final : public GradContext {
 public:
  InstructionGradContext(const Instruction& ins, std::vector<Tensor> operands, Tensor result,
                         Tensor grad)
      : ins_(ins),
        operands_(std::move(operands)),
        result_(std::move(result)),
        grad_(std::move(grad)) {
    for (const Tensor& t : operands_)
      metas_.push_back(TensorMeta{t.dtype(), to_dims(t.shape())});
  }
  size_t num_inputs() const override { return operands_.size(); }
  Tensor input(size_t i) const override { return operands_.at(i); }
  Tensor output(size_t) const override { return result_; }
  const TensorMeta& input_meta(size_t i) const override { return metas_.at(i); }
  bool needs_input_grad(size_t) const override { return true; }
  const Tensor& grad_output(size_t) const override { return grad_; }
  const Attrs& attrs() const override { return ins_.attrs; }

 private:
  const Instruction& ins_;
  std::vector<Tensor> operands_;
  Tensor result_, grad_;
  std::vector<TensorMeta> metas_;
};

void accumulate(Tensor& into, const Tensor& grad) {
  if (!grad.defined()) return;
  into = into.defined() ? dispatch1(op("add"), {into, grad}) : grad;
}

std::vector<Tensor> fused_grad(const GradContext& ctx) {
  const Program& program = parse_program(ctx.attrs().get_string("program"));
  std::vector<Tensor> inputs, results;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    inputs.push_back(ctx.input(i));
  std::vector<std::vector<Tensor>> operands;
  for (const Instruction& ins : program.instructions) {  // the forward again, op by op
    operands.push_back(gather_operands(ins, inputs, results, [](const Operand&) {}));
    results.push_back(dispatch1(*ins.op, operands.back(), ins.attrs));
  }
  std::vector<Tensor> result_grads(results.size()), input_grads(inputs.size());
  result_grads.back() = ctx.grad_output(0);
  for (size_t j = program.instructions.size(); j-- > 0;) {
    if (!result_grads[j].defined()) continue;
    const Instruction& ins = program.instructions[j];
    KILN_CHECK(ins.op->grad != nullptr, "fused_elementwise: ", ins.op->name,
               " has no backward rule");
    std::vector<Tensor> grads =
        ins.op->grad(InstructionGradContext(ins, operands[j], results[j], result_grads[j]));
    for (size_t k = 0; k < ins.operands.size() && k < grads.size(); ++k) {
      const Operand& o = ins.operands[k];
      accumulate(o.is_result ? result_grads[o.index] : input_grads[o.index], grads[k]);
    }
  }
  for (size_t i = 0; i < input_grads.size(); ++i) {
    if (!ctx.needs_input_grad(i)) input_grads[i] = Tensor();
  }
  return input_grads;
}

}  // namespace

const Program& parse_program(const std::string& text) {
  // Programs are few and long-lived (one per fused node): parsed once each.
  thread_local std::vector<std::pair<std::string, std::unique_ptr<Program>>> cache;
  for (const auto& [key, program] : cache) {
    if (key == text) return *program;
  }
  auto program = std::make_unique<Program>();
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    // An instruction is "name(a, b)": read until its closing parenthesis.
    while (word.back() != ')' && !words.eof()) {
      std::string more;
      words >> more;
      word += more;
    }
    const size_t open = word.find('(');
    check_program(open != std::string::npos && open > 0 && word.back() == ')', text,
                  "'" + word + "' is not name(operands)");
    Instruction ins;
    const OpDef* def = op_registry().find(word.substr(0, open));
    check_program(def != nullptr, text, "no op '" + word.substr(0, open) + "'");
    check_program(def->kind == OpKind::Elementwise && def->attrs.empty() && def->num_outputs == 1 &&
                      def->cpu != nullptr,
                  text, def->name + " is not an elementwise op without attributes");
    ins.op = def;
    std::string list = word.substr(open + 1, word.size() - open - 2);
    for (size_t begin = 0; begin < list.size();) {
      size_t comma = list.find(',', begin);
      if (comma == std::string::npos) comma = list.size();
      ins.operands.push_back(
          parse_operand(list.substr(begin, comma - begin), text, program->instructions.size()));
      begin = comma + 1;
    }
    check_program(
        int(ins.operands.size()) >= def->min_inputs && int(ins.operands.size()) <= def->max_inputs,
        text,
        def->name + " takes " + std::to_string(def->min_inputs) + " to " +
            std::to_string(def->max_inputs) + " operands");
    ins.attrs = normalize_attrs(*def, {});
    program->instructions.push_back(std::move(ins));
  }
  check_program(!program->instructions.empty(), text, "no instruction");
  cache.emplace_back(text, std::move(program));
  return *cache.back().second;
}

void register_fused_elementwise(OpRegistry& registry) {
  registry.add(OpDef{.name = "fused_elementwise",
                     .min_inputs = 1,
                     .max_inputs = -1,
                     .attrs = {{"program", AttrKind::String, std::string("")}},
                     .infer = infer_fused,
                     .cpu = fused_kernel,
                     .grad = fused_grad,
                     .kind = OpKind::Opaque,
                     // Each block's inputs are read before its output is
                     // written, and only the last op writes the output.
                     .may_run_inplace = true});
}

}  // namespace kiln
