#include "kiln/jit/trace/recorder.h"

#include "kiln/autograd/autograd.h"

#include <algorithm>

#include "kiln/jit/ir/size_symbols.h"
#include "kiln/kernels/cpu/copy.h"

namespace kiln::jit {
namespace {

bool same_view(const TensorImpl& a, const TensorImpl& b) {
  return a.dtype() == b.dtype() && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// Whether eager's result shape is the graph's, whose symbolic dims (if any)
// take the example values of the ShapeEnv in scope.
bool shape_agrees(const IntList& eager, const DimList& graph) {
  if (is_static(graph)) return matches_shape(eager, graph);
  const ShapeEnv* env = current_shape_env();
  return env && evaluate(graph, env->hints()) == eager;
}

// The inputs `op` writes in place under these attributes, as its OpDef
// declares them (batch_norm: its running statistics, in training only).
std::vector<int> written_inputs(const OpDef& op, const Attrs& attrs) {
  if (!op.has_side_effects || !op.mutated_inputs) return {};
  return op.mutated_inputs(attrs);
}

}  // namespace

Recorder::Recorder(RecordOptions options) : options_(std::move(options)) {}

Recorder::~Recorder() {
  uninstall();
}

void Recorder::install() {
  KILN_CHECK(dispatch_observer() == nullptr && trace_hook() == nullptr,
             "trace: a trace is already recording on this thread");
  set_dispatch_observer(static_cast<DispatchObserver*>(this));
  set_trace_hook(static_cast<TraceHook*>(this));
  set_control_flow_tracer(static_cast<ControlFlowTracer*>(this));
  shape_env_scope_.emplace(&shape_env_);
  installed_ = true;
}

void Recorder::uninstall() {
  if (!installed_) return;
  // Only the thread that began may uninstall; another thread's slots are not ours.
  if (dispatch_observer() == static_cast<DispatchObserver*>(this)) set_dispatch_observer(nullptr);
  if (trace_hook() == static_cast<TraceHook*>(this)) set_trace_hook(nullptr);
  if (control_flow_tracer() == static_cast<ControlFlowTracer*>(this))
    set_control_flow_tracer(nullptr);
  if (current_shape_env() == &shape_env_) shape_env_scope_.reset();
  installed_ = false;
}

void Recorder::report(WarningKind kind, std::string what, const std::source_location& where) {
  TraceWarning warning = make_warning(kind, std::move(what), where);
  warning.fatal = options_.strict && is_divergence(kind);
  warnings_.push_back(warning);
  // A fatal warning goes to the handler even when quiet, so that a front
  // end can raise its own error type at its own line.
  if (!options_.quiet || warning.fatal) warn(warning);
  if (warning.fatal) throw Error(ErrorKind::Runtime, warning.message);
}

// ---------------------------------------------------------------- begin / end

void Recorder::begin(const std::vector<Tensor>& inputs, const nn::NamedTensors& params) {
  KILN_CHECK(!recording(), "trace: begin() called while this recorder is recording");
  KILN_CHECK_VALUE(options_.input_names.empty() || options_.input_names.size() == inputs.size(),
                   "trace: ", options_.input_names.size(), " input names for ", inputs.size(),
                   " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK_VALUE(inputs[i].defined(), "trace: input ", i, " is an undefined tensor");
    // A number promotes types unlike a tensor of its dtype, which is all a
    // graph input can be: leave numbers to the traced code as constants.
    KILN_CHECK_VALUE(!inputs[i].impl()->wrapped_number, "trace: input ", i,
                     " is a wrapped Python number; pass numbers as constants, or as 0-d tensors");
  }
  shape_env_ = ShapeEnv();
  std::vector<TensorMeta> types = input_types(inputs);
  install();
  graph_ = std::make_shared<Graph>();
  started_ = std::chrono::steady_clock::now();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    std::string name = options_.input_names.empty() ? "" : options_.input_names[i];
    Value* v = graph_->add_input(std::move(types[i]), std::move(name));
    dynamic_.insert(v);
    // The same tensor given twice: the code cannot tell the two apart, so
    // every use is the first input.
    if (find(t)) continue;
    bind(t, v);
    roots_.push_back(Root{t, v});
  }
  for (const auto& [name, t] : params) {
    if (!t.defined() || find(t)) continue;
    Value* v = graph_->add_param(name, TensorMeta{t.dtype(), to_dims(t.shape())}, t);
    dynamic_.insert(v);
    bind(t, v);
    roots_.push_back(Root{t, v});
  }
}

std::vector<TensorMeta> Recorder::input_types(const std::vector<Tensor>& inputs) {
  std::vector<TensorMeta> types;
  for (const Tensor& t : inputs)
    types.push_back(TensorMeta{t.dtype(), to_dims(t.shape())});
  std::map<std::string, std::string> bound_at;  // symbol -> "input 0 dim 1", for errors
  for (const DynamicDim& dynamic : options_.dynamic_dims) {
    KILN_CHECK_VALUE(dynamic.input < inputs.size(), "trace: a dynamic dim names input ",
                     dynamic.input, ", but there are ", inputs.size(), " inputs");
    const Tensor& t = inputs[dynamic.input];
    std::string where = str("input ", dynamic.input, " dim ", dynamic.dim);
    int64_t d = wrap_dim(dynamic.dim, t.dim(), "trace: dynamic dims", t.shape());
    KILN_CHECK_VALUE(SizeExpr::symbol(dynamic.symbol).symbols().size() == 1, "trace: ", where,
                     ": '", dynamic.symbol, "' cannot name a size");
    int64_t value = t.size(d);
    if (std::optional<int64_t> hint = shape_env_.hint(dynamic.symbol)) {
      KILN_CHECK_VALUE(*hint == value, "trace: ", where, " is ", dynamic.symbol, ", which ",
                       bound_at[dynamic.symbol], " sets to ", *hint, ", but its size is ", value,
                       " (shape ", t.shape(), ")");
    }
    shape_env_.set_hint(dynamic.symbol, value);
    bound_at.emplace(dynamic.symbol, where);
    const SizeExpr symbol = SizeExpr::symbol(dynamic.symbol);
    if (dynamic.min) {
      KILN_CHECK_VALUE(*dynamic.min <= value, "trace: ", where, " (", dynamic.symbol, ") is ",
                       value, ", below its min ", *dynamic.min);
      shape_env_.add_guard(ShapeGuard{SizeExpr(*dynamic.min), symbol, ShapeGuard::Relation::Le,
                                      str("min of ", dynamic.symbol)});
    }
    if (dynamic.max) {
      KILN_CHECK_VALUE(value <= *dynamic.max, "trace: ", where, " (", dynamic.symbol, ") is ",
                       value, ", above its max ", *dynamic.max);
      shape_env_.add_guard(ShapeGuard{symbol, SizeExpr(*dynamic.max), ShapeGuard::Relation::Le,
                                      str("max of ", dynamic.symbol)});
    }
    types[dynamic.input].shape[size_t(d)] = Dim(symbol);
  }
  return types;
}

Capture Recorder::end(const std::vector<Tensor>& outputs) {
  KILN_CHECK(recording(), "trace: end() called without begin()");
  uninstall();
  for (const ShapeGuard& guard : shape_env_.guards())
    graph_->add_guard(guard);
  accept_state_writes();
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].defined()) continue;
    abort();
    KILN_CHECK_VALUE(false, "trace: output ", i, " is an undefined tensor");
  }
  std::vector<Value*> values;
  for (const Tensor& t : outputs)
    values.push_back(value_of(t, /*check_stale=*/true));
  warn_constant_outputs(values);
  Capture capture;
  capture.graph = graph_;
  capture.num_outputs = values.size();
  graph_->set_outputs(std::move(values));
  add_state_updates(capture);
  add_grad_updates(capture);
  capture.differentiable = !options_.bind_outside_state;
  drop_unused_constants();
  capture.warnings = std::move(warnings_);
  capture.example_sizes = shape_env_.hints();
  capture.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  abort();  // clears the recording state; the graph lives on in `capture`
  return capture;
}

void Recorder::abort() {
  uninstall();
  graph_.reset();
  warnings_.clear();
  entries_.clear();
  by_storage_.clear();
  born_.clear();
  born_refs_.clear();
  dynamic_.clear();
  roots_.clear();
  frames_.clear();
  internal_.clear();
  internal_refs_.clear();
  state_writes_.clear();
  pending_write_ = nullptr;
}

// Inputs and parameters the code wrote in place get an extra output each,
// which CompiledFunction copies into them after every run: the compiled
// function then leaves them as the eager code did (BatchNorm's
// num_batches_tracked += 1, x.add_(1) on an input).
void Recorder::add_state_updates(Capture& capture) {
  std::vector<Value*> outputs = graph_->outputs();
  for (const Root& root : roots_) {
    Entry& entry = entries_.at(root.tensor.impl());
    if (root.tensor.version() != entry.version) {
      report(WarningKind::AliasedWrite,
             str("in-place write into ", describe(root.original),
                 " through a view while tracing: the compiled function does not write it"));
    }
    if (entry.value == root.original) continue;
    StateUpdate update{outputs.size(), root.original->kind()};
    if (update.target == ValueKind::Param) {
      update.param = root.original->name();
    } else {
      const auto& inputs = graph_->inputs();
      update.input =
          size_t(std::find(inputs.begin(), inputs.end(), root.original) - inputs.begin());
    }
    capture.state_updates.push_back(std::move(update));
    outputs.push_back(entry.value);
  }
  graph_->set_outputs(std::move(outputs));
}

// The .grad of every bound parameter that requires grad, as the code left
// it: a training step's zero_grad(); backward() leaves this call's gradient.
void Recorder::add_grad_updates(Capture& capture) {
  if (!options_.bind_outside_state) return;
  std::vector<Value*> outputs = graph_->outputs();
  for (const Root& root : roots_) {
    if (root.original->kind() != ValueKind::Param || !root.tensor.requires_grad()) continue;
    Tensor g = kiln::grad(root.tensor);
    GradUpdate update{root.original->name()};
    if (g.defined()) {
      update.output = outputs.size();
      outputs.push_back(value_of(g, /*check_stale=*/true));
    }
    capture.grad_updates.push_back(std::move(update));
  }
  graph_->set_outputs(std::move(outputs));
}

// A tensor from outside, bound by reference (bind_outside_state).
Value* Recorder::bind_state(const Tensor& t) {
  if (t.requires_grad() && kiln::grad(t).defined()) {
    report(WarningKind::GradConstant,
           str("a parameter (shape ", t.shape(),
               ") enters the compiled function with a .grad already: each call sets .grad to "
               "that call's gradient rather than adding to it; call zero_grad() inside the "
               "compiled step"));
  }
  Value* v = graph_->add_param(str("state.", graph_->params().size()),
                               TensorMeta{t.dtype(), to_dims(t.shape())}, t);
  dynamic_.insert(v);
  bind(t, v);
  roots_.push_back(Root{t, v});
  return v;
}

void Recorder::warn_constant_outputs(const std::vector<Value*>& outputs) {
  if (graph_->inputs().empty()) return;  // trace(fn, {}): everything is constant by design
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (is_dynamic(outputs[i])) continue;
    report(WarningKind::ConstantOutput,
           str("output ", i,
               " does not depend on the inputs: it was computed while tracing, and the compiled "
               "function returns that same value on every call"));
  }
}

void Recorder::drop_unused_constants() {
  for (Value* v : std::vector<Value*>(graph_->constants())) {
    if (v->uses().empty() && graph_->output_uses(v) == 0) graph_->remove_unused(v);
  }
}

// ---------------------------------------------------------------- values

Recorder::Entry* Recorder::find(const Tensor& t) {
  auto it = entries_.find(t.impl());
  return it == entries_.end() ? nullptr : &it->second;
}

// A tensor made outside dispatch over the same elements as a recorded one
// (detach() does that) holds the same value.
Recorder::Entry* Recorder::find_same_view(const Tensor& t) {
  auto [first, last] = by_storage_.equal_range(t.storage().get());
  for (auto it = first; it != last; ++it) {
    if (same_view(*it->second, *t.impl())) return &entries_.at(it->second);
  }
  return nullptr;
}

Recorder::Entry& Recorder::bind(const Tensor& t, Value* value, bool outside) {
  auto [it, inserted] = entries_.try_emplace(t.impl(), Entry{t, value, t.version(), outside});
  if (inserted) {
    by_storage_.emplace(t.storage().get(), t.impl());
    return it->second;
  }
  it->second.value = value;
  it->second.version = t.version();
  return it->second;
}

std::string Recorder::describe(const Value* value) const {
  switch (value->kind()) {
    case ValueKind::Input: {
      const auto& inputs = graph_->inputs();
      return str("graph input ", std::find(inputs.begin(), inputs.end(), value) - inputs.begin());
    }
    case ValueKind::Param:
      return str("parameter '", value->name(), "'");
    case ValueKind::Constant:
      return "a constant";
    case ValueKind::NodeOutput:
      return str("the output of ", value->producer()->op().name);
  }
  return "?";
}

// Note [Constants are copies]
// A constant holds a copy of the tensor's value when the recording first
// met it, not a reference (PyTorch's tracer keeps references). The graph
// must compute what the eager code computed: in-place writes later in the
// traced code are recorded as new values, so a referenced constant would
// see those writes and the graph would apply them twice (acc = zeros(3);
// acc.add_(x) would replay as x + x). A copy also keeps a compiled
// function, its folded form (issue 6) and its saved file (issue 7) in
// agreement when the user later changes the tensor. Tensors meant to
// change between calls are inputs or parameters, which are bound, not
// copied. The cost is memory for tensors the code closes over, which are
// usually small; a weight captured this way by mistake is reported when it
// requires grad.
Value* Recorder::add_constant(const Tensor& t) {
  Tensor copy = make_tensor(t.shape(), t.dtype());
  cpu::copy_convert(view_of(copy), view_of(t));
  copy.impl()->wrapped_number = t.impl()->wrapped_number;
  return graph_->add_constant(std::move(copy), t.impl()->wrapped_number);
}

Value* Recorder::value_of(const Tensor& t, bool check_stale) {
  if (Entry* entry = find(t)) {
    if (check_stale && t.version() != entry->version) {
      report(WarningKind::AliasedWrite,
             str("a traced tensor (", describe(entry->value), ", shape ", t.shape(),
                 ") was changed by an in-place write into a view or base of it: the graph keeps "
                 "its value from before the write, the eager code sees the new one"));
      entry->version = t.version();
    }
    return entry->value;
  }
  if (Entry* same = find_same_view(t)) {
    Value* value = value_of(same->tensor, check_stale);
    // A recorded training step is never differentiated again (Capture::differentiable).
    bool differentiable = !options_.bind_outside_state;
    if (differentiable && same->tensor.requires_grad() && !t.requires_grad() && is_dynamic(value)) {
      report(WarningKind::UntracedView,
             str("detach() of ", describe(value),
                 " is not recorded: when the compiled function runs under autograd, gradients "
                 "flow where the eager code stopped them"));
    }
    bind(t, value, same->outside);
    return value;
  }
  auto aliases = by_storage_.equal_range(t.storage().get());
  if (aliases.first != aliases.second) {
    report(WarningKind::UntracedView,
           str("a view of a traced tensor made outside the op table (shape ", t.shape(),
               "): the graph holds a copy of its values at trace time"));
  }
  bool outside = born_.count(t.storage().get()) == 0;
  auto made_inside = internal_.find(t.storage().get());
  KILN_CHECK(made_inside == internal_.end() || made_inside->second <= frames_.size() ||
                 known_outside_block(t),
             "a value computed inside kiln.cond, while_loop or scan (shape ", t.shape(),
             ") is read outside it: only the op's results leave it. A tensor the function "
             "kept elsewhere (appended to a list, set as an attribute) holds one run's "
             "value, not the graph's; return it from the function instead");
  // Inside a block: what an enclosing graph holds (or would bind as state)
  // enters through a block input.
  if (!frames_.empty() && (known_outside_block(t) ||
                           (outside && options_.bind_outside_state && !t.impl()->wrapped_number))) {
    return capture(t);
  }
  if (outside && options_.bind_outside_state && !t.impl()->wrapped_number) return bind_state(t);
  if (t.requires_grad()) {
    report(WarningKind::GradConstant,
           str("a tensor that requires grad (shape ", t.shape(),
               ") was captured as a constant: the compiled function uses a copy of its value "
               "and no gradient reaches it; pass it as an input or a named parameter"));
  }
  return bind(t, add_constant(t), outside).value;
}

// ---------------------------------------------------------------- ops

void Recorder::on_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                     std::span<const Tensor> outputs) {
  if (!recording()) return;
  accept_state_writes();
  bool is_write = pending_write_ && outputs.size() == 1 && outputs[0].impl() == pending_write_;
  if (is_write) {
    record_write(op, inputs, attrs, outputs[0]);
    return;
  }
  record_op(op, inputs, attrs, outputs);
}

void Recorder::record_op(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                         std::span<const Tensor> outputs) {
  std::vector<Value*> values;
  values.reserve(inputs.size());
  for (const Tensor& t : inputs)
    values.push_back(t.defined() ? value_of(t, /*check_stale=*/true) : nullptr);
  const std::vector<int> written = written_inputs(op, attrs);
  check_side_effects(op, written, values);
  note_state_writes(written, inputs);
  shape_env_.set_context(op.name);  // the reason of the guards its inference decides
  Node* node = graph_->append(op, std::move(values), attrs);
  // A size the data decided (nonzero's count) takes this call's value as
  // its example: decisions on it become guards, checked when it is bound.
  if (std::string symbol = bound_symbol(*node); !symbol.empty())
    shape_env_.set_hint(symbol, bound_value(*node, outputs, shape_env_.hints()));
  KILN_ASSERT(node->outputs().size() == outputs.size(), op.name, ": the graph infers ",
              node->outputs().size(), " outputs, eager gave ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Value* v = node->output(i);
    KILN_ASSERT(v->dtype() == outputs[i].dtype() && shape_agrees(outputs[i].shape(), v->shape()),
                op.name, ": the graph infers output ", i, " as ", v->dtype(), v->shape(),
                ", eager gave ", outputs[i].dtype(), outputs[i].shape());
    bind(outputs[i], node->output(i));
  }
  mark_dynamic(op, node);
}

// The values an in-place op overwrites are still there: resolve every input
// (copying tensors new to the recording) before the kernel runs.
void Recorder::before_write(const OpDef& op, std::span<const Tensor> inputs, const Tensor& out) {
  if (!recording()) return;
  accept_state_writes();
  for (const Tensor& t : inputs) {
    if (t.defined()) value_of(t, /*check_stale=*/true);
  }
  pending_write_ = out.impl();
  bool known = find(out) || by_storage_.count(out.storage().get()) > 0;
  if (!known && options_.bind_outside_state && born_.count(out.storage().get()) == 0) {
    bind_state(out);
    return;
  }
  if (known) value_of(out, /*check_stale=*/true);
  bool outside = known ? find(out)->outside : born_.count(out.storage().get()) == 0;
  if (!outside) return;
  report(
      WarningKind::OutsideWrite,
      str("in-place ", op.name, " into a tensor from outside the traced code (shape ", out.shape(),
          ", not an input, parameter or buffer): the compiled function computes the new value "
          "but never writes that tensor; pass it as an input or register it as a buffer"));
}

// out = op(inputs), recorded as a new value (cast and expanded to out's dtype
// and shape as dispatch_into does) that `out` and every tensor viewing the
// same elements now hold.
void Recorder::record_write(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                            const Tensor& out) {
  pending_write_ = nullptr;
  std::vector<Value*> values;
  for (const Tensor& t : inputs)  // checked in before_write; the write bumped their versions
    values.push_back(t.defined() ? value_of(t, /*check_stale=*/false) : nullptr);
  check_side_effects(op, written_inputs(op, attrs), values);
  shape_env_.set_context(op.name);
  Node* node = graph_->append(op, std::move(values), attrs);
  mark_dynamic(op, node);
  Value* result = node->output(0);
  if (result->dtype() != out.dtype()) {
    static const OpDef& cast_op = kiln::op("cast");
    node = graph_->append(cast_op, {result}, {{"dtype", out.dtype()}});
    mark_dynamic(cast_op, node);
    result = node->output(0);
  }
  DimList out_shape = symbolic_shape(out).value_or(to_dims(out.shape()));
  if (!same_dims(out_shape, result->shape())) {
    static const OpDef& expand_op = kiln::op("expand");
    node = graph_->append(expand_op, {result}, {{"size", canonical_attr(out_shape)}});
    mark_dynamic(expand_op, node);
    result = node->output(0);
  }
  bool outside = find(out) ? find(out)->outside : born_.count(out.storage().get()) == 0;
  bind(out, result, outside);
  auto [first, last] = by_storage_.equal_range(out.storage().get());
  for (auto it = first; it != last; ++it) {
    if (same_view(*it->second, *out.impl())) bind(entries_.at(it->second).tensor, result);
  }
}

// An op that writes some of its inputs in place (batch_norm's running
// statistics; its API function bumps their versions once dispatch returns):
// those writes are the op's own, which the graph replays, not writes
// through an alias.
void Recorder::note_state_writes(const std::vector<int>& written, std::span<const Tensor> inputs) {
  for (int i : written) {
    if (size_t(i) < inputs.size() && inputs[size_t(i)].defined())
      state_writes_.push_back(inputs[size_t(i)]);
  }
}

void Recorder::accept_state_writes() {
  for (const Tensor& t : state_writes_) {
    if (Entry* entry = find(t)) entry->version = t.version();
  }
  state_writes_.clear();
}

void Recorder::check_side_effects(const OpDef& op, const std::vector<int>& written,
                                  const std::vector<Value*>& inputs) {
  for (int i : written) {
    const Value* input = size_t(i) < inputs.size() ? inputs[size_t(i)] : nullptr;
    if (!input || input->kind() != ValueKind::Constant) continue;
    report(WarningKind::SideEffectOnConstant,
           str(op.name, " updates its input ", i,
               " in place, but that tensor is a constant of the graph (not a registered buffer): "
               "the compiled function updates its own copy, never the original tensor"));
  }
}

// A node's outputs vary between calls when it draws, when an input does, or
// when its attributes are sizes (kiln.ones(n) with n a symbol: of an input's
// shape, or a count a nonzero binds when it runs).
void Recorder::mark_dynamic(const OpDef& op, const Node* node) {
  bool dynamic = op.is_random || node->attrs().any_symbolic() ||
                 std::any_of(node->inputs().begin(), node->inputs().end(),
                             [&](const Value* v) { return v && is_dynamic(v); });
  if (!dynamic) return;
  for (const Value* out : node->outputs())
    dynamic_.insert(out);
}

// ---------------------------------------------------------------- core hook

void Recorder::on_host_read(const Tensor& t, const char* what, const std::source_location& where) {
  if (!recording() || !t.defined()) return;
  accept_state_writes();
  Entry* entry = find(t);
  if (!entry) entry = find_same_view(t);
  if (!entry || !is_dynamic(entry->value)) return;  // a constant's value is the same every call
  const Value* v = entry->value;
  if (v->kind() == ValueKind::Input || v->kind() == ValueKind::Param) {
    report(WarningKind::InputRead,
           str(what, " on ", describe(v),
               ": its value at trace time was frozen into the graph, and later calls do not read "
               "it again"),
           where);
    return;
  }
  report(WarningKind::HostRead,
         str(what,
             " on a traced value: the value was frozen into the graph, and the compiled function "
             "does not compute it again"),
         where);
}

void Recorder::on_random_draw(const char* what, const std::source_location& where) {
  if (!recording()) return;
  report(WarningKind::RandomFactory,
         str(what,
             "() while tracing: the random numbers it drew were frozen into the graph as a "
             "constant, and every call of the compiled function reuses them (ops such as dropout "
             "draw anew on each call)"),
         where);
}

std::optional<DimList> Recorder::symbolic_shape(const Tensor& t) {
  if (!recording() || !t.defined()) return std::nullopt;
  Entry* entry = find(t);
  if (!entry) entry = find_same_view(t);
  if (!entry || is_static(entry->value->shape())) return std::nullopt;
  return entry->value->shape();
}

void Recorder::on_size_specialized(const Dim& size, int64_t value, const char* what,
                                   const std::source_location& where) {
  if (!recording()) return;
  report(WarningKind::SizeSpecialized,
         str(what, " of the symbolic size ", size, " while tracing: the graph is specialized to ",
             size, " == ", value, ", and a call at another size traces again"),
         where);
}

void Recorder::on_tensor_created(const Tensor& t) {
  if (!recording()) return;
  if (born_.insert(t.storage().get()).second) born_refs_.push_back(t.storage());
  if (!frames_.empty()) note_internal({t.storage()}, frames_.size());
}

}  // namespace kiln::jit
