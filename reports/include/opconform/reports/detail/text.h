// Helpers shared by the writers (not part of the public API): outcome order, number and text
// formatting that every file format needs the same way.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports::detail {

// Every outcome, in the enum's order (the order of summaries and tables).
const std::vector<Outcome>& all_outcomes();
// passed and skipped are ok (CheckResult::ok()); anything else is worth a line in a report.
bool is_ok(Outcome o);

// `s` with each invalid UTF-8 sequence replaced by U+FFFD: kernel messages may hold any bytes,
// and JSON, XML and HTML all require valid UTF-8.
std::string valid_utf8(std::string_view s);
// valid_utf8(s) with control characters other than newline and tab written as visible text
// ("\x1b"): XML cannot hold them at all, and in a terminal, Markdown or a page they would act
// (an ANSI escape recolouring the console) or vanish instead of showing what the message held.
std::string visible_text(std::string_view s);
// `seconds` with `decimals` digits after the point, independent of the C locale ("12.345").
std::string fixed(double seconds, int decimals);
// The first line of `s` (everything before the first '\n').
std::string_view first_line(std::string_view s);
// "check [device, dtype]", leaving out what is empty ("load [cpu]", "load").
std::string where(const CaseResult& r);

}  // namespace opconform::reports::detail
