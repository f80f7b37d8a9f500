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
// Note [Library strings are data]: names and messages come from the library under test and may
// hold anything. valid_utf8(s) with every character that would act instead of showing written
// as visible text: C0 controls other than newline and tab ("\x1b"), DEL, C1 controls, bidi
// controls, U+2028/U+2029 and U+FFFE/U+FFFF ("\u202e"). XML cannot hold some of them at all,
// and in a terminal, Markdown or a page they would act (an ANSI escape recolouring the console,
// an override turning "deliaf" into "failed") or vanish instead of showing what the text held.
// Every writer, the console and the CLI's own output go through it (or one_line_text).
std::string visible_text(std::string_view s);
// visible_text(s) on one line (newline and tab written as "\n", "\t"), at most max_chars
// characters shown and the rest counted ("... (99880 more characters)"): a name in a console
// line or a table cell. Reports in JSON keep the full text.
std::string one_line_text(std::string_view s, size_t max_chars = 160);
// `seconds` with `decimals` digits after the point, independent of the C locale ("12.345").
std::string fixed(double seconds, int decimals);
// The first line of `s` (everything before the first '\n').
std::string_view first_line(std::string_view s);
// "check [device, dtype]", leaving out what is empty ("load [cpu]", "load").
std::string where(const CaseResult& r);

}  // namespace opconform::reports::detail
