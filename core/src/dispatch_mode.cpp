// The dispatch mode stack, its fallback and per-(op, mode type) rules (see dispatch_mode.h).
#include "opconform/core/dispatch_mode.h"

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <optional>

#include "opconform/core/error.h"

namespace opconform {
namespace {

thread_local std::vector<std::shared_ptr<DispatchMode>> tls_modes;

const SubclassInfo* first_subclass_argument(const OperatorHandle& op, const Stack& stack);

void set_mode_key(bool included) {
  auto& local = local_dispatch_key_set();
  local.included = included ? local.included.add(DispatchKey::DispatchMode)
                            : local.included.remove(DispatchKey::DispatchMode);
}

bool mode_key_included() { return local_dispatch_key_set().included.has(DispatchKey::DispatchMode); }

// Takes the top mode off the stack for a scope (Note [What a mode sees]); the key goes when the
// stack empties, so the calls made meanwhile skip DispatchMode altogether.
class PopTopMode {
 public:
  PopTopMode() : mode_(std::move(tls_modes.back())), key_was_included_(mode_key_included()) {
    tls_modes.pop_back();
    if (tls_modes.empty()) set_mode_key(false);
  }
  ~PopTopMode() {
    tls_modes.push_back(std::move(mode_));
    set_mode_key(key_was_included_);
  }
  PopTopMode(const PopTopMode&) = delete;
  PopTopMode& operator=(const PopTopMode&) = delete;
  DispatchMode& mode() const { return *mode_; }

 private:
  std::shared_ptr<DispatchMode> mode_;
  bool key_was_included_;
};

void mode_fallback(const OperatorHandle& op, DispatchKeySet keys, Stack& stack) {
  if (tls_modes.empty()) {
    // No mode: the key came with a tensor-subclass-like wrapper (modes run before subclasses).
    if (const SubclassInfo* info = first_subclass_argument(op, stack)) {
      std::shared_ptr<TensorSubclass> subclass = info->subclass;  // alive while it runs
      subclass->dispatch(op, stack);
      return;
    }
    // The key was included by someone else (a plain IncludeDispatchKeyGuard): nothing to do here.
    op.redispatch_boxed(keys.after(DispatchKey::DispatchMode), stack);
    return;
  }
  PopTopMode popped;
  popped.mode().dispatch(op, stack);
}

// ---- rules ----

// One rule: for a mode type or for a tensor-subclass type (the key's type says which).
struct RuleEntry {
  uint64_t id;
  DispatchRule rule;
  SubclassDispatchRule subclass_rule;
};
using RuleKey = std::pair<std::string, std::type_index>;

std::mutex rules_mutex;
std::map<RuleKey, std::list<RuleEntry>, std::less<>>& rules() {
  static auto* r = new std::map<RuleKey, std::list<RuleEntry>, std::less<>>();  // outlives static handles
  return *r;
}
uint64_t next_rule_id = 0;

// The newest rule for (op, type), copied so it runs without the lock (rules call ops, which may
// register or look up rules themselves).
std::optional<RuleEntry> find_rule(const std::string& op_name, std::type_index type) {
  std::lock_guard lock(rules_mutex);
  auto it = rules().find(RuleKey{op_name, type});
  if (it == rules().end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

RegistrationHandle add_rule(std::string op_name, std::type_index type, RuleEntry entry) {
  OPCONFORM_CHECK(entry.rule || entry.subclass_rule, ErrorCode::kRegistration, "register_dispatch_rule: no rule given for '",
                  op_name, "'");
  OPCONFORM_CHECK(op_name.find("::") != std::string::npos, ErrorCode::kRegistration,
                  "register_dispatch_rule: '", op_name, "' is not a full operator name (ns::op)");
  std::lock_guard lock(rules_mutex);
  uint64_t id = entry.id = ++next_rule_id;
  RuleKey key{std::move(op_name), type};
  rules()[key].push_front(std::move(entry));
  return RegistrationHandle([key = std::move(key), id] {
    std::lock_guard lock(rules_mutex);
    auto it = rules().find(key);
    if (it == rules().end()) return;
    it->second.remove_if([id](const RuleEntry& e) { return e.id == id; });
    if (it->second.empty()) rules().erase(it);
  });
}

const SubclassInfo* subclass_info(const Tensor& t) {
  return t.defined() ? t.unsafe_impl()->subclass.get() : nullptr;
}

// The first wrapper tensor among the call's arguments.
const SubclassInfo* first_subclass_argument(const OperatorHandle& op, const Stack& stack) {
  size_t n = std::min(op.schema().arguments.size(), stack.size());
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.is_tensor()) {
      if (const auto* info = subclass_info(v.to_tensor())) return info;
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) {
        if (const auto* info = subclass_info(t)) return info;
      }
    }
  }
  return nullptr;
}

}  // namespace

DispatchMode::~DispatchMode() = default;

void DispatchMode::dispatch(const OperatorHandle& op, Stack& stack) {
  if (auto entry = find_rule(op.name(), std::type_index(typeid(*this))); entry && entry->rule) {
    entry->rule(*this, op, stack);
    return;
  }
  redispatch(op, stack);
}

void DispatchMode::redispatch(const OperatorHandle& op, Stack& stack) {
  // Inside dispatch() this mode is already off the stack: a fresh call goes through the outer
  // modes (or, with none left, straight to the keys below DispatchMode).
  if (!tls_modes.empty() && tls_modes.back().get() == this) {
    PopTopMode popped;
    op.call_boxed(stack);
    return;
  }
  op.call_boxed(stack);
}

DispatchModeGuard::DispatchModeGuard(std::shared_ptr<DispatchMode> mode)
    : mode_(std::move(mode)), previous_key_included_(mode_key_included()) {
  OPCONFORM_CHECK(mode_ != nullptr, ErrorCode::kInvalidArgument, "DispatchModeGuard: null mode");
  tls_modes.push_back(mode_);
  set_mode_key(true);
}

DispatchModeGuard::~DispatchModeGuard() {
  // Normally the top; searched from the top so a misnested guard still removes its own mode.
  auto it = std::find(tls_modes.rbegin(), tls_modes.rend(), mode_);
  if (it != tls_modes.rend()) tls_modes.erase(std::next(it).base());
  set_mode_key(previous_key_included_ || !tls_modes.empty());
}

std::vector<std::shared_ptr<DispatchMode>> dispatch_mode_stack() { return tls_modes; }

RegistrationHandle install_dispatch_mode_fallback(Registry& registry) {
  return registry.fallback(DispatchKey::DispatchMode, KernelFunction::from_boxed(mode_fallback),
                           RegistrationSource::named("the dispatch mode fallback (dispatch_mode.cpp)"));
}

// Note [Fallbacks installed once]: a fallback applies to every operator, so (as in PyTorch's
// Dispatcher) registering or removing one recomputes every operator's dispatch table. A check
// that installed the mode fallback around each sample spent a third of its time there (perf:
// recompute and the removal's table copies, over 189 operators, twice per sample). The mode
// fallback only acts while a mode is pushed, so keeping it installed changes no other call.
void ensure_dispatch_mode_fallback(Registry& registry) {
  if (registry.has_fallback(DispatchKey::DispatchMode)) return;
  registry.retain(install_dispatch_mode_fallback(registry));
}

RegistrationHandle register_dispatch_rule(std::string op_name, std::type_index mode_type, DispatchRule rule) {
  return add_rule(std::move(op_name), mode_type, RuleEntry{0, std::move(rule), nullptr});
}

RegistrationHandle register_subclass_dispatch_rule(std::string op_name, std::type_index subclass_type,
                                                   SubclassDispatchRule rule) {
  return add_rule(std::move(op_name), subclass_type, RuleEntry{0, nullptr, std::move(rule)});
}

// ---------------------------------------------------------------- tensor-subclass-like wrappers

TensorSubclass::~TensorSubclass() = default;

void TensorSubclass::dispatch(const OperatorHandle& op, Stack& stack) {
  if (auto entry = find_rule(op.name(), std::type_index(typeid(*this))); entry && entry->subclass_rule) {
    entry->subclass_rule(*this, op, stack);
    return;
  }
  unwrap_and_call(op, stack);
}

void TensorSubclass::unwrap_and_call(const OperatorHandle& op, Stack& stack) {
  size_t n = std::min(op.schema().arguments.size(), stack.size());
  for (size_t i = stack.size() - n; i < stack.size(); ++i) stack[i] = map_tensors(stack[i], unwrap_subclass);
  op.call_boxed(stack);
}

Tensor make_subclass_tensor(const Tensor& inner, std::shared_ptr<TensorSubclass> subclass) {
  OPCONFORM_CHECK(inner.defined() && subclass != nullptr, ErrorCode::kInvalidArgument,
                  "make_subclass_tensor: needs a defined inner tensor and a subclass object");
  // Same memory and metadata as inner; the DispatchMode key routes its calls to the subclass.
  Tensor wrapper = inner.as_strided(inner.sizes(), inner.strides(), inner.storage_offset());
  detail::TensorImpl* impl = wrapper.unsafe_impl();
  impl->key_set = impl->key_set.add(DispatchKey::DispatchMode);
  impl->subclass = std::make_shared<const SubclassInfo>(SubclassInfo{std::move(subclass), unwrap_subclass(inner)});
  return wrapper;
}

TensorSubclass* subclass_of(const Tensor& t) {
  const SubclassInfo* info = subclass_info(t);
  return info ? info->subclass.get() : nullptr;
}

Tensor unwrap_subclass(const Tensor& t) {
  const SubclassInfo* info = subclass_info(t);
  return info ? info->inner : t;
}


}  // namespace opconform
