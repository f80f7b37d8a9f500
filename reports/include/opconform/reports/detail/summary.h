// What the HTML and Markdown reports both draw from a report: the op x check matrix (not part of
// the public API; findings, the failures grouped by cause, are reports/findings.h).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports::detail {

// The op x check matrix: ops and checks sorted by name, each cell the indices of its results
// (over devices and dtypes; empty when the op has no result for the check).
struct Matrix {
  std::vector<std::string> ops, checks;
  std::vector<std::vector<std::vector<size_t>>> cells;  // [op][check]
};
Matrix op_check_matrix(const Report& report);

// The index of the worst result of `indices` (conformance::severity; the first of equals).
size_t worst_of(const Report& report, const std::vector<size_t>& indices);
// A cell's label: ok, FAIL, skip, n/a, CRASH, TIME, ?.
std::string_view short_label(Outcome o);
// "2 passed, 1 failed": the outcomes of `indices`, counted, in enum order.
std::string outcome_counts(const Report& report, const std::vector<size_t>& indices);

}  // namespace opconform::reports::detail
