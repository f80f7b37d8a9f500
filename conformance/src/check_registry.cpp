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
    using Factory = std::unique_ptr<Check> (*)();
#define OPCONFORM_CHECK_FACTORY(name) std::pair<std::string_view, Factory>{#name, detail::make_##name},
    for (auto [listed, make] : {OPCONFORM_BUILTIN_CHECKS(OPCONFORM_CHECK_FACTORY)}) {
#undef OPCONFORM_CHECK_FACTORY
      auto check = make();
      // The list's name is the check's (builtin_checks.h): one name, one check.
      OPCONFORM_CHECK(check->name() == listed, ErrorCode::kInternal, "built-in check '", listed, "' calls itself '",
                      check->name(), "'");
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
