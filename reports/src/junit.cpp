// JUnit XML (writers.h: to_junit), the format CI systems (GitLab, Jenkins, GitHub actions that
// read test reports) show as test results. Counts follow the common Ant/Surefire schema.
// Note [JUnit agrees with the exit status]: a result is a <failure> (an <error> when crashed or
// timed out) exactly when the report's FailPolicy (--fail-on) makes it fail the run; every other
// non-passing result, and each untested case, is <skipped> with its message. So a run that exits
// 0 never shows a failed test in Jenkins or GitLab, and one that exits 1 always does.
#include <map>
#include <utility>
#include <vector>
#include <sstream>

#include "opconform/reports/detail/text.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

// Escapes text for XML 1.0 content or attribute values. Control characters XML cannot hold
// are visible text already (visible_text); in attributes, tab and newline become references so
// that attribute-value normalisation keeps them.
std::string xml(std::string_view raw, bool attribute) {
  const std::string text = detail::visible_text(raw);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\'': out += attribute ? "&apos;" : "'"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      default: out += c;
    }
  }
  return out;
}

std::string attr(std::string_view s) { return xml(s, true); }
std::string text(std::string_view s) { return xml(s, false); }

// "check[device,dtype]" as writers.h documents; a load problem without a dtype is "load[cpu]".
std::string case_name(const CaseResult& r) {
  if (r.device.empty() && r.dtype.empty()) return r.check;
  return r.check + "[" + r.device + (r.dtype.empty() ? "" : "," + r.dtype) + "]";
}

enum class Kind { pass, failure, error, skipped };

// Note [JUnit agrees with the exit status].
Kind kind_of(Outcome o, const FailPolicy& policy) {
  if (policy.fails_on(o)) return o == Outcome::crashed || o == Outcome::timed_out ? Kind::error : Kind::failure;
  return o == Outcome::passed ? Kind::pass : Kind::skipped;
}

// One <testcase>: a result, or an untested case.
struct Entry {
  std::string name, classname, type, summary, body;
  Kind kind = Kind::pass;
  double seconds = 0;
};

struct Counts {
  size_t tests = 0, failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  void add(const Entry& e) {
    ++tests;
    seconds += e.seconds;
    switch (e.kind) {
      case Kind::failure: ++failures; break;
      case Kind::error: ++errors; break;
      case Kind::skipped: ++skipped; break;
      case Kind::pass: break;
    }
  }
  std::string attributes() const {
    std::ostringstream out;
    out << "tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\""
        << skipped << "\"";
    return out.str();
  }
};

Entry entry_of(const CaseResult& r, const FailPolicy& policy) {
  // The body of a <failure> or <error>: the whole message, the cause, then what replays it. The
  // message attribute ends with the cause key, so that CI can group by it (Note [One finding per
  // cause] in conformance/cause.h).
  const std::string key = r.cause_key();
  std::string body = r.message;
  if (!key.empty()) body += "\ncause: " + key;
  if (r.minimal_input) body += "\nminimal input: " + *r.minimal_input;
  if (!r.repro.empty()) body += "\nrepro: " + r.repro;
  std::string summary = std::string(detail::first_line(r.message)) + (key.empty() ? "" : " [cause " + key + "]");
  // An expected result does not fail the run (expectations.h): skipped, saying why.
  if (!r.expected.empty()) {
    return {case_name(r), r.op, "expected " + std::string(conformance::to_string(r.outcome)),
            summary + " (expected: " + r.expected + ")", body, Kind::skipped, r.seconds};
  }
  return {case_name(r), r.op, std::string(conformance::to_string(r.outcome)), summary, body, kind_of(r.outcome, policy),
          r.seconds};
}

// A stale entry (fails with --fail-on stale) or an expired one (always fails).
Entry entry_of(const ExpectationEntry& e, const std::string& file, const FailPolicy& policy) {
  const bool expired = e.status == ExpectationEntry::Status::expired;
  const std::string what = expired ? "is past its date " + e.until : "matched no result";
  return {"expectation[line " + std::to_string(e.line) + "]", "opconform.expectations", std::string(to_string(e.status)),
          file + ":" + std::to_string(e.line) + " (" + e.selector + ") " + what,
          "reason: " + e.reason, expired || policy.stale ? Kind::failure : Kind::skipped, 0};
}

Entry entry_of(const UntestedCase& c, const FailPolicy& policy) {
  std::string body = "every check was skipped, unsupported or mistrusted on this case, so nothing was tested:";
  for (const auto& reason : c.reasons) body += "\n  " + reason;
  return {"untested[" + c.device + "," + c.dtype + "]", c.op, "untested",
          "no check tested " + c.key() + " (" + std::to_string(c.reasons.size()) + " skipped, unsupported or mistrusted)", body,
          policy.untested ? Kind::failure : Kind::skipped, 0};
}

Entry interrupted_entry() {
  return {"interrupted", "opconform", "interrupted", "the run was stopped before every case ran",
          "SIGINT or SIGTERM stopped the run; this report holds only the cases that finished", Kind::failure, 0};
}

// What the run was, in every suite (the JUnit schema has <properties> per <testsuite>): CI views
// (Jenkins, GitLab) show them with the tests, and a result can be traced to the library, the
// opconform version, the seed, the command and the shard that gave it.
std::string properties(const RunInfo& info) {
  std::vector<std::pair<std::string, std::string>> list = {
      {"library", info.library}, {"library_path", info.library_path}};
  for (const auto& o : info.library_options) list.emplace_back("library_option", o);
  list.insert(list.end(), {{"against", info.against},
                           {"opconform_version", info.tool_version},
                           {"seed", info.seed == 0 ? std::string("fixed per case") : std::to_string(info.seed)},
                           {"samples", std::to_string(info.samples)},
                           {"command", info.command},
                           {"shard", info.shard.empty() ? std::string("none") : info.shard},
                           {"fail_on", to_string(info.fail_on)}});
  std::string out = "    <properties>\n";
  for (const auto& [name, value] : list)
    out += "      <property name=\"" + attr(name) + "\" value=\"" + attr(value) + "\"/>\n";
  return out + "    </properties>\n";
}

void write_case(std::ostringstream& out, const Entry& e) {
  out << "    <testcase name=\"" << attr(e.name) << "\" classname=\"" << attr(e.classname) << "\" time=\""
      << detail::fixed(e.seconds, 3) << "\"";
  switch (e.kind) {
    case Kind::pass:
      out << "/>\n";
      return;
    case Kind::skipped:
      // <skipped> has a message and no type: the outcome leads the message.
      out << ">\n      <skipped message=\"" << attr(e.type) << ": " << attr(e.summary) << "\"/>\n";
      break;
    case Kind::failure:
    case Kind::error: {
      const char* tag = e.kind == Kind::failure ? "failure" : "error";
      out << ">\n      <" << tag << " type=\"" << attr(e.type) << "\" message=\"" << attr(e.summary) << "\">"
          << text(e.body) << "</" << tag << ">\n";
      break;
    }
  }
  out << "    </testcase>\n";
}

}  // namespace

std::string to_junit(const Report& report) {
  // One suite per op, ops in order of name, cases in run order within an op, then its untested cases.
  const FailPolicy& policy = report.info.fail_on;
  std::map<std::string, std::vector<Entry>> by_op;
  Counts total;
  for (const CaseResult& r : report.results) by_op[r.op].push_back(entry_of(r, policy));
  for (const UntestedCase& c : untested_cases(report)) by_op[c.op].push_back(entry_of(c, policy));
  // An interrupted run fails (Note [JUnit agrees with the exit status]): one failing case says so.
  if (report.info.interrupted) by_op["opconform"].push_back(interrupted_entry());
  for (const ExpectationEntry& e : report.expectations)
    if (e.status != ExpectationEntry::Status::active)
      by_op["opconform.expectations"].push_back(entry_of(e, report.info.expectations_file, policy));
  for (const auto& [op, entries] : by_op)
    for (const Entry& e : entries) total.add(e);
  const std::string props = properties(report.info);
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"opconform " << attr(report.info.library) << "\" " << total.attributes() << " time=\""
      << detail::fixed(report.seconds, 3) << "\">\n";
  for (const auto& [op, results] : by_op) {
    Counts counts;
    for (const Entry& e : results) counts.add(e);
    out << "  <testsuite name=\"" << attr(op) << "\" " << counts.attributes() << " time=\""
        << detail::fixed(counts.seconds, 3) << "\"";
    if (!report.info.started_at.empty()) out << " timestamp=\"" << attr(report.info.started_at) << "\"";
    out << ">\n" << props;
    for (const Entry& e : results) write_case(out, e);
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace opconform::reports
