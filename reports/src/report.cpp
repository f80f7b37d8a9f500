// The result model (report.h) and the helpers every writer shares (detail/text.h).
#include "opconform/reports/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "opconform/core/error.h"
#include "opconform/reports/detail/text.h"

namespace opconform::reports {

std::string CaseResult::key() const { return op + " " + detail::where(*this); }

std::optional<conformance::Cause> CaseResult::cause() const {
  if (outcome == Outcome::passed) return std::nullopt;
  if (recorded_cause) return recorded_cause;
  // A load problem is about loading, whatever its outcome says.
  if (check == "load") return conformance::Cause{conformance::FindingKind::load, "", "the library or op did not load"};
  return conformance::cause_for_outcome(outcome, check);
}

std::string CaseResult::cause_key() const {
  const auto c = cause();
  return c ? conformance::cause_key(op, check, *c) : std::string();
}

std::string_view to_string(ExpectationEntry::Status status) {
  switch (status) {
    case ExpectationEntry::Status::active: return "active";
    case ExpectationEntry::Status::stale: return "stale";
    case ExpectationEntry::Status::expired: return "expired";
  }
  return "active";
}

size_t Report::count(Outcome o) const {
  return static_cast<size_t>(std::count_if(results.begin(), results.end(), [o](const CaseResult& r) { return r.outcome == o; }));
}

bool FailPolicy::fails_on(Outcome o) const { return std::find(outcomes.begin(), outcomes.end(), o) != outcomes.end(); }

std::string to_string(const FailPolicy& policy) {
  std::string out;
  for (Outcome o : policy.outcomes) out += (out.empty() ? "" : ",") + std::string(conformance::to_string(o));
  if (policy.untested) out += out.empty() ? "untested" : ",untested";
  if (policy.stale) out += out.empty() ? "stale" : ",stale";
  return out;
}

FailPolicy parse_fail_policy(std::string_view list) {
  FailPolicy policy{{}, false};
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view name = list.substr(start, comma - start);
    if (name == "untested") policy.untested = true;
    else if (name == "stale") policy.stale = true;
    else if (!name.empty()) {
      try {
        const Outcome o = parse_outcome(name);
        if (!policy.fails_on(o)) policy.outcomes.push_back(o);
      } catch (const Error& e) {
        // parse_outcome's message names the known outcomes; untested is one more name here.
        throw Error(e.code(), ::opconform::detail::concat("--fail-on: ", e.message(), ", or untested, stale"));
      }
    }
    start = comma + 1;
  }
  OPCONFORM_CHECK(!policy.outcomes.empty() || policy.untested || policy.stale, ErrorCode::kInvalidArgument,
                  "--fail-on: an empty list (name at least one outcome, untested or stale)");
  return policy;
}

std::string UntestedCase::key() const { return op + " [" + device + ", " + dtype + "]"; }

// Note [Untested is not a pass]: a check that was skipped (not applicable), unsupported (no
// kernel) or mistrusted (its comparisons could not tell a right kernel from one returning zeros)
// proved nothing; a case where that is true of every check proved nothing at all, however
// green its row looks. It is a verdict of its own, computed here from the results (never stored
// apart from them, so no writer can disagree), shown by every writer and the console, and it fails
// the run by default (FailPolicy::untested); `--fail-on` without "untested" relaxes it.
std::vector<UntestedCase> untested_cases(const Report& report) {
  struct Seen {
    UntestedCase c;
    bool tested = false;
  };
  std::vector<Seen> cases;  // in run order
  std::map<std::string, size_t> index;
  for (const CaseResult& r : report.results) {
    if (r.check == "load") continue;
    UntestedCase c{r.op, r.device, r.dtype, {}};
    auto [it, added] = index.try_emplace(c.key(), cases.size());
    if (added) cases.push_back({std::move(c), false});
    Seen& seen = cases[it->second];
    // Mistrusted ran but proved nothing (every compared value zero or NaN): not a test either.
    if (r.outcome != Outcome::skipped && r.outcome != Outcome::unsupported && r.outcome != Outcome::mistrusted)
      seen.tested = true;
    else
      seen.c.reasons.push_back(r.check + ": " + std::string(conformance::to_string(r.outcome)) + " — " +
                               std::string(detail::first_line(r.message)));
  }
  std::vector<UntestedCase> out;
  for (auto& s : cases)
    if (!s.tested) out.push_back(std::move(s.c));
  return out;
}

bool fails(const Report& report) { return fails(report, report.info.fail_on); }

bool fails(const Report& report, const FailPolicy& policy) {
  const bool a_result_fails = std::any_of(report.results.begin(), report.results.end(), [&](const CaseResult& r) {
    return policy.fails_on(r.outcome) && r.expected.empty();
  });
  const auto has = [&](ExpectationEntry::Status s) {
    return std::any_of(report.expectations.begin(), report.expectations.end(),
                       [s](const ExpectationEntry& e) { return e.status == s; });
  };
  // A shard sees only its share of the ops: an entry whose ops ran in another shard is stale here
  // and not in the merged report, which alone judges staleness.
  const bool a_shard = !report.info.shard.empty() && report.info.shard != "merged";
  return report.info.interrupted || a_result_fails || (policy.untested && !untested_cases(report).empty()) ||
         has(ExpectationEntry::Status::expired) || (policy.stale && !a_shard && has(ExpectationEntry::Status::stale));
}

Outcome parse_outcome(std::string_view name) {
  for (Outcome o : detail::all_outcomes()) {
    if (conformance::to_string(o) == name) return o;
  }
  std::string known;
  for (Outcome o : detail::all_outcomes()) {
    if (!known.empty()) known += ", ";
    known += conformance::to_string(o);
  }
  throw Error(ErrorCode::kInvalidArgument,
              ::opconform::detail::concat("unknown outcome '", name, "' (known: ", known, ")"));
}

namespace detail {

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> outcomes = {Outcome::passed,      Outcome::failed,  Outcome::skipped,
                                                Outcome::unsupported, Outcome::crashed, Outcome::timed_out,
                                                Outcome::mistrusted};
  return outcomes;
}

bool is_ok(Outcome o) { return o == Outcome::passed || o == Outcome::skipped; }

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t min = 0;  // the smallest code point of this length: longer (overlong) forms are invalid
    if (c < 0x80) {
      out += s[i++];
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000;
    }
    bool valid = len != 0 && i + len <= s.size();
    uint32_t cp = len == 0 ? 0 : c & (0x7F >> len);
    for (size_t k = 1; valid && k < len; ++k) {
      const auto cont = static_cast<unsigned char>(s[i + k]);
      valid = (cont & 0xC0) == 0x80;
      cp = (cp << 6) | (cont & 0x3F);
    }
    valid = valid && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (valid) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the one bad byte; decoding resumes after it
      ++i;
    }
  }
  return out;
}

namespace {

// Code points that act instead of showing: C1 controls (U+009B starts a terminal escape), bidi
// controls (U+202E shows "deliaf" as "failed"), the Unicode line and paragraph separators, and
// U+FFFE/U+FFFF, which XML 1.0 forbids (a junit.xml holding one does not parse).
bool acts_instead_of_showing(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0x2028 || cp == 0x2029 || cp == 0xFFFE || cp == 0xFFFF;
}

// The code point of the valid UTF-8 sequence at s[i] and its length.
std::pair<uint32_t, size_t> decode(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1};
  const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  uint32_t cp = c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return {cp, len};
}

void append_hex(std::string& out, uint32_t v, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int d = digits - 1; d >= 0; --d) out += kHex[(v >> (4 * d)) & 0xF];
}

}  // namespace

std::string visible_text(std::string_view raw) {
  const std::string s = valid_utf8(raw);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto [cp, len] = decode(s, i);
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F) {
      out += "\\x";
      append_hex(out, cp, 2);
    } else if (acts_instead_of_showing(cp)) {
      out += "\\u";
      append_hex(out, cp, 4);
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out;
}

std::string one_line_text(std::string_view raw, size_t max_chars) {
  std::string out;
  for (char c : visible_text(raw)) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  // Count code points, not bytes, and cut on a boundary.
  size_t chars = 0, cut = std::string::npos;
  for (size_t i = 0; i < out.size(); ++i) {
    if ((static_cast<unsigned char>(out[i]) & 0xC0) == 0x80) continue;
    if (chars == max_chars) cut = i;
    ++chars;
  }
  if (cut == std::string::npos) return out;
  return out.substr(0, cut) + "... (" + std::to_string(chars - max_chars) + " more characters)";
}

std::string fixed(double seconds, int decimals) {
  // A time is never NaN or infinite when measured; if one arrives anyway, 0 keeps every format valid.
  if (!std::isfinite(seconds)) seconds = 0;
  char buffer[512];  // fixed notation of 1e308 needs 309 digits
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, seconds, std::chars_format::fixed, decimals);
  if (ec != std::errc()) return "0";
  return std::string(buffer, end);
}

std::string_view first_line(std::string_view s) { return s.substr(0, s.find('\n')); }

std::string where(const CaseResult& r) {
  std::string out = r.check;
  if (r.device.empty() && r.dtype.empty()) return out;
  out += " [" + r.device;
  if (!r.dtype.empty()) out += ", " + r.dtype;
  return out + "]";
}

}  // namespace detail
}  // namespace opconform::reports
