// Chains of convolutions in channels-last layout, for inference graphs:
//   %y = conv2d_fused(%x, %w, %b, %r) {...}      (or conv2d)
// -> %xt = permute(%x) {dims=[0, 2, 3, 1]}        (where %x is not NHWC yet)
//    %yt = conv2d_fused(%xt, %w, %b, %rt) {..., layout="nhwc"}
//    %y  = clone(permute(%yt) {dims=[0, 3, 1, 2]}) (for readers outside)
// A convolution that reads %y (or adds it as its residual) reads %yt
// instead, so a chain of them (ResNet's blocks, residual adds included)
// keeps oneDNN's blocked layout (NHWC here: `acdb`) from one to the next
// (through the max pools between them too: max_pool2d_nhwc) and reorders
// only where the chain starts (the copy %xt's reader makes of the
// permuted view) and where something else reads it (the clone); those
// left unread are removed. On NCHW each such convolution reordered its
// source, destination and residual per call: 32 reorders per ResNet-18
// call, a tenth of its time.
//
// A chain starts at a convolution that takes the blocked layouts on NCHW
// anyway (kernels/cpu/conv.h: conv2d_channels_last_starts_chain) and takes
// in any convolution oneDNN runs channels-last whose input is in the chain
// (1x1 ones, small images). Depthwise and small convolutions run kiln's own
// NCHW kernels and stay out. Float32, 4-D only. Rounding
// changes (oneDNN's channels-last kernels sum in another order than the
// NCHW ones), within float32 tolerance: frozen graphs unless exact, as
// fuse_conv_epilogue. Sizes past the batch must be static.
#include <unordered_map>

#include "kiln/jit/passes/pass_util.h"
#include "kiln/jit/passes/passes.h"
#include "kiln/kernels/cpu/conv.h"
#include "kiln/ops/registry.h"

namespace kiln::jit {
namespace {

bool is_conv(const Node& node) {
  const std::string& name = node.op().name;
  if (name == "conv2d") return true;
  return name == "conv2d_fused" && node.attrs().get_string("layout") == "nchw";
}

// The value's 4 sizes, or false where one past the batch is symbolic. A
// symbolic batch (an ONNX model's) counts as 1, its least: the choice
// depends on the rest, and the kernel picks its algorithm per size.
bool sizes_4d(const Value* value, int64_t (&sizes)[4]) {
  if (!value || value->shape().size() != 4) return false;
  for (size_t d = 0; d < 4; ++d) {
    const Dim& dim = value->shape()[d];
    if (!dim.is_static() && d > 0) return false;
    sizes[d] = dim.is_static() ? dim.static_value() : 1;
  }
  return true;
}

cpu::Conv2dParams params_of(const Attrs& attrs) {
  cpu::Conv2dParams p;
  const IntList& stride = attrs.get_ints("stride");
  const IntList& padding = attrs.get_ints("padding");
  const IntList& dilation = attrs.get_ints("dilation");
  for (size_t i = 0; i < 2; ++i) {
    p.stride[i] = stride.size() == 1 ? stride[0] : stride.at(i);
    p.padding[i] = padding.size() == 1 ? padding[0] : padding.at(i);
    p.dilation[i] = dilation.size() == 1 ? dilation[0] : dilation.at(i);
  }
  p.groups = attrs.get_int("groups");
  return p;
}

enum class Fit { No, Joins, Starts };

Fit chain_fit(const Node& conv) {
  int64_t x[4], w[4], out[4];
  if (!sizes_4d(conv.input(0), x) || !sizes_4d(conv.input(1), w) || !sizes_4d(conv.output(), out) ||
      conv.output()->dtype() != DType::Float32) {
    return Fit::No;
  }
  for (Value* input : conv.inputs())
    if (input && input->dtype() != DType::Float32) return Fit::No;
  const cpu::Conv2dParams p = params_of(conv.attrs());
  if (cpu::conv2d_channels_last_starts_chain(out, x, w, p)) return Fit::Starts;
  return cpu::conv2d_channels_last_runs(out, x, w, p) ? Fit::Joins : Fit::No;
}

class Chains {
 public:
  explicit Chains(Graph& graph) : graph_(graph) {}

  bool in_chain(const Value* value) const { return nhwc_.count(value) != 0; }

  // The channels-last twin of an NCHW value: the chain's own, or a
  // permuted view made before `reader` (one per value).
  Value* nhwc_of(Value* value, Node* reader) {
    auto found = nhwc_.find(value);
    if (found != nhwc_.end()) return found->second;
    static const OpDef& permute = op("permute");
    Value* view =
        graph_.insert_before(reader, permute, {value}, {{"dims", IntList{0, 2, 3, 1}}})->output();
    nhwc_.emplace(value, view);
    edges_.push_back(view->producer());
    return view;
  }

  void convert(Node* conv) {
    static const OpDef& fused = op("conv2d_fused");
    std::vector<Value*> inputs{nhwc_of(conv->input(0), conv), conv->input(1)};
    const size_t count = conv->inputs().size();
    if (count > 2) inputs.push_back(conv->input(2));  // null: no bias
    if (count > 3 && conv->input(3)) inputs.push_back(nhwc_of(conv->input(3), conv));
    Attrs attrs = conv->attrs();
    attrs.set("layout", std::string("nhwc"));
    replace(conv, graph_.insert_before(conv, fused, inputs, attrs));
  }

  // A max pool reading the chain pools channels-last.
  void convert_pool(Node* pool) {
    static const OpDef& pool_nhwc = op("max_pool2d_nhwc");
    replace(pool,
            graph_.insert_before(pool, pool_nhwc, {nhwc_of(pool->input(0), pool)}, pool->attrs()));
  }

  // The edges nothing reads: the chain continued past them.
  void erase_unread() {
    for (auto it = edges_.rbegin(); it != edges_.rend(); ++it)
      if (is_dead(**it)) graph_.erase(*it);
  }

 private:
  // `node`'s readers read clone(permute(chained)) instead; the chain reads
  // `chained` itself.
  void replace(Node* node, Node* chained) {
    static const OpDef& permute = op("permute");
    static const OpDef& clone = op("clone");
    Node* back =
        graph_.insert_before(node, permute, {chained->output()}, {{"dims", IntList{0, 3, 1, 2}}});
    Node* copy = graph_.insert_before(node, clone, {back->output()});
    node->output()->replace_all_uses_with(copy->output());
    graph_.erase(node);
    nhwc_.emplace(copy->output(), chained->output());
    edges_.push_back(back);
    edges_.push_back(copy);
  }

 private:
  Graph& graph_;
  std::unordered_map<const Value*, Value*> nhwc_;
  std::vector<Node*> edges_;  // in creation order: readers after what they read
};

}  // namespace

bool carry_conv_layout(Graph& graph, PassContext& context) {
  if (!context.frozen() || (context.exact() && !context.fast_math())) return false;
  Chains chains(graph);
  bool changed = false;
  for (Node* node : graph.nodes()) {
    if (node->op().name == "max_pool2d" && chains.in_chain(node->input(0))) {
      context.count_rule("max pool in a channels-last chain");
      chains.convert_pool(node);
      changed = true;
      continue;
    }
    if (!is_conv(*node)) continue;
    const Fit fit = chain_fit(*node);
    if (fit == Fit::No) continue;
    if (fit == Fit::Joins && !chains.in_chain(node->input(0))) continue;
    context.count_rule(fit == Fit::Starts && !chains.in_chain(node->input(0))
                           ? "start a channels-last chain"
                           : "continue a channels-last chain");
    chains.convert(node);
    changed = true;
  }
  if (!changed) return false;
  chains.erase_unread();
  context.note(
      "conv2d_fused {layout=nhwc}: consecutive convolutions keep oneDNN's channels-last "
      "layout, reordered only where a chain starts or is read outside it; rounding within "
      "float32 tolerance (exact keeps NCHW)");
  return true;
}

}  // namespace kiln::jit
