// Comparing and joining reports: `opconform report diff A B` and `opconform report merge ...`.
#pragma once
#include <string>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

struct ReportDiff {
  // Findings compared by cause key (Note [One finding per cause]): "no new finding" is what a
  // vendor gates on. Each is "key: title (N results)".
  std::vector<std::string> new_findings;   // causes only in `after`
  std::vector<std::string> gone_findings;  // causes only in `before`
  // False when a report was written before causes were recorded (schema 1 or 2): its results'
  // keys are their outcomes' own, so every finding would read new; findings are then not compared.
  bool by_cause = true;
  // Results keyed by CaseResult::key() in both reports:
  std::vector<std::pair<CaseResult, CaseResult>> regressions;  // ok before (passed/skipped), not ok after
  std::vector<std::pair<CaseResult, CaseResult>> fixes;        // not ok before, ok after
  std::vector<std::pair<CaseResult, CaseResult>> changed;      // not ok in both, another outcome
  std::vector<std::string> new_ops;      // ops only in `after`
  std::vector<std::string> removed_ops;  // ops only in `before`
  bool empty() const;
};
ReportDiff diff(const Report& before, const Report& after);
// Markdown: new findings first, then findings gone, regressions, fixes, changes, new and removed ops.
std::string format_diff(const ReportDiff& d);

// Joins shard reports into one: results concatenated (sorted by op, device, dtype, check), the
// time the longest shard's, info from the first with shard "merged". Two results with the same
// key are an error naming it (overlapping shards), as are reports of different libraries. The
// shards' expectations (one --expect file) are joined by line: their matches added, an entry
// stale only when it matched nothing in any shard.
Report merge(const std::vector<Report>& shards);

}  // namespace opconform::reports
