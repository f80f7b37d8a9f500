#include <algorithm>
#include <map>
#include <mutex>

#include "opconform/conformance/check.h"
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/core/error.h"

namespace opconform::conformance {
namespace {

struct CheckTable {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<Check>, std::less<>> checks;
};

CheckTable& table() {
  static CheckTable* t = [] {
    auto* created = new CheckTable();  // never destroyed: checks are used until exit
    for (auto make : {detail::make_test_schema, detail::make_test_autograd_registration, detail::make_test_faketensor,
                      detail::make_gradcheck, detail::make_gradgradcheck, detail::make_stride_invariance,
                      detail::make_determinism, detail::make_dtype_consistency, detail::make_edge_shapes,
                      detail::make_vmap_consistency, detail::make_autocast_consistency, detail::make_error_inputs,
                      detail::make_reference_agreement, detail::make_test_aot_dispatch_dynamic,
                      detail::make_memory_safety, detail::make_thread_safety}) {
      auto check = make();
      std::string name(check->name());
      created->checks.emplace(std::move(name), std::move(check));
    }
    return created;
  }();
  return *t;
}

}  // namespace

const Check& check_named(std::string_view name) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.checks.find(name);
  if (it == t.checks.end()) {
    std::string known;
    for (const auto& [n, c] : t.checks) known += (known.empty() ? "" : ", ") + n;
    throw Error(ErrorCode::kInvalidArgument, opconform::detail::concat("unknown check '", name, "' (known: ", known, ")"));
  }
  return *it->second;
}

std::vector<std::string> check_names() {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<std::string> names;
  for (const auto& [n, c] : t.checks) names.push_back(n);
  return in_run_order(std::move(names));
}

std::vector<std::string> in_run_order(std::vector<std::string> checks) {
  std::stable_partition(checks.begin(), checks.end(), [](const std::string& n) { return n == "thread_safety"; });
  return checks;
}

void register_check(std::unique_ptr<Check> check) {
  auto& t = table();
  std::lock_guard lock(t.mutex);
  std::string name(check->name());
  t.checks[name] = std::move(check);
}

}  // namespace opconform::conformance
