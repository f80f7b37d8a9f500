// The stored form of a report (writers.h: to_json, report_from_json); the schema is
// reports/schema/report.schema.json. Keys are written in a fixed order, doubles in the shortest
// form that reads back to the same value, so the same report always gives the same bytes.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "opconform/core/error.h"
#include "opconform/reports/detail/text.h"
#include "opconform/reports/findings.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

using OrderedJson = nlohmann::ordered_json;
using Json = nlohmann::json;

// A time is never NaN or infinite when measured; JSON has no such numbers (nlohmann would write
// null, which would not read back), so one that arrives anyway is stored as 0.
double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "report JSON: " + (path.empty() ? what : path + ": " + what));
}

std::string type_name(const Json& j) {
  if (j.is_number()) return "a number";
  if (j.is_null()) return "null";
  std::string name = j.type_name();
  return (name == "object" || name == "array" ? "an " : "a ") + name;
}

// Field readers: each names the path of what is wrong ("results[3].outcome").
const Json& field(const Json& object, const char* key, const std::string& path) {
  auto it = object.find(key);
  if (it == object.end()) fail(path, std::string("missing field '") + key + "'");
  return *it;
}

std::string join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }

const Json& object_field(const Json& object, const char* key, const std::string& path) {
  const Json& j = field(object, key, path);
  if (!j.is_object()) fail(join(path, key), "expected an object, got " + type_name(j));
  return j;
}

std::string string_field(const Json& object, const char* key, const std::string& path) {
  const Json& j = field(object, key, path);
  if (!j.is_string()) fail(join(path, key), "expected a string, got " + type_name(j));
  return j.get<std::string>();
}

double number_field(const Json& object, const char* key, const std::string& path) {
  const Json& j = field(object, key, path);
  if (!j.is_number()) fail(join(path, key), "expected a number, got " + type_name(j));
  return j.get<double>();
}

uint64_t unsigned_field(const Json& object, const char* key, const std::string& path, uint64_t max) {
  const Json& j = field(object, key, path);
  // nlohmann reads every integer >= 0 as number_unsigned; a negative one is number_integer.
  if (!j.is_number_unsigned()) fail(join(path, key), "expected an integer >= 0, got " + (j.is_number() ? j.dump() : type_name(j)));
  const auto v = j.get<uint64_t>();
  if (v > max) fail(join(path, key), "value " + std::to_string(v) + " is too large (at most " + std::to_string(max) + ")");
  return v;
}

RunInfo read_info(const Json& j, const std::string& path) {
  RunInfo info;
  info.tool_version = string_field(j, "tool_version", path);
  info.library = string_field(j, "library", path);
  info.library_path = string_field(j, "library_path", path);
  info.against = string_field(j, "against", path);
  info.command = string_field(j, "command", path);
  info.started_at = string_field(j, "started_at", path);
  info.seed = unsigned_field(j, "seed", path, std::numeric_limits<uint64_t>::max());
  info.samples = static_cast<int>(unsigned_field(j, "samples", path, std::numeric_limits<int>::max()));
  info.shard = string_field(j, "shard", path);
  if (j.contains("shard_source")) info.shard_source = string_field(j, "shard_source", path);  // only when sharded
  // Reports written before the policy was recorded failed on failed, crashed and timed_out.
  if (j.contains("fail_on")) {
    try {
      info.fail_on = parse_fail_policy(string_field(j, "fail_on", path));
    } catch (const Error& e) {
      fail(join(path, "fail_on"), e.message());
    }
  } else {
    info.fail_on = FailPolicy{FailPolicy{}.outcomes, false};
  }
  if (j.contains("sandbox")) info.sandbox = string_field(j, "sandbox", path);  // older reports have none
  if (j.contains("library_options")) {  // written only when the plugin was given options
    const Json& list = field(j, "library_options", path);
    if (!list.is_array()) fail(join(path, "library_options"), "expected an array, got " + type_name(list));
    for (const Json& o : list) {
      if (!o.is_string()) fail(join(path, "library_options"), "expected strings, got " + type_name(o));
      info.library_options.push_back(o.get<std::string>());
    }
  }
  if (j.contains("interrupted")) {
    if (!j.at("interrupted").is_boolean()) fail(join(path, "interrupted"), "expected true or false");
    info.interrupted = j.at("interrupted").get<bool>();
  }
  if (j.contains("expectations_file")) info.expectations_file = string_field(j, "expectations_file", path);
  return info;
}

CaseResult read_result(const Json& j, const std::string& path) {
  if (!j.is_object()) fail(path, "expected an object, got " + type_name(j));
  CaseResult r;
  r.op = string_field(j, "op", path);
  r.check = string_field(j, "check", path);
  r.device = string_field(j, "device", path);
  r.dtype = string_field(j, "dtype", path);
  const std::string outcome = string_field(j, "outcome", path);
  try {
    r.outcome = parse_outcome(outcome);
  } catch (const Error& e) {
    fail(path + ".outcome", e.message());
  }
  r.message = string_field(j, "message", path);
  r.repro = string_field(j, "repro", path);
  const Json& minimal = field(j, "minimal_input", path);
  if (minimal.is_string()) {
    r.minimal_input = minimal.get<std::string>();
  } else if (!minimal.is_null()) {
    fail(path + ".minimal_input", "expected a string or null, got " + type_name(minimal));
  }
  r.seconds = number_field(j, "seconds", path);
  // Schema 1 and 2 said "no_backward" in a field of its own; schema 3 says it in the cause.
  if (j.contains("reason") && string_field(j, "reason", path) == "no_backward" && !j.contains("cause"))
    r.recorded_cause = conformance::Cause{conformance::FindingKind::not_implemented,
                                          std::string(conformance::kNoBackwardSubject),
                                          "no backward registered (inference only)"};
  // Schema 3: the cause (null for a pass) and the expectation that covers the result.
  if (j.contains("cause") && !j.at("cause").is_null()) {
    const Json& c = object_field(j, "cause", path);
    const std::string cpath = join(path, "cause");
    conformance::Cause cause;
    const std::string kind = string_field(c, "kind", cpath);
    const auto parsed = conformance::parse_finding_kind(kind);
    if (!parsed) fail(join(cpath, "kind"), "unknown finding kind '" + kind + "'");
    cause.kind = *parsed;
    cause.subject = string_field(c, "subject", cpath);
    cause.title = string_field(c, "title", cpath);
    if (c.contains("library_wide")) {
      if (!c.at("library_wide").is_boolean()) fail(join(cpath, "library_wide"), "expected true or false");
      cause.library_wide = c.at("library_wide").get<bool>();
    }
    r.recorded_cause = std::move(cause);
  }
  if (j.contains("expected")) r.expected = string_field(j, "expected", path);
  return r;
}

// The recorded cause of `r` (which has one).
OrderedJson cause_object(const CaseResult& r) {
  const conformance::Cause& c = *r.recorded_cause;
  return {{"key", r.cause_key()},
          {"kind", conformance::to_string(c.kind)},
          {"subject", c.subject},
          {"title", c.title},
          {"library_wide", c.library_wide}};
}

OrderedJson finding_object(const Report& report, const Finding& f) {
  const CaseResult& lead = report.results[f.lead];
  return {{"key", f.key},
          {"title", f.cause.title},
          {"check", f.check},
          {"kind", conformance::to_string(f.cause.kind)},
          {"subject", f.cause.subject},
          {"outcome", conformance::to_string(f.outcome)},
          {"ops", f.ops},
          {"dtypes", f.dtypes},
          {"devices", f.devices},
          {"results", f.results.size()},
          {"expected", f.expected},
          {"minimal_input", lead.minimal_input ? OrderedJson(*lead.minimal_input) : OrderedJson(nullptr)},
          {"repro", lead.repro},
          {"message", lead.message}};
}

std::vector<ExpectationEntry> read_expectation_entries(const Json& list) {
  if (!list.is_array()) fail("expectations", "expected an array, got " + type_name(list));
  std::vector<ExpectationEntry> out;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string path = "expectations[" + std::to_string(k) + "]";
    if (!list[k].is_object()) fail(path, "expected an object, got " + type_name(list[k]));
    ExpectationEntry e;
    e.line = static_cast<int>(unsigned_field(list[k], "line", path, std::numeric_limits<int>::max()));
    e.selector = string_field(list[k], "selector", path);
    e.outcome = string_field(list[k], "outcome", path);
    e.reason = string_field(list[k], "reason", path);
    e.until = string_field(list[k], "until", path);
    e.matched = unsigned_field(list[k], "matched", path, std::numeric_limits<uint64_t>::max());
    const std::string status = string_field(list[k], "status", path);
    if (status == "active") e.status = ExpectationEntry::Status::active;
    else if (status == "stale") e.status = ExpectationEntry::Status::stale;
    else if (status == "expired") e.status = ExpectationEntry::Status::expired;
    else fail(path + ".status", "unknown status '" + status + "' (known: active, stale, expired)");
    out.push_back(std::move(e));
  }
  return out;
}

// Note [A result's JSON is small]: every result crosses the worker channel and lands in
// report.json and report.html (27,465 in the main job); a cause is written only where one was
// recorded (results that are not ok) and `expected` only where an entry covers the result, which
// kept the main job's report.json at 9.1 MB instead of 11.9 MB.
OrderedJson result_object(const CaseResult& r) {
  OrderedJson o = {{"op", r.op},
          {"check", r.check},
          {"device", r.device},
          {"dtype", r.dtype},
          {"outcome", conformance::to_string(r.outcome)},
          {"message", r.message},
          {"repro", r.repro},
          {"minimal_input", r.minimal_input ? OrderedJson(*r.minimal_input) : OrderedJson(nullptr)},
          {"seconds", finite_or_zero(r.seconds)}};
  if (r.recorded_cause) o["cause"] = cause_object(r);
  if (!r.expected.empty()) o["expected"] = r.expected;
  return o;
}

}  // namespace

std::string result_to_json_line(const CaseResult& result) {
  return result_object(result).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

CaseResult result_from_json_line(std::string_view line) {
  Json j;
  try {
    j = Json::parse(line);
  } catch (const Json::exception& e) {
    fail("result", std::string("not JSON: ") + e.what());
  }
  return read_result(j, "result");
}

std::string to_json(const Report& report) {
  const RunInfo& i = report.info;
  OrderedJson info = {{"tool_version", i.tool_version}, {"library", i.library}, {"library_path", i.library_path},
                      {"against", i.against},           {"command", i.command}, {"started_at", i.started_at},
                      {"seed", i.seed},                 {"samples", i.samples}, {"shard", i.shard},
                      {"fail_on", to_string(i.fail_on)}, {"sandbox", i.sandbox},
                      {"interrupted", i.interrupted},
                      {"expectations_file", i.expectations_file}};
  if (!i.library_options.empty()) info["library_options"] = i.library_options;
  if (!i.shard_source.empty()) info["shard_source"] = i.shard_source;  // older readers never see it unsharded
  OrderedJson summary = OrderedJson::object();
  for (Outcome o : detail::all_outcomes()) summary[std::string(conformance::to_string(o))] = report.count(o);
  const auto untested = untested_cases(report);
  summary["untested_cases"] = untested.size();
  OrderedJson untested_list = OrderedJson::array();
  for (const UntestedCase& c : untested)
    untested_list.push_back({{"op", c.op}, {"device", c.device}, {"dtype", c.dtype}, {"reasons", c.reasons}});
  OrderedJson results = OrderedJson::array();
  for (const CaseResult& r : report.results) results.push_back(result_object(r));
  // Note [One finding per cause]: derived from the results (a reader recomputes them).
  const auto found = findings(report);
  OrderedJson finding_list = OrderedJson::array(), gap_list = OrderedJson::array();
  for (const Finding& f : found) finding_list.push_back(finding_object(report, f));
  for (const Finding& f : gaps(report)) gap_list.push_back(finding_object(report, f));
  summary["findings"] = found.size();
  OrderedJson expectation_list = OrderedJson::array();
  for (const ExpectationEntry& e : report.expectations)
    expectation_list.push_back({{"line", e.line}, {"selector", e.selector}, {"outcome", e.outcome},
                                {"reason", e.reason}, {"until", e.until}, {"matched", e.matched},
                                {"status", to_string(e.status)}});
  summary["verdict"] = fails(report) ? "FAIL" : "PASS";
  summary["partial"] = i.interrupted;
  OrderedJson doc = {{"schema_version", Report::kSchemaVersion},
                     {"info", std::move(info)},
                     {"seconds", finite_or_zero(report.seconds)},
                     {"summary", std::move(summary)},
                     {"untested", std::move(untested_list)},
                     {"findings", std::move(finding_list)},
                     {"gaps", std::move(gap_list)},
                     {"expectations", std::move(expectation_list)},
                     {"results", std::move(results)}};
  // Invalid UTF-8 (a kernel's message may hold any bytes) becomes U+FFFD rather than an exception.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Report report_from_json(std::string_view text) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // Not only parse_error: a number too large for any type ("1e400") is an out_of_range.
    // e.what() starts with "[json.exception.parse_error.101] "; the rest says where and what.
    std::string what = e.what();
    if (auto close = what.find("] "); close != std::string::npos) what = what.substr(close + 2);
    fail("", "not valid JSON: " + what);
  }
  if (!doc.is_object()) fail("", "expected an object at the top level, got " + type_name(doc));

  const Json& version = field(doc, "schema_version", "");
  if (!version.is_number_integer() || version.get<int64_t>() < Report::kOldestSchemaVersion ||
      version.get<int64_t>() > Report::kSchemaVersion) {
    fail("schema_version", "this opconform reads schema versions " + std::to_string(Report::kOldestSchemaVersion) +
                               " to " + std::to_string(Report::kSchemaVersion) + ", the file has " + version.dump());
  }
  Report report;
  report.info = read_info(object_field(doc, "info", ""), "info");
  report.seconds = number_field(doc, "seconds", "");
  const Json& results = field(doc, "results", "");
  if (!results.is_array()) fail("results", "expected an array, got " + type_name(results));
  for (size_t k = 0; k < results.size(); ++k) {
    report.results.push_back(read_result(results[k], "results[" + std::to_string(k) + "]"));
  }
  if (doc.contains("expectations")) report.expectations = read_expectation_entries(doc.at("expectations"));
  // The summary is derived from the results; one that disagrees means the file was edited or
  // cut, and the results cannot be trusted to be complete.
  const Json& summary = object_field(doc, "summary", "");
  for (Outcome o : detail::all_outcomes()) {
    const std::string name(conformance::to_string(o));
    const uint64_t said = unsigned_field(summary, name.c_str(), "summary", std::numeric_limits<uint64_t>::max());
    if (said != report.count(o)) {
      fail("summary." + name, "says " + std::to_string(said) + " but the results hold " +
                                  std::to_string(report.count(o)) + " (an edited or incomplete file)");
    }
  }
  if (summary.contains("untested_cases")) {
    const uint64_t said = unsigned_field(summary, "untested_cases", "summary", std::numeric_limits<uint64_t>::max());
    const size_t actual = untested_cases(report).size();
    if (said != actual) {
      fail("summary.untested_cases", "says " + std::to_string(said) + " but the results hold " +
                                         std::to_string(actual) + " (an edited or incomplete file)");
    }
  }
  return report;
}

}  // namespace opconform::reports
