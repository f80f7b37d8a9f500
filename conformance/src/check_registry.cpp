#include <algorithm>
#include <map>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/error.h"

namespace opconform::conformance {
namespace {

// The built-in checks by name: made once, never changed (so read without a lock), never destroyed
// (checks are used until exit).
using CheckTable = std::map<std::string, std::unique_ptr<Check>, std::less<>>;

const CheckTable& table() {
  static const CheckTable* t = [] {
    auto* created = new CheckTable();
    for (auto make : {detail::make_test_schema, detail::make_test_autograd_registration, detail::make_test_faketensor,
                      detail::make_gradcheck, detail::make_gradgradcheck, detail::make_stride_invariance,
                      detail::make_determinism, detail::make_dtype_consistency, detail::make_edge_shapes,
                      detail::make_vmap_consistency, detail::make_autocast_consistency, detail::make_error_inputs,
                      detail::make_reference_agreement, detail::make_test_aot_dispatch_dynamic,
                      detail::make_memory_safety, detail::make_thread_safety, detail::make_device_consistency}) {
      auto check = make();
      std::string name(check->name());
      created->emplace(std::move(name), std::move(check));
    }
    return created;
  }();
  return *t;
}

}  // namespace

const Check& check_named(std::string_view name) {
  const auto& t = table();
  auto it = t.find(name);
  if (it == t.end()) {
    std::string known;
    for (const auto& [n, c] : t) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kInvalidArgument, opconform::detail::concat("unknown check '", name, "' (known: ", known, ")"));
  }
  return *it->second;
}

std::vector<std::string> check_names() {
  std::vector<std::string> names;
  for (const auto& [n, c] : table()) names.push_back(n);
  return in_run_order(std::move(names));
}

std::vector<std::string> in_run_order(std::vector<std::string> checks) {
  std::stable_partition(checks.begin(), checks.end(), [](const std::string& n) { return n == "thread_safety"; });
  return checks;
}

}  // namespace opconform::conformance
