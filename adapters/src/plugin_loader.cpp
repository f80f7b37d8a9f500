// The loader: dlopen, entry point, ABI check, and the registrar through which register_ops puts
// the plugin's kernels into a Registry as boxed kernels (plugin_call.h does each call).
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "opconform/adapters/loader.h"
#include "opconform/core/autograd.h"
#include "opconform/core/backend_select.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/schema.h"
#include "elf_check.h"
#include "library_message.h"
#include "plugin_call.h"
#include "plugin_op_spec.h"

namespace opconform::adapters {
namespace {

using detail::PluginKernel;

std::string_view kind_name(OpcKernelKind kind) {
  switch (kind) {
    case OPC_KERNEL_CPU: return "cpu";
    case OPC_KERNEL_CUDA: return "cuda";
    case OPC_KERNEL_FAKE: return "fake";
    case OPC_KERNEL_BACKWARD: return "backward";
    default: return "unknown";
  }
}

// Schemas compare with SymInt read as int: ATen spells some sizes SymInt where older and newer
// releases (and the reference) spell int, and the two are the same at a call.
std::string comparable_schema(const FunctionSchema& s) {
  std::string text = s.to_string();
  for (size_t at = 0; (at = text.find("SymInt", at)) != std::string::npos;) text.replace(at, 6, "int");
  return text;
}

// Tensor[], Tensor?[] or Tensor[]? (a backward operator's gradient list): the engine gives and takes
// one gradient per element of such a value (Note [Tensor[] gradients]).
bool is_tensor_list_type(const Type& type) {
  const Type& present = type.is_optional() ? type.elem() : type;
  return present.is_list() && present.is_tensor_like();
}

// Note [A backward sees the arguments before the call]: an in-place op's derivative needs the
// written argument's value from before the call (mul_'s gradient of `other` is grad * self as it
// was), as PyTorch's formulas get it. In version 2 the autograd kernel of an op that writes an
// argument copies the written tensors before the call (only when a gradient will be recorded) and
// hands the copies to its backward; version 1's formulas keep getting the arguments after the call.
thread_local const std::vector<std::optional<Tensor>>* tls_before_the_call = nullptr;

struct OpState {
  FunctionSchema schema;
  bool defined_from_reference = false;  // implemented by name, the schema taken from the reference
  std::map<OpcKernelKind, PluginKernel> kernels;
  std::optional<std::vector<DType>> dtypes;
  bool backend_select = false;  // a factory's BackendSelect kernel is registered
  LoadedLibrary::Declared declared;  // declare_op's flags
  std::string backward_op;  // version 2: the operator giving this op's gradients (declare_backward_op)
  std::string backward_of;  // version 2: this op is that op's backward operator
};

// The loaded library: its registrations (undone first on destruction), then the dlopen handle.
class PluginLibrary final : public LoadedLibrary {
 public:
  ~PluginLibrary() override {
    while (!handles.empty()) handles.pop_back();  // kernels first, definitions last
    if (dl != nullptr) dlclose(dl);
  }
  const std::string& name() const override { return name_; }
  const std::string& version() const override { return version_; }
  const std::string& origin() const override { return origin_; }
  std::vector<std::string> ops() const override {
    std::vector<std::string> out;
    // Backward operators are checked through their forward op (plugin.h, declare_backward_op).
    for (const auto& [op, state] : ops_)
      if (!state.kernels.empty() && state.backward_of.empty()) out.push_back(op);
    return out;
  }
  bool has_kernel(const std::string& op, OpcKernelKind kind) const override {
    auto it = ops_.find(op);
    if (it == ops_.end()) return false;
    return it->second.kernels.count(kind) != 0 || (kind == OPC_KERNEL_FAKE && it->second.declared.reference_fake);
  }
  const std::vector<PluginOptionSpec>& option_specs() const override { return option_specs_; }
  Declared declared(const std::string& op) const override {
    auto it = ops_.find(op);
    return it == ops_.end() ? Declared{} : it->second.declared;
  }
  std::optional<std::vector<DType>> declared_dtypes(const std::string& op) const override {
    auto it = ops_.find(op);
    return it == ops_.end() ? std::nullopt : it->second.dtypes;
  }
  const std::vector<LoadProblem>& problems() const override { return problems_; }

  // ---- registration (called through the registrar) ----
  Registry* registry = nullptr;
  uint32_t abi_version = OPC_PLUGIN_ABI_VERSION_1;  // the plugin's own (plugin.h, "Version 2")
  LoadOptions options;
  std::string last_error;
  std::vector<RegistrationHandle> handles;
  void* dl = nullptr;
  std::string name_, version_, origin_;
  std::map<std::string, OpState> ops_;
  std::set<std::string> left_out_;  // ops with a load problem: their registrations are ignored
  std::vector<LoadProblem> problems_;
  std::vector<PluginOptionSpec> option_specs_;
  std::vector<OpcOption> c_options_;  // over options.plugin_options' strings, for the registrar

  bool defined_in_registry(const std::string& op) const {
    auto e = registry->find(op);
    return e && e->has_schema();
  }

  RegistrationSource source() const { return RegistrationSource::named("plugin '" + name_ + "' (" + origin_ + ")"); }

  void define(std::string_view text) {
    FunctionSchema schema = parse_schema(text);
    OPCONFORM_CHECK(!schema.ns.empty(), ErrorCode::kRegistration, "define: the schema '", text,
                    "' needs a qualified name (\"mylib::op(...)\")");
    const std::string op = schema.full_name();
    if (auto it = ops_.find(op); it != ops_.end()) {
      // Defining an op after implementing it (its schema taken from the reference) is fine when
      // the two agree.
      OPCONFORM_CHECK(it->second.defined_from_reference && comparable_schema(it->second.schema) == comparable_schema(schema),
                      ErrorCode::kRegistration, "define: operator '", op, "' is defined twice");
      return;
    }
    OPCONFORM_CHECK(left_out_.count(op) == 0, ErrorCode::kRegistration, "define: operator '", op, "' is defined twice");
    std::vector<Tag> tags;
    std::shared_ptr<const OpData> data;
    if (options.schemas != nullptr) {
      if (auto known = options.schemas->find(op); known && known->has_schema()) {
        if (comparable_schema(known->schema()) != comparable_schema(schema)) {
          problems_.push_back({op, "the plugin's schema differs from the reference's, so the op was left out:\n  plugin:    " +
                                       schema.to_string() + "\n  reference: " + known->schema().to_string()});
          left_out_.insert(op);
          return;
        }
        tags = known->tags();  // the same op is checked the same way, defined or not
        data = known->data();
      }
    }
    OPCONFORM_CHECK(!defined_in_registry(op), ErrorCode::kRegistration, "define: operator '", op,
                    "' is already defined in the registry the plugin is loaded into");
    handles.push_back(registry->define(schema, tags, source()));
    if (data) registry->set_op_data(op, *data);
    ops_[op].schema = std::move(schema);
  }

  void impl(const std::string& op, OpcKernelKind kind, OpcKernelFn fn, void* user_data) {
    if (left_out_.count(op) != 0) return;
    OPCONFORM_CHECK(fn != nullptr, ErrorCode::kRegistration, "impl: the ", kind_name(kind), " kernel of '", op,
                    "' is NULL");
    OPCONFORM_CHECK(kind_name(kind) != "unknown", ErrorCode::kRegistration, "impl: unknown kernel kind ", kind,
                    " for '", op, "'");
    OpState& state = known_op(op);
    OPCONFORM_CHECK(state.kernels.count(kind) == 0, ErrorCode::kRegistration, "impl: '", op, "' has two ",
                    kind_name(kind), " kernels");
    OPCONFORM_CHECK(kind != OPC_KERNEL_FAKE || !state.declared.reference_fake, ErrorCode::kRegistration, "impl: '", op,
                    "' takes the reference's fake kernel (OPC_OP_REFERENCE_FAKE): it cannot have its own");
    OPCONFORM_CHECK(kind != OPC_KERNEL_BACKWARD || state.backward_op.empty(), ErrorCode::kRegistration, "impl: '", op,
                    "' has the backward operator '", state.backward_op, "': it cannot have a backward formula too");
    state.kernels[kind] = {fn, user_data};
    // A factory (no tensor argument) reaches its backend through its Device argument.
    if (auto device = factory_device_argument(state.schema); device && !state.backend_select &&
                                                              (kind == OPC_KERNEL_CPU || kind == OPC_KERNEL_CUDA)) {
      handles.push_back(registry->impl(op, DispatchKey::BackendSelect, backend_select_kernel(*device), source()));
      state.backend_select = true;
    }
    switch (kind) {
      case OPC_KERNEL_CPU: handles.push_back(registry->impl(op, DispatchKey::CPU, boxed_kernel(op, kind), source())); break;
      case OPC_KERNEL_CUDA: handles.push_back(registry->impl(op, DispatchKey::CUDA, boxed_kernel(op, kind), source())); break;
      case OPC_KERNEL_FAKE:
        handles.push_back(registry->impl(op, DispatchKey::Fake, wrap_fake_kernel(boxed_kernel(op, kind)), source()));
        break;
      case OPC_KERNEL_BACKWARD:
        handles.push_back(registry->impl(op, DispatchKey::Autograd, autograd_kernel(op), source()));
        break;
    }
  }

  // declare_backward_op (version 2): `backward` is defined with the schema derived from op's
  // (backward_schema), or checked against it when the plugin defined it, and op's autograd kernel
  // dispatches to it.
  void declare_backward_op(const std::string& op, const std::string& backward) {
    if (left_out_.count(op) != 0) return;
    OPCONFORM_CHECK(abi_version >= 2, ErrorCode::kRegistration, "declare_backward_op is plugin ABI version 2");
    OpState& state = known_op(op);
    OPCONFORM_CHECK(state.kernels.count(OPC_KERNEL_BACKWARD) == 0 && state.backward_op.empty(), ErrorCode::kRegistration,
                    "declare_backward_op: '", op, "' already has a backward (a formula or an operator)");
    FunctionSchema derived = parse_schema(backward_schema(state.schema, backward));
    if (auto it = ops_.find(backward); it != ops_.end()) {
      OPCONFORM_CHECK(comparable_schema(it->second.schema) == comparable_schema(derived) && it->second.backward_of.empty(),
                      ErrorCode::kRegistration, "declare_backward_op: '", backward, "' is defined as ",
                      it->second.schema.to_string(), ", but the backward of '", op, "' must be ", derived.to_string());
    } else {
      OPCONFORM_CHECK(!defined_in_registry(backward), ErrorCode::kRegistration, "declare_backward_op: operator '",
                      backward, "' is already defined in the registry the plugin is loaded into");
      handles.push_back(registry->define(derived, {}, source()));
      ops_[backward].schema = std::move(derived);
    }
    ops_[backward].backward_of = op;
    state.backward_op = backward;
    handles.push_back(registry->impl(op, DispatchKey::Autograd, autograd_kernel(op), source()));
  }

  // The schema of op's backward operator (plugin.h, declare_backward_op): op's arguments (plain,
  // positional), its returns as result<j>, one gradient per tensor return; one gradient per argument.
  static std::string backward_schema(const FunctionSchema& forward, const std::string& backward) {
    std::vector<std::string> names;
    auto unique = [&](std::string name) {
      while (std::find(names.begin(), names.end(), name) != names.end()) name += "_";
      names.push_back(name);
      return name;
    };
    std::string args, grads, rets;
    auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
    for (const Argument& a : forward.arguments) add(args, a.type.to_string() + " " + unique(a.name));
    for (size_t j = 0; j < forward.returns.size(); ++j) {
      const Type& t = forward.returns[j].type;
      add(args, t.to_string() + " " + unique("result" + std::to_string(j)));
      if (t.is_tensor_like())
        add(grads, std::string(is_tensor_list_type(t) ? "Tensor?[] " : "Tensor? ") + unique("grad" + std::to_string(j)));
    }
    for (const Argument& a : forward.arguments) add(rets, is_tensor_list_type(a.type) ? "Tensor[]?" : "Tensor?");
    if (!grads.empty()) add(args, grads);
    return backward + "(" + args + ") -> (" + rets + ")";
  }

  void declare_dtypes(const std::string& op, const DLDataType* dtypes, int64_t count) {
    if (left_out_.count(op) != 0) return;
    OPCONFORM_CHECK(count >= 0 && (count == 0 || dtypes != nullptr), ErrorCode::kRegistration,
                    "declare_dtypes: bad list for '", op, "'");
    known_op(op);
    std::vector<DType> list;
    for (int64_t i = 0; i < count; ++i) list.push_back(from_dlpack_dtype(dtypes[i]));
    declare_dtypes_list(op, std::move(list));
  }

  // declare_op (ABI 1.1). An op implemented by name keeps the reference's data: the plugin may
  // narrow its dtypes and take the reference's fake kernel, nothing else.
  void declare_op(const OpcOpSpec* spec) {
    const detail::OpSpecFields fields = detail::read_op_spec(spec);
    const std::string& op = fields.op;
    if (left_out_.count(op) != 0) return;
    OpState& state = known_op(op);
    const bool reference_fake = (fields.flags & OPC_OP_REFERENCE_FAKE) != 0;
    if (state.defined_from_reference) {
      OPCONFORM_CHECK(!fields.has_data, ErrorCode::kRegistration, "declare_op '", op,
                      "': the op is the reference's, and so are its constraints, sample builder, tolerances and "
                      "flags; a plugin may declare only its dtypes and OPC_OP_REFERENCE_FAKE for it");
    } else {
      OPCONFORM_CHECK(!reference_fake, ErrorCode::kRegistration, "declare_op '", op,
                      "': OPC_OP_REFERENCE_FAKE is for ops the plugin implements by name from the reference; this op "
                      "is the plugin's own (register an OPC_KERNEL_FAKE kernel instead)");
    }
    OpData data = detail::op_data_from_spec(*spec, state.schema, *registry->get(op).data(), name_);
    if (fields.has_dtypes) state.dtypes = data.constraints.dtypes;
    // What the plugin said, not what the op's data holds (a reference op's data has the reference's).
    state.declared.sample_builder = state.declared.sample_builder || fields.has_builder;
    state.declared.constraints = state.declared.constraints || fields.has_constraints;
    if (!state.defined_from_reference) registry->set_op_data(op, std::move(data));
    else if (fields.has_dtypes) declare_dtypes_list(op, *state.dtypes);
    if ((fields.flags & OPC_OP_RANDOM) != 0) registry->add_tag(op, Tag::nondeterministic_seeded);
    if (reference_fake && !state.declared.reference_fake) {
      OPCONFORM_CHECK(state.kernels.count(OPC_KERNEL_FAKE) == 0, ErrorCode::kRegistration, "declare_op '", op,
                      "': OPC_OP_REFERENCE_FAKE, but the plugin registered a fake kernel of its own");
      handles.push_back(registry->impl(op, DispatchKey::Fake, reference_fake_kernel(op), source()));
      state.declared.reference_fake = true;
    }
  }

  // Note [The reference's fake kernel for a plugin op]: a fake call of the plugin's op is
  // redispatched into the reference registry's op at the same keys, not answered by a copy of its
  // kernel: the reference's fake kernels may call other ops of their own registry, which the
  // plugin's registry does not have. The reference registry outlives the plugin's (LoadOptions).
  KernelFunction reference_fake_kernel(const std::string& op) {
    const OperatorHandle reference = options.schemas->get(op);
    return KernelFunction::from_boxed([reference](const OperatorHandle&, DispatchKeySet keys, Stack& stack) {
      reference.redispatch_boxed(keys, stack);
    });
  }

  void declare_dtypes_list(const std::string& op, std::vector<DType> list) {
    OpData data = *registry->get(op).data();
    data.constraints.dtypes = list;
    registry->set_op_data(op, std::move(data));
    ops_[op].dtypes = std::move(list);
  }

  // The op's state, defining it from the schema source when the plugin did not.
  OpState& known_op(const std::string& op) {
    if (auto it = ops_.find(op); it != ops_.end()) return it->second;
    std::optional<OperatorHandle> known = options.schemas ? options.schemas->find(op) : std::nullopt;
    OPCONFORM_CHECK(known && known->has_schema(), ErrorCode::kRegistration, "operator '", op,
                    "' is not defined: define it first (r->define with its schema)",
                    options.schemas ? ", or name one the reference knows" : "");
    OPCONFORM_CHECK(!defined_in_registry(op), ErrorCode::kRegistration, "operator '", op,
                    "' is already defined in the registry the plugin is loaded into");
    handles.push_back(registry->define(known->schema(), known->tags(), source()));
    registry->set_op_data(op, *known->data());  // the definition's data comes with it
    OpState& state = ops_[op];
    state.schema = known->schema();
    state.defined_from_reference = true;
    return state;
  }

  // Splits the op's arguments off the stack (the dispatcher has checked there are all of them).
  static std::vector<IValue> pop_arguments(const FunctionSchema& schema, Stack& stack) {
    const size_t n = std::min(schema.arguments.size(), stack.size());
    std::vector<IValue> args(std::make_move_iterator(stack.end() - static_cast<std::ptrdiff_t>(n)),
                             std::make_move_iterator(stack.end()));
    stack.resize(stack.size() - n);
    return args;
  }

  static std::vector<bool> writable_arguments(const FunctionSchema& schema) {
    std::vector<bool> w;
    for (const auto& a : schema.arguments) w.push_back(a.is_write());
    return w;
  }

  // The boxed kernel that calls the plugin's `kind` kernel (fake: data-less tensors both ways).
  KernelFunction boxed_kernel(const std::string& op, OpcKernelKind kind) {
    PluginKernel k = ops_[op].kernels[kind];
    detail::PluginCallSite site;
    site.library = name_;
    site.op_name = op;
    site.kind = kind_name(kind);
    // Which arguments the kernel may write: the schema's, known at registration, not per call.
    site.writable = writable_arguments(ops_[op].schema);
    site.returns = ops_[op].schema.returns;
    site.abi_version = abi_version;
    site.fake = kind == OPC_KERNEL_FAKE;
    return KernelFunction::from_boxed([k, site](const OperatorHandle& handle, DispatchKeySet, Stack& stack) {
      auto args = pop_arguments(handle.schema(), stack);
      // Read per call: declare_op's OPC_OP_RANDOM may tag the op after its kernels are registered.
      auto results = detail::call_plugin_kernel(k, site, args, handle.has_tag(Tag::nondeterministic_seeded));
      for (auto& r : results) stack.push_back(std::move(r));
    });
  }

  // What the autograd kernel keeps of a call for its backward. Every returned tensor goes through
  // save_for_backward, a Tensor[] return's elements too: kept in user_data, a returned tensor
  // whose grad_fn is this very node would hold the node alive (a cycle: split_with_sizes leaked).
  struct Saved {
    Stack values;  // arguments then returns, tensors replaced by None (returned lists by empty lists)
    struct Slot {
      size_t value;
      std::optional<size_t> element;  // an element of a returned Tensor[]
    };
    std::vector<Slot> tensor_slots;  // where the saved tensors go back
  };

  // The autograd kernel: setup_context keeps the call's arguments and returns (tensors through
  // save_for_backward, so in-place changes after the call are caught); backward hands
  // [arguments..., returns..., gradients] to the plugin's formula or (version 2) its backward
  // operator, and reads one gradient per argument.
  KernelFunction autograd_kernel(const std::string& op) {
    auto setup = [](autograd::AutogradContext& ctx, const Stack& inputs, const Stack& outputs) {
      Saved saved;
      std::vector<Tensor> tensors;
      const auto* before = tls_before_the_call;  // Note [A backward sees the arguments before the call]
      for (const Stack* part : {&inputs, &outputs}) {
        for (size_t i = 0; i < part->size(); ++i) {
          const bool copied = part == &inputs && before != nullptr && i < before->size() && (*before)[i];
          const IValue& v = copied ? IValue(*(*before)[i]) : (*part)[i];
          if (const Tensor* t = v.get_if<Tensor>(); t != nullptr && t->defined()) {
            saved.tensor_slots.push_back({saved.values.size(), std::nullopt});
            tensors.push_back(*t);
            saved.values.emplace_back();
          } else if (part == &outputs && v.is_tensor_list()) {
            const auto& list = v.to_tensor_list();
            for (size_t e = 0; e < list.size(); ++e) {
              saved.tensor_slots.push_back({saved.values.size(), e});
              tensors.push_back(list[e]);
            }
            saved.values.emplace_back(std::vector<Tensor>(list.size()));
          } else {
            saved.values.push_back(v);
          }
        }
      }
      ctx.save_for_backward(std::move(tensors));
      ctx.user_data = std::move(saved);
    };
    auto backward = [this, op](autograd::AutogradContext& ctx, const std::vector<Tensor>& grads) {
      const Saved& saved = std::any_cast<const Saved&>(ctx.user_data);
      std::vector<IValue> args = saved.values;
      const auto tensors = ctx.saved_tensors();
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Saved::Slot& slot = saved.tensor_slots[i];
        if (!slot.element) {
          args[slot.value] = IValue(tensors[i]);
          continue;
        }
        std::vector<Tensor> list = args[slot.value].to_tensor_list();
        list[*slot.element] = tensors[i];
        args[slot.value] = IValue(std::move(list));
      }
      const OpState& state = ops_.at(op);
      std::vector<IValue> results = state.backward_op.empty() ? call_formula(op, std::move(args), grads)
                                                              : call_backward_op(state, std::move(args), grads);
      return engine_gradients(op, saved, results);
    };
    KernelFunction recording = autograd::make_autograd_kernel(backward, setup);
    const FunctionSchema& schema = ops_.at(op).schema;
    if (abi_version < 2 || !schema.is_mutable()) return recording;
    std::vector<bool> written = writable_arguments(schema);
    return KernelFunction::from_boxed([recording, written](const OperatorHandle& handle, DispatchKeySet keys,
                                                           Stack& stack) {
      const size_t first = stack.size() - std::min(stack.size(), written.size());
      bool records = false;  // a node will be recorded: grad mode, and some tensor argument requires grad
      for (size_t i = first; i < stack.size() && autograd::GradMode::is_enabled() && !records; ++i) {
        if (const Tensor* t = stack[i].get_if<Tensor>()) records = t->defined() && t->requires_grad();
        if (const auto* list = stack[i].get_if<std::vector<Tensor>>())
          for (const Tensor& t : *list) records = records || t.requires_grad();
      }
      std::vector<std::optional<Tensor>> before(written.size());
      if (records) {
        for (size_t i = 0; i < written.size() && first + i < stack.size(); ++i) {
          const Tensor* t = stack[first + i].get_if<Tensor>();
          if (written[i] && t != nullptr && t->defined()) {
            autograd::NoGradGuard no_grad;
            before[i] = t->clone();
          }
        }
      }
      const auto* previous = std::exchange(tls_before_the_call, records ? &before : nullptr);
      try {
        recording.call_boxed(handle, keys, stack);
      } catch (...) {
        tls_before_the_call = previous;
        throw;
      }
      tls_before_the_call = previous;
    });
  }

  // The plugin's OPC_KERNEL_BACKWARD formula on [arguments..., returns..., one gradient per returned
  // tensor]: one value per argument.
  std::vector<IValue> call_formula(const std::string& op, std::vector<IValue> args, const std::vector<Tensor>& grads) {
    for (const Tensor& g : grads) args.push_back(g.defined() ? IValue(g) : IValue());
    // Graph capture runs formulas on fake tensors. A formula is compiled code that reads data and
    // has no fake counterpart: it cannot be captured. That is a limit of formulas, not a bug of the
    // plugin, so it is kNotImplemented (the compile checks then leave gradients out and say so).
    const bool fake = std::any_of(args.begin(), args.end(), [](const IValue& v) {
      const Tensor* t = v.get_if<Tensor>();
      return t != nullptr && t->defined() && t->is_fake();
    });
    OPCONFORM_CHECK(!fake, ErrorCode::kNotImplemented, "the backward kernel of '", op, "' in plugin '", name_,
                    "' is compiled code: it cannot be captured into a graph (a backward operator with a fake kernel, "
                    "plugin ABI version 2, can be)");
    const FunctionSchema& schema = ops_.at(op).schema;
    detail::PluginCallSite site;
    site.library = name_;
    site.op_name = op;
    site.kind = "backward";
    site.abi_version = abi_version;
    // One return per argument: a gradient (Tensor?) or None; for a Tensor[] argument a list of
    // gradients (Tensor[]?).
    site.returns.resize(schema.arguments.size());
    for (size_t i = 0; i < site.returns.size(); ++i) {
      site.returns[i].type = is_tensor_list_type(schema.arguments[i].type)
                                 ? Type::optional(Type::list(Type::base(TypeKind::kTensor)))
                                 : Type::optional(Type::base(TypeKind::kTensor));
    }
    return detail::call_plugin_kernel(ops_.at(op).kernels.at(OPC_KERNEL_BACKWARD), site, args);
  }

  // The backward operator on [arguments..., returns..., one gradient per tensor return], through
  // the dispatcher: under create_graph its own autograd kernel records it (double backward), and
  // on fake tensors its fake kernel runs (capture).
  std::vector<IValue> call_backward_op(const OpState& state, std::vector<IValue> args, const std::vector<Tensor>& grads) {
    const size_t n = state.schema.arguments.size();
    size_t next = 0;  // the engine's gradients: one per returned tensor, a Tensor[] return's flattened
    for (size_t j = 0; j < state.schema.returns.size(); ++j) {
      const Type& type = state.schema.returns[j].type;
      if (!type.is_tensor_like()) continue;
      const IValue& returned = args.at(n + j);
      // An integer output (max.dim's indices) has no gradient: the engine's zeros for it are None here,
      // as PyTorch's formulas never see one.
      auto gradient = [&](const Tensor& output) -> std::optional<Tensor> {
        const Tensor g = next < grads.size() ? grads[next] : Tensor();
        ++next;
        if (!g.defined() || (output.defined() && !is_floating(output.dtype()) && !is_complex(output.dtype())))
          return std::nullopt;
        return g;
      };
      if (!is_tensor_list_type(type)) {
        const auto g = gradient(returned.is_tensor() ? returned.to_tensor() : Tensor());
        args.push_back(g ? IValue(*g) : IValue());
        continue;
      }
      std::vector<std::optional<Tensor>> list;
      if (returned.is_tensor_list())
        for (const Tensor& output : returned.to_tensor_list()) list.push_back(gradient(output));
      args.push_back(IValue(std::move(list)));
    }
    Stack stack = std::move(args);
    registry->get(state.backward_op).call_boxed(stack);
    return stack;
  }

  // One gradient per argument as the engine takes them: a Tensor[] argument's list flattened in its
  // place, one per element (Note [Tensor[] gradients]).
  std::vector<Tensor> engine_gradients(const std::string& op, const Saved& saved, const std::vector<IValue>& results) {
    const FunctionSchema& schema = ops_.at(op).schema;
    OPCONFORM_CHECK(results.size() == schema.arguments.size(), ErrorCode::kSchemaMismatch, "the backward of '", op,
                    "' in plugin '", name_, "' gave ", results.size(), " gradients for ", schema.arguments.size(),
                    " arguments");
    std::vector<Tensor> out;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!is_tensor_list_type(schema.arguments[i].type)) {
        out.push_back(results[i].is_none() ? Tensor() : results[i].to_tensor());
        continue;
      }
      const IValue& forward_list = saved.values.at(i);
      size_t n = 0;  // the engine's slots for the argument: one per element, None elements too
      if (forward_list.is_tensor_list()) n = forward_list.to_tensor_list().size();
      else if (const auto* ol = forward_list.get_if<std::vector<std::optional<Tensor>>>()) n = ol->size();
      if (results[i].is_none()) {
        out.insert(out.end(), n, Tensor());
        continue;
      }
      const auto& list = results[i].to_tensor_list();
      OPCONFORM_CHECK(list.size() == n, ErrorCode::kSchemaMismatch, "the backward of '", op, "' in plugin '", name_,
                      "' returned ", list.size(), " gradients for the list argument '", schema.arguments[i].name,
                      "', which has ", n, " elements");
      out.insert(out.end(), list.begin(), list.end());
    }
    return out;
  }
};

// ---- the registrar callbacks: C function pointers, nothing may throw out of them ----

// A failing registration returns its status and message to the plugin, and is kept as a load
// problem of the op: a register_ops that goes on and returns OPC_OK would otherwise hide it.
template <typename F>
OpcStatus guarded(void* host, const char* op, F&& f) {
  auto* lib = static_cast<PluginLibrary*>(host);
  try {
    f(*lib);
    return OPC_OK;
  } catch (const std::exception& e) {
    lib->last_error = e.what();
  } catch (...) {
    lib->last_error = "an unknown exception";
  }
  try {
    std::string name = op != nullptr ? std::string(op).substr(0, std::string_view(op).find('(')) : "(unnamed)";
    lib->problems_.push_back({std::move(name), "a registration failed (register_ops went on): " + lib->last_error});
  } catch (...) {  // out of memory: the status still says it failed
  }
  return OPC_ERROR;
}

OpcStatus registrar_define(void* host, const char* schema) {
  return guarded(host, schema, [&](PluginLibrary& lib) {
    OPCONFORM_CHECK(schema != nullptr, ErrorCode::kRegistration, "define: the schema is NULL");
    lib.define(schema);
  });
}

OpcStatus registrar_impl(void* host, const char* op, OpcKernelKind kind, OpcKernelFn fn, void* user_data) {
  return guarded(host, op, [&](PluginLibrary& lib) {
    OPCONFORM_CHECK(op != nullptr, ErrorCode::kRegistration, "impl: the operator name is NULL");
    lib.impl(op, kind, fn, user_data);
  });
}

OpcStatus registrar_declare_dtypes(void* host, const char* op, const DLDataType* dtypes, int64_t count) {
  return guarded(host, op, [&](PluginLibrary& lib) {
    OPCONFORM_CHECK(op != nullptr, ErrorCode::kRegistration, "declare_dtypes: the operator name is NULL");
    lib.declare_dtypes(op, dtypes, count);
  });
}

void registrar_set_error(void* host, const char* message) {
  try {
    static_cast<PluginLibrary*>(host)->last_error = detail::library_message(message);
  } catch (...) {
  }
}

OpcStatus registrar_declare_backward_op(void* host, const char* op, const char* backward) {
  return guarded(host, op, [&](PluginLibrary& lib) {
    OPCONFORM_CHECK(op != nullptr && backward != nullptr, ErrorCode::kRegistration,
                    "declare_backward_op: an operator name is NULL");
    lib.declare_backward_op(op, backward);
  });
}

OpcStatus registrar_declare_op(void* host, const OpcOpSpec* spec) {
  const char* op = spec != nullptr && spec->size >= offsetof(OpcOpSpec, op_name) + sizeof(spec->op_name)
                       ? spec->op_name
                       : nullptr;
  return guarded(host, op, [&](PluginLibrary& lib) { lib.declare_op(spec); });
}

// The plugin's option specs, and the given options checked against them (ABI 1.1).
std::vector<PluginOptionSpec> option_specs_of(const OpcPlugin* plugin, const std::string& label) {
  std::vector<PluginOptionSpec> specs;
  if (!OPC_HAS_FIELD(plugin, OpcPlugin, num_options) || plugin->num_options == 0) return specs;
  if (plugin->num_options < 0 || plugin->num_options > 256 || plugin->options == nullptr)
    throw PluginError(label, "OpcPlugin.options is NULL or num_options " + std::to_string(plugin->num_options) +
                                 " is out of range");
  for (int64_t i = 0; i < plugin->num_options; ++i) {
    const OpcOptionSpec& o = plugin->options[i];
    if (o.name == nullptr || o.name[0] == '\0')
      throw PluginError(label, "OpcPlugin.options[" + std::to_string(i) + "] has no name");
    specs.push_back({o.name, o.help != nullptr ? o.help : "", o.default_value != nullptr ? o.default_value : "",
                     (o.flags & OPC_OPTION_REQUIRED) != 0, (o.flags & OPC_OPTION_REPEATABLE) != 0});
  }
  return specs;
}

void check_options(const std::vector<PluginOptionSpec>& specs, const PluginOptions& given, bool abi_1_1,
                   const std::string& label) {
  if (!given.empty() && !abi_1_1)
    throw PluginError(label, "built for plugin ABI 1.0: it takes no options (--plugin-option " +
                                 format_plugin_option(given.front()) + ")");
  std::string names;
  for (const auto& s : specs) names += (names.empty() ? "" : ", ") + s.name;
  std::map<std::string, int> count;
  for (const auto& [name, value] : given) {
    // clang 14 (the fuzz preset) cannot capture a structured binding: capture a reference to it.
    auto spec = std::find_if(specs.begin(), specs.end(), [&name = name](const PluginOptionSpec& s) { return s.name == name; });
    if (spec == specs.end())
      throw PluginError(label, "unknown option '" + name + "' (" +
                                   (specs.empty() ? std::string("it takes none") : "it takes: " + names) + ")");
    if (++count[name] > 1 && !spec->repeatable) throw PluginError(label, "option '" + name + "' is given twice");
  }
  for (const auto& s : specs)
    if (s.required && count[s.name] == 0)
      throw PluginError(label, "option '" + s.name + "' is required (--plugin-option " + s.name + "=...: " + s.help + ")");
}

int32_t registrar_host_knows(void* host, const char* op) {
  auto* lib = static_cast<PluginLibrary*>(host);
  if (op == nullptr || lib->options.schemas == nullptr) return 0;
  try {
    auto known = lib->options.schemas->find(op);
    return known && known->has_schema() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

std::unique_ptr<LoadedLibrary> register_plugin(std::unique_ptr<PluginLibrary> lib, const OpcPlugin* plugin,
                                               Registry& registry, const LoadOptions& options) {
  const std::string& origin = lib->origin_;
  if (plugin == nullptr) throw PluginError(origin, "opconform_plugin() returned NULL");
  if (plugin->abi_version < OPC_PLUGIN_ABI_VERSION_1 || plugin->abi_version > OPC_PLUGIN_ABI_VERSION) {
    throw PluginError(origin, "built for plugin ABI version " + std::to_string(plugin->abi_version) +
                                  ", this opconform loads versions " + std::to_string(OPC_PLUGIN_ABI_VERSION_1) + " to " +
                                  std::to_string(OPC_PLUGIN_ABI_VERSION) + " (rebuild it against this opconform's plugin.h)");
  }
  if (plugin->size < offsetof(OpcPlugin, flags)) {
    throw PluginError(origin, "OpcPlugin.size is " + std::to_string(plugin->size) + ", smaller than ABI version " +
                                  std::to_string(plugin->abi_version) + "'s struct");
  }
  if (plugin->name == nullptr || plugin->name[0] == '\0') throw PluginError(origin, "OpcPlugin.name is empty");
  if (plugin->register_ops == nullptr) throw PluginError(origin, "OpcPlugin.register_ops is NULL");
  lib->name_ = plugin->name;
  lib->version_ = plugin->version != nullptr ? plugin->version : "";
  lib->registry = &registry;
  lib->abi_version = plugin->abi_version;
  lib->options = options;
  const bool abi_1_1 = OPC_HAS_FIELD(plugin, OpcPlugin, num_options);
  lib->option_specs_ = option_specs_of(plugin, origin);
  check_options(lib->option_specs_, lib->options.plugin_options, abi_1_1, origin);
  for (const auto& [name, value] : lib->options.plugin_options) lib->c_options_.push_back({name.c_str(), value.c_str()});

  OpcRegistrar registrar{};
  registrar.version = plugin->abi_version;  // the plugin's own (plugin.h, "Migration from version 1")
  registrar.size = sizeof(OpcRegistrar);
  registrar.host = lib.get();
  registrar.define = registrar_define;
  registrar.impl = registrar_impl;
  registrar.declare_dtypes = registrar_declare_dtypes;
  registrar.host_knows = registrar_host_knows;
  registrar.options = lib->c_options_.data();
  registrar.num_options = static_cast<int64_t>(lib->c_options_.size());
  registrar.set_error = registrar_set_error;
  registrar.declare_op = registrar_declare_op;
  registrar.declare_backward_op = registrar_declare_backward_op;
  const std::string label = lib->name_ + " (" + origin + ")";
  OpcStatus status = OPC_ERROR;
  try {
    status = plugin->register_ops(&registrar);
  } catch (...) {
    // A C++ plugin let an exception out: the ABI forbids it, but the load can still fail cleanly.
    throw PluginError(label, "register_ops threw a C++ exception across the C ABI");
  }
  if (status != OPC_OK) {
    throw PluginError(label, "register_ops failed with status " + std::to_string(status) +
                                       (lib->last_error.empty() ? std::string() : ": " + lib->last_error));
  }
  return lib;
}

}  // namespace

std::pair<std::string, std::string> parse_plugin_option(std::string_view text) {
  const size_t eq = text.find('=');
  OPCONFORM_CHECK(eq != std::string_view::npos && eq > 0, ErrorCode::kInvalidArgument, "--plugin-option '", text,
                  "' is not NAME=VALUE");
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

std::string format_plugin_option(const std::pair<std::string, std::string>& option) {
  return option.first + "=" + option.second;
}

std::unique_ptr<LoadedLibrary> load_plugin(const std::filesystem::path& path, Registry& registry,
                                           const LoadOptions& options) {
  const std::string origin = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw PluginError(origin, "no such file");
  if (std::filesystem::is_directory(path, ec)) throw PluginError(origin, "is a directory, not a shared library");
  if (auto problem = detail::elf_problem(path)) throw PluginError(origin, *problem);
  auto lib = std::make_unique<PluginLibrary>();
  lib->origin_ = origin;
  // A path without a slash would make dlopen search the library path instead of opening the file.
  const std::string open_path = origin.find('/') == std::string::npos ? "./" + origin : origin;
  lib->dl = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->dl == nullptr) {
    const char* why = dlerror();
    throw PluginError(origin, std::string("cannot be loaded as a shared library: ") + (why ? why : "unknown reason"));
  }
  dlerror();
  void* entry = dlsym(lib->dl, OPC_PLUGIN_ENTRY_POINT);
  if (entry == nullptr) {
    throw PluginError(origin, "is not an opconform plugin: it exports no '" OPC_PLUGIN_ENTRY_POINT
                              "' function (see opconform/plugin.h)");
  }
  const OpcPlugin* plugin = reinterpret_cast<OpcPluginEntryFn>(entry)();
  return register_plugin(std::move(lib), plugin, registry, options);
}

std::unique_ptr<LoadedLibrary> load_plugin(const OpcPlugin* plugin, Registry& registry, const LoadOptions& options,
                                           std::string origin) {
  auto lib = std::make_unique<PluginLibrary>();
  lib->origin_ = std::move(origin);
  return register_plugin(std::move(lib), plugin, registry, options);
}

}  // namespace opconform::adapters
