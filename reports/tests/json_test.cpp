// The stored form (to_json, report_from_json) and its schema file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <functional>
#include <set>

#include "opconform/reports/detail/text.h"
#include "opconform/reports/writers.h"
#include "support/error_of.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using opconform::testing::error_of;
using testing::expect_golden;
using testing::sample_report;

TEST(ReportsJson, MatchesGolden) { expect_golden("report.json", to_json(sample_report())); }

// A report written by opconform before the version was raised (golden/report-v1.json, the sample
// as version 1 wrote it; never regenerated) still reads, whole.
TEST(ReportsJson, AVersionOneReportStillReads) {
  const std::string v1 = testing::read_file(std::filesystem::path(OPCONFORM_SOURCE_DIR) / "reports/tests/golden/report-v1.json");
  ASSERT_NE(v1.find("\"schema_version\": 1,"), std::string::npos) << "the file must stay a version-1 report";
  // Version 1 had no causes: the results read without them (cause() then gives the outcome's own).
  Report without_causes = sample_report();
  for (CaseResult& r : without_causes.results) r.recorded_cause.reset();
  EXPECT_EQ(report_from_json(v1), without_causes);
  EXPECT_EQ(report_from_json(v1).results[7].cause_key(), "aten::index_put/determinism/crash/");
  EXPECT_EQ(Report::kOldestSchemaVersion, 1);
  EXPECT_GT(Report::kSchemaVersion, 1);
  EXPECT_NE(to_json(sample_report()).find("\"schema_version\": " + std::to_string(Report::kSchemaVersion) + ","),
            std::string::npos);
}

TEST(ReportsJson, SampleRoundTrips) {
  const Report report = sample_report();
  EXPECT_EQ(report_from_json(to_json(report)), report);
}

TEST(ReportsJson, DoublesAreWrittenShortestAndReadBackExactly) {
  Report report;
  report.seconds = 0.1;
  report.results = {testing::result("op", "c", "cpu", "float32", Outcome::passed, "", "", std::nullopt, 1.0 / 3)};
  const std::string text = to_json(report);
  EXPECT_THAT(text, HasSubstr("\"seconds\": 0.1,"));
  EXPECT_THAT(text, HasSubstr("\"seconds\": 0.3333333333333333\n"));
  EXPECT_EQ(report_from_json(text), report);
}

TEST(ReportsJson, InvalidUtf8AndNonFiniteTimesStillMakeAReadableFile) {
  Report report;
  report.seconds = std::numeric_limits<double>::quiet_NaN();
  report.results = {testing::result("op", "c", "cpu", "float32", Outcome::failed, "bad \xFF byte", "", std::nullopt,
                                    std::numeric_limits<double>::infinity())};
  const Report back = report_from_json(to_json(report));
  EXPECT_EQ(back.seconds, 0);
  EXPECT_EQ(back.results.at(0).seconds, 0);
  EXPECT_EQ(back.results.at(0).message, "bad \xEF\xBF\xBD byte");
}

// ---------------------------------------------------------------- malformed input

// The message of the Error that reading `text` throws (an Error of code kInvalidArgument).
std::string read_error(const std::string& text) {
  const Error e = error_of([&] { report_from_json(text); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  return e.what();
}

// The sample's JSON with one change made through nlohmann.
std::string edited(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json doc = nlohmann::json::parse(to_json(sample_report()));
  edit(doc);
  return doc.dump();
}

TEST(ReportsJsonErrors, TruncatedOrEmptyTextSaysWhere) {
  const std::string text = to_json(sample_report());
  EXPECT_THAT(read_error(text.substr(0, text.size() / 2)), AllOf(HasSubstr("report JSON: not valid JSON"), HasSubstr("line")));
  EXPECT_THAT(read_error(""), HasSubstr("not valid JSON"));
  EXPECT_THAT(read_error("{\"schema_version\": 1,"), HasSubstr("not valid JSON"));
  EXPECT_THAT(read_error("{\"op\": \"\xFF\"}"), HasSubstr("not valid JSON"));
  // Found by fuzz/report_json: nlohmann reports a number out of every type's range as
  // out_of_range, not parse_error, and it escaped as a non-opconform exception.
  EXPECT_THAT(read_error("{\"seconds\": 1e400}"), AllOf(HasSubstr("not valid JSON"), HasSubstr("number overflow")));
}

TEST(ReportsJsonErrors, WrongTypesNameTheField) {
  EXPECT_THAT(read_error("[]"), HasSubstr("expected an object at the top level, got an array"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"][1]["outcome"] = 5; })),
              HasSubstr("results[1].outcome: expected a string, got a number"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"] = "none"; })), HasSubstr("results: expected an array, got a string"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"][2] = 7; })), HasSubstr("results[2]: expected an object"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["info"] = nullptr; })), HasSubstr("info: expected an object, got null"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["info"]["seed"] = -1; })), HasSubstr("info.seed: expected an integer >= 0, got -1"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["info"]["samples"] = 1.5; })), HasSubstr("info.samples: expected an integer >= 0, got 1.5"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["info"]["samples"] = 1ll << 40; })), HasSubstr("info.samples: value 1099511627776 is too large"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"][0]["minimal_input"] = 3; })),
              HasSubstr("results[0].minimal_input: expected a string or null, got a number"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["seconds"] = "fast"; })), HasSubstr("seconds: expected a number, got a string"));
}

TEST(ReportsJsonErrors, MissingFieldsAreNamed) {
  EXPECT_THAT(read_error(edited([](auto& d) { d.erase("results"); })), HasSubstr("missing field 'results'"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"][3].erase("check"); })), HasSubstr("results[3]: missing field 'check'"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["info"].erase("library"); })), HasSubstr("info: missing field 'library'"));
  EXPECT_THAT(read_error("{}"), HasSubstr("missing field 'schema_version'"));
}

TEST(ReportsJsonErrors, UnknownOutcomeIsNamedWithTheKnownOnes) {
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"][0]["outcome"] = "exploded"; })),
              AllOf(HasSubstr("results[0].outcome: unknown outcome 'exploded'"), HasSubstr("timed_out")));
}

TEST(ReportsJsonErrors, OtherSchemaVersionsAreRefused) {
  const int newer = Report::kSchemaVersion + 1;
  EXPECT_THAT(read_error(edited([&](auto& d) { d["schema_version"] = newer; })),
              HasSubstr("schema_version: this opconform reads schema versions 1 to " +
                        std::to_string(Report::kSchemaVersion) + ", the file has " + std::to_string(newer)));
  EXPECT_THAT(read_error(edited([](auto& d) { d["schema_version"] = 0; })), HasSubstr("the file has 0"));
  EXPECT_THAT(read_error(edited([](auto& d) { d["schema_version"] = "1"; })), HasSubstr("the file has \"1\""));
}

TEST(ReportsJsonErrors, ASummaryThatDisagreesWithTheResultsIsRefused) {
  // Deleting a result without fixing the summary: a cut or hand-edited file.
  EXPECT_THAT(read_error(edited([](auto& d) { d["results"].erase(1); })),
              HasSubstr("summary.failed: says 3 but the results hold 2"));
}

// ---------------------------------------------------------------- properties

// Valid UTF-8 over all of Unicode's planes, control characters and NUL included.
rc::Gen<std::string> gen_text() {
  return rc::gen::map(rc::gen::container<std::vector<uint32_t>>(rc::gen::oneOf(
                          rc::gen::inRange<uint32_t>(0, 0x80), rc::gen::inRange<uint32_t>(0x80, 0x800),
                          rc::gen::inRange<uint32_t>(0x800, 0xD800), rc::gen::inRange<uint32_t>(0xE000, 0x10000),
                          rc::gen::inRange<uint32_t>(0x10000, 0x110000))),
                      [](const std::vector<uint32_t>& code_points) {
                        std::string s;
                        for (uint32_t cp : code_points) {
                          if (cp < 0x80) {
                            s += static_cast<char>(cp);
                          } else if (cp < 0x800) {
                            s += static_cast<char>(0xC0 | (cp >> 6));
                            s += static_cast<char>(0x80 | (cp & 0x3F));
                          } else if (cp < 0x10000) {
                            s += static_cast<char>(0xE0 | (cp >> 12));
                            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                            s += static_cast<char>(0x80 | (cp & 0x3F));
                          } else {
                            s += static_cast<char>(0xF0 | (cp >> 18));
                            s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
                            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
                            s += static_cast<char>(0x80 | (cp & 0x3F));
                          }
                        }
                        return s;
                      });
}

rc::Gen<double> gen_seconds() {
  return rc::gen::suchThat(rc::gen::arbitrary<double>(), [](double d) { return std::isfinite(d); });
}

rc::Gen<Report> gen_report() {
  return rc::gen::exec([] {
    Report r;
    r.info.tool_version = *gen_text();
    r.info.library = *gen_text();
    r.info.library_path = *gen_text();
    r.info.against = *gen_text();
    r.info.command = *gen_text();
    r.info.started_at = *gen_text();
    r.info.seed = *rc::gen::arbitrary<uint64_t>();
    r.info.samples = *rc::gen::inRange(0, std::numeric_limits<int>::max());
    r.info.shard = *gen_text();
    r.seconds = *gen_seconds();
    const auto n = *rc::gen::inRange<size_t>(0, 8);
    for (size_t k = 0; k < n; ++k) {
      CaseResult c;
      c.op = *gen_text();
      c.check = *gen_text();
      c.device = *gen_text();
      c.dtype = *gen_text();
      c.outcome = *rc::gen::elementOf(detail::all_outcomes());
      c.message = *gen_text();
      c.repro = *gen_text();
      if (*rc::gen::arbitrary<bool>()) c.minimal_input = *gen_text();
      c.seconds = *gen_seconds();
      r.results.push_back(std::move(c));
    }
    return r;
  });
}

RC_GTEST_PROP(ReportsJsonProperty, ArbitraryReportsRoundTrip, ()) {
  const Report report = *gen_report();
  RC_ASSERT(report_from_json(to_json(report)) == report);
}

// Reading never crashes and never throws anything but opconform::Error, whatever it is given.
void expect_only_errors(const std::string& text) {
  try {
    report_from_json(text);
  } catch (const Error&) {
  } catch (const std::exception& e) {
    RC_FAIL(std::string("threw a non-opconform exception: ") + e.what());
  }
}

RC_GTEST_PROP(ReportsJsonProperty, ArbitraryBytesAreReadOrRefusedWithAnError, ()) {
  expect_only_errors(*rc::gen::arbitrary<std::string>());
}

RC_GTEST_PROP(ReportsJsonProperty, DamagedReportsAreReadOrRefusedWithAnError, ()) {
  std::string text = to_json(sample_report());
  // Cut out a piece, then overwrite a few bytes: near-valid input reaches the field checks.
  const auto from = *rc::gen::inRange<size_t>(0, text.size());
  const auto length = *rc::gen::inRange<size_t>(0, 40);
  text.erase(from, length);
  const auto changes = *rc::gen::inRange(0, 4);
  for (int k = 0; k < changes && !text.empty(); ++k) {
    text[*rc::gen::inRange<size_t>(0, text.size())] = *rc::gen::elementOf(std::string("{}[]\",:01-e.ntf\\ x"));
  }
  expect_only_errors(text);
}

// ---------------------------------------------------------------- the schema file

nlohmann::json read_schema() {
  return nlohmann::json::parse(testing::read_file(std::filesystem::path(OPCONFORM_SOURCE_DIR) /
                                                  "reports/schema/report.schema.json"));
}

std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

// The keys a schema object lists, checked against its "required" list: every field is required
// but those to_json writes only when they say something (`optional`).
std::set<std::string> schema_keys(const nlohmann::json& object_schema, const std::set<std::string>& optional = {}) {
  std::set<std::string> keys = keys_of(object_schema.at("properties"));
  std::set<std::string> required = object_schema.at("required").get<std::set<std::string>>();
  required.insert(optional.begin(), optional.end());
  EXPECT_EQ(keys, required);
  EXPECT_EQ(object_schema.at("additionalProperties"), false);
  return keys;
}

TEST(ReportsJsonSchema, IsDraft2020WithTheCurrentVersion) {
  const nlohmann::json schema = read_schema();
  EXPECT_EQ(schema.at("$schema"), "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema.at("properties").at("schema_version").at("const"), Report::kSchemaVersion);
  std::vector<std::string> outcomes;
  for (Outcome o : detail::all_outcomes()) outcomes.emplace_back(conformance::to_string(o));
  EXPECT_EQ(schema.at("$defs").at("outcome").at("enum").get<std::vector<std::string>>(), outcomes);
}

TEST(ReportsJsonSchema, ListsExactlyTheKeysToJsonWrites) {
  const nlohmann::json schema = read_schema();
  const nlohmann::json& defs = schema.at("$defs");
  // The optional fields of RunInfo set, so that every key is written.
  Report report = sample_report();
  report.info.library_options = {"factor=2"};
  report.info.shard = "1/4", report.info.shard_source = "--shard";
  const nlohmann::json doc = nlohmann::json::parse(to_json(report));
  EXPECT_EQ(keys_of(doc), schema_keys(schema));
  EXPECT_EQ(keys_of(doc.at("info")), schema_keys(defs.at("run_info"), {"library_options", "shard_source"}));
  EXPECT_EQ(keys_of(doc.at("summary")), schema_keys(defs.at("summary")));
  // A cause only where one was recorded, `expected` only where an entry covers the result (Note [A
  // result's JSON is small]); the sample has both kinds.
  const std::set<std::string> result_keys = schema_keys(defs.at("case_result"), {"cause", "expected"});
  ASSERT_FALSE(doc.at("results").empty());
  std::set<std::string> seen;
  for (const auto& r : doc.at("results")) {
    for (const auto& key : keys_of(r)) EXPECT_EQ(result_keys.count(key), 1u) << key;
    const auto keys = keys_of(r);
    seen.insert(keys.begin(), keys.end());
  }
  EXPECT_EQ(seen.count("cause"), 1u);
  // The references the top level uses point at those definitions.
  EXPECT_EQ(schema.at("properties").at("info").at("$ref"), "#/$defs/run_info");
  EXPECT_EQ(schema.at("properties").at("summary").at("$ref"), "#/$defs/summary");
  EXPECT_EQ(schema.at("properties").at("results").at("items").at("$ref"), "#/$defs/case_result");
}

}  // namespace
}  // namespace opconform::reports
