// Grouping results by cause (findings.h).
#include "opconform/reports/findings.h"

#include <algorithm>
#include <map>

namespace opconform::reports {
namespace {

void insert_sorted(std::vector<std::string>& names, const std::string& name) {
  auto at = std::lower_bound(names.begin(), names.end(), name);
  if (at == names.end() || *at != name) names.insert(at, name);
}

template <typename Keep>
std::vector<Finding> group(const Report& report, Keep keep) {
  std::vector<Finding> out;
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < report.results.size(); ++i) {
    const CaseResult& r = report.results[i];
    if (!keep(r.outcome)) continue;
    std::string key = r.cause_key();
    auto [at, added] = index.try_emplace(key, out.size());
    if (added) {
      Finding f;
      f.key = std::move(key);
      f.cause = *r.cause();
      f.check = r.check;
      f.outcome = r.outcome;
      f.lead = i;
      out.push_back(std::move(f));
    }
    Finding& f = out[at->second];
    f.results.push_back(i);
    if (conformance::severity(r.outcome) > conformance::severity(f.outcome)) f.outcome = r.outcome;
    if (!report.results[f.lead].minimal_input && r.minimal_input) f.lead = i;
    insert_sorted(f.ops, r.op);
    if (!r.dtype.empty()) insert_sorted(f.dtypes, r.dtype);
    if (!r.device.empty()) insert_sorted(f.devices, r.device);
    if (!r.expected.empty()) ++f.expected;
  }
  // The title shown is the lead result's, beside its message.
  for (Finding& f : out) f.cause = *report.results[f.lead].cause();
  // Most results first; stable, so ties keep the order of their first result.
  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.results.size() > b.results.size(); });
  return out;
}

}  // namespace

std::vector<Finding> findings(const Report& report) {
  return group(report, [](Outcome o) {
    return o == Outcome::failed || o == Outcome::crashed || o == Outcome::timed_out || o == Outcome::mistrusted;
  });
}

std::vector<Finding> gaps(const Report& report) {
  return group(report, [](Outcome o) { return o == Outcome::unsupported; });
}

std::string compact_list(const std::vector<std::string>& names, size_t shown) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += " (+" + std::to_string(names.size() - shown) + " more)";
  return out;
}

}  // namespace opconform::reports
