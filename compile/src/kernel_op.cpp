#include "opconform/compile/kernel_op.h"

#include <cctype>
#include <map>
#include <mutex>
#include <utility>

#include "opconform/compile/detail/tracing.h"
#include "opconform/core/autograd.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/schema.h"

// Note [kernel_op registrations]
// wrap_kernel::<name> gets
//   - the raw kernel at the backend key of its device (CPU or CUDA);
//   - at Fake, a kernel that does nothing: outputs are allocated by the caller and a raw kernel
//     changes no metadata, so the fake result of the call is "nothing happened";
//   - at Autograd, refuse_autograd_kernel: a raw kernel has no derivative. Inside an eager
//     kernel_op call this kernel is never reached (the op's own autograd kernel runs the body
//     below the autograd keys); it fires for a direct call, or under capture_joint, where the
//     body runs inline above autograd — loudly, rather than leaving the written outputs
//     silently without history.
// A kernel_op gets
//   - its body at CompositeExplicitAutograd: eager calls on every backend (CPU, CUDA, Meta) run
//     it, and the ops inside dispatch on their own arguments. Not CompositeImplicitAutograd:
//     that would also serve the autograd keys, so autograd would try to differentiate through
//     the wrapped kernels, and it does not cover Fake;
//   - the body again at Fake (through wrap_fake_kernel): on fake tensors the inner ops run their
//     fake kernels and the wrapped kernels do nothing, so a body of such calls is its own fake
//     kernel and needs no hand-written one;
//   - at Autograd, not_implemented_autograd_kernel: the forward runs, a backward through the op
//     fails naming it (triton_op without register_autograd). A formula registered later at
//     Autograd (register_autograd) overrides it for eager calls; capture does not use it (the
//     body is inlined above autograd);
//   - its body in the tracing mode's table (detail::register_kernel_op_body), so that capture
//     records the inner calls instead of the op.

namespace opconform::compile {
namespace detail {

struct WrappedKernelState {
  std::string name;     // the kernel's name, "axpy"
  std::string op_name;  // "wrap_kernel::axpy"
  RawKernelFn fn = nullptr;
  DeviceType device = DeviceType::CPU;
  Registry* registry = nullptr;
  std::optional<OperatorHandle> op;
  std::vector<RegistrationHandle> handles;  // the definition first

  ~WrappedKernelState() {
    while (!handles.empty()) handles.pop_back();  // kernels before the definition
  }
};

struct KernelOpState {
  std::string name;
  Registry* registry = nullptr;
  std::optional<OperatorHandle> op;
  std::vector<RegistrationHandle> handles;  // the definition first

  ~KernelOpState() {
    while (!handles.empty()) handles.pop_back();
  }
};

}  // namespace detail

namespace {

using detail::KernelOpState;
using detail::WrappedKernelState;

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string argument_error_prefix(const std::string& op, const char* what, size_t i) {
  return "'" + op + "': " + what + "[" + std::to_string(i) + "]";
}

std::vector<int64_t> launch_ints(const IValue& v, const std::string& op) {
  if (const auto* ints = v.get_if<std::vector<int64_t>>()) return *ints;
  std::vector<int64_t> out;
  for (const IValue& item : v.to_generic_list()) {
    OPCONFORM_CHECK(item.is_int(), ErrorCode::kInvalidArgument, "'", op, "': launch argument ", item.repr(),
                    " is not a concrete int (a symbolic size reached a real kernel)");
    out.push_back(item.to_int());
  }
  return out;
}

std::vector<double> launch_floats(const IValue& v) {
  if (const auto* floats = v.get_if<std::vector<double>>()) return *floats;
  std::vector<double> out;
  if (const auto* ints = v.get_if<std::vector<int64_t>>()) {
    for (int64_t i : *ints) out.push_back(static_cast<double>(i));
    return out;
  }
  for (const IValue& item : v.to_generic_list()) out.push_back(item.to_double());
  return out;
}

// The raw kernel as a boxed kernel of wrap_kernel::<name>: checks that every tensor is on the
// kernel's device (a mixed call dispatches to the highest backend key, and a raw kernel would
// read another device's memory), then calls it.
KernelFunction raw_kernel(RawKernelFn fn, DeviceType device) {
  return KernelFunction::from_boxed([fn, device](const OperatorHandle& op, DispatchKeySet, Stack& stack) {
    const size_t base = stack.size() - 4;
    const std::vector<Tensor>& inputs = stack[base].to_tensor_list();
    const std::vector<Tensor>& outputs = stack[base + 1].to_tensor_list();
    auto check = [&](const std::vector<Tensor>& ts, const char* what) {
      for (size_t i = 0; i < ts.size(); ++i) {
        OPCONFORM_CHECK(ts[i].defined(), ErrorCode::kInvalidArgument, argument_error_prefix(op.name(), what, i),
                        " is undefined");
        OPCONFORM_CHECK(ts[i].device().type == device, ErrorCode::kInvalidArgument,
                        argument_error_prefix(op.name(), what, i), " is on ", ts[i].device().to_string(),
                        ", the kernel runs on ", device_type_name(device));
      }
    };
    check(inputs, "inputs");
    check(outputs, "outputs");
    fn(inputs, outputs, launch_ints(stack[base + 2], op.name()), launch_floats(stack[base + 3]));
    stack.resize(base);
  });
}

// The fake kernel: the outputs exist already and the kernel changes no metadata.
KernelFunction nothing_kernel() {
  return KernelFunction::from_boxed([](const OperatorHandle&, DispatchKeySet, Stack& stack) { stack.resize(stack.size() - 4); });
}

// Wrapped kernels by registry and name (Note [kernel_op registrations]: once per name and registry).
struct WrapTable {
  std::mutex mutex;
  std::map<std::pair<const Registry*, std::string>, std::weak_ptr<WrappedKernelState>> entries;
};
WrapTable& wrap_table() {
  static WrapTable table;
  return table;
}

FunctionSchema kernel_op_schema(const std::string& qualified_name, const std::string& text) {
  size_t first = text.find_first_not_of(" \t\n");
  const bool signature_only = first != std::string::npos && text[first] == '(';
  FunctionSchema schema = parse_schema(signature_only ? qualified_name + text.substr(first) : text);
  OPCONFORM_CHECK(!schema.ns.empty(), ErrorCode::kRegistration, "kernel_op('", qualified_name,
                  "'): the name needs a namespace (\"mylib::", qualified_name, "\")");
  OPCONFORM_CHECK(schema.full_name() == qualified_name, ErrorCode::kRegistration, "kernel_op('", qualified_name,
                  "'): the schema '", text, "' names another operator, '", schema.full_name(), "'");
  return schema;
}

}  // namespace

// ---------------------------------------------------------------- wrap_kernel

const std::string& WrappedKernel::op_name() const { return state_->op_name; }
OperatorHandle WrappedKernel::handle() const { return *state_->op; }
DeviceType WrappedKernel::device() const { return state_->device; }

void WrappedKernel::operator()(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                               const std::vector<SymInt>& ints, const std::vector<double>& floats) const {
  Stack stack;
  stack.reserve(4);
  stack.emplace_back(inputs);
  stack.emplace_back(outputs);
  bool concrete = true;
  for (const SymInt& i : ints) concrete = concrete && !i.is_symbolic();
  if (concrete) {
    std::vector<int64_t> values;
    values.reserve(ints.size());
    for (const SymInt& i : ints) values.push_back(i.expect_int());
    stack.emplace_back(std::move(values));
  } else {
    // A symbolic launch argument (under capture): kept as an expression, so that the graph
    // evaluates it again from the inputs' sizes on replay.
    std::vector<IValue> items;
    for (const SymInt& i : ints) items.emplace_back(i);
    stack.push_back(IValue::list(std::move(items)));
  }
  stack.emplace_back(floats);
  state_->op->call_boxed(stack);
}

WrappedKernel wrap_kernel(std::string name, RawKernelFn fn, Registry& registry, DeviceType device, SourceLocation loc) {
  const std::string op_name = "wrap_kernel::" + name;
  OPCONFORM_CHECK(is_identifier(name), ErrorCode::kInvalidArgument, "wrap_kernel('", name,
                  "'): the name must be an identifier (letters, digits, '_')");
  OPCONFORM_CHECK(fn != nullptr, ErrorCode::kInvalidArgument, "wrap_kernel('", name, "'): the kernel is null");
#ifdef OPCONFORM_WITH_CUDA
  const bool cuda_ok = true;
#else
  const bool cuda_ok = false;
#endif
  OPCONFORM_CHECK(device == DeviceType::CPU || device == DeviceType::CUDA, ErrorCode::kInvalidArgument,
                  "wrap_kernel('", name, "'): kernels run on cpu or cuda, not ", device_type_name(device));
  OPCONFORM_CHECK(device != DeviceType::CUDA || cuda_ok, ErrorCode::kNotImplemented, "wrap_kernel('", name,
                  "'): a cuda kernel needs a build with CUDA (this one has none)");

  WrapTable& table = wrap_table();
  std::lock_guard lock(table.mutex);
  auto& slot = table.entries[{&registry, name}];
  if (auto existing = slot.lock()) {
    auto op = registry.find(op_name);
    if (op && *op == *existing->op) {  // still this registry's operator (not a new registry at the same address)
      OPCONFORM_CHECK(existing->fn == fn && existing->device == device, ErrorCode::kRegistration, "wrap_kernel('",
                      name, "'): '", op_name, "' is already registered in this registry for another ",
                      existing->fn == fn ? "device (" + device_type_name(existing->device) + ")" : std::string("kernel"),
                      "; give this kernel another name");
      return WrappedKernel(existing);
    }
  }

  auto state = std::make_shared<WrappedKernelState>();
  state->name = name;
  state->op_name = op_name;
  state->fn = fn;
  state->device = device;
  state->registry = &registry;
  const RegistrationSource source = RegistrationSource::here(loc);
  state->handles.push_back(registry.define(
      parse_schema(op_name + "(Tensor[] inputs, Tensor(a!)[] outputs, int[] ints, float[] floats) -> ()"), {}, source));
  state->handles.push_back(registry.impl(op_name, backend_key(device), raw_kernel(fn, device), source));
  state->handles.push_back(registry.impl(op_name, DispatchKey::Fake, wrap_fake_kernel(nothing_kernel()), source));
  state->handles.push_back(registry.impl(
      op_name, DispatchKey::Autograd,
      autograd::refuse_autograd_kernel("is a raw kernel (wrap_kernel) and has no derivative; call it inside a "
                                       "kernel_op, or under NoGradGuard"),
      source));
  state->op = registry.get(op_name);
  slot = state;
  return WrappedKernel(std::move(state));
}

// ---------------------------------------------------------------- kernel_op

const std::string& KernelOp::name() const { return state_->name; }
OperatorHandle KernelOp::handle() const { return *state_->op; }
const FunctionSchema& KernelOp::schema() const { return state_->op->schema(); }

Stack KernelOp::operator()(Stack args) const {
  state_->op->call_boxed(args);
  return args;
}

KernelOp kernel_op(std::string qualified_name, std::string schema_text, KernelOpBody body, Registry& registry,
                   SourceLocation loc) {
  OPCONFORM_CHECK(body != nullptr, ErrorCode::kInvalidArgument, "kernel_op('", qualified_name, "'): the body is empty");
  FunctionSchema schema = kernel_op_schema(qualified_name, schema_text);
  const std::string name = schema.full_name();
  const size_t num_returns = schema.returns.size();
  const RegistrationSource source = RegistrationSource::here(loc);

  auto state = std::make_shared<KernelOpState>();
  state->name = name;
  state->registry = &registry;
  state->handles.push_back(registry.define(std::move(schema), {}, source));  // a duplicate throws here
  OPCONFORM_CHECK(detail::kernel_op_body(name) == nullptr, ErrorCode::kRegistration, "kernel_op('", name,
                  "'): a kernel_op of this name is alive in another registry; capture finds bodies by name, "
                  "process-wide, so one name can be a kernel_op in one registry at a time");
  state->op = registry.get(name);

  // The body with its result checked: what eager, fake and capture run.
  auto run = [body = std::move(body), name, num_returns](const Stack& args) {
    Stack returns = body(args);
    OPCONFORM_CHECK(returns.size() == num_returns, ErrorCode::kSchemaMismatch, "kernel_op '", name,
                    "': the body returned ", returns.size(), " values, the schema has ", num_returns, " returns");
    return returns;
  };
  auto boxed = KernelFunction::from_boxed([run](const OperatorHandle& op, DispatchKeySet, Stack& stack) {
    const size_t base = stack.size() - op.schema().arguments.size();
    Stack returns = run(Stack(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end()));
    stack.resize(base);
    for (IValue& r : returns) stack.push_back(std::move(r));
  });
  state->handles.push_back(registry.impl(name, DispatchKey::CompositeExplicitAutograd, boxed, source));
  state->handles.push_back(registry.impl(name, DispatchKey::Fake, wrap_fake_kernel(boxed), source));
  state->handles.push_back(registry.impl(name, DispatchKey::Autograd, autograd::not_implemented_autograd_kernel(), source));
  state->handles.push_back(detail::register_kernel_op_body(name, run));
  return KernelOp(std::move(state));
}

}  // namespace opconform::compile
