// Report JSON reader (reports/include/opconform/reports/writers.h): the first byte picks
//   even: result_from_json_line, the form the harness's workers send their results in;
//   odd:  report_from_json, what `opconform report diff/merge` read.
// Any text either throws opconform::Error or reads to a value that writes back to JSON reading
// to the same value; a report read also goes through every writer, diff and merge (they take
// whatever strings a file holds).
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "opconform/reports/diff_merge.h"
#include "opconform/reports/writers.h"

namespace {

using namespace opconform;
using namespace opconform::reports;

void read_result_line(std::string_view text) {
  CaseResult result;
  try {
    result = result_from_json_line(text);
  } catch (const Error&) {
    return;
  }
  const std::string line = result_to_json_line(result);
  FUZZ_CHECK(line.find('\n') == std::string::npos, "a result line holds a newline: ", fuzz::printable(line));
  CaseResult again;
  try {
    again = result_from_json_line(line);
  } catch (const Error& e) {
    fuzz::fail("a result written back does not read: " + fuzz::printable(line) + ": " + e.what());
  }
  FUZZ_CHECK(again == result, "a result reads back differently: ", fuzz::printable(line));
}

void read_report(std::string_view text) {
  Report report;
  try {
    report = report_from_json(text);
  } catch (const Error&) {
    return;
  }
  const std::string json = to_json(report);
  Report again;
  try {
    again = report_from_json(json);
  } catch (const Error& e) {
    fuzz::fail("a report written back does not read: " + std::string(e.what()));
  }
  FUZZ_CHECK(again == report, "a report reads back differently:\n", fuzz::printable(json));
  (void)to_markdown(report);
  (void)to_html(report);
  (void)to_junit(report);
  (void)format_diff(diff(report, again));
  // Merging a report with itself: each result key appears twice, which merge must refuse or take.
  try {
    (void)merge({report, report});
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    read_result_line(text);
  } else {
    read_report(text);
  }
  return 0;
}
