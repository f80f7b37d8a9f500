#include "opconform/core/custom_op.h"

#include "opconform/core/backend_select.h"

#include <map>
#include <mutex>

namespace opconform {
namespace detail {
namespace {

[[noreturn]] void fail(const std::string& op, const std::string& message) {
  throw Error(ErrorCode::kRegistration, "custom_op '" + op + "': " + message);
}

// Custom ops by (registry, name), for the free register_* functions.
struct CustomOpTable {
  std::mutex mutex;
  std::map<std::pair<const Registry*, std::string>, std::weak_ptr<CustomOpState>, std::less<>> ops;
};
CustomOpTable& custom_op_table() {
  static CustomOpTable table;
  return table;
}

// The standard inplace and out= shapes (the seed document's contract), for given schemas.
void validate_tag_shapes(const std::string& op, const FunctionSchema& s, const std::vector<Tag>& tags) {
  bool inplace = std::find(tags.begin(), tags.end(), Tag::inplace) != tags.end();
  bool out = std::find(tags.begin(), tags.end(), Tag::out) != tags.end();
  if (inplace && out) fail(op, "Tag::inplace and Tag::out cannot be combined");
  auto mutated = s.mutable_arguments();
  if (inplace) {
    bool ok = !s.arguments.empty() && s.arguments[0].type.kind() == TypeKind::kTensor && !s.arguments[0].kwarg_only &&
              mutated == std::vector<size_t>{0} && s.returns.size() == 1 &&
              s.returns[0].type.kind() == TypeKind::kTensor && s.returns[0].alias_info &&
              s.returns[0].alias_info->is_write && s.arguments[0].alias_info &&
              s.returns[0].alias_info->before_set == s.arguments[0].alias_info->before_set;
    if (!ok) {
      fail(op, "Tag::inplace needs the schema (Tensor(a!) self, ...) -> Tensor(a!): the first argument is the only "
               "mutated one and is returned; got " + s.to_string());
    }
  }
  if (out) {
    bool ok = !mutated.empty() && s.returns.size() == mutated.size();
    for (size_t k = 0; ok && k < mutated.size(); ++k) {
      const Argument& a = s.arguments[mutated[k]];
      const Argument& r = s.returns[k];
      ok = a.kwarg_only && a.type.kind() == TypeKind::kTensor && r.type.kind() == TypeKind::kTensor && r.alias_info &&
           r.alias_info->is_write && r.alias_info->before_set == a.alias_info->before_set;
    }
    if (!ok) {
      fail(op, "Tag::out needs keyword-only mutated Tensor arguments returned in declaration order, e.g. "
               "(Tensor x, *, Tensor(a!) out) -> Tensor(a!); got " + s.to_string());
    }
  }
}

// The fake kernel the schema alone determines: inplace returns its first argument, out= its
// out arguments, a mutable op returning nothing returns nothing.
std::optional<KernelFunction> automatic_fake_kernel(const FunctionSchema& s, const std::vector<Tag>& tags) {
  bool inplace = std::find(tags.begin(), tags.end(), Tag::inplace) != tags.end();
  bool out = std::find(tags.begin(), tags.end(), Tag::out) != tags.end();
  size_t n = s.arguments.size();
  if (inplace) {
    return KernelFunction::from_boxed([n](const OperatorHandle&, DispatchKeySet, Stack& stack) {
      IValue self = stack[stack.size() - n];
      stack.resize(stack.size() - n);
      stack.push_back(std::move(self));
    });
  }
  if (out) {
    auto outs = s.mutable_arguments();
    return KernelFunction::from_boxed([n, outs](const OperatorHandle&, DispatchKeySet, Stack& stack) {
      size_t base = stack.size() - n;
      std::vector<IValue> results;
      for (size_t i : outs) results.push_back(stack[base + i]);
      stack.resize(base);
      for (auto& r : results) stack.push_back(std::move(r));
    });
  }
  if (s.is_mutable() && s.returns.empty()) {
    return KernelFunction::from_boxed([n](const OperatorHandle&, DispatchKeySet, Stack& stack) {
      stack.resize(stack.size() - n);
    });
  }
  return std::nullopt;
}

// The kernel at DispatchKey::Meta (Note [Meta calls of custom ops]). It runs the fake kernel the
// dispatch table holds now (register_fake's newest, or the automatic one), so a replaced fake
// kernel needs nothing here; inputs and outputs cross between meta and fake tensors.
void meta_via_fake_kernel(const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
  OPCONFORM_CHECK_BECAUSE(op.has_kernel_at(DispatchKey::Fake), ErrorCode::kNotImplemented, ErrorReason::kNoFakeKernel, "operator '", op.name(),
                  "' has no fake kernel; register one with register_fake (a call with meta tensors runs a custom "
                  "op's fake kernel, never its function: meta tensors have no data)");
  KernelFunction fake = op.kernel_for(DispatchKey::Fake);
  const size_t n = std::min(op.entry().num_arguments, stack.size());
  const size_t base = stack.size() - n;
  struct Pair {
    Tensor fake, meta;
  };
  std::vector<Pair> pairs;  // the inputs, then the outputs made so far
  FakeTensorMode mode;
  FakeTensorModeGuard guard(mode);
  for (size_t i = base; i < stack.size(); ++i) {
    stack[i] = map_tensors(stack[i], [&](const Tensor& t) {
      // A meta tensor only: an argument with data would be returned unwritten (in-place forms).
      OPCONFORM_CHECK(t.device().is_meta(), ErrorCode::kInvalidArgument, "custom op '", op.name(), "': argument '",
                      op.schema().arguments[i - base].name, "' is on ", t.device().to_string(),
                      " in a call with meta tensors; such a call runs the fake kernel, and every tensor argument "
                      "must be on the meta device");
      Tensor f = mode.from_tensor(t);
      pairs.push_back({f, t});
      return f;
    });
  }
  fake.call_boxed(op, keys, stack);
  // An input returned maps back to itself, a view of one (or of an earlier output) shares its
  // storage; anything else is a new meta tensor.
  auto to_meta = [&](const Tensor& t) -> Tensor {
    for (const Pair& p : pairs) {
      if (t.is_same(p.fake)) return p.meta;
    }
    for (const SymInt& s : t.sym_sizes()) {
      OPCONFORM_CHECK(!s.is_symbolic(), ErrorCode::kNotImplemented, "custom op '", op.name(),
                      "': its fake kernel returned a size that depends on the data (get_ctx().new_dynamic_size()), "
                      "which a meta tensor cannot hold; call the op on fake tensors (FakeTensorMode) instead");
    }
    std::shared_ptr<Storage> storage;
    for (const Pair& p : pairs) {
      if (!storage && t.is_alias_of(p.fake)) storage = p.meta.storage();
    }
    if (!storage) storage = Storage::allocate(t.storage()->nbytes(), Device::meta());
    Tensor meta = make_tensor(std::move(storage), t.sizes(), t.strides(), t.storage_offset(), t.dtype());
    pairs.push_back({t, meta});
    return meta;
  };
  for (size_t i = base; i < stack.size(); ++i) stack[i] = map_tensors(stack[i], to_meta);
}

// Once per op, and never over a meta kernel the user gave (Note [Meta calls of custom ops]).
void register_meta_kernel(CustomOpState& state, SourceLocation loc) {
  if (state.meta_kernel_registered || state.user_meta_kernel) return;
  state.library.impl(state.name, KernelFunction::from_boxed(meta_via_fake_kernel), DispatchKey::Meta, {}, loc);
  state.meta_kernel_registered = true;
}

}  // namespace

// ---------------------------------------------------------------- the aliasing contract

AliasContract AliasContract::from_schema(const std::string& op_name, const FunctionSchema& schema) {
  AliasContract c;
  c.op_name = op_name;
  for (const auto& a : schema.arguments) c.argument_names.push_back(a.name);
  for (const auto& r : schema.returns) {
    std::optional<size_t> must_be;
    if (r.alias_info && r.alias_info->is_write) {
      for (size_t i = 0; i < schema.arguments.size(); ++i) {
        const auto& a = schema.arguments[i];
        if (a.alias_info && a.alias_info->before_set == r.alias_info->before_set) must_be = i;
      }
    }
    c.output_is_argument.push_back(must_be);
  }
  return c;
}

void AliasContract::check(const TensorRefs& inputs, const TensorRefs& outputs) const {
  for (const TensorRef& out : outputs) {
    std::optional<size_t> must_be = out.index < output_is_argument.size() ? output_is_argument[out.index] : std::nullopt;
    if (must_be) {
      bool same = false;
      for (const TensorRef& in : inputs) same = same || (in.index == *must_be && in.tensor->is_same(*out.tensor));
      if (!same) {
        throw Error(ErrorCode::kSchemaMismatch,
                    "custom op '" + op_name + "': output " + std::to_string(out.index) + " must be argument '" +
                        argument_names[*must_be] + "' itself (the schema annotates it as written and returned), "
                        "but the function returned a different tensor");
      }
      continue;
    }
    for (const TensorRef& in : inputs) {
      if (in.tensor->is_alias_of(*out.tensor)) {
        throw Error(ErrorCode::kSchemaMismatch,
                    "custom op '" + op_name + "': output " + std::to_string(out.index) + " is argument '" +
                        argument_names[in.index] + "' or a view of it; custom ops must return new tensors "
                        "(return a clone), except the standard forms Tag::inplace and Tag::out");
      }
    }
  }
}

// ---------------------------------------------------------------- definition

CustomOpState::CustomOpState(std::string op_name, Registry& reg, FunctionSchema s, std::vector<Tag> t)
    : name(std::move(op_name)), registry(&reg), schema(std::move(s)), tags(std::move(t)),
      kernels(std::make_shared<CustomOpKernels>()),
      contract(std::make_shared<const AliasContract>(AliasContract::from_schema(name, schema))),
      library(schema.ns, LibraryKind::FRAGMENT, std::nullopt, reg) {
  for (auto& e : kernels->enabled) e.store(true);
}

std::vector<std::string> argument_names_of(const std::string& schema_text) {
  std::vector<std::string> names;
  for (const auto& a : parse_schema("f" + schema_text).arguments) names.push_back(a.name);
  return names;
}

FunctionSchema checked_given_schema(const std::string& name, const std::string& schema_text,
                                    const MutatesArgs& mutates_args, const std::vector<Tag>& tags) {
  // A schema given without a name ("(Tensor x) -> Tensor") takes the op's.
  std::string text = schema_text;
  auto sep = name.find("::");
  if (sep == std::string::npos) fail(name, "the name must be 'namespace::name'");
  if (!text.empty() && text.front() == '(') text = name + text;
  FunctionSchema s = parse_schema(text);
  if (s.ns.empty()) s.ns = name.substr(0, sep);
  if (s.full_name() != name && s.qualified_name() != name) {
    fail(name, "the schema names another operator: " + s.full_name());
  }
  std::vector<std::string> written;
  for (size_t i : s.mutable_arguments()) written.push_back(s.arguments[i].name);
  if (!mutates_args.unknown) {
    auto expected = mutates_args.names;
    std::sort(expected.begin(), expected.end());
    auto actual = written;
    std::sort(actual.begin(), actual.end());
    if (expected != actual) {
      std::string w, m;
      for (const auto& x : actual) w += (w.empty() ? "" : ", ") + x;
      for (const auto& x : expected) m += (m.empty() ? "" : ", ") + x;
      fail(name, "the schema and mutates_args disagree: the schema writes {" + w + "}, mutates_args names {" + m + "}");
    }
  }
  validate_tag_shapes(name, s, tags);
  return s;
}

std::shared_ptr<CustomOpState> define_custom_op(std::string name, FunctionSchema schema, const CustomOpOptions& options,
                                                AutogradWrapper wrap_autograd, SourceLocation loc) {
  Registry& registry = options.registry ? *options.registry : Registry::global();
  auto sep = name.find("::");
  if (sep == std::string::npos || sep == 0) fail(name, "the name must be 'namespace::name', e.g. 'mylib::my_linear'");
  schema.ns = name.substr(0, sep);
  validate_tag_shapes(name, schema, options.tags);
  auto state = std::make_shared<CustomOpState>(name, registry, schema, options.tags);
  state->library.define(schema.to_string(), options.tags, "", loc);
  state->wrap_autograd = std::move(wrap_autograd);

  // What every custom op gets, whatever its function type (Note [Custom op aliasing]); these
  // registrations are the custom_op call's, so they carry its location.
  bool out = std::find(options.tags.begin(), options.tags.end(), Tag::out) != options.tags.end();
  KernelFunction autograd_kernel = out ? autograd::refuse_autograd_kernel(std::string(autograd::kOutOperatorReason))
                                       : autograd::not_implemented_autograd_kernel();
  state->library.impl(name, state->wrap_autograd(std::move(autograd_kernel)), DispatchKey::Autograd, {}, loc);
  if (auto fake = automatic_fake_kernel(schema, options.tags)) {
    state->library.impl(name, wrap_fake_kernel(*fake), DispatchKey::Fake, {}, loc);
  }
  if (auto device = factory_device_argument(schema)) {
    state->library.impl(name, backend_select_kernel(*device), DispatchKey::BackendSelect, {}, loc);
  }

  auto& table = custom_op_table();
  std::lock_guard lock(table.mutex);
  table.ops[{&registry, name}] = state;
  return state;
}

void register_default_kernels(CustomOpState& state, KernelFunction fn,
                              const std::optional<std::vector<DeviceType>>& device_types, SourceLocation loc) {
  state.kernels->original = fn;
  if (!device_types) {
    state.library.impl(state.name, std::move(fn), DispatchKey::CompositeExplicitAutograd, {}, loc);
    register_meta_kernel(state, loc);  // else the function would serve meta too
    return;
  }
  if (device_types->empty()) fail(state.name, "device_types is an empty list (use nullopt for every device)");
  for (DeviceType d : *device_types) {
    state.library.impl(state.name, fn, backend_key(d), {}, loc);
    if (d == DeviceType::Meta) state.user_meta_kernel = true;
  }
  // An automatic fake kernel serves meta as register_fake's does.
  if (state.registry->get(state.name).has_kernel_at(DispatchKey::Fake)) register_meta_kernel(state, loc);
}

}  // namespace detail

// ---------------------------------------------------------------- CustomOpDef

const std::string& CustomOpDef::name() const { return state_->name; }
OperatorHandle CustomOpDef::handle() const { return state_->registry->get(state_->name); }
const FunctionSchema& CustomOpDef::schema() const { return state_->schema; }
Registry& CustomOpDef::registry() const { return *state_->registry; }
bool CustomOpDef::has_fake() const { return state_->fake_source.has_value(); }
bool CustomOpDef::has_autograd() const { return state_->has_autograd; }

CustomOpDef& CustomOpDef::register_kernel_function(std::vector<DeviceType> device_types, KernelFunction kernel,
                                                   SourceLocation loc) {
  if (device_types.empty()) {
    // Every device: where the default function is. set_kernel_enabled is per device type, the
    // one of the call's backend key.
    auto k = KernelFunction::from_boxed([kernels = state_->kernels, kernel](const OperatorHandle& op,
                                                                           DispatchKeySet keys, Stack& stack) {
      std::optional<DeviceType> d = device_type_of((keys & DispatchKeySet::below(DispatchKey::Fake)).highest());
      if (!d || kernels->enabled[static_cast<size_t>(*d)].load(std::memory_order_relaxed)) {
        kernel.call_boxed(op, keys, stack);
      } else {
        kernels->original.call_boxed(op, keys, stack);
      }
    });
    state_->library.impl(state_->name, std::move(k), DispatchKey::CompositeExplicitAutograd, {}, loc);
    detail::register_meta_kernel(*state_, loc);  // meta keeps the fake kernel
    return *this;
  }
  for (DeviceType d : device_types) {
    if (d == DeviceType::Meta) state_->user_meta_kernel = true;
    // Checked on each call, so set_kernel_enabled takes effect at once (one atomic load).
    auto k = KernelFunction::from_boxed([kernels = state_->kernels, d, kernel](const OperatorHandle& op,
                                                                              DispatchKeySet keys, Stack& stack) {
      if (kernels->enabled[static_cast<size_t>(d)].load(std::memory_order_relaxed)) {
        kernel.call_boxed(op, keys, stack);
      } else {
        kernels->original.call_boxed(op, keys, stack);
      }
    });
    state_->library.impl(state_->name, std::move(k), backend_key(d), {}, loc);
  }
  return *this;
}

CustomOpDef& CustomOpDef::register_fake_function(KernelFunction kernel, SourceLocation loc) {
  // A custom op's fake kernel is replaced, not refused (PyTorch's CustomOpDef.register_fake): the
  // new one is registered before the old one is undone, so the op never lacks one between.
  RegistrationSource source = RegistrationSource::here(loc);
  std::string where = source.where;
  state_->user_fake = state_->registry->impl(state_->name, DispatchKey::Fake, wrap_fake_kernel(std::move(kernel)),
                                             std::move(source));
  state_->fake_source = std::move(where);
  detail::register_meta_kernel(*state_, loc);
  return *this;
}

CustomOpDef& CustomOpDef::register_autograd(autograd::BackwardFn backward, autograd::SetupContextFn setup_context,
                                            SourceLocation loc) {
  if (std::find(state_->tags.begin(), state_->tags.end(), Tag::out) != state_->tags.end()) {
    throw Error(ErrorCode::kRegistration, "register_autograd: '" + state_->name +
                                              "' is an out= operator (Tag::out); out= operators do not support autograd");
  }
  if (!backward) throw Error(ErrorCode::kRegistration, "register_autograd: '" + state_->name + "': backward is empty");
  if (!setup_context) setup_context = [](autograd::AutogradContext&, const Stack&, const Stack&) {};
  state_->library.impl(state_->name,
                       state_->wrap_autograd(autograd::make_autograd_kernel(std::move(backward), std::move(setup_context))),
                       DispatchKey::Autograd, {}, loc);
  state_->has_autograd = true;
  return *this;
}

CustomOpDef& CustomOpDef::register_autograd(autograd::BackwardFn backward, KeywordSetupContextFn setup_context,
                                            SourceLocation loc) {
  std::vector<bool> kwarg_only;
  for (const auto& a : state_->schema.arguments) kwarg_only.push_back(a.kwarg_only);
  return register_autograd(std::move(backward), [kwarg_only, setup_context](autograd::AutogradContext& ctx,
                                                                           const Stack& inputs, const Stack& outputs) {
    Stack positional, keyword_only;
    for (size_t i = 0; i < inputs.size(); ++i) (i < kwarg_only.size() && kwarg_only[i] ? keyword_only : positional).push_back(inputs[i]);
    setup_context(ctx, positional, keyword_only, outputs);
  }, loc);
}

CustomOpDef& CustomOpDef::register_autocast(DeviceType device_type, DType cast_dtype, SourceLocation loc) {
  // make_autocast_kernel and autocast_key reject device types without autocast.
  state_->library.impl(state_->name, make_autocast_kernel(device_type, cast_dtype), autocast_key(device_type), {}, loc);
  return *this;
}

CustomOpDef& CustomOpDef::register_vmap(VmapRule rule, SourceLocation loc) {
  state_->library.impl(state_->name, make_vmap_kernel(std::move(rule)), DispatchKey::Batched, {}, loc);
  return *this;
}

void CustomOpDef::keep(RegistrationHandle handle) { state_->extra.push_back(std::move(handle)); }

KernelEnabledGuard CustomOpDef::set_kernel_enabled(DeviceType device_type, bool enabled) {
  bool previous = state_->kernels->enabled[static_cast<size_t>(device_type)].exchange(enabled);
  return KernelEnabledGuard(state_, device_type, previous);
}

KernelEnabledGuard::KernelEnabledGuard(std::shared_ptr<detail::CustomOpState> state, DeviceType device, bool previous)
    : state_(std::move(state)), device_(device), previous_(previous) {}

KernelEnabledGuard::~KernelEnabledGuard() {
  if (state_) state_->kernels->enabled[static_cast<size_t>(device_)].store(previous_);
}

// ---------------------------------------------------------------- free functions

RegistrationHandle install_builtin_fallbacks(Registry& registry) {
  auto handles = std::make_shared<std::vector<RegistrationHandle>>();
  handles->push_back(autograd::install_autograd_fallback(registry));
  handles->push_back(install_fake_fallback(registry));
  handles->push_back(install_vmap_fallback(registry));
  handles->push_back(install_dispatch_mode_fallback(registry));
  return RegistrationHandle([handles] {
    while (!handles->empty()) handles->pop_back();  // newest first
  });
}

std::optional<CustomOpDef> find_custom_op(std::string_view name, Registry& registry) {
  auto& table = detail::custom_op_table();
  std::lock_guard lock(table.mutex);
  auto it = table.ops.find(std::pair<const Registry*, std::string>{&registry, std::string(name)});
  if (it == table.ops.end()) return std::nullopt;
  if (auto state = it->second.lock()) return CustomOpDef(state);
  return std::nullopt;
}

RegistrationHandle register_autograd(std::string_view op_name, autograd::BackwardFn backward,
                                     autograd::SetupContextFn setup_context, Registry& registry, SourceLocation loc) {
  if (auto def = find_custom_op(op_name, registry)) {
    def->register_autograd(std::move(backward), std::move(setup_context), loc);
    return RegistrationHandle();
  }
  if (!setup_context) setup_context = [](autograd::AutogradContext&, const Stack&, const Stack&) {};
  return registry.impl(op_name, DispatchKey::Autograd,
                       autograd::make_autograd_kernel(std::move(backward), std::move(setup_context)),
                       RegistrationSource::here(loc));
}

RegistrationHandle register_autocast(std::string_view op_name, DeviceType device_type, DType cast_dtype,
                                     Registry& registry, SourceLocation loc) {
  if (auto def = find_custom_op(op_name, registry)) {
    def->register_autocast(device_type, cast_dtype, loc);
    return RegistrationHandle();
  }
  return registry.impl(op_name, autocast_key(device_type), make_autocast_kernel(device_type, cast_dtype),
                       RegistrationSource::here(loc));
}

RegistrationHandle register_vmap(std::string_view op_name, VmapRule rule, Registry& registry, SourceLocation loc) {
  if (auto def = find_custom_op(op_name, registry)) {
    def->register_vmap(std::move(rule), loc);
    return RegistrationHandle();
  }
  return registry.impl(op_name, DispatchKey::Batched, make_vmap_kernel(std::move(rule)), RegistrationSource::here(loc));
}

}  // namespace opconform
