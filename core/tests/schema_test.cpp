// Tests of the schema language: parse/print round trips (PyTorch's core ATen opset, hand-written
// schemas, random structures), default classification, alias queries, schema kinds, and parse
// errors (message format, no crash on arbitrary input).
#include "opconform/core/schema.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "opconform/core/default_value.h"
#include "opconform/core/error.h"

namespace opconform {

// How rapidcheck shows a generated schema in a counterexample.
void showValue(const FunctionSchema& s, std::ostream& os) { os << s.to_string(); }

namespace {

using Sizes = std::vector<std::size_t>;

// The Error a callable throws, or a failed expectation when it throws nothing.
template <typename F>
std::optional<Error> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------------------------

std::filesystem::path opset_path() {
  // core/tests/schema_test.cpp -> repository root -> reference/data/core_aten_opset.tsv (the
  // repository's own copy of the opset list)
  const auto repo_root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
  return repo_root / "reference" / "data" / "core_aten_opset.tsv";
}

TEST(SchemaRoundTrip, EveryCoreAtenOpsetSchema) {
  const auto path = opset_path();
  if (!std::filesystem::exists(path)) {
    FAIL() << "core ATen opset not found at " << path.string() << " (it is part of the repository)";
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::string line;
  int checked = 0;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << "line " << line_no << " has no tab: " << line;
    const std::string qualified = line.substr(0, tab);
    const std::string text = line.substr(tab + 1);
    SCOPED_TRACE("line " + std::to_string(line_no) + ": " + text);
    FunctionSchema s;
    try {
      s = parse_schema(text);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_EQ(s.to_string(), text);
    EXPECT_EQ(s.full_name(), qualified);
    EXPECT_EQ(parse_schema(s.to_string()), s);
    ++checked;
  }
  EXPECT_GE(checked, 189) << "the opset file lists 189 overloads";
}

const std::vector<std::string> kHandWritten = {
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
    "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
    "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
    "aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()",
    "aten::index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "aten::empty.memory_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
    "Device? device=None, bool? pin_memory=None, MemoryFormat? memory_format=None) -> Tensor",
    "aten::rand(SymInt[] size, *, Generator? generator, ScalarType? dtype=None) -> Tensor",
    "foo::bar(str reduce=\"mean\", str s='x', float eps=1e-05) -> Tensor",
    // More of the grammar.
    "aten::alias(Tensor(a) self) -> Tensor(a)",
    "aten::_fused_moving_avg(Tensor(a! -> a|b) self) -> Tensor",
    "aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]",
    "aten::_foreach_add.List_out(Tensor[] self, Tensor[] other, *, Scalar alpha=1, "
    "Tensor(a!)[] out) -> ()",
    "aten::where(Tensor(a)? x) -> Tensor(a)?",
    "aten::amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor",
    "aten::avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> "
    "Tensor",
    "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
    "dtype=None) "
    "-> Tensor",
    "aten::nll_loss(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean, "
    "SymInt ignore_index=-100) -> Tensor",
    "aten::clone(Tensor self, *, MemoryFormat? memory_format=contiguous_format) -> Tensor",
    "aten::to.dtype(Tensor(a) self, ScalarType dtype=long, bool copy=False) -> Tensor(a)",
    "aten::leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor",
    "aten::_pdist_forward(Tensor self, float p=2.) -> Tensor",
    "aten::permute(Tensor(a) self, int[] dims=[0, 1]) -> Tensor(a)",
    "aten::f(float[] a=[0.5, 1e-05, -2.], bool[3] mask=[True, False, True]) -> ()",
    "aten::g(SymInt[3] s, bool[3] m, complex c, Dimname d, Storage st, Stream s2, Any x) -> Any",
    "aten::_local_scalar_dense(Tensor self) -> Scalar",
    "aten::sym_size.int(Tensor self, int dim) -> SymInt",
    "aten::is_nonzero(Tensor self) -> bool",
    "aten::item(Tensor self) -> float",
    "aten::numel(Tensor self) -> int",
    "aten::sort(Tensor self, int dim=-1) -> (Tensor values, Tensor indices)",
    "aten::single(Tensor self) -> Tensor values",
    "aten::clamp(Tensor self, float min=-inf, float max=inf) -> Tensor",
    "aten::chunks(Tensor(a -> *) self) -> Tensor(a)[]",
    "aten::lst(Tensor(a)[] xs) -> Tensor(a)[]",
    "aten::opt(Tensor(a!)? x) -> ()",
    "aten::sizes(SymInt[]? s=None, int[1]? d=None, float[]? f=None) -> int[]",
    "prim::Print(...) -> ()",
    "prim::TupleConstruct(Tensor a, ...) -> ...",
    "prim::VarRet(Tensor a) -> (Tensor, ...)",
    "noname(Tensor a) -> Tensor",
    "noname.overload(Tensor a) -> Tensor",
    "aten::string_escape(str s=\"a\\\"b\") -> str",
    "aten::device(Device d=\"cuda:0\", Device e=cpu) -> Device",
};

TEST(SchemaRoundTrip, HandWrittenSchemas) {
  for (const auto& text : kHandWritten) {
    SCOPED_TRACE(text);
    FunctionSchema s;
    ASSERT_NO_THROW(s = parse_schema(text));
    EXPECT_EQ(s.to_string(), text);
    EXPECT_EQ(parse_schema(s.to_string()), s);
  }
}

TEST(SchemaRoundTrip, NonCanonicalInputPrintsCanonically) {
  EXPECT_EQ(parse_schema("  aten::f( Tensor   a ,int[ 2 ]x=[1,2] )->( Tensor ) ").to_string(),
            "aten::f(Tensor a, int[2] x=[1, 2]) -> Tensor");
  EXPECT_EQ(parse_schema("aten::f(Tensor( a! ->a | b )self)->(Tensor(a!)r)").to_string(),
            "aten::f(Tensor(a! -> a|b) self) -> Tensor(a!) r");
  EXPECT_EQ(parse_schema("f()->()").to_string(), "f() -> ()");
}

// ---------------------------------------------------------------------------------------------
// Structure
// ---------------------------------------------------------------------------------------------

TEST(SchemaStructure, NameParts) {
  auto s = parse_schema("aten::add.Tensor(Tensor self) -> Tensor");
  EXPECT_EQ(s.ns, "aten");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload_name, "Tensor");
  EXPECT_EQ(s.qualified_name(), "aten::add");
  EXPECT_EQ(s.full_name(), "aten::add.Tensor");

  s = parse_schema("relu(Tensor self) -> Tensor");
  EXPECT_EQ(s.ns, "");
  EXPECT_EQ(s.overload_name, "");
  EXPECT_EQ(s.qualified_name(), "relu");
  EXPECT_EQ(s.full_name(), "relu");
}

TEST(SchemaStructure, Arguments) {
  const auto s = parse_schema(
      "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
      "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)");
  ASSERT_EQ(s.arguments.size(), 5u);
  EXPECT_EQ(s.arguments[0].type, Type::base(TypeKind::kTensor));
  EXPECT_EQ(s.arguments[1].type, Type::base(TypeKind::kInt));
  EXPECT_FALSE(s.arguments[1].default_value);
  ASSERT_TRUE(s.arguments[2].default_value);
  EXPECT_EQ(s.arguments[2].default_value->kind, DefaultKind::kBool);
  EXPECT_EQ(std::get<bool>(s.arguments[2].default_value->value), false);
  EXPECT_FALSE(s.arguments[2].kwarg_only);
  EXPECT_TRUE(s.arguments[3].kwarg_only);
  EXPECT_TRUE(s.arguments[4].kwarg_only);
  EXPECT_EQ(s.num_kwarg_only(), 2u);
  ASSERT_TRUE(s.arguments[3].alias_info);
  EXPECT_EQ(s.arguments[3].alias_info->before_set, std::vector<std::string>{"a"});
  EXPECT_TRUE(s.arguments[3].alias_info->is_write);
  ASSERT_EQ(s.returns.size(), 2u);
  EXPECT_EQ(s.returns[0].name, "values");
  EXPECT_EQ(s.returns[1].name, "indices");
  EXPECT_EQ(s.argument_index("max_values"), 4u);
  EXPECT_EQ(s.argument_index("nope"), std::nullopt);
}

TEST(SchemaStructure, Types) {
  const Type tensor = Type::base(TypeKind::kTensor);
  const Type i = Type::base(TypeKind::kInt);
  EXPECT_EQ(parse_type("Tensor?[]"), Type::list(Type::optional(tensor)));
  EXPECT_EQ(parse_type("int[]?"), Type::optional(Type::list(i)));
  EXPECT_EQ(parse_type("int[1]?"), Type::optional(Type::list(i, 1)));
  EXPECT_EQ(parse_type("SymInt[3]"), Type::list(Type::base(TypeKind::kSymInt), 3));
  EXPECT_NE(parse_type("int[2]"), parse_type("int[]"));
  EXPECT_NE(parse_type("int[2]"), parse_type("int[3]"));
  EXPECT_EQ(parse_type("Tensor?[]").base_kind(), TypeKind::kTensor);
  EXPECT_TRUE(parse_type("Tensor?[]").is_tensor_like());
  EXPECT_FALSE(parse_type("int[]").is_tensor_like());
  EXPECT_EQ(parse_type("int[2]").size(), 2);
  EXPECT_EQ(parse_type("int[2]").elem(), i);

  for (const char* text :
       {"Tensor",     "int",     "SymInt",    "float",        "bool",      "str",       "Scalar",
        "ScalarType", "Device",  "Layout",    "MemoryFormat", "Generator", "Dimname",   "Storage",
        "Stream",     "complex", "Any",       "int[]",        "int[2]",    "bool[3]",   "Tensor?[]",
        "int[]?",     "int[1]?", "SymInt[]?", "Tensor[][]",   "float[]?",  "Dimname[1]"}) {
    EXPECT_EQ(parse_type(text).to_string(), text);
  }
  // Alias annotations belong to arguments, not to types.
  EXPECT_TRUE(error_of([] { parse_type("Tensor(a)"); }));
  EXPECT_TRUE(error_of([] { (void)Type::optional(Type::optional(Type())); }));
  EXPECT_TRUE(error_of([] { (void)Type::base(TypeKind::kList); }));
  EXPECT_TRUE(error_of([] { (void)Type().elem(); }));
}

TEST(SchemaStructure, AliasAnnotations) {
  auto a = parse_argument("Tensor(a! -> a|b) self");
  ASSERT_TRUE(a.alias_info);
  EXPECT_EQ(a.alias_info->before_set, std::vector<std::string>{"a"});
  EXPECT_EQ(a.alias_info->after_set, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(a.alias_info->is_write);
  EXPECT_EQ(a.alias_info->all_sets(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.to_string(), "Tensor(a! -> a|b) self");

  a = parse_argument("Tensor(a -> *) self");
  EXPECT_FALSE(a.alias_info->is_write);
  EXPECT_TRUE(a.alias_info->after_has_wildcard());
  EXPECT_FALSE(a.alias_info->before_has_wildcard());

  a = parse_argument("Tensor(a!)[] self");
  EXPECT_EQ(a.type, Type::list(Type()));
  EXPECT_TRUE(a.is_write());
  EXPECT_EQ(a.to_string(), "Tensor(a!)[] self");

  a = parse_argument("Tensor(a)? self");
  EXPECT_EQ(a.type, Type::optional(Type()));
  EXPECT_FALSE(a.is_write());
  EXPECT_EQ(a.alias_info->effective_after_set(), std::vector<std::string>{"a"});
}

// ---------------------------------------------------------------------------------------------
// Defaults
// ---------------------------------------------------------------------------------------------

DefaultValue default_of(const std::string& argument) {
  const auto a = parse_argument(argument);
  EXPECT_TRUE(a.default_value) << argument;
  return a.default_value.value_or(DefaultValue{});
}

TEST(SchemaDefaults, Classification) {
  auto d = default_of("int x=1");
  EXPECT_EQ(d.kind, DefaultKind::kInt);
  EXPECT_EQ(std::get<std::int64_t>(d.value), 1);
  d = default_of("int x=-1");
  EXPECT_EQ(std::get<std::int64_t>(d.value), -1);
  EXPECT_EQ(d.text, "-1");

  d = default_of("float eps=1e-05");
  EXPECT_EQ(d.kind, DefaultKind::kFloat);
  EXPECT_DOUBLE_EQ(std::get<double>(d.value), 1e-05);
  EXPECT_EQ(d.text, "1e-05");
  d = default_of("float p=2.");
  EXPECT_DOUBLE_EQ(std::get<double>(d.value), 2.0);
  EXPECT_EQ(d.text, "2.");
  d = default_of("float p=2");  // an int literal for a float argument
  EXPECT_EQ(d.kind, DefaultKind::kFloat);
  EXPECT_DOUBLE_EQ(std::get<double>(d.value), 2.0);
  EXPECT_EQ(d.text, "2");
  d = default_of("Scalar s=0.01");
  EXPECT_EQ(d.kind, DefaultKind::kFloat);
  d = default_of("Scalar alpha=1");
  EXPECT_EQ(d.kind, DefaultKind::kInt);
  d = default_of("float m=-inf");
  EXPECT_EQ(std::get<double>(d.value), -std::numeric_limits<double>::infinity());
  d = default_of("float m=nan");
  EXPECT_TRUE(std::isnan(std::get<double>(d.value)));

  d = default_of("int[] dims=[0, 1]");
  EXPECT_EQ(d.kind, DefaultKind::kIntList);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(d.value), (std::vector<std::int64_t>{0, 1}));
  d = default_of("int[] dims=[0,1]");
  EXPECT_EQ(d.text, "[0, 1]");
  d = default_of("int[1] dim=[]");
  EXPECT_EQ(d.kind, DefaultKind::kIntList);
  EXPECT_TRUE(std::get<std::vector<std::int64_t>>(d.value).empty());
  d = default_of("int[1] dim=1");  // a bare int broadcasts to the fixed size
  EXPECT_EQ(d.kind, DefaultKind::kIntList);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(d.value), std::vector<std::int64_t>{1});
  EXPECT_EQ(d.text, "1");
  d = default_of("SymInt[2] padding=0");
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(d.value), (std::vector<std::int64_t>{0, 0}));
  d = default_of("float[] f=[1, 0.5]");
  EXPECT_EQ(d.kind, DefaultKind::kFloatList);
  EXPECT_EQ(std::get<std::vector<double>>(d.value), (std::vector<double>{1.0, 0.5}));
  d = default_of("bool[3] m=[True, False, True]");
  EXPECT_EQ(d.kind, DefaultKind::kBoolList);
  EXPECT_EQ(std::get<std::vector<bool>>(d.value), (std::vector<bool>{true, false, true}));
  d = default_of("float[]? f=[]");
  EXPECT_EQ(d.kind, DefaultKind::kFloatList);

  d = default_of("bool b=True");
  EXPECT_EQ(d.kind, DefaultKind::kBool);
  EXPECT_TRUE(std::get<bool>(d.value));
  d = default_of("Tensor? t=None");
  EXPECT_EQ(d.kind, DefaultKind::kNone);
  EXPECT_EQ(d.text, "None");

  d = default_of("str reduce=\"none\"");
  EXPECT_EQ(d.kind, DefaultKind::kString);
  EXPECT_EQ(std::get<std::string>(d.value), "none");
  EXPECT_EQ(d.text, "\"none\"");
  d = default_of("str s='str'");
  EXPECT_EQ(std::get<std::string>(d.value), "str");
  EXPECT_EQ(d.text, "'str'");
  d = default_of("str s=\"a\\\"b\"");
  EXPECT_EQ(std::get<std::string>(d.value), "a\"b");

  d = default_of("ScalarType? dtype=4");  // PyTorch prints enum defaults by number
  EXPECT_EQ(d.kind, DefaultKind::kInt);
  EXPECT_EQ(std::get<std::int64_t>(d.value), 4);

  for (const char* text : {"int reduction=Mean", "MemoryFormat m=contiguous_format",
                           "ScalarType t=long", "Layout l=strided"}) {
    d = default_of(text);
    EXPECT_EQ(d.kind, DefaultKind::kEnumIdentifier) << text;
    EXPECT_EQ(std::get<std::string>(d.value), d.text);
  }
}

// default_ivalue: the value a call that leaves the argument out passes.
TEST(SchemaDefaults, IValuesOfDefaults) {
  auto value = [](const std::string& argument) { return default_ivalue(parse_argument(argument)); };
  // PyTorch prints a ScalarType default as its enum number (randperm's "ScalarType? dtype=4").
  const std::vector<std::pair<int, DType>> numbers = {
      {0, DType::UInt8},   {1, DType::Int8},      {2, DType::Int16},       {3, DType::Int32},
      {4, DType::Int64},   {5, DType::Float16},   {6, DType::Float32},     {7, DType::Float64},
      {9, DType::Complex64}, {10, DType::Complex128}, {11, DType::Bool}, {15, DType::BFloat16}};
  for (const auto& [number, dtype] : numbers) {
    for (const char* type : {"ScalarType?", "ScalarType"}) {
      const std::string argument = std::string(type) + " dtype=" + std::to_string(number);
      const auto v = value(argument);
      ASSERT_TRUE(v && v->get_if<DType>()) << argument;
      EXPECT_EQ(*v->get_if<DType>(), dtype) << argument;
    }
  }
  // Numbers with no DType here (8 ComplexHalf, 12 QInt8) and a Layout by number have no value.
  EXPECT_FALSE(value("ScalarType? dtype=8"));
  EXPECT_FALSE(value("ScalarType? dtype=12"));
  EXPECT_FALSE(value("Layout? layout=0"));
  // The same number stays a number for an int; None stays None.
  ASSERT_TRUE(value("int x=4"));
  EXPECT_EQ(value("int x=4")->to_int(), 4);
  ASSERT_TRUE(value("ScalarType? dtype=None"));
  EXPECT_TRUE(value("ScalarType? dtype=None")->is_none());
}

TEST(SchemaDefaults, MismatchedKindsAreRejected) {
  for (const char* text :
       {"bool b=3", "int x=\"s\"", "Tensor t=1", "Tensor t=None", "int x=None", "int x=1.5",
        "float f=True", "str s=1", "bool b=[True]", "int[] x=1", "int[] x=[1.5]", "Tensor[] t=[]",
        "float f=[1.0]", "bool b=Mean", "ScalarType d=True", "Layout l=1.5", "Generator g=None"}) {
    SCOPED_TRACE(text);
    const auto e = error_of([&] { parse_argument(text); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), ErrorCode::kSchemaParse);
    EXPECT_NE(e->message().find("does not fit type"), std::string::npos) << e->message();
  }
}

// ---------------------------------------------------------------------------------------------
// Kinds and alias queries
// ---------------------------------------------------------------------------------------------

TEST(SchemaQueries, Kinds) {
  const std::vector<std::pair<std::string, SchemaKind>> cases = {
      {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
       SchemaKind::kFunctional},
      {"aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
       SchemaKind::kInplace},
      {"aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
       SchemaKind::kOut},
      {"aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
       "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)",
       SchemaKind::kOut},
      {"aten::_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()",
       SchemaKind::kInplace},
      {"aten::_foreach_add.List_out(Tensor[] self, Tensor[] other, *, Scalar alpha=1, "
       "Tensor(a!)[] out) -> ()",
       SchemaKind::kOut},
      {"aten::_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, "
       "Tensor(a!) running_mean, Tensor(b!) running_var, bool training, float momentum, "
       "float eps) -> (Tensor, Tensor, Tensor)",
       SchemaKind::kMutable},
      {"aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
       SchemaKind::kView},
      {"aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)", SchemaKind::kView},
      // Named like inplace but returns something else: mutable.
      {"aten::weird_(Tensor(a!) self) -> Tensor", SchemaKind::kMutable},
      // Writes a kwarg-only tensor but does not return it while returning something: mutable.
      {"aten::f(Tensor self, *, Tensor(a!) buf) -> Tensor", SchemaKind::kMutable},
  };
  for (const auto& [text, kind] : cases) {
    EXPECT_EQ(parse_schema(text).kind(), kind)
        << text << " is " << to_string(parse_schema(text).kind());
  }
  EXPECT_EQ(to_string(SchemaKind::kOut), "out");
}

TEST(SchemaQueries, Mutability) {
  const auto s = parse_schema(
      "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
      "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)");
  EXPECT_TRUE(s.is_mutable());
  EXPECT_FALSE(s.is_mutable(0));
  EXPECT_TRUE(s.is_mutable(3));
  EXPECT_TRUE(s.is_mutable(4));
  EXPECT_EQ(s.mutable_arguments(), (Sizes{3, 4}));
  EXPECT_FALSE(parse_schema("aten::abs(Tensor self) -> Tensor").is_mutable());

  const auto e = error_of([&] { (void)s.is_mutable(5); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::kInvalidArgument);
}

TEST(SchemaQueries, Aliasing) {
  auto s = parse_schema(
      "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, "
      "Tensor(b!) max_values) -> (Tensor(a!) values, Tensor(b!) indices)");
  EXPECT_TRUE(s.may_alias(0, 3));
  EXPECT_FALSE(s.may_alias(0, 4));
  EXPECT_FALSE(s.may_alias(0, 0));
  EXPECT_TRUE(s.may_alias(1, 4));
  EXPECT_EQ(s.output_aliases(), (std::vector<Sizes>{{3}, {4}}));

  s = parse_schema(
      "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> "
      "Tensor(a)[]");
  EXPECT_TRUE(s.may_alias(0, 0));
  EXPECT_FALSE(s.may_alias(0, 1));
  EXPECT_EQ(s.output_aliases(), (std::vector<Sizes>{{0}}));

  // The wildcard reaches any annotated tensor.
  s = parse_schema("aten::w(Tensor(a -> *) x, Tensor(b) y, Tensor z) -> (Tensor(b), Tensor)");
  EXPECT_EQ(s.output_aliases(), (std::vector<Sizes>{{0, 1}, {}}));

  s = parse_schema("aten::abs(Tensor self) -> Tensor");
  EXPECT_EQ(s.output_aliases(), (std::vector<Sizes>{{}}));

  const auto e1 = error_of([&] { (void)s.may_alias(1, 0); });
  ASSERT_TRUE(e1);
  EXPECT_EQ(e1->code(), ErrorCode::kInvalidArgument);
  const auto e2 = error_of([&] { (void)s.may_alias(0, 1); });
  ASSERT_TRUE(e2);
  EXPECT_EQ(e2->code(), ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

TEST(SchemaErrors, MessageNamesColumnExpectationAndFinding) {
  const std::string text = "aten::f(Tensor a x) -> Tensor";
  const auto e = error_of([&] { parse_schema(text); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), ErrorCode::kSchemaParse);
  const std::size_t col = text.find('x') + 1;
  EXPECT_EQ(e->message(), "schema parse error at column " + std::to_string(col) +
                              ": expected ')' or ',' but found 'x'\n" + text + "\n" +
                              std::string(col - 1, ' ') + "^");
}

struct BadSchema {
  const char* text;
  std::size_t column;
  const char* fragment;  // expected in the message
};

TEST(SchemaErrors, MalformedSchemas) {
  const std::vector<BadSchema> cases = {
      {"aten::f(Tensor a) Tensor", 19, "expected '->' but found 'Tensor'"},
      {"aten::f(Tensor a -> Tensor", 18, "expected ')' or ','"},
      {"aten::f(Tensor a)) -> Tensor", 18, "expected '->' but found ')'"},
      {"aten::f(Tensor a) -> (Tensor", 29, "expected ')' or ',' but found end of input"},
      {"aten::f(Tensr a) -> Tensor", 9, "unknown type 'Tensr'"},
      {"aten::f(Tensor(a! a) -> Tensor", 19, "expected '->' or ')' but found 'a'"},
      {"aten::f(Tensor(a! self) -> Tensor", 19, "expected '->' or ')'"},
      {"aten::f(Tensor() a) -> Tensor", 16, "expected an alias set name or '*'"},
      {"(Tensor a) -> Tensor", 1, "expected operator name but found '('"},
      {"aten::(Tensor a) -> Tensor", 7, "expected operator name after '::'"},
      {"aten::f.(Tensor a) -> Tensor", 9, "expected overload name"},
      {"aten::f(int[x] a) -> Tensor", 13, "expected list size or ']' but found 'x'"},
      {"aten::f(int[0] a) -> Tensor", 13, "list size must be an integer"},
      {"aten::f(int[2.5] a) -> Tensor", 13, "list size must be an integer"},
      {"aten::f(Tensor a) -> (Tensor) junk", 31, "expected end of schema but found 'junk'"},
      {"aten::f(Tensor a) -> Tensor x y", 31, "expected end of schema but found 'y'"},
      {"aten::f(bool b=3) -> Tensor", 16, "default value 3 does not fit type bool"},
      {"aten::f(int x=\"s\") -> Tensor", 15, "does not fit type int"},
      {"aten::f(Tensor t=1) -> Tensor", 18, "does not fit type Tensor"},
      {"aten::f(Tensor a, int a) -> Tensor", 19, "duplicate argument name 'a'"},
      {"aten::f(Tensor a) -> (Tensor x, Tensor x)", 33, "duplicate return name 'x'"},
      {"aten::f(Tensor a) -> Tensor(a!)", 22, "return writes alias set 'a'"},
      {"aten::f(Tensor a, *, *, Tensor b) -> Tensor", 22, "only one '*'"},
      {"aten::f(Tensor a, *) -> Tensor", 20, "expected ',' after '*' but found ')'"},
      {"aten::f(Tensor a, *,) -> Tensor", 21, "expected a type but found ')'"},
      {"aten::f(int(a) x) -> Tensor", 12, "alias annotations are only allowed on Tensor"},
      {"aten::f(int?? x) -> Tensor", 13, "optional of optional"},
      {"aten::f(str s=\"abc) -> Tensor", 15, "unterminated string"},
      {"aten::f(Tensor a) -> Tensor=1", 28, "expected end of schema but found '='"},
      {"aten::f(Tensor a, ..., Tensor b) -> Tensor", 22, "expected ')' after '...'"},
      {"aten::f(int x=99999999999999999999) -> Tensor", 15, "out of range"},
      {"aten::f(Tensor a) -> Tensor #", 29, "found '#'"},
      {"aten::f(Tensor(a|a) x) -> Tensor", 18, "alias set 'a' repeats"},
      {"", 1, "expected operator name but found end of input"},
      {"aten::f(int[5000] x) -> Tensor", 13, "list size must be an integer"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const auto e = error_of([&] { parse_schema(c.text); });
    ASSERT_TRUE(e) << "parsed: " << parse_schema(c.text).to_string();
    EXPECT_EQ(e->code(), ErrorCode::kSchemaParse);
    const std::string prefix = "schema parse error at column " + std::to_string(c.column) + ": ";
    EXPECT_EQ(e->message().rfind(prefix, 0), 0u) << e->message();
    EXPECT_NE(e->message().find(c.fragment), std::string::npos) << e->message();
    // The message ends with the schema line and a caret under the column.
    const std::string tail = "\n" + std::string(c.column - 1, ' ') + "^";
    EXPECT_TRUE(e->message().size() >= tail.size() &&
                e->message().compare(e->message().size() - tail.size(), tail.size(), tail) == 0)
        << e->message();
  }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

// Runs a property for at least `min_cases` successful cases (more if RC_PARAMS asks for more),
// reporting a counterexample as a test failure.
template <typename Testable>
void check_property(int min_cases, const Testable& testable) {
  auto params = rc::detail::configuration().testParams;
  params.maxSuccess = std::max(params.maxSuccess, min_cases);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  int runs = 0;
  const auto counted = [&] {
    ++runs;
    testable();
  };
  const auto result = rc::detail::checkTestable(counted, metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream message;
    rc::detail::printResultMessage(result, message);
    FAIL() << message.str();
  }
  EXPECT_GE(runs, min_cases);
}

const std::vector<TypeKind> kBaseKinds = {
    TypeKind::kTensor,  TypeKind::kInt,     TypeKind::kSymInt,       TypeKind::kFloat,
    TypeKind::kBool,    TypeKind::kStr,     TypeKind::kScalar,       TypeKind::kScalarType,
    TypeKind::kDevice,  TypeKind::kLayout,  TypeKind::kMemoryFormat, TypeKind::kGenerator,
    TypeKind::kDimname, TypeKind::kStorage, TypeKind::kStream,       TypeKind::kComplex,
    TypeKind::kAny};

// Float texts in PyTorch's printed style, with their values.
const std::vector<std::string> kFloatTexts = {"1e-05", "2.",  "0.01", "0.5",  "-1.5", "1e+10",
                                              "3.25",  "-0.", "inf",  "-inf", "100.", "1e-08"};
const std::vector<std::string> kEnumIdents = {"Mean", "contiguous_format", "long", "strided",
                                              "cpu",  "preserve_format"};

// The generators below run inside rc::gen::exec, drawing with `*gen`.

std::string draw_ident() {
  static const std::string first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
  static const std::string rest = first + "0123456789";
  std::string s(1, *rc::gen::elementOf(first));
  const int extra = *rc::gen::inRange(0, 8);
  for (int i = 0; i < extra; ++i) s += *rc::gen::elementOf(rest);
  return s;
}

Type draw_type() {
  // Tensor a third of the time: it is the only type with alias annotations.
  Type t = Type::base(*rc::gen::inRange(0, 3) == 0 ? TypeKind::kTensor
                                                   : *rc::gen::elementOf(kBaseKinds));
  const int layers = *rc::gen::inRange(0, 3);
  for (int i = 0; i < layers; ++i) {
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        t = Type::list(t);
        break;
      case 1:
        t = Type::list(t, *rc::gen::inRange<std::int64_t>(1, 5));
        break;
      default:
        if (!t.is_optional()) t = Type::optional(t);
        break;
    }
  }
  return t;
}

DefaultValue make_default(DefaultKind kind, std::string text, DefaultValue::Value value) {
  DefaultValue d;
  d.kind = kind;
  d.text = std::move(text);
  d.value = std::move(value);
  return d;
}

// A random scalar default for a base kind: {text, kind, value}; nullopt if the kind has none.
std::optional<DefaultValue> draw_scalar_default(TypeKind kind) {
  const auto draw_int = [] {
    const auto v = *rc::gen::inRange<std::int64_t>(-1000, 1000);
    return make_default(DefaultKind::kInt, std::to_string(v), v);
  };
  const auto draw_float = [] {
    const auto text = *rc::gen::elementOf(kFloatTexts);
    return make_default(DefaultKind::kFloat, text, std::strtod(text.c_str(), nullptr));
  };
  const auto draw_bool = [] {
    const bool b = *rc::gen::arbitrary<bool>();
    return make_default(DefaultKind::kBool, b ? "True" : "False", b);
  };
  const auto draw_string = [] {
    std::string content;
    const int n = *rc::gen::inRange(0, 6);
    for (int i = 0; i < n; ++i) content += *rc::gen::elementOf(std::string("abcxyz _-:0"));
    const char quote = *rc::gen::elementOf(std::string("\"'"));
    return make_default(DefaultKind::kString, quote + content + quote, content);
  };
  const auto draw_enum = [] {
    const auto id = *rc::gen::elementOf(kEnumIdents);
    return make_default(DefaultKind::kEnumIdentifier, id, id);
  };
  switch (kind) {
    case TypeKind::kInt:
    case TypeKind::kSymInt:
      return *rc::gen::arbitrary<bool>() ? draw_int() : draw_enum();
    case TypeKind::kFloat:
    case TypeKind::kComplex: {
      if (*rc::gen::arbitrary<bool>()) return draw_float();
      const auto v = *rc::gen::inRange(-50, 50);
      return make_default(DefaultKind::kFloat, std::to_string(v), static_cast<double>(v));
    }
    case TypeKind::kBool:
      return draw_bool();
    case TypeKind::kScalar: {
      switch (*rc::gen::inRange(0, 3)) {
        case 0:
          return draw_int();
        case 1:
          return draw_float();
        default:
          return draw_bool();
      }
    }
    case TypeKind::kAny:
      return draw_int();
    case TypeKind::kStr:
    case TypeKind::kDimname:
      return draw_string();
    case TypeKind::kScalarType:
    case TypeKind::kLayout:
    case TypeKind::kMemoryFormat:
      return draw_enum();
    case TypeKind::kDevice:
      return *rc::gen::arbitrary<bool>() ? draw_enum() : draw_string();
    default:
      return std::nullopt;
  }
}

// A random default that fits `type`, built as the parser would classify it.
std::optional<DefaultValue> draw_default(const Type& type) {
  if (type.is_optional()) {
    if (*rc::gen::arbitrary<bool>()) return make_default(DefaultKind::kNone, "None", {});
    return draw_default(type.elem());
  }
  if (!type.is_list()) return draw_scalar_default(type.kind());
  const TypeKind elem = type.elem().kind();
  DefaultKind kind;
  if (elem == TypeKind::kInt || elem == TypeKind::kSymInt) {
    kind = DefaultKind::kIntList;
  } else if (elem == TypeKind::kFloat) {
    kind = DefaultKind::kFloatList;
  } else if (elem == TypeKind::kBool) {
    kind = DefaultKind::kBoolList;
  } else {
    return std::nullopt;
  }
  // A written list, or (for T[N]) one bare element standing for N copies.
  const bool bare = type.size() && *rc::gen::arbitrary<bool>();
  const std::size_t n = bare ? 1 : static_cast<std::size_t>(*rc::gen::inRange(0, 4));
  std::vector<DefaultValue> elems;
  for (std::size_t i = 0; i < n; ++i) {
    auto e = draw_scalar_default(elem == TypeKind::kSymInt ? TypeKind::kInt : elem);
    if (e->kind == DefaultKind::kEnumIdentifier)
      e = make_default(DefaultKind::kInt, "7", std::int64_t{7});
    elems.push_back(std::move(*e));
  }
  std::string text;
  if (bare) {
    text = elems[0].text;
    elems.assign(static_cast<std::size_t>(*type.size()), elems[0]);
  } else {
    text = "[";
    for (std::size_t i = 0; i < elems.size(); ++i) text += (i ? ", " : "") + elems[i].text;
    text += "]";
  }
  DefaultValue::Value value;
  if (kind == DefaultKind::kIntList) {
    std::vector<std::int64_t> v;
    for (const auto& e : elems) v.push_back(std::get<std::int64_t>(e.value));
    value = v;
  } else if (kind == DefaultKind::kFloatList) {
    std::vector<double> v;
    for (const auto& e : elems) v.push_back(std::get<double>(e.value));
    value = v;
  } else {
    std::vector<bool> v;
    for (const auto& e : elems) v.push_back(std::get<bool>(e.value));
    value = v;
  }
  return make_default(kind, std::move(text), std::move(value));
}

std::vector<std::string> draw_alias_set(const std::vector<std::string>& pool) {
  std::vector<std::string> set{*rc::gen::elementOf(pool)};
  if (*rc::gen::inRange(0, 4) == 0) {
    const auto extra = *rc::gen::elementOf(pool);
    if (std::find(set.begin(), set.end(), extra) == set.end()) set.push_back(extra);
  }
  return set;
}

// Makes every non-empty name in `args` unique by suffixing repeats.
void uniquify(std::vector<Argument>& args) {
  std::set<std::string> seen;
  for (auto& a : args) {
    if (a.name.empty()) continue;
    for (int k = 0; seen.count(a.name) != 0; ++k) a.name += "_" + std::to_string(k);
    seen.insert(a.name);
  }
}

rc::Gen<FunctionSchema> gen_schema() {
  return rc::gen::exec([] {
    const std::vector<std::string> set_names = {"a", "b", "c", "d"};
    FunctionSchema s;
    if (*rc::gen::arbitrary<bool>()) s.ns = draw_ident();
    s.name = draw_ident();
    if (*rc::gen::arbitrary<bool>()) s.overload_name = draw_ident();

    const int nargs = *rc::gen::inRange(0, 7);
    const int first_kwarg = *rc::gen::inRange(0, nargs + 1);
    std::vector<std::string> declared_sets;
    for (int i = 0; i < nargs; ++i) {
      Argument a;
      a.type = draw_type();
      a.name = draw_ident();
      a.kwarg_only = i >= first_kwarg;
      if (*rc::gen::inRange(0, 3) == 0) a.default_value = draw_default(a.type);
      if (a.type.is_tensor_like() && *rc::gen::arbitrary<bool>()) {
        AliasInfo info;
        info.before_set = draw_alias_set(set_names);
        info.is_write = *rc::gen::arbitrary<bool>();
        switch (*rc::gen::inRange(0, 4)) {
          case 0:
            info.after_set = {"*"};
            break;
          case 1:
            info.after_set = draw_alias_set(set_names);
            break;
          default:
            break;
        }
        for (const auto& name : info.all_sets()) {
          if (name != "*") declared_sets.push_back(name);
        }
        a.alias_info = std::move(info);
      }
      s.arguments.push_back(std::move(a));
    }
    uniquify(s.arguments);

    const int nrets = *rc::gen::inRange(0, 4);
    const bool named = *rc::gen::arbitrary<bool>();
    for (int j = 0; j < nrets; ++j) {
      Argument r;
      r.type = draw_type();
      if (named) r.name = draw_ident();
      if (r.type.is_tensor_like() && *rc::gen::arbitrary<bool>()) {
        AliasInfo info;
        // A write return must name a set that some argument declares.
        const bool can_write = !declared_sets.empty();
        info.is_write = can_write && *rc::gen::arbitrary<bool>();
        info.before_set = {info.is_write ? *rc::gen::elementOf(declared_sets)
                                         : *rc::gen::elementOf(set_names)};
        r.alias_info = std::move(info);
      }
      s.returns.push_back(std::move(r));
    }
    uniquify(s.returns);
    s.is_vararg = *rc::gen::inRange(0, 10) == 0;
    s.is_varret = *rc::gen::inRange(0, 10) == 0;
    return s;
  });
}

TEST(SchemaProperty, RandomSchemasRoundTrip) {
  check_property(300, [] {
    const FunctionSchema s = *gen_schema();
    const std::string text = s.to_string();
    RC_LOG() << text << "\n";
    const FunctionSchema parsed = parse_schema(text);
    RC_ASSERT(parsed.to_string() == text);
    RC_ASSERT(parsed == s);
  });
}

// Whatever the input, the parser returns or throws Error(kSchemaParse): it never crashes,
// hangs, or throws anything else. What parses prints to a string that parses to the same schema.
void parse_never_crashes(const std::string& text) {
  std::optional<FunctionSchema> parsed;
  try {
    parsed = parse_schema(text);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == ErrorCode::kSchemaParse);
  }
  if (parsed) {
    // Printing is idempotent (structural equality could trip over a `nan` default).
    const std::string printed = parsed->to_string();
    RC_ASSERT(parse_schema(printed).to_string() == printed);
  }
  for (auto f : {+[](const std::string& t) { (void)parse_type(t); },
                 +[](const std::string& t) { (void)parse_argument(t); }}) {
    try {
      f(text);
    } catch (const Error& e) {
      RC_ASSERT(e.code() == ErrorCode::kSchemaParse);
    }
  }
}

TEST(SchemaProperty, RandomBytesNeverCrashTheParser) {
  check_property(500, [] { parse_never_crashes(*rc::gen::arbitrary<std::string>()); });
}

// Random sequences of schema tokens reach much deeper into the grammar than random bytes.
TEST(SchemaProperty, RandomTokenSoupNeverCrashesTheParser) {
  const std::vector<std::string> tokens = {
      "aten",     "::",   "foo",   ".",      "out",  "(",     ")",   "Tensor", "int",  "SymInt",
      "float",    "bool", "str",   "Scalar", "?",    "[",     "]",   "[2]",    "(a!)", "(a)",
      "(a -> *)", "a",    "b",     "!",      "|",    "->",    "*",   ",",      "=",    "1",
      "-1",       "2.",   "1e-05", "True",   "None", "\"s\"", "'t'", "[]",     "...",  " ",
      "x",        "y",    "Mean",  "inf",    "-",    "\t"};
  check_property(500, [&] {
    const auto parts = *rc::gen::container<std::vector<std::string>>(rc::gen::elementOf(tokens));
    std::string text;
    for (const auto& p : parts) text += p;
    parse_never_crashes(text);
  });
}

// Single-byte edits of valid schemas: most become parse errors one token away from valid.
TEST(SchemaProperty, MutatedSchemasNeverCrashTheParser) {
  check_property(500, [] {
    std::string text = *rc::gen::elementOf(kHandWritten);
    const int edits = *rc::gen::inRange(1, 4);
    for (int i = 0; i < edits; ++i) {
      const auto pos = *rc::gen::inRange<std::size_t>(0, text.size() + 1);
      const char c = *rc::gen::elementOf(std::string("()[]<>,*?!|=.-:'\" aT1x\t"));
      switch (*rc::gen::inRange(0, 3)) {
        case 0:
          text.insert(pos, 1, c);
          break;
        case 1:
          if (pos < text.size()) text.erase(pos, 1);
          break;
        default:
          if (pos < text.size()) text[pos] = c;
          break;
      }
    }
    parse_never_crashes(text);
  });
}

}  // namespace
}  // namespace opconform
