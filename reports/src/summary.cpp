#include "opconform/reports/detail/summary.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "opconform/reports/detail/text.h"

namespace opconform::reports::detail {

Matrix op_check_matrix(const Report& report) {
  Matrix m;
  for (const CaseResult& r : report.results) m.ops.push_back(r.op), m.checks.push_back(r.check);
  for (auto* names : {&m.ops, &m.checks}) {
    std::sort(names->begin(), names->end());
    names->erase(std::unique(names->begin(), names->end()), names->end());
  }
  m.cells.assign(m.ops.size(), std::vector<std::vector<size_t>>(m.checks.size()));
  const auto position = [](const std::vector<std::string>& sorted, const std::string& name) {
    return static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), name) - sorted.begin());
  };
  for (size_t i = 0; i < report.results.size(); ++i) {
    const CaseResult& r = report.results[i];
    m.cells[position(m.ops, r.op)][position(m.checks, r.check)].push_back(i);
  }
  return m;
}

size_t worst_of(const Report& report, const std::vector<size_t>& indices) {
  size_t worst = indices.front();
  for (size_t i : indices)
    if (conformance::severity(report.results[i].outcome) > conformance::severity(report.results[worst].outcome)) worst = i;
  return worst;
}

std::string_view short_label(Outcome o) {
  switch (o) {
    case Outcome::passed: return "ok";
    case Outcome::failed: return "FAIL";
    case Outcome::skipped: return "skip";
    case Outcome::unsupported: return "n/a";
    case Outcome::crashed: return "CRASH";
    case Outcome::timed_out: return "TIME";
    case Outcome::mistrusted: return "?";
  }
  return "";
}

std::string outcome_counts(const Report& report, const std::vector<size_t>& indices) {
  std::string out;
  for (Outcome o : all_outcomes()) {
    const auto n = std::count_if(indices.begin(), indices.end(), [&](size_t i) { return report.results[i].outcome == o; });
    if (n > 0) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(conformance::to_string(o));
  }
  return out;
}

}  // namespace opconform::reports::detail
