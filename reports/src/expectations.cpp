// Parsing and applying --expect files (expectations.h).
#include "opconform/reports/expectations.h"

#include <fnmatch.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "opconform/core/error.h"
#include "opconform/reports/findings.h"

namespace opconform::reports {
namespace {

using ::opconform::detail::concat;

// fnmatch, or the exact text (a name may hold glob characters itself), as --ops matches.
bool matches(const std::string& glob, const std::string& text) {
  return glob.empty() || glob == text || fnmatch(glob.c_str(), text.c_str(), 0) == 0;
}

// YYYY-MM-DD naming a day of the calendar (2027-02-31 is none).
bool valid_date(std::string_view d) {
  if (d.size() != 10 || d[4] != '-' || d[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (d[i] < '0' || d[i] > '9') return false;
  const auto number = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = at; i < at + n; ++i) v = v * 10 + (d[i] - '0');
    return v;
  };
  const std::chrono::year_month_day day{std::chrono::year(number(0, 4)), std::chrono::month(unsigned(number(5, 2))),
                                        std::chrono::day(unsigned(number(8, 2)))};
  return day.ok();
}

// Splits one line into NAME=VALUE fields; a value may be double-quoted. Throws naming the column.
std::vector<std::pair<std::string, std::string>> fields_of(std::string_view line, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size() || line[i] == '#') break;
    const size_t eq = line.find('=', i);
    const size_t space = line.find_first_of(" \t", i);
    OPCONFORM_CHECK(eq != std::string_view::npos && (space == std::string_view::npos || eq < space),
                    ErrorCode::kInvalidArgument, where, ": expected NAME=VALUE at column ", i + 1, ", got '",
                    line.substr(i, space == std::string_view::npos ? std::string_view::npos : space - i), "'");
    std::string name(line.substr(i, eq - i)), value;
    i = eq + 1;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      for (; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size()) {
          value += line[++i];
        } else if (line[i] == '"') {
          closed = true, ++i;
          break;
        } else {
          value += line[i];
        }
      }
      OPCONFORM_CHECK(closed, ErrorCode::kInvalidArgument, where, ": the value of '", name, "' has no closing quote");
    } else {
      const size_t end = line.find_first_of(" \t", i);
      value = std::string(line.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i));
      i = end == std::string_view::npos ? line.size() : end;
    }
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

Expectation parse_entry(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& where) {
  Expectation e;
  for (const auto& [name, value] : fields) {
    std::string* selector = name == "cause"    ? &e.cause
                            : name == "op"     ? &e.op
                            : name == "check"  ? &e.check
                            : name == "dtype"  ? &e.dtype
                            : name == "device" ? &e.device
                                               : nullptr;
    if (selector != nullptr) {
      OPCONFORM_CHECK(!value.empty(), ErrorCode::kInvalidArgument, where, ": '", name, "' is empty");
      *selector = value;
      e.selector += (e.selector.empty() ? "" : " ") + name + "=" + value;
    } else if (name == "outcome") {
      if (value != "any") {
        try {
          e.outcome = parse_outcome(value);
        } catch (const Error& error) {
          throw Error(ErrorCode::kInvalidArgument, concat(where, ": outcome: ", error.message(), ", or any"));
        }
        OPCONFORM_CHECK(*e.outcome != Outcome::passed && *e.outcome != Outcome::skipped, ErrorCode::kInvalidArgument,
                        where, ": outcome '", value, "' is never a finding (expect failed, crashed, timed_out, ",
                        "mistrusted, unsupported or any)");
      }
    } else if (name == "reason") {
      e.reason = value;
    } else if (name == "until") {
      OPCONFORM_CHECK(valid_date(value), ErrorCode::kInvalidArgument, where, ": until '", value,
                      "' is not a date YYYY-MM-DD");
      e.until = value;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  concat(where, ": unknown field '", name,
                         "' (known: cause, op, check, dtype, device, outcome, reason, until)"));
    }
  }
  OPCONFORM_CHECK(!e.selector.empty(), ErrorCode::kInvalidArgument, where,
                  ": the entry matches everything: give a cause, op, check, dtype or device");
  OPCONFORM_CHECK(!e.reason.empty(), ErrorCode::kInvalidArgument, where,
                  ": no reason: every expectation says why (reason=\"...\")");
  return e;
}

}  // namespace

bool Expectation::covers(const CaseResult& r, std::string_view key) const {
  if (r.outcome == Outcome::passed || r.outcome == Outcome::skipped) return false;
  if (outcome && *outcome != r.outcome) return false;
  return matches(op, r.op) && matches(check, r.check) && matches(dtype, r.dtype) && matches(device, r.device) &&
         (cause.empty() || matches(cause, std::string(key)));
}

std::vector<Expectation> parse_expectations(std::string_view text, std::string_view source) {
  std::vector<Expectation> out;
  int number = 0;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    ++number;
    const std::string where = concat(source, ":", number);
    const auto fields = fields_of(line, where);
    if (fields.empty()) continue;
    Expectation e = parse_entry(fields, where);
    e.line = number;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Expectation> read_expectations(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OPCONFORM_CHECK(in.good(), ErrorCode::kInvalidArgument, "--expect: cannot read '", path.string(), "'");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_expectations(text.str(), path.string());
}

std::string expected_reason(const std::vector<Expectation>& entries, const CaseResult& result, std::string_view today) {
  if (entries.empty() || result.outcome == Outcome::passed || result.outcome == Outcome::skipped) return "";
  const std::string key = result.cause_key();
  for (const Expectation& e : entries)
    if ((e.until.empty() || e.until >= today) && e.covers(result, key)) return e.reason;
  return "";
}

void apply_expectations(Report& report, const std::vector<Expectation>& entries, std::string_view today) {
  report.expectations.clear();
  for (CaseResult& r : report.results) r.expected.clear();
  // Each result's cause key once, not once per entry (330 entries x 27,857 results on ATen).
  std::vector<std::string> keys(report.results.size());
  for (size_t i = 0; i < report.results.size(); ++i)
    if (report.results[i].outcome != Outcome::passed && report.results[i].outcome != Outcome::skipped)
      keys[i] = report.results[i].cause_key();
  for (const Expectation& e : entries) {
    ExpectationEntry applied;
    applied.line = e.line, applied.selector = e.selector, applied.reason = e.reason, applied.until = e.until;
    applied.outcome = e.outcome ? std::string(conformance::to_string(*e.outcome)) : "any";
    // Dates in YYYY-MM-DD compare as text.
    const bool expired = !e.until.empty() && e.until < today;
    for (size_t i = 0; i < report.results.size(); ++i) {
      CaseResult& r = report.results[i];
      if (!e.covers(r, keys[i])) continue;
      ++applied.matched;
      if (!expired && r.expected.empty()) r.expected = e.reason;
    }
    applied.status = expired ? ExpectationEntry::Status::expired
                     : applied.matched == 0 ? ExpectationEntry::Status::stale
                                            : ExpectationEntry::Status::active;
    report.expectations.push_back(std::move(applied));
  }
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[16];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", &tm);
  return buffer;
}

std::string expectations_for(const Report& report) {
  std::ostringstream out;
  out << "# opconform expectations (docs/expectations.md), made from a report of '" << report.info.library
      << "'.\n# Fill in each reason: an entry without one is an error.\n";
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  for (const auto& list : {findings(report), gaps(report)}) {
    for (const Finding& f : list) {
      out << "\n# " << f.cause.title << " (" << f.results.size() << " results: " << compact_list(f.ops, 3) << ")\n";
      // One outcome when all its results share it, else any.
      bool one_outcome = true;
      for (size_t i : f.results) one_outcome = one_outcome && report.results[i].outcome == f.outcome;
      out << "cause=" << quoted(f.key) << " outcome=" << (one_outcome ? conformance::to_string(f.outcome) : "any")
          << " reason=\"\"\n";
    }
  }
  return out.str();
}

}  // namespace opconform::reports
