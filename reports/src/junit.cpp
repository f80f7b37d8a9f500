// JUnit XML (writers.h: to_junit), the format CI systems (GitLab, Jenkins, GitHub actions that
// read test reports) show as test results. Counts follow the common Ant/Surefire schema:
// failures (failed, mistrusted), errors (crashed, timed_out), skipped (skipped, unsupported).
#include <map>
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

struct Counts {
  size_t tests = 0, failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  void add(const CaseResult& r) {
    ++tests;
    seconds += r.seconds;
    switch (r.outcome) {
      case Outcome::failed: case Outcome::mistrusted: ++failures; break;
      case Outcome::crashed: case Outcome::timed_out: ++errors; break;
      case Outcome::skipped: case Outcome::unsupported: ++skipped; break;
      case Outcome::passed: break;
    }
  }
  std::string attributes() const {
    std::ostringstream out;
    out << "tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\""
        << skipped << "\"";
    return out.str();
  }
};

// The body of a <failure> or <error>: the whole message, then what replays it.
std::string details(const CaseResult& r) {
  std::string body = r.message;
  if (r.minimal_input) body += "\nminimal input: " + *r.minimal_input;
  if (!r.repro.empty()) body += "\nrepro: " + r.repro;
  return text(body);
}

void write_case(std::ostringstream& out, const CaseResult& r) {
  out << "    <testcase name=\"" << attr(case_name(r)) << "\" classname=\"" << attr(r.op) << "\" time=\""
      << detail::fixed(r.seconds, 3) << "\"";
  const std::string outcome(conformance::to_string(r.outcome));
  const std::string summary = attr(detail::first_line(r.message));
  switch (r.outcome) {
    case Outcome::passed:
      out << "/>\n";
      return;
    case Outcome::skipped:
    case Outcome::unsupported:
      // <skipped> has a message and no type: the outcome leads the message.
      out << ">\n      <skipped message=\"" << outcome << ": " << summary << "\"/>\n";
      break;
    case Outcome::failed:
    case Outcome::mistrusted:
      out << ">\n      <failure type=\"" << outcome << "\" message=\"" << summary << "\">" << details(r) << "</failure>\n";
      break;
    case Outcome::crashed:
    case Outcome::timed_out:
      out << ">\n      <error type=\"" << outcome << "\" message=\"" << summary << "\">" << details(r) << "</error>\n";
      break;
  }
  out << "    </testcase>\n";
}

}  // namespace

std::string to_junit(const Report& report) {
  // One suite per op, ops in order of name, cases in run order within an op.
  std::map<std::string, std::vector<const CaseResult*>> by_op;
  Counts total;
  for (const CaseResult& r : report.results) {
    by_op[r.op].push_back(&r);
    total.add(r);
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<testsuites name=\"opconform " << attr(report.info.library) << "\" " << total.attributes() << " time=\""
      << detail::fixed(report.seconds, 3) << "\">\n";
  for (const auto& [op, results] : by_op) {
    Counts counts;
    for (const CaseResult* r : results) counts.add(*r);
    out << "  <testsuite name=\"" << attr(op) << "\" " << counts.attributes() << " time=\""
        << detail::fixed(counts.seconds, 3) << "\"";
    if (!report.info.started_at.empty()) out << " timestamp=\"" << attr(report.info.started_at) << "\"";
    out << ">\n";
    for (const CaseResult* r : results) write_case(out, *r);
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
  return out.str();
}

}  // namespace opconform::reports
