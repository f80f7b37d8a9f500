// What the HTML and Markdown reports both draw from a report: the op x check matrix and the
// failures grouped (not part of the public API).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports::detail {

// Note [Grouped failures]: a bug in one kernel usually fails the same check with the same message
// on every dtype and device, and a report that lists it twelve times hides the other bugs. The
// results that are not ok are grouped by op, check, outcome and message: one card (HTML) or
// section (Markdown) a group, with the cases (device, dtype) it holds, each with its own minimal
// input and repro line. Groups come in the order of their first result.
struct FailureGroup {
  std::vector<size_t> members;  // indices into report.results, in run order; members[0] leads
};
std::vector<FailureGroup> failure_groups(const Report& report);

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
