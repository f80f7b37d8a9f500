// The Markdown summary (to_markdown).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "opconform/reports/detail/markdown.h"
#include "opconform/reports/writers.h"
#include "support/golden.h"
#include "support/sample_report.h"

namespace opconform::reports {
namespace {

using ::testing::HasSubstr;
using testing::sample_report;

// The '|' that split cells (not escaped as "\|").
size_t cell_separators(const std::string& line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  return n;
}

TEST(ReportsMarkdown, MatchesGolden) { testing::expect_golden("report.md", to_markdown(sample_report())); }

TEST(ReportsMarkdown, EveryTableRowHasItsHeadersCellCount) {
  std::istringstream lines(to_markdown(sample_report()));
  std::string line;
  size_t columns = 0, rows = 0;
  while (std::getline(lines, line)) {
    if (!line.starts_with("|")) {
      columns = 0;
      continue;
    }
    if (columns == 0) columns = cell_separators(line);
    EXPECT_EQ(cell_separators(line), columns) << line;
    ++rows;
  }
  EXPECT_GT(rows, 20u);
}

// Note [One finding per cause]: a section per finding, with its cause key, kind, check and what it
// covers; the first result's message, minimal input and repro line.
TEST(ReportsMarkdown, ListsEachFindingWithMessageInputAndRepro) {
  const std::string md = to_markdown(sample_report());
  EXPECT_THAT(md, HasSubstr("## Findings (6 causes, 6 results)"));
  EXPECT_THAT(md, HasSubstr("### `the gradient of 'self' is wrong`: **failed**, 1 result\n\n| cause | kind | check |"));
  EXPECT_THAT(md, HasSubstr("| `aten::add.Tensor/gradcheck/wrong_gradient/self` | `wrong_gradient` | `gradcheck` | "
                            "`aten::add.Tensor` | `float32` | `cpu` |"));
  EXPECT_THAT(md, HasSubstr("First result, `aten::add.Tensor [cpu, float32]`:\n\n```text\ngradient of 'self'"));
  // Unsupported results apart from the failures.
  EXPECT_THAT(md, HasSubstr("## Not implemented (1 causes, 1 unsupported results)"));
  EXPECT_THAT(md, HasSubstr("Findings (one per cause): **6**"));
  EXPECT_THAT(md, HasSubstr("Minimal input:\n\n```text\nself: tensor([0.0, 1.0, -2.5, 3.0], dtype=float32)\n"));
  EXPECT_THAT(md, HasSubstr("Repro: `OPCONFORM_SEED=42 opconform repro"));
}

// The op x check matrix: checks as columns (sorted), the worst outcome per cell, bold when not
// ok with how many of the cell's results are not ok; the '|' in a name escaped.
TEST(ReportsMarkdown, HasTheOpByCheckMatrix) {
  const std::string md = to_markdown(sample_report());
  EXPECT_THAT(md, HasSubstr("| op | `determinism` | `dtype_consistency` | `edge_shapes` | `gradcheck` | `load` | "
                            "`stride_invariance` | `test_faketensor` | `test_schema` |\n| --- | :---: |"));
  // gradcheck of add: failed on cpu float32, passed on float64, skipped on cuda float16.
  EXPECT_THAT(md, HasSubstr("| `aten::add.Tensor` |  |  |  | **FAIL** 1/3 |  |  |  | ok |\n"));
  EXPECT_THAT(md, HasSubstr("| `aten::mul.Tensor` |  |  |  |  |  | **n/a** 1/2 |  | ok |\n"));
  EXPECT_THAT(md, HasSubstr("| `vendor::fused<&\"\\|'>.out` |  |  | **FAIL** |"));
}

// Note [One finding per cause]: the same cause on two cases is one section listing both, the
// message once, each result's repro line in the folded list.
TEST(ReportsMarkdown, OneCauseOnTwoCasesIsOneSection) {
  const std::string md = to_markdown(testing::sample_report_with_repeated_failure());
  EXPECT_THAT(md, HasSubstr("## Findings (6 causes, 7 results)"));
  EXPECT_THAT(md, HasSubstr("### `the gradient of 'self' is wrong`: **failed**, 2 results\n"));
  EXPECT_THAT(md, HasSubstr("`aten::add.Tensor` | `float32, float64` | `cpu, cuda` |"));
  size_t messages = 0;
  for (size_t at = md.find("gradient of 'self' differs"); at != std::string::npos; at = md.find("gradient of 'self' differs", at + 1))
    ++messages;
  EXPECT_EQ(messages, 1u);
  EXPECT_THAT(md, HasSubstr("<details><summary>All 2 results</summary>\n\n- `aten::add.Tensor [cpu, float32]` failed: "));
  EXPECT_THAT(md, HasSubstr("- `aten::add.Tensor [cuda, float64]` failed: `opconform repro --library "
                            "/opt/vendor/lib/libvendor_ops.so --op aten::add.Tensor --check gradcheck --device cuda --dtype float64`"));
  EXPECT_THAT(md, HasSubstr("First result, `aten::add.Tensor [cpu, float32]`:"));
}

TEST(ReportsMarkdown, QuotingHelpersSurviveBackticks) {
  EXPECT_EQ(detail::md_code("a`b"), "``a`b``");
  EXPECT_EQ(detail::md_code("`x"), "`` `x ``");
  EXPECT_EQ(detail::md_code("one\ntwo"), "`one\\ntwo`");  // the line break shown, on one row
  EXPECT_EQ(detail::md_block("has ``` inside"), "````text\nhas ``` inside\n````\n");
  EXPECT_EQ(detail::md_cell("a|b"), "a\\|b");
}

TEST(ReportsMarkdown, AnEmptyReportStillHasItsSummary) {
  const std::string md = to_markdown(Report{});
  EXPECT_THAT(md, HasSubstr("# opconform report: `(unnamed library)`"));
  EXPECT_THAT(md, HasSubstr("| **total** | **0** |"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr("## Findings")));
}

}  // namespace
}  // namespace opconform::reports
