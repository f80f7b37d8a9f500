// Expectations: the known findings of a library, written down so that CI gates on "no new
// finding" (`opconform check --expect FILE`), as PyTorch's skip and xfail lists do, but typed and
// each with its reason.
//
// The format (docs/expectations.md): one entry a line; '#' starts a comment; fields NAME=VALUE
// separated by spaces, a value with spaces in double quotes ("\"" and "\\" escape inside them).
//   cause=GLOB op=GLOB check=GLOB dtype=GLOB device=GLOB   what the entry covers: at least one,
//                                                           every one given must match (fnmatch:
//                                                           '*', '?', '[...]'; or the exact text)
//   outcome=NAME      the outcome it expects: failed, crashed, timed_out, mistrusted, unsupported
//                     or any (the default)
//   reason="..."      why (required)
//   until=YYYY-MM-DD  optional: from the day after, the entry no longer covers and fails the run
// An entry covers every result that is not a pass or a skip, matches its fields and has its
// outcome. Covered results do not fail the run; an entry that covers nothing is stale (reported;
// `--fail-on stale` fails on it); one past its date is expired and fails the run.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

struct Expectation {
  int line = 0;
  std::string cause, op, check, dtype, device;  // globs; "" matches anything
  std::optional<Outcome> outcome;               // nullopt: any
  std::string reason;
  std::string until;                            // "YYYY-MM-DD" or ""
  std::string selector;                         // the matching fields as written, for reports

  // Whether the entry covers `result`, whose cause key (CaseResult::cause_key) the caller computed
  // once for every entry it asks.
  bool covers(const CaseResult& result, std::string_view cause_key) const;
};

// Parses an expectations file's text; throws opconform::Error (kInvalidArgument) naming
// `source`:line and what is wrong (an unknown field, a missing reason, a bad date or outcome).
std::vector<Expectation> parse_expectations(std::string_view text, std::string_view source);
// Reads and parses a file; throws opconform::Error naming the path when it cannot be read.
std::vector<Expectation> read_expectations(const std::filesystem::path& path);

// Marks the results each entry covers (CaseResult::expected) and records every entry with its
// status in report.expectations. `today` is "YYYY-MM-DD" (today_utc()). The first entry that
// covers a result is its reason.
void apply_expectations(Report& report, const std::vector<Expectation>& entries, std::string_view today);
// The reason of the first entry that covers `result` and is not past its date on `today` ("" when
// none): what apply_expectations marks, for one result as it comes (the console's lines).
std::string expected_reason(const std::vector<Expectation>& entries, const CaseResult& result, std::string_view today);
// Today's date in UTC, "YYYY-MM-DD".
std::string today_utc();

// An expectations file covering every finding of `report` (one entry per cause key, outcome and
// a reason to fill in): the starting point a vendor edits (`opconform report expect`).
std::string expectations_for(const Report& report);

}  // namespace opconform::reports
