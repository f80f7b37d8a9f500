// Findings: the results of a report grouped by cause (Note [One finding per cause] in
// conformance/cause.h). One finding is one thing to fix, however many ops, dtypes, devices and
// samples show it; every writer and the console draw findings from here, never from their own
// grouping.
#pragma once
#include <string>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

struct Finding {
  std::string key;    // CaseResult::cause_key(), shared by every result of the finding
  conformance::Cause cause;  // the lead result's cause (its title, shown beside the lead's message)
  std::string check;
  Outcome outcome = Outcome::failed;  // the worst outcome among its results (conformance::severity)
  std::vector<std::string> ops, dtypes, devices;  // what it covers, each sorted, without repeats
  std::vector<size_t> results;  // indices into Report::results, in run order
  size_t lead = 0;              // the result shown first: the first with a minimal input, else results[0]
  size_t expected = 0;          // how many of its results an --expect entry covers
};

// The findings of results that fail a run or prove nothing (failed, crashed, timed_out,
// mistrusted), most results first, ties in the order of their first result.
std::vector<Finding> findings(const Report& report);
// The same grouping of unsupported results: what the library does not implement, said once per
// cause, apart from the failures.
std::vector<Finding> gaps(const Report& report);

// "aten::add.Tensor, aten::mul.Tensor (+3 more)": a list cut for display after `shown` entries.
std::string compact_list(const std::vector<std::string>& names, size_t shown = 4);

}  // namespace opconform::reports
