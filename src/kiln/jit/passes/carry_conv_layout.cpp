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
// anyway (kernels/cpu/conv.h: conv2d_channels_last_starts_chain), or at
// one oneDNN runs channels-last over at most 56x56 pixels whose output a
// convolution of the chain reads (MobileNet's 1x1 expansion before its
// depthwise layer), and takes in any convolution oneDNN runs channels-last
// whose input is in the chain (1x1 ones, small images, depthwise ones:
// oneDNN's channels-last depthwise kernel fills its lanes on 7x7 and 14x14
// planes, where kiln's NCHW one wastes them). Squeeze-excitation stays in
// the chain: its global average pool becomes a mean over H and W of the
// NHWC twin (the same memory as the NCHW [N, C, 1, 1] result), its FCs
// run on that 1x1 image as they were, and its channel scale multiplies the
// twin by the scale seen as [N, 1, 1, C]. Small convolutions run kiln's
// own NCHW kernels and stay out. Float32, 4-D only. Rounding
// changes (oneDNN's channels-last kernels sum in another order than the
// NCHW ones), within float32 tolerance: frozen graphs unless exact, as
// fuse_conv_epilogue. Sizes past the batch must be static.
#include <algorithm>
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

// A convolution that runs channels-last starts a chain where a reader of
// its output would join it: MobileNet's 1x1 expansion before its depthwise
// convolution. Alone (its output read by no such convolution) it would pay
// a reorder in and out for nothing. On a 1x1 image (squeeze-excitation's
// FCs) both layouts are the same memory: nothing to gain. Over large
// images the reorder costs more than the chain saves: PicoDet's chains
// starting at 100x76 (a 1x1 256 -> 64 layer reading a concatenation, 5x5
// depthwise layers) cost 9 ms more than they saved (of 106 ms), where
// kiln's NCHW depthwise kernel fills its lanes anyway; from 56x56 down
// (MobileNetV3's, PP-LCNet's) they pay.
constexpr int64_t kMaxStartPixels = 56 * 56;

bool feeds_a_chain(const Node& conv) {
  int64_t x[4], out[4];
  if (!sizes_4d(conv.input(0), x) || !sizes_4d(conv.output(), out) || out[2] * out[3] == 1 ||
      x[2] * x[3] > kMaxStartPixels)
    return false;
  for (const Use& use : conv.output()->uses()) {
    if (use.user && is_conv(*use.user) && chain_fit(*use.user) != Fit::No) return true;
  }
  return false;
}

// adaptive_avg_pool2d to 1x1 (global average pooling: squeeze-excitation's
// squeeze, the classifier's pool).
bool is_global_pool(const Node& node) {
  if (node.op().name != "adaptive_avg_pool2d" || node.output()->dtype() != DType::Float32)
    return false;
  const IntList& size = node.attrs().get_ints("output_size");
  return !size.empty() && std::all_of(size.begin(), size.end(), [](int64_t s) { return s == 1; });
}

// The shape [N, C, 1, 1] (or [1, C, 1, 1], [N, 1, 1, 1]) of a per-channel
// factor broadcast over `image` [N, C, H, W]: squeeze-excitation's scale.
bool is_channel_factor(const Value* factor, const Value* image) {
  int64_t f[4], x[4];
  if (!sizes_4d(factor, f) || !sizes_4d(image, x) || factor->dtype() != DType::Float32)
    return false;
  const bool batch_fits = factor->shape()[0] == image->shape()[0] || f[0] == 1;
  return batch_fits && (f[1] == x[1] || f[1] == 1) && f[2] == 1 && f[3] == 1;
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

  // Global average pooling of a chain value: the mean over H and W of its
  // NHWC twin, [N, 1, 1, C], is [N, C, 1, 1] in the same order (a view).
  void convert_global_pool(Node* pool) {
    static const OpDef& mean = op("mean");
    static const OpDef& permute = op("permute");
    Node* sum = graph_.insert_before(pool, mean, {nhwc_of(pool->input(0), pool)},
                                     {{"dims", IntList{1, 2}}, {"keepdim", true}});
    Node* back =
        graph_.insert_before(pool, permute, {sum->output()}, {{"dims", IntList{0, 3, 1, 2}}});
    pool->output()->replace_all_uses_with(back->output());
    graph_.erase(pool);
  }

  // mul(image, factor) with `image` in the chain and a per-channel factor:
  // the product of its twin and the factor seen as [N, 1, 1, C].
  void convert_channel_mul(Node* mul, size_t image_index) {
    static const OpDef& permute = op("permute");
    Value* factor = mul->input(1 - image_index);
    Value* factor_nhwc =
        graph_.insert_before(mul, permute, {factor}, {{"dims", IntList{0, 2, 3, 1}}})->output();
    std::vector<Value*> inputs(2);
    inputs[image_index] = nhwc_of(mul->input(image_index), mul);
    inputs[1 - image_index] = factor_nhwc;
    replace(mul, graph_.insert_before(mul, mul->op(), inputs, mul->attrs()));
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
    if (is_global_pool(*node) && chains.in_chain(node->input(0))) {
      context.count_rule("global average pool in a channels-last chain");
      chains.convert_global_pool(node);
      changed = true;
      continue;
    }
    if (node->op().name == "mul" && node->inputs().size() == 2) {
      for (size_t i = 0; i < 2; ++i) {
        Value* image = node->input(i);
        if (!chains.in_chain(image) || !is_channel_factor(node->input(1 - i), image) ||
            node->output()->shape() != image->shape())
          continue;
        context.count_rule("channel scale in a channels-last chain");
        chains.convert_channel_mul(node, i);
        changed = true;
        break;
      }
      continue;
    }
    if (!is_conv(*node)) continue;
    const Fit fit = chain_fit(*node);
    if (fit == Fit::No) continue;
    if (fit == Fit::Joins && !chains.in_chain(node->input(0)) && !feeds_a_chain(*node)) continue;
    context.count_rule(chains.in_chain(node->input(0)) ? "continue a channels-last chain"
                                                       : "start a channels-last chain");
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
