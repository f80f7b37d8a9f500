// The reference's claims about the Core ATen opset: schema strings identical to PyTorch's, at
// least 100 operators, every family represented, and docs/reference.md up to date.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "opconform/reference.h"
#include "opconform/reference/coverage.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

std::vector<OpInfo> infos() {
  return reference_op_infos(testing::registry());
}

const std::vector<CoreAtenOp>& opset() { return core_aten_opset(); }

TEST(Coverage, TheCompiledInTableIsTheSourceFile) {
  const auto file = read_core_aten_opset(std::string(OPCONFORM_SOURCE_DIR) + "/reference/data/core_aten_opset.tsv");
  ASSERT_EQ(file.size(), opset().size());
  ASSERT_GT(file.size(), 150u);
  for (size_t i = 0; i < file.size(); ++i) {
    EXPECT_EQ(file[i].name, opset()[i].name);
    EXPECT_EQ(file[i].schema, opset()[i].schema);
  }
}

TEST(Coverage, SchemasAreExactlyPyTorchs) {
  EXPECT_THAT(schema_mismatches(opset(), infos()), ::testing::IsEmpty());
}

TEST(Coverage, AtLeastOneHundredCoreAtenOperatorsInEveryFamily) {
  std::set<std::string> core;
  for (const auto& op : opset()) core.insert(op.name);
  int implemented = 0;
  std::set<std::string> families;
  for (const auto& i : infos()) {
    implemented += core.count(i.name);
    families.insert(i.family);
  }
  EXPECT_GE(implemented, 100);
  EXPECT_THAT(families, ::testing::IsSupersetOf({"elementwise_unary", "elementwise_binary", "activation",
                                                 "normalization", "reduction", "linear_algebra", "convolution_pooling",
                                                 "indexing", "shape", "creation", "sorting"}));
}

TEST(Coverage, EveryOpHasEveryPartItNeeds) {
  for (const auto& i : infos()) {
    SCOPED_TRACE(i.name);
    EXPECT_TRUE(i.cpu);
    EXPECT_TRUE(i.fake);
    EXPECT_FALSE(i.doc.empty());
    EXPECT_FALSE(i.dtypes.empty());
    for (const auto& t : i.data->tolerances) EXPECT_FALSE(t.reason.empty());
  }
}

TEST(Coverage, TheGeneratedPageIsUpToDate) {
  std::ifstream in(std::string(OPCONFORM_SOURCE_DIR) + "/docs/reference.md");
  ASSERT_TRUE(in.good()) << "docs/reference.md is missing: run opconform list --markdown docs/reference.md";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), format_coverage_markdown(opset(), infos()))
      << "docs/reference.md is out of date: run build/default/harness/opconform list --markdown "
         "docs/reference.md";
}

TEST(Coverage, ReadingAMalformedTableIsAnErrorNamingTheFile) {
  const std::string path = ::testing::TempDir() + "/bad_opset.tsv";
  std::ofstream(path) << "# comment\naten::x no tab here\n";
  try {
    read_core_aten_opset(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("bad_opset.tsv:2"));
  }
  EXPECT_THROW(read_core_aten_opset(path + ".missing"), Error);
}

}  // namespace
}  // namespace opconform::reference
