#include "opconform/core/registry.h"

#include <algorithm>
#include <atomic>
#include <sstream>

namespace opconform {

namespace detail {

struct RegistryState {
  mutable std::mutex mutex;
  std::map<std::string, std::unique_ptr<OperatorEntry>, std::less<>> ops;
  std::array<std::list<KernelRegistration>, kNumRuntimeKeys> fallbacks;
  std::map<std::string, RegistrationSource, std::less<>> claimed_namespaces;
  uint64_t next_id = 1;
  // Registrations kept for the registry's lifetime (Registry::retain); they find the state gone
  // when it is destroyed, so destroying them here undoes nothing.
  std::vector<RegistrationHandle> retained;
};

DispatchKeySet keys_of_other_values(const IValue& v) {
  if (v.is_tensor_list()) return keys_of(v.to_tensor_list());
  if (v.tag() == IValue::Tag::OptionalTensorList) return keys_of(v.to<std::vector<std::optional<Tensor>>>());
  if (v.tag() == IValue::Tag::GenericList) {
    DispatchKeySet ks;
    for (const auto& e : v.to_generic_list()) {
      if (e.is_tensor()) ks |= keys_of(e.to_tensor());
    }
    return ks;
  }
  return {};
}

}  // namespace detail

namespace {

using detail::KernelRegistration;
using detail::OperatorEntry;
using detail::RegistryState;
using detail::TableSource;

std::string_view to_string(TableSource s) {
  switch (s) {
    case TableSource::Missing: return "missing";
    case TableSource::Skip: return "skip";
    case TableSource::Direct: return "direct";
    case TableSource::CompositeExplicit: return "CompositeExplicitAutograd";
    case TableSource::AutogradAlias: return "Autograd";
    case TableSource::CompositeImplicit: return "CompositeImplicitAutograd";
    case TableSource::Fallback: return "fallback";
  }
  return "?";
}

const KernelRegistration* active(const std::list<KernelRegistration>& l) { return l.empty() ? nullptr : &l.front(); }

// "ns::op.overload" -> ("ns::op", "overload"), validating the shape of the name.
void check_operator_name(std::string_view name) {
  auto sep = name.find("::");
  OPCONFORM_CHECK(sep != std::string_view::npos && sep > 0 && sep + 2 < name.size(), ErrorCode::kInvalidArgument,
                  "operator name '", name, "' must be qualified as 'namespace::name[.overload]'");
}

// The error kernel a missing backend entry holds: it reports what the operator does have.
struct MissingKernel {
  const OperatorEntry* entry;
  DispatchKey key;
};

std::string describe_kernels(const OperatorEntry& e) {
  std::string out;
  for (size_t k = 1; k < e.kernels.size(); ++k) {
    const auto* r = active(e.kernels[k]);
    if (!r || r->kernel.is_fallthrough()) continue;
    if (!out.empty()) out += ", ";
    out += std::string(opconform::to_string(static_cast<DispatchKey>(k))) + " (registered at " + r->source.where + ")";
  }
  return out.empty() ? "none" : out;
}

KernelFunction missing_kernel(const OperatorEntry* entry, DispatchKey key) {
  return KernelFunction::from_boxed([entry, key](const OperatorHandle&, DispatchKeySet keys, Stack&) {
    std::string message;
    if (key == DispatchKey::Undefined) {
      message = detail::concat("Could not run '", entry->name,
                               "': the call has no tensor arguments to dispatch on and no BackendSelect kernel; "
                               "it has kernels for: ", describe_kernels(*entry));
    } else {
      message = detail::concat("Could not run '", entry->name, "' with arguments from the '", opconform::to_string(key),
                               "' backend; it has kernels for: ", describe_kernels(*entry));
    }
    if (!entry->schema) message += detail::concat(" (and no definition: '", entry->name, "' was never defined)");
    throw Error(ErrorCode::kNotImplemented, ErrorReason::kNoKernel, message);
  });
}

bool has_own_backend_kernel(const OperatorEntry& e, DispatchKey autograd) {
  // The backend whose autograd key this is; AutogradOther stands for no particular backend.
  static constexpr std::pair<DispatchKey, DispatchKey> pairs[] = {
      {DispatchKey::AutogradCPU, DispatchKey::CPU},
      {DispatchKey::AutogradCUDA, DispatchKey::CUDA},
      {DispatchKey::AutogradMeta, DispatchKey::Meta},
      {DispatchKey::AutogradPrivateUse1, DispatchKey::PrivateUse1},
      {DispatchKey::AutogradPrivateUse2, DispatchKey::PrivateUse2},
      {DispatchKey::AutogradPrivateUse3, DispatchKey::PrivateUse3},
  };
  for (auto [ag, backend] : pairs) {
    if (ag == autograd) {
      const auto* r = active(e.kernels[static_cast<size_t>(backend)]);
      return (r && !r->kernel.is_fallthrough()) ||
             active(e.kernels[static_cast<size_t>(DispatchKey::CompositeExplicitAutograd)]) != nullptr;
    }
  }
  return false;
}

// Note [Dispatch] in registry.h. One runtime key's entry of e's table (and its bit of e.skip).
void recompute_key(OperatorEntry& e, const RegistryState& state, int i) {
  auto alias = [&](DispatchKey k) { return active(e.kernels[static_cast<size_t>(k)]); };
  auto k = static_cast<DispatchKey>(i);
  const KernelRegistration* chosen = nullptr;
  TableSource source = TableSource::Missing;
  if (const auto* r = active(e.kernels[i])) {
    chosen = r;
    source = TableSource::Direct;
  } else if (is_backend_key(k) && alias(DispatchKey::CompositeExplicitAutograd)) {
    chosen = alias(DispatchKey::CompositeExplicitAutograd);
    source = TableSource::CompositeExplicit;
  } else if (is_autograd_key(k) && alias(DispatchKey::Autograd)) {
    chosen = alias(DispatchKey::Autograd);
    source = TableSource::AutogradAlias;
  } else if (alias(DispatchKey::CompositeImplicitAutograd) &&
             (is_backend_key(k) || (is_autograd_key(k) && !has_own_backend_kernel(e, k)))) {
    chosen = alias(DispatchKey::CompositeImplicitAutograd);
    source = TableSource::CompositeImplicit;
  } else if (const auto* f = active(state.fallbacks[i])) {
    chosen = f;
    source = TableSource::Fallback;
  }
  if (chosen && chosen->kernel.is_fallthrough()) {
    chosen = nullptr;
    source = TableSource::Skip;
  }
  if (k != DispatchKey::Undefined) e.skip = e.skip.remove(k);
  if (chosen) {
    e.table[i] = chosen->kernel;
    e.table_where[i] = &chosen->source;
  } else if (source != TableSource::Skip && (is_backend_key(k) || k == DispatchKey::Undefined)) {
    e.table[i] = missing_kernel(&e, k);
    e.table_where[i] = nullptr;
  } else {
    source = TableSource::Skip;
    e.table[i] = KernelFunction();
    e.table_where[i] = nullptr;
    if (k != DispatchKey::Undefined) e.skip = e.skip.add(k);
  }
  e.table_source[i] = source;
}

void recompute(OperatorEntry& e, const RegistryState& state) {
  e.skip = DispatchKeySet();
  for (int i = 0; i < kNumRuntimeKeys; ++i) recompute_key(e, state, i);
}

OperatorEntry& entry_for(RegistryState& state, std::string_view name) {
  auto it = state.ops.find(name);
  if (it != state.ops.end()) return *it->second;
  auto e = std::make_unique<OperatorEntry>();
  e->name = std::string(name);
  e->registry = &state;
  recompute(*e, state);
  return *state.ops.emplace(std::string(name), std::move(e)).first->second;
}

// Removes the registration with `id` from a kernel list; true when it was there.
// Note [Kernels die outside the lock]: a kernel may own registrations of its own (an autograd
// formula that holds a CustomOpDef, a plugin's state); destroying it while the registry's mutex is
// held would deadlock when those unregister in turn. So an unregistration moves the kernel (and
// the dispatch table it leaves behind) out under the lock, and they are destroyed after it.
// Moves the registration with `id` from a kernel list into `taken`; true when it was there.
bool take_id(std::list<KernelRegistration>& l, uint64_t id, std::list<KernelRegistration>& taken) {
  for (auto it = l.begin(); it != l.end(); ++it) {
    if (it->id == id) {
      taken.splice(taken.end(), l, it);
      return true;
    }
  }
  return false;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

}  // namespace

// ---------------------------------------------------------------- handles

RegistrationSource RegistrationSource::here(SourceLocation loc) {
  std::string file = loc.file;
  // Keep paths short and stable: from the project's top folder on when recognisable.
  for (const char* top : {"/core/", "/compile/", "/reference/", "/adapters/", "/conformance/", "/harness/",
                          "/examples/", "/tests/", "/bench/", "/fuzz/"}) {
    if (auto pos = file.rfind(top); pos != std::string::npos) {
      file = file.substr(pos + 1);
      break;
    }
  }
  return {file + ":" + std::to_string(loc.line)};
}

RegistrationHandle& RegistrationHandle::operator=(RegistrationHandle&& o) noexcept {
  if (this != &o) {
    reset();
    undo_ = std::exchange(o.undo_, nullptr);
  }
  return *this;
}

void RegistrationHandle::reset() {
  if (auto undo = std::exchange(undo_, nullptr)) undo();
}

// ---------------------------------------------------------------- OperatorHandle

const FunctionSchema& OperatorHandle::schema() const {
  OPCONFORM_CHECK(entry_->schema.has_value(), ErrorCode::kRegistration, "operator '", entry_->name,
                  "' has implementations but no definition (no schema was registered)");
  return *entry_->schema;
}

bool OperatorHandle::has_tag(Tag t) const {
  return std::find(entry_->tags.begin(), entry_->tags.end(), t) != entry_->tags.end();
}

std::shared_ptr<const OpData> OperatorHandle::data() const {
  static const auto* none = new std::shared_ptr<const OpData>(std::make_shared<const OpData>());  // read until exit
  std::lock_guard lock(entry_->registry->mutex);
  return entry_->data ? entry_->data : *none;
}

DispatchKeySet OperatorHandle::dispatch_keys(const Stack& stack) const {
  const auto& local = local_dispatch_key_set();
  return ((detail::keys_of_stack(stack, entry_->num_arguments) | DispatchKeySet(DispatchKey::BackendSelect)) |
          local.included) - local.excluded - entry_->skip;
}

void OperatorHandle::reject_boxed_call(const Stack& stack) const {
  OPCONFORM_CHECK(entry_->schema.has_value(), ErrorCode::kRegistration, "cannot call '", entry_->name,
                  "': it has no definition (no schema)");
  throw Error(ErrorCode::kSchemaMismatch, detail::concat("'", entry_->name, "' takes ", entry_->num_arguments,
                                                         " arguments but the stack holds ", stack.size()));
}

void OperatorHandle::redispatch_boxed(DispatchKeySet keys, Stack& stack) const {
  keys = keys - entry_->skip;
  entry_->table[static_cast<size_t>(keys.highest())].call_boxed(*this, keys, stack);
}

const KernelFunction& OperatorHandle::kernel_for(DispatchKey key) const {
  OPCONFORM_CHECK(!is_alias_key(key), ErrorCode::kInvalidArgument, "kernel_for: '", to_string(key),
                  "' is an alias key; ask for a runtime key such as CPU or AutogradCPU");
  return entry_->table[static_cast<size_t>(key)];
}

bool OperatorHandle::has_kernel_for(DispatchKey key) const {
  const TableSource s = entry_->table_source[static_cast<size_t>(key)];
  return s != TableSource::Missing && s != TableSource::Skip;
}

bool OperatorHandle::has_kernel_at(DispatchKey key) const {
  const auto* r = active(entry_->kernels[static_cast<size_t>(key)]);
  return r != nullptr && !r->kernel.is_fallthrough();
}

std::string OperatorHandle::dump_dispatch_table() const {
  std::ostringstream out;
  out << entry_->name;
  if (entry_->schema) out << "\nschema: " << entry_->schema->to_string() << " (registered at " << entry_->schema_source.where << ")";
  else out << "\nschema: none (dangling implementation)";
  for (int i = kNumRuntimeKeys - 1; i > 0; --i) {
    TableSource s = entry_->table_source[i];
    if (s == TableSource::Skip) continue;
    out << "\n  " << to_string(static_cast<DispatchKey>(i)) << ": ";
    if (s == TableSource::Missing) {
      out << "missing";
    } else {
      out << "kernel registered at " << entry_->table_where[i]->where << " [" << to_string(s) << "]";
    }
  }
  return out.str();
}

// ---------------------------------------------------------------- Registry

Registry::Registry() : state_(std::make_shared<detail::RegistryState>()) {}
Registry::~Registry() = default;

Registry& Registry::global() {
  static Registry* registry = new Registry();  // never destroyed: handles may outlive main()
  return *registry;
}

std::optional<OperatorHandle> OperatorHandle::find_in_registry(std::string_view name) const {
  RegistryState* state = entry_->registry;
  if (state == nullptr) return std::nullopt;
  std::lock_guard lock(state->mutex);
  auto it = state->ops.find(name);
  if (it == state->ops.end()) return std::nullopt;
  return OperatorHandle(it->second.get());
}

std::optional<OperatorHandle> Registry::find(std::string_view name) const {
  std::lock_guard lock(state_->mutex);
  auto it = state_->ops.find(name);
  if (it == state_->ops.end()) return std::nullopt;
  return OperatorHandle(it->second.get());
}

OperatorHandle Registry::get(std::string_view name) const {
  if (auto op = find(name)) return *op;
  std::lock_guard lock(state_->mutex);
  std::vector<std::pair<size_t, std::string>> close;
  for (const auto& [n, e] : state_->ops) {
    size_t d = edit_distance(name, n);
    if (d <= 3 || n.starts_with(std::string(name) + ".")) close.emplace_back(d, n);
  }
  std::sort(close.begin(), close.end());
  std::string hint;
  for (size_t i = 0; i < close.size() && i < 5; ++i) hint += (i ? ", " : "; did you mean: ") + close[i].second;
  throw Error(ErrorCode::kInvalidArgument, detail::concat("unknown operator '", name, "'", hint));
}

std::vector<OperatorHandle> Registry::operators() const {
  std::lock_guard lock(state_->mutex);
  std::vector<OperatorHandle> out;
  for (const auto& [n, e] : state_->ops) {
    bool any = e->schema.has_value();
    for (const auto& l : e->kernels) any = any || !l.empty();
    if (any) out.emplace_back(e.get());
  }
  return out;
}

std::vector<std::string> Registry::dangling_impls() const {
  std::vector<std::string> out;
  for (const auto& op : operators()) {
    if (!op.has_schema()) out.push_back(op.name());
  }
  return out;
}

RegistrationHandle Registry::define(FunctionSchema schema, std::vector<Tag> tags, RegistrationSource source,
                                    std::string alias_analysis) {
  OPCONFORM_CHECK(!schema.ns.empty(), ErrorCode::kRegistration, "define: the schema '", schema.to_string(),
                  "' has no namespace");
  OPCONFORM_CHECK(alias_analysis.empty() || alias_analysis == "FROM_SCHEMA" || alias_analysis == "CONSERVATIVE",
                  ErrorCode::kRegistration, "define '", schema.full_name(), "': alias_analysis must be '', "
                  "'FROM_SCHEMA' or 'CONSERVATIVE', got '", alias_analysis, "'");
  std::string name = schema.full_name();
  std::lock_guard lock(state_->mutex);
  OperatorEntry& e = entry_for(*state_, name);
  OPCONFORM_CHECK(!e.schema.has_value(), ErrorCode::kRegistration, "operator '", name,
                  "' is already defined (at ", e.schema_source.where, "); it cannot be defined again at ", source.where);
  e.num_arguments = schema.arguments.size();
  e.schema = std::move(schema);
  e.schema_source = std::move(source);
  e.tags = std::move(tags);
  e.alias_analysis = std::move(alias_analysis);
  std::weak_ptr<RegistryState> weak = state_;
  OperatorEntry* entry = &e;
  return RegistrationHandle([weak, entry] {
    auto state = weak.lock();
    if (!state) return;
    std::shared_ptr<const OpData> data;  // destroyed after the lock: a sample builder may hold anything
    std::lock_guard lock(state->mutex);
    entry->schema.reset();
    entry->tags.clear();
    entry->num_arguments = 0;
    data = std::move(entry->data);
  });
}

void Registry::set_op_data(std::string_view op_name, OpData data) {
  std::shared_ptr<const OpData> replaced;  // destroyed after the lock (as an undone kernel is)
  auto shared = std::make_shared<const OpData>(std::move(data));
  std::lock_guard lock(state_->mutex);
  auto it = state_->ops.find(op_name);
  OPCONFORM_CHECK(it != state_->ops.end() && it->second->schema.has_value(), ErrorCode::kRegistration,
                  "set_op_data: operator '", op_name, "' is not defined in this registry");
  validate_op_data(*it->second->schema, *shared);
  replaced = std::exchange(it->second->data, std::move(shared));
}

void Registry::add_tag(std::string_view op_name, Tag tag) {
  std::lock_guard lock(state_->mutex);
  auto it = state_->ops.find(op_name);
  OPCONFORM_CHECK(it != state_->ops.end() && it->second->schema.has_value(), ErrorCode::kRegistration,
                  "add_tag: operator '", op_name, "' is not defined in this registry");
  auto& tags = it->second->tags;
  if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
}

RegistrationHandle Registry::impl(std::string_view op_name, DispatchKey key, KernelFunction kernel,
                                  RegistrationSource source, bool allow_override) {
  check_operator_name(op_name);
  OPCONFORM_CHECK(key != DispatchKey::Undefined && key < DispatchKey::EndOfAliasKeys, ErrorCode::kRegistration,
                  "impl '", op_name, "': invalid dispatch key");
  OPCONFORM_CHECK(kernel.valid(), ErrorCode::kRegistration, "impl '", op_name, "' at ", to_string(key),
                  ": the kernel is empty");
  std::lock_guard lock(state_->mutex);
  OperatorEntry& e = entry_for(*state_, op_name);
  auto& list = e.kernels[static_cast<size_t>(key)];
  if (!allow_override && !list.empty()) {
    throw Error(ErrorCode::kRegistration,
                detail::concat("impl '", op_name, "' at ", to_string(key), " (", source.where,
                               "): a kernel is already registered for this key at ", list.front().source.where,
                               " and allow_override is false"));
  }
  uint64_t id = state_->next_id++;
  list.push_front({std::move(kernel), std::move(source), id});
  recompute(e, *state_);
  std::weak_ptr<RegistryState> weak = state_;
  OperatorEntry* entry = &e;
  return RegistrationHandle([weak, entry, key, id] {
    auto state = weak.lock();
    if (!state) return;
    std::list<KernelRegistration> taken;  // destroyed after the lock (Note [Kernels die outside the lock])
    std::array<KernelFunction, kNumRuntimeKeys> old_table;
    std::lock_guard lock(state->mutex);
    if (take_id(entry->kernels[static_cast<size_t>(key)], id, taken)) {
      old_table = entry->table;
      recompute(*entry, *state);
    }
  });
}

RegistrationHandle Registry::fallback(DispatchKey key, KernelFunction kernel, RegistrationSource source) {
  OPCONFORM_CHECK(key != DispatchKey::Undefined && !is_alias_key(key), ErrorCode::kRegistration,
                  "fallback: '", to_string(key), "' is not a runtime dispatch key (alias keys take no fallback)");
  OPCONFORM_CHECK(kernel.valid(), ErrorCode::kRegistration, "fallback at ", to_string(key), ": the kernel is empty");
  std::lock_guard lock(state_->mutex);
  auto& list = state_->fallbacks[static_cast<size_t>(key)];
  uint64_t id = state_->next_id++;
  list.push_front({std::move(kernel), std::move(source), id});
  // A fallback decides its own key's entry only: one entry per operator is recomputed, not the
  // whole table (checks install and remove the vmap and fake fallbacks around every case).
  const int index = static_cast<int>(key);
  for (auto& [n, e] : state_->ops) recompute_key(*e, *state_, index);
  std::weak_ptr<RegistryState> weak = state_;
  return RegistrationHandle([weak, key, id] {
    auto state = weak.lock();
    if (!state) return;
    std::list<KernelRegistration> taken;  // destroyed after the lock (Note [Kernels die outside the lock])
    std::vector<KernelFunction> old_entries;
    std::lock_guard lock(state->mutex);
    if (take_id(state->fallbacks[static_cast<size_t>(key)], id, taken)) {
      old_entries.reserve(state->ops.size());
      for (auto& [n, e] : state->ops) {
        old_entries.push_back(e->table[static_cast<size_t>(key)]);
        recompute_key(*e, *state, static_cast<int>(key));
      }
    }
  });
}

bool Registry::has_fallback(DispatchKey key) const {
  if (static_cast<size_t>(key) >= state_->fallbacks.size()) return false;  // an alias key has none
  std::lock_guard lock(state_->mutex);
  return active(state_->fallbacks[static_cast<size_t>(key)]) != nullptr;
}

void Registry::retain(RegistrationHandle handle) {
  std::lock_guard lock(state_->mutex);
  state_->retained.push_back(std::move(handle));
}

RegistrationHandle Registry::claim_namespace(std::string_view ns, RegistrationSource source) {
  std::lock_guard lock(state_->mutex);
  auto it = state_->claimed_namespaces.find(ns);
  OPCONFORM_CHECK(it == state_->claimed_namespaces.end(), ErrorCode::kRegistration,
                  "only one DEF library can define namespace '", ns, "'; it was already created at ",
                  it == state_->claimed_namespaces.end() ? "" : it->second.where,
                  " (use a FRAGMENT library to add operators to it)");
  state_->claimed_namespaces.emplace(std::string(ns), std::move(source));
  std::weak_ptr<RegistryState> weak = state_;
  std::string key(ns);
  return RegistrationHandle([weak, key] {
    if (auto state = weak.lock()) {
      std::lock_guard lock(state->mutex);
      state->claimed_namespaces.erase(key);
    }
  });
}

// ---------------------------------------------------------------- KernelFunction (non-template)

KernelFunction KernelFunction::from_boxed(BoxedKernel f) {
  OPCONFORM_CHECK(static_cast<bool>(f), ErrorCode::kRegistration, "from_boxed: empty function");
  KernelFunction k;
  k.functor_ = std::make_shared<BoxedKernel>(std::move(f));
  k.boxed_ = [](const void* functor, const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
    (*static_cast<const BoxedKernel*>(functor))(op, keys, stack);
  };
  return k;
}

KernelFunction KernelFunction::fallthrough() {
  KernelFunction k;
  k.fallthrough_ = true;
  return k;
}

}  // namespace opconform

namespace opconform {

void SafeKernelFunction::call_boxed(DispatchKeySet keys, Stack& stack) const {
  OPCONFORM_CHECK(kernel_.valid(), ErrorCode::kNotImplemented, "get_kernel('", op_.name(), "', ", to_string(key_),
                  "): the operator has no kernel for this key (it is skipped)");
  kernel_.call_boxed(op_, keys, stack);
}

SafeKernelFunction get_kernel(const OperatorHandle& op, DispatchKey key) {
  const KernelFunction& k = op.kernel_for(key);
  return SafeKernelFunction(op, key, k);
}

SafeKernelFunction get_kernel(std::string_view op_name, DispatchKey key, const Registry& registry) {
  return get_kernel(registry.get(op_name), key);
}

}  // namespace opconform
