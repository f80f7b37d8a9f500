// Comparing two reports and joining shards (diff_merge.h).
#include "opconform/reports/diff_merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "opconform/core/error.h"
#include "opconform/reports/detail/markdown.h"
#include "opconform/reports/detail/text.h"
#include "opconform/reports/findings.h"

namespace opconform::reports {
namespace {

// The identity of a result as a tuple: key() is for people, this cannot collide whatever the
// names hold. The order (op, device, dtype, check) is merge's documented sort order.
using Key = std::tuple<std::string, std::string, std::string, std::string>;
Key key_of(const CaseResult& r) { return {r.op, r.device, r.dtype, r.check}; }

std::map<Key, const CaseResult*> index(const Report& report) {
  std::map<Key, const CaseResult*> by_key;
  for (const CaseResult& r : report.results) by_key.try_emplace(key_of(r), &r);  // the first one counts
  return by_key;
}

std::set<std::string> ops_of(const Report& report) {
  std::set<std::string> ops;
  for (const CaseResult& r : report.results) ops.insert(r.op);
  return ops;
}

using detail::md_cell;
using detail::md_code;
using Pairs = std::vector<std::pair<CaseResult, CaseResult>>;

void write_table(std::ostringstream& out, const char* title, const Pairs& pairs, bool details) {
  if (pairs.empty()) return;
  out << "## " << title << " (" << pairs.size() << ")\n\n"
      << "| op | check | device | dtype | before | after |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& [before, after] : pairs) {
    out << "| " << md_cell(md_code(after.op)) << " | " << md_cell(md_code(after.check)) << " | "
        << md_cell(md_code(after.device)) << " | " << md_cell(md_code(after.dtype)) << " | " << before.outcome
        << " | **" << after.outcome << "** |\n";
  }
  out << "\n";
  if (!details) return;
  // What went wrong now, one line each, with the line that replays it.
  for (const auto& [before, after] : pairs) {
    out << "- " << md_code(after.op) << " " << md_code(detail::where(after));
    if (!after.message.empty()) out << ": " << md_code(detail::first_line(after.message));
    if (!after.repro.empty()) out << " — repro " << md_code(after.repro);
    out << "\n";
  }
  out << "\n";
}

void write_ops(std::ostringstream& out, const char* title, const std::vector<std::string>& ops) {
  if (ops.empty()) return;
  out << "## " << title << " (" << ops.size() << ")\n\n";
  for (const auto& op : ops) out << "- " << md_code(op) << "\n";
  out << "\n";
}

// "report 2" or "report 2 (shard 2/4)", for merge's errors.
std::string shard_name(const std::vector<Report>& shards, size_t s) {
  std::string name = "report " + std::to_string(s + 1);
  if (!shards[s].info.shard.empty()) name += " (shard " + shards[s].info.shard + ")";
  return name;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

bool ReportDiff::empty() const {
  return new_findings.empty() && gone_findings.empty() && regressions.empty() && fixes.empty() && changed.empty() && new_ops.empty() && removed_ops.empty();
}

ReportDiff diff(const Report& before, const Report& after) {
  ReportDiff d;
  const auto old_results = index(before);
  for (const auto& [key, now] : index(after)) {  // key order: sorted by op, device, dtype, check
    auto it = old_results.find(key);
    if (it == old_results.end()) continue;
    const CaseResult& was = *it->second;
    const bool was_ok = detail::is_ok(was.outcome), now_ok = detail::is_ok(now->outcome);
    if (was_ok && !now_ok) {
      d.regressions.emplace_back(was, *now);
    } else if (!was_ok && now_ok) {
      d.fixes.emplace_back(was, *now);
    } else if (!was_ok && !now_ok && was.outcome != now->outcome) {
      d.changed.emplace_back(was, *now);
    }
  }
  // By cause: a finding is new when no finding of `before` has its key. Only where both reports
  // recorded causes (an older report's keys are its outcomes', never the new ones).
  const auto records_causes = [](const Report& r) {
    return std::all_of(r.results.begin(), r.results.end(), [](const CaseResult& c) {
      return detail::is_ok(c.outcome) || c.outcome == Outcome::unsupported || c.check == "load" || c.recorded_cause;
    });
  };
  d.by_cause = records_causes(before) && records_causes(after);
  const auto old_findings = d.by_cause ? findings(before) : std::vector<Finding>{};
  const auto now_findings = d.by_cause ? findings(after) : std::vector<Finding>{};
  const auto only_in = [](const std::vector<Finding>& list, const std::vector<Finding>& other) {
    std::set<std::string> keys;
    for (const Finding& f : other) keys.insert(f.key);
    std::vector<std::string> out;
    for (const Finding& f : list)
      if (!keys.count(f.key)) out.push_back(f.key + ": " + f.cause.title + " (" + plural(f.results.size(), "result", "results") + ")");
    return out;
  };
  d.new_findings = only_in(now_findings, old_findings);
  d.gone_findings = only_in(old_findings, now_findings);
  const auto old_ops = ops_of(before), new_ops = ops_of(after);
  std::set_difference(new_ops.begin(), new_ops.end(), old_ops.begin(), old_ops.end(), std::back_inserter(d.new_ops));
  std::set_difference(old_ops.begin(), old_ops.end(), new_ops.begin(), new_ops.end(), std::back_inserter(d.removed_ops));
  return d;
}

std::string format_diff(const ReportDiff& d) {
  std::ostringstream out;
  out << "# opconform report diff\n\n";
  if (!d.by_cause)
    out << "Findings not compared by cause: a report was written before causes were recorded (schema 1 or 2).\n\n";
  if (d.empty()) {
    out << "No differences.\n";
    return out.str();
  }
  out << plural(d.new_findings.size(), "new finding", "new findings") << ", "
      << plural(d.gone_findings.size(), "finding gone", "findings gone") << ", "
      << plural(d.regressions.size(), "regression", "regressions") << ", " << plural(d.fixes.size(), "fix", "fixes")
      << ", " << d.changed.size() << " changed, " << plural(d.new_ops.size(), "new op", "new ops") << ", "
      << plural(d.removed_ops.size(), "removed op", "removed ops") << ".\n\n";
  write_ops(out, "New findings", d.new_findings);
  write_ops(out, "Findings gone", d.gone_findings);
  write_table(out, "Regressions", d.regressions, true);
  write_table(out, "Fixes", d.fixes, false);
  write_table(out, "Changed", d.changed, true);
  write_ops(out, "New ops", d.new_ops);
  write_ops(out, "Removed ops", d.removed_ops);
  std::string text = out.str();
  text.pop_back();  // one newline at the end, not a blank line
  return text;
}

Report merge(const std::vector<Report>& shards) {
  OPCONFORM_CHECK(!shards.empty(), ErrorCode::kInvalidArgument, "merge: no reports to merge");
  Report merged;
  merged.info = shards.front().info;
  merged.info.shard = "merged";
  merged.info.shard_source.clear();  // each shard's own
  std::map<Key, size_t> seen;  // key -> the shard it came from
  for (size_t s = 0; s < shards.size(); ++s) {
    const Report& shard = shards[s];
    OPCONFORM_CHECK(shard.info.library == merged.info.library, ErrorCode::kInvalidArgument,
                    "merge: ", shard_name(shards, s), " is of library '", shard.info.library, "', ",
                    shard_name(shards, 0), " of '", merged.info.library,
                    "': reports of different libraries cannot be merged");
    // The merged verdict (and its exit status) must be the one each shard was run with.
    OPCONFORM_CHECK(shard.info.fail_on == merged.info.fail_on, ErrorCode::kInvalidArgument, "merge: ",
                    shard_name(shards, s), " was run with --fail-on ", to_string(shard.info.fail_on), ", ",
                    shard_name(shards, 0), " with ", to_string(merged.info.fail_on),
                    ": shards of one run share one --fail-on");
    merged.seconds = std::max(merged.seconds, shard.seconds);
    merged.info.interrupted = merged.info.interrupted || shard.info.interrupted;
    OPCONFORM_CHECK(shard.info.expectations_file == merged.info.expectations_file, ErrorCode::kInvalidArgument, "merge: ",
                    shard_name(shards, s), " was run with --expect '", shard.info.expectations_file, "', ",
                    shard_name(shards, 0), " with '", merged.info.expectations_file,
                    "': shards of one run share one expectations file");
    for (const ExpectationEntry& e : shard.expectations) {
      auto at = std::find_if(merged.expectations.begin(), merged.expectations.end(),
                             [&](const ExpectationEntry& m) { return m.line == e.line; });
      if (at == merged.expectations.end()) {
        merged.expectations.push_back(e);
        continue;
      }
      at->matched += e.matched;
      // Expired in one shard (a run across midnight) is expired; matched in any is not stale.
      if (e.status == ExpectationEntry::Status::expired) at->status = ExpectationEntry::Status::expired;
      else if (at->status == ExpectationEntry::Status::stale && at->matched > 0) at->status = ExpectationEntry::Status::active;
    }
    for (const CaseResult& r : shard.results) {
      auto [it, inserted] = seen.try_emplace(key_of(r), s);
      OPCONFORM_CHECK(inserted, ErrorCode::kInvalidArgument, "merge: result '", r.key(), "' is in both ",
                      shard_name(shards, it->second), " and ", shard_name(shards, s), " (overlapping shards?)");
      merged.results.push_back(r);
    }
  }
  std::stable_sort(merged.results.begin(), merged.results.end(),
                   [](const CaseResult& a, const CaseResult& b) { return key_of(a) < key_of(b); });
  return merged;
}

}  // namespace opconform::reports
