// OpInfo is read from the registry the reference was registered into (Note [Per-op data belongs to
// the registry]): each registry holds its own data, and one without the reference has none.
#include <gtest/gtest.h>

#include "opconform/reference.h"

namespace opconform::reference {
namespace {

TEST(OpInfo, EachRegistryOfTheReferenceHasItsOwnData) {
  Registry a, b;
  auto in_a = register_reference_ops(a);
  auto in_b = register_reference_ops(b);
  ASSERT_EQ(reference_op_infos(a).size(), reference_op_infos(b).size());
  ASSERT_GT(reference_op_infos(a).size(), 150u);

  OpData changed = *b.get("aten::abs").data();
  changed.doc = "changed in b only";
  changed.constraints.dtypes = {DType::Float64};
  b.set_op_data("aten::abs", changed);
  EXPECT_EQ(reference_op_info(b, "aten::abs")->doc, "changed in b only");
  EXPECT_EQ(reference_op_info(b, "aten::abs")->dtypes, std::vector<DType>{DType::Float64});
  EXPECT_NE(reference_op_info(a, "aten::abs")->doc, "changed in b only");
  EXPECT_GT(reference_op_info(a, "aten::abs")->dtypes.size(), 1u);

  Registry none;
  EXPECT_TRUE(reference_op_infos(none).empty());
  EXPECT_FALSE(reference_op_info(none, "aten::abs").has_value());
}

TEST(OpInfo, TheSummaryFollowsTheRegisteredParts) {
  Registry r;
  auto reg = register_reference_ops(r);
  auto add = reference_op_info(r, "aten::add.Tensor");
  ASSERT_TRUE(add.has_value());
  EXPECT_TRUE(add->cpu && add->fake && add->autograd);
  EXPECT_EQ(add->family, "elementwise_binary");
  EXPECT_TRUE(add->data->rounding.has_value());
  auto out = reference_op_info(r, "aten::atan2.out");
  ASSERT_TRUE(out.has_value());
  EXPECT_FALSE(out->autograd) << "out= ops refuse autograd; that is no formula";
  EXPECT_TRUE(reference_op_info(r, "aten::randperm").value_or(OpInfo{}).nondeterministic);
  EXPECT_FALSE(add->nondeterministic);
}

}  // namespace
}  // namespace opconform::reference
