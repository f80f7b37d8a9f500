// infer_schema: C++ signatures, argument names and mutates_args/tags into schemas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "opconform/core/infer_schema.h"
#include "support/error_of.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;

// The message of the schema-mismatch Error a call throws.
std::string error_of(auto&& f) {
  Error e = testing::error_of(f);
  EXPECT_EQ(e.code(), ErrorCode::kSchemaMismatch);
  return e.what();
}

TEST(InferSchema, EveryParameterType) {
  using F = std::tuple<Tensor, int64_t> (*)(const Tensor&, int64_t, SymInt, double, bool, std::string, Scalar, DType,
                                            Device, Layout, MemoryFormat, std::vector<int64_t>, std::vector<Tensor>,
                                            std::optional<Tensor>, std::vector<std::optional<Tensor>>,
                                            std::optional<std::vector<int64_t>>, std::vector<SymInt>, float, int32_t);
  auto s = infer_schema<F>({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s"},
                           {}, "mylib::all");
  EXPECT_EQ(s.to_string(),
            "mylib::all(Tensor a, int b, SymInt c, float d, bool e, str f, Scalar g, ScalarType h, Device i, "
            "Layout j, MemoryFormat k, int[] l, Tensor[] m, Tensor? n, Tensor?[] o, int[]? p, SymInt[] q, float r, "
            "int s) -> (Tensor, int)");
  EXPECT_EQ(s.kind(), SchemaKind::kFunctional);
}

TEST(InferSchema, ReturnForms) {
  EXPECT_EQ(infer_schema<void(const Tensor&)>({"x"}, {"x"}, "f").to_string(), "f(Tensor(a0!) x) -> ()");
  EXPECT_EQ(infer_schema<std::vector<Tensor>(const Tensor&)>({"x"}, {}, "f").to_string(), "f(Tensor x) -> Tensor[]");
  EXPECT_EQ(infer_schema<double(const Tensor&)>({"x"}, {}, "f").to_string(), "f(Tensor x) -> float");
}

TEST(InferSchema, MutatedArgumentsGetWriteAnnotations) {
  auto s = infer_schema<void(const Tensor&, const Tensor&, const std::vector<Tensor>&)>({"x", "y", "zs"}, {"y", "zs"},
                                                                                         "mylib::add_mutate");
  EXPECT_EQ(s.to_string(), "mylib::add_mutate(Tensor x, Tensor(a1!) y, Tensor(a2!)[] zs) -> ()");
  EXPECT_EQ(s.kind(), SchemaKind::kMutable);
  EXPECT_EQ(s.mutable_arguments(), (std::vector<size_t>{1, 2}));
  auto unknown = infer_schema<void(const Tensor&, int64_t, const Tensor&)>({"x", "n", "y"}, MutatesArgs::all_unknown(), "g");
  EXPECT_EQ(unknown.to_string(), "g(Tensor(a0!) x, int n, Tensor(a2!) y) -> ()");
}

TEST(InferSchema, InplaceTag) {
  auto s = infer_schema<Tensor(const Tensor&, const Tensor&)>({"x", "y"}, {"x"}, "mylib::add_inplace", {Tag::inplace});
  EXPECT_EQ(s.to_string(), "mylib::add_inplace(Tensor(a!) x, Tensor y) -> Tensor(a!)");
  // The schema kind is syntactic (torchgen's): without a trailing '_' in the name this is a
  // mutable op; the inplace contract comes from the tag.
  EXPECT_EQ(s.kind(), SchemaKind::kMutable);
  auto underscore = infer_schema<Tensor(const Tensor&)>({"x"}, {"x"}, "mylib::sin_", {Tag::inplace});
  EXPECT_EQ(underscore.kind(), SchemaKind::kInplace);
}

TEST(InferSchema, OutTag) {
  auto one = infer_schema<Tensor(const Tensor&, const Tensor&, const Tensor&)>({"x", "y", "*", "out"}, {"out"},
                                                                               "mylib::add_out", {Tag::out});
  EXPECT_EQ(one.to_string(), "mylib::add_out(Tensor x, Tensor y, *, Tensor(a!) out) -> Tensor(a!)");
  EXPECT_EQ(one.kind(), SchemaKind::kOut);
  // Trailing out tensors become keyword-only without an explicit '*'.
  auto two = infer_schema<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&)>(
      {"x", "out0", "out1"}, {"out0", "out1"}, "f", {Tag::out});
  EXPECT_EQ(two.to_string(), "f(Tensor x, *, Tensor(a!) out0, Tensor(b!) out1) -> (Tensor(a!), Tensor(b!))");
}

TEST(InferSchema, WithKeysetKernelsDropTheKeySet) {
  EXPECT_EQ(infer_schema<Tensor(DispatchKeySet, const Tensor&)>({"x"}, {}, "f").to_string(), "f(Tensor x) -> Tensor");
}

TEST(InferSchema, ErrorsNameTheProblem) {
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x"}, {"y"}, "mylib::f"); }),
              HasSubstr("infer_schema for 'mylib::f': mutates_args names 'y', which is not an argument (arguments: x)"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, int64_t)>({"x", "n"}, {"n"}, "f"); }),
              HasSubstr("mutates_args names 'n', which is a int, not a Tensor"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, int64_t)>({"x"}, {}, "f"); }),
              HasSubstr("1 argument names given (x) for a function of 2 parameters (const Tensor&, long)"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, char*)>({"x", "p"}, {}, "f"); }),
              HasSubstr("parameter 'p' has unsupported type 'char*'"));
  EXPECT_THAT(error_of([] { infer_schema<std::vector<std::vector<int64_t>>(const Tensor&)>({"x"}, {}, "f"); }),
              HasSubstr("unsupported return type"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x"}, {"x"}, "f", {Tag::inplace, Tag::out}); }),
              HasSubstr("cannot be combined"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, const Tensor&)>({"x", "y"}, {"y"}, "f", {Tag::inplace}); }),
              HasSubstr("Tag::inplace needs mutates_args to name exactly the first argument ('x')"));
  EXPECT_THAT(error_of([] { infer_schema<void(const Tensor&)>({"x"}, {"x"}, "f", {Tag::inplace}); }),
              HasSubstr("Tag::inplace needs the operator to return that same Tensor"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, const Tensor&)>({"out", "y"}, {"out"}, "f", {Tag::out}); }),
              HasSubstr("out argument 'out' must be keyword-only"));
  EXPECT_THAT(error_of([] { infer_schema<void(const Tensor&, const Tensor&)>({"x", "*", "out"}, {"out"}, "f", {Tag::out}); }),
              HasSubstr("must return its 1 out tensor(s)"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x x"}, {}, "f"); }), HasSubstr("invalid argument name"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&, const Tensor&)>({"x", "x"}, {}, "f"); }),
              HasSubstr("argument name 'x' repeats"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x", "*"}, {}, "f"); }),
              HasSubstr("'*' must be followed"));
  // Found by fuzz/infer_schema: the overload and the namespace were not checked, and the schema
  // printed as text that does not parse.
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x"}, {}, "mylib::f.a b"); }),
              HasSubstr("invalid operator name 'mylib::f.a b'"));
  EXPECT_THAT(error_of([] { infer_schema<Tensor(const Tensor&)>({"x"}, {}, "::f"); }), HasSubstr("invalid operator name"));
}

TEST(InferSchema, InferredSchemasParseBack) {
  auto s = infer_schema<std::tuple<Tensor, Tensor>(const Tensor&, const std::optional<Tensor>&, double, const Tensor&,
                                                   const Tensor&)>({"x", "w", "eps", "*", "a", "b"}, {"a", "b"},
                                                                   "ns::norm.out", {Tag::out});
  EXPECT_EQ(parse_schema(s.to_string()), s);
}

}  // namespace
}  // namespace opconform
