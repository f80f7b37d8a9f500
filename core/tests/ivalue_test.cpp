// IValue: boxing and unboxing of every kind, copies and moves, symbolic integers.
#include <gtest/gtest.h>

#include "opconform/core/ivalue.h"
#include "opconform/core/shape_env.h"
#include "support/error_of.h"

namespace opconform {
namespace {

using testing::error_of;

TEST(IValue, ScalarsRoundTrip) {
  EXPECT_EQ(IValue(int64_t(7)).to<int64_t>(), 7);
  EXPECT_EQ(IValue(7).to<double>(), 7.0);  // an int is accepted for float, as PyTorch
  EXPECT_TRUE(IValue(true).to<bool>());
  EXPECT_EQ(IValue(Scalar(2.5)).tag(), IValue::Tag::Double);
  EXPECT_EQ(IValue(DType::Float16).to<DType>(), DType::Float16);
  EXPECT_EQ(IValue(Device::cuda(1)).to<Device>(), Device::cuda(1));
  EXPECT_EQ(IValue(std::optional<int64_t>()).tag(), IValue::Tag::None);
  EXPECT_EQ(IValue(std::vector<int64_t>{1, 2}).to<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(IValue("mean").to<std::string>(), "mean");
}

TEST(IValue, WrongTypeNamesBoth) {
  Error e = error_of([] { IValue(1.5).to<Tensor>(); });
  EXPECT_EQ(e.code(), ErrorCode::kSchemaMismatch);
  EXPECT_NE(std::string(e.what()).find("expected a value of type Tensor but got float"), std::string::npos);
}

TEST(IValue, CopiesShareTensorsAndMovesEmptyTheSource) {
  Tensor t = ones({2});
  IValue a(t);
  IValue b = a;
  EXPECT_TRUE(b.to_tensor().is_same(t));
  IValue c = std::move(a);
  EXPECT_TRUE(c.to_tensor().is_same(t));
  IValue list(std::vector<Tensor>{t, t});
  IValue list_copy = list;
  EXPECT_TRUE(list_copy.identical(list));
  b = IValue(int64_t(3));  // a tensor slot overwritten by an int
  EXPECT_EQ(b.to_int(), 3);
}

TEST(IValue, SymbolicIntegersBoxAsThemselves) {
  ShapeEnv env;
  SymInt u = env.create_unbacked(0, 100);
  IValue boxed(u);
  EXPECT_EQ(boxed.tag(), IValue::Tag::SymInt);
  EXPECT_TRUE(boxed.to<SymInt>().is_symbolic());
  EXPECT_EQ(IValue(SymInt(4)).tag(), IValue::Tag::Int);  // concrete ones stay ints
  EXPECT_EQ(IValue(4).to<SymInt>(), SymInt(4));

  IValue sizes = to_ivalue(std::vector<SymInt>{u, SymInt(3)});
  auto back = sizes.to<std::vector<SymInt>>();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[0].is_symbolic());
  EXPECT_EQ(back[1], SymInt(3));
  EXPECT_EQ(to_ivalue(std::vector<SymInt>{SymInt(1), SymInt(2)}).tag(), IValue::Tag::IntList);
  EXPECT_NE(sizes.repr().find("u0"), std::string::npos);
}

}  // namespace
}  // namespace opconform
