// OpData in the registry (Note [Per-op data belongs to the registry]): set by whoever defines an
// op, validated against its schema, removed with the definition, and per registry — two
// registries hold different data for one op name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core/op_data.h"
#include "opconform/core/registry.h"
#include "support/error_of.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;

constexpr const char* kSchema = "opdata::f(Tensor x, int k) -> Tensor";

RegistrationHandle define_f(Registry& r) { return r.define(parse_schema(kSchema), {}, RegistrationSource::named("test")); }

OpData with_dtypes(std::vector<DType> dtypes, std::string doc) {
  OpData d;
  d.doc = std::move(doc);
  d.constraints.accept_dtypes(std::move(dtypes));
  return d;
}

TEST(OpData, TwoRegistriesHoldDifferentDataForOneOpName) {
  Registry a, b;
  auto def_a = define_f(a), def_b = define_f(b);
  a.set_op_data("opdata::f", with_dtypes({DType::Float32}, "a's"));
  b.set_op_data("opdata::f", with_dtypes({DType::Int64, DType::Bool}, "b's"));
  EXPECT_EQ(a.get("opdata::f").data()->doc, "a's");
  EXPECT_EQ(b.get("opdata::f").data()->doc, "b's");
  EXPECT_EQ(a.get("opdata::f").data()->constraints.dtypes, std::vector<DType>{DType::Float32});
  EXPECT_EQ(b.get("opdata::f").data()->constraints.dtypes, (std::vector<DType>{DType::Int64, DType::Bool}));
}

TEST(OpData, AnOpWithoutDataHasEmptyData) {
  Registry r;
  auto def = define_f(r);
  auto data = r.get("opdata::f").data();
  ASSERT_NE(data, nullptr);
  EXPECT_TRUE(data->empty());
  EXPECT_FALSE(with_dtypes({DType::Float32}, "").empty());
}

TEST(OpData, DataIsRemovedWithTheDefinitionAndOldCopiesStayValid) {
  Registry r;
  auto def = define_f(r);
  r.set_op_data("opdata::f", with_dtypes({DType::Float32}, "first"));
  auto first = r.get("opdata::f").data();
  r.set_op_data("opdata::f", with_dtypes({DType::Float64}, "second"));
  EXPECT_EQ(first->doc, "first");  // a reader's copy outlives its replacement
  EXPECT_EQ(r.get("opdata::f").data()->doc, "second");
  def.reset();
  auto again = define_f(r);
  EXPECT_TRUE(r.get("opdata::f").data()->empty()) << "a new definition starts without the old one's data";
}

TEST(OpData, SettingDataNeedsADefinitionAndDataThatFitsTheSchema) {
  Registry r;
  Error undefined = testing::error_of([&] { r.set_op_data("opdata::f", {}); });
  EXPECT_EQ(undefined.code(), ErrorCode::kRegistration);
  EXPECT_THAT(undefined.what(), HasSubstr("'opdata::f' is not defined"));
  auto def = define_f(r);
  OpData unknown_arg;
  unknown_arg.constraints.relate(size_positive("y"));
  Error bad = testing::error_of([&] { r.set_op_data("opdata::f", unknown_arg); });
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.what(), HasSubstr("opdata::f"));
  EXPECT_THAT(bad.what(), HasSubstr("'y'"));
  EXPECT_TRUE(r.get("opdata::f").data()->empty()) << "refused data is not stored";
}

}  // namespace
}  // namespace opconform
