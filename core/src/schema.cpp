// The schema language: types, printing, queries, and a recursive-descent parser.
//
// Layout of this file:
//   1. names and printing of types, alias annotations, arguments and schemas
//   2. FunctionSchema queries (kind, mutability, aliasing)
//   3. the lexer (string_view -> tokens with 1-based columns)
//   4. the parser (tokens -> FunctionSchema), default-value classification, validation
#include "opconform/core/schema.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "opconform/core/error.h"

namespace opconform {
namespace {

// The spelling of each base type in the schema language.
constexpr std::array<std::pair<TypeKind, std::string_view>, 17> kBaseTypeNames{{
    {TypeKind::kTensor, "Tensor"},
    {TypeKind::kInt, "int"},
    {TypeKind::kSymInt, "SymInt"},
    {TypeKind::kFloat, "float"},
    {TypeKind::kBool, "bool"},
    {TypeKind::kStr, "str"},
    {TypeKind::kScalar, "Scalar"},
    {TypeKind::kScalarType, "ScalarType"},
    {TypeKind::kDevice, "Device"},
    {TypeKind::kLayout, "Layout"},
    {TypeKind::kMemoryFormat, "MemoryFormat"},
    {TypeKind::kGenerator, "Generator"},
    {TypeKind::kDimname, "Dimname"},
    {TypeKind::kStorage, "Storage"},
    {TypeKind::kStream, "Stream"},
    {TypeKind::kComplex, "complex"},
    {TypeKind::kAny, "Any"},
}};

// Fixed list sizes beyond this are rejected: `int[N] x=1` materializes N values.
constexpr std::int64_t kMaxFixedListSize = 4096;

std::optional<TypeKind> base_type_from_name(std::string_view name) {
  for (const auto& [kind, spelling] : kBaseTypeNames) {
    if (spelling == name) return kind;
  }
  return std::nullopt;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

bool contains(const std::vector<std::string>& set, std::string_view item) {
  return std::find(set.begin(), set.end(), item) != set.end();
}

}  // namespace

// =============================================================================================
// 1. Names and printing
// =============================================================================================

std::string_view to_string(TypeKind kind) {
  if (kind == TypeKind::kList) return "List";
  if (kind == TypeKind::kOptional) return "Optional";
  for (const auto& [k, spelling] : kBaseTypeNames) {
    if (k == kind) return spelling;
  }
  return "?";
}

std::string_view to_string(DefaultKind kind) {
  switch (kind) {
    case DefaultKind::kNone:
      return "none";
    case DefaultKind::kBool:
      return "bool";
    case DefaultKind::kInt:
      return "int";
    case DefaultKind::kFloat:
      return "float";
    case DefaultKind::kIntList:
      return "int_list";
    case DefaultKind::kFloatList:
      return "float_list";
    case DefaultKind::kBoolList:
      return "bool_list";
    case DefaultKind::kString:
      return "string";
    case DefaultKind::kEnumIdentifier:
      return "enum_identifier";
  }
  return "?";
}

std::string_view to_string(SchemaKind kind) {
  switch (kind) {
    case SchemaKind::kFunctional:
      return "functional";
    case SchemaKind::kInplace:
      return "inplace";
    case SchemaKind::kOut:
      return "out";
    case SchemaKind::kMutable:
      return "mutable";
    case SchemaKind::kView:
      return "view";
  }
  return "?";
}

Type Type::base(TypeKind kind) {
  OPCONFORM_CHECK(kind != TypeKind::kList && kind != TypeKind::kOptional,
                  ErrorCode::kInvalidArgument, "Type::base needs a base kind, got ",
                  opconform::to_string(kind));
  Type t;
  t.kind_ = kind;
  return t;
}

Type Type::list(Type elem, std::optional<std::int64_t> size) {
  OPCONFORM_CHECK(!size || (*size >= 1 && *size <= kMaxFixedListSize), ErrorCode::kInvalidArgument,
                  "fixed list size must be in [1, ", kMaxFixedListSize, "], got ",
                  size.value_or(0));
  Type t;
  t.kind_ = TypeKind::kList;
  t.elem_ = std::make_shared<const Type>(std::move(elem));
  t.size_ = size;
  return t;
}

Type Type::optional(Type elem) {
  OPCONFORM_CHECK(!elem.is_optional(), ErrorCode::kInvalidArgument, "optional of optional type '",
                  elem.to_string(), "?' is not allowed");
  Type t;
  t.kind_ = TypeKind::kOptional;
  t.elem_ = std::make_shared<const Type>(std::move(elem));
  return t;
}

const Type& Type::elem() const {
  OPCONFORM_CHECK(elem_ != nullptr, ErrorCode::kInvalidArgument, "type '", to_string(),
                  "' has no element type");
  return *elem_;
}

TypeKind Type::base_kind() const noexcept {
  const Type* t = this;
  while (t->elem_) t = t->elem_.get();
  return t->kind_;
}

std::string Type::to_string(const AliasInfo* alias) const {
  switch (kind_) {
    case TypeKind::kList:
      return elem_->to_string(alias) + (size_ ? "[" + std::to_string(*size_) + "]" : "[]");
    case TypeKind::kOptional:
      return elem_->to_string(alias) + "?";
    default: {
      std::string out(opconform::to_string(kind_));
      if (alias && kind_ == TypeKind::kTensor) out += "(" + alias->to_string() + ")";
      return out;
    }
  }
}

bool operator==(const Type& a, const Type& b) {
  if (a.kind_ != b.kind_ || a.size_ != b.size_) return false;
  if (!a.elem_ || !b.elem_) return a.elem_ == b.elem_;
  return *a.elem_ == *b.elem_;
}

bool AliasInfo::before_has_wildcard() const noexcept { return contains(before_set, "*"); }
bool AliasInfo::after_has_wildcard() const noexcept { return contains(effective_after_set(), "*"); }

std::vector<std::string> AliasInfo::all_sets() const {
  std::vector<std::string> out = before_set;
  for (const auto& s : after_set) {
    if (!contains(out, s)) out.push_back(s);
  }
  return out;
}

std::string AliasInfo::to_string() const {
  std::string out = join(before_set, "|");
  if (is_write) out += "!";
  if (!after_set.empty()) out += " -> " + join(after_set, "|");
  return out;
}

std::string Argument::to_string() const {
  std::string out = type.to_string(alias_info ? &*alias_info : nullptr);
  if (!name.empty()) out += " " + name;
  if (default_value) out += "=" + default_value->text;
  return out;
}

std::string FunctionSchema::qualified_name() const { return ns.empty() ? name : ns + "::" + name; }

std::string FunctionSchema::full_name() const {
  return overload_name.empty() ? qualified_name() : qualified_name() + "." + overload_name;
}

// Mirrors c10's operator<<(ostream&, const FunctionSchema&).
std::string FunctionSchema::to_string() const {
  std::string out = full_name() + "(";
  bool seen_kwarg_only = false;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (i > 0) out += ", ";
    if (arguments[i].kwarg_only && !seen_kwarg_only) {
      out += "*, ";
      seen_kwarg_only = true;
    }
    out += arguments[i].to_string();
  }
  if (is_vararg) out += arguments.empty() ? "..." : ", ...";
  out += ") -> ";
  const bool bare = returns.size() == 1 && !is_varret;
  if (bare) return out + returns[0].to_string();
  if (returns.empty() && is_varret) return out + "...";
  out += "(";
  for (std::size_t i = 0; i < returns.size(); ++i) {
    if (i > 0) out += ", ";
    out += returns[i].to_string();
  }
  if (is_varret) out += ", ...";
  return out + ")";
}

// =============================================================================================
// 2. Queries
// =============================================================================================

bool FunctionSchema::is_mutable(std::size_t arg_index) const {
  OPCONFORM_CHECK(arg_index < arguments.size(), ErrorCode::kInvalidArgument, full_name(),
                  ": argument index ", arg_index, " out of range (", arguments.size(),
                  " arguments)");
  return arguments[arg_index].is_write();
}

bool FunctionSchema::is_mutable() const {
  return std::any_of(arguments.begin(), arguments.end(),
                     [](const Argument& a) { return a.is_write(); });
}

std::vector<std::size_t> FunctionSchema::mutable_arguments() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].is_write()) out.push_back(i);
  }
  return out;
}

bool FunctionSchema::may_alias(std::size_t return_index, std::size_t arg_index) const {
  OPCONFORM_CHECK(return_index < returns.size(), ErrorCode::kInvalidArgument, full_name(),
                  ": return index ", return_index, " out of range (", returns.size(), " returns)");
  OPCONFORM_CHECK(arg_index < arguments.size(), ErrorCode::kInvalidArgument, full_name(),
                  ": argument index ", arg_index, " out of range (", arguments.size(),
                  " arguments)");
  const auto& out = returns[return_index].alias_info;
  const auto& in = arguments[arg_index].alias_info;
  if (!out || !in) return false;  // unannotated values are fresh / never aliased
  const auto out_sets = out->all_sets();
  const auto in_sets = in->all_sets();
  // The wildcard set may alias anything.
  if (contains(out_sets, "*") || contains(in_sets, "*")) return true;
  return std::any_of(out_sets.begin(), out_sets.end(),
                     [&](const std::string& s) { return contains(in_sets, s); });
}

std::vector<std::vector<std::size_t>> FunctionSchema::output_aliases() const {
  std::vector<std::vector<std::size_t>> out(returns.size());
  for (std::size_t j = 0; j < returns.size(); ++j) {
    for (std::size_t i = 0; i < arguments.size(); ++i) {
      if (may_alias(j, i)) out[j].push_back(i);
    }
  }
  return out;
}

std::optional<std::size_t> FunctionSchema::argument_index(std::string_view arg_name) const {
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name == arg_name) return i;
  }
  return std::nullopt;
}

std::size_t FunctionSchema::num_kwarg_only() const {
  return static_cast<std::size_t>(std::count_if(arguments.begin(), arguments.end(),
                                                [](const Argument& a) { return a.kwarg_only; }));
}

// The classification follows torchgen's FunctionSchema.kind(), with "view" added for schemas that
// write nothing but return an alias of an input.
SchemaKind FunctionSchema::kind() const {
  if (!is_mutable()) {
    for (std::size_t j = 0; j < returns.size(); ++j) {
      for (std::size_t i = 0; i < arguments.size(); ++i) {
        if (may_alias(j, i)) return SchemaKind::kView;
      }
    }
    return SchemaKind::kFunctional;
  }
  // Inplace: `foo_(Tensor(a!) self, ...) -> Tensor(a!)`; list forms (`_foreach_add_`) return ().
  if (!name.empty() && name.back() == '_' && !arguments.empty() && arguments[0].is_write()) {
    const auto& self_sets = arguments[0].alias_info->before_set;
    if (returns.empty() || (returns.size() == 1 && returns[0].is_write() &&
                            returns[0].alias_info->before_set == self_sets)) {
      return SchemaKind::kInplace;
    }
  }
  // Out: kwarg-only written arguments, each returned (or nothing returned at all).
  bool has_out = false;
  bool all_returned = true;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    if (!arguments[i].kwarg_only || !arguments[i].is_write()) continue;
    has_out = true;
    bool returned = false;
    for (std::size_t j = 0; j < returns.size(); ++j) {
      if (returns[j].is_write() && may_alias(j, i)) returned = true;
    }
    all_returned = all_returned && returned;
  }
  if (has_out && (all_returned || returns.empty())) return SchemaKind::kOut;
  return SchemaKind::kMutable;
}

// =============================================================================================
// 3. Lexer
// =============================================================================================

namespace {

enum class Tok : std::uint8_t {
  kIdent,     // [A-Za-z_][A-Za-z0-9_]*
  kNumber,    // -?digits(.digits*)?([eE][+-]?digits)?
  kString,    // "..." or '...' (text includes the quotes)
  kArrow,     // ->
  kScope,     // ::
  kEllipsis,  // ...
  kPunct,     // one of ( ) [ ] , * ? ! | = . -
  kInvalid,   // any other byte, or an unterminated string
  kEnd,
};

struct Token {
  Tok kind;
  std::string_view text;
  std::size_t col;  // 1-based column of the first character

  bool is(char punct) const { return kind == Tok::kPunct && text.size() == 1 && text[0] == punct; }
};

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

std::vector<Token> tokenize(std::string_view src) {
  std::vector<Token> tokens;
  std::size_t i = 0;
  auto emit = [&](Tok kind, std::size_t begin) {
    tokens.push_back({kind, src.substr(begin, i - begin), begin + 1});
  };
  while (i < src.size()) {
    const char c = src[i];
    const std::size_t begin = i;
    const auto at = [&](std::size_t k) { return i + k < src.size() ? src[i + k] : '\0'; };
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (is_ident_start(c)) {
      while (i < src.size() && is_ident_char(src[i])) ++i;
      emit(Tok::kIdent, begin);
    } else if (is_digit(c) || (c == '-' && is_digit(at(1)))) {
      if (c == '-') ++i;
      while (is_digit(at(0))) ++i;
      if (at(0) == '.') {
        ++i;
        while (is_digit(at(0))) ++i;
      }
      // An exponent only when digits follow, so `1e` stays `1` followed by `e`.
      if ((at(0) == 'e' || at(0) == 'E') &&
          (is_digit(at(1)) || ((at(1) == '+' || at(1) == '-') && is_digit(at(2))))) {
        i += 2;
        while (is_digit(at(0))) ++i;
      }
      emit(Tok::kNumber, begin);
    } else if (c == '"' || c == '\'') {
      ++i;
      while (i < src.size() && src[i] != c) i += (src[i] == '\\' && i + 1 < src.size()) ? 2 : 1;
      if (i >= src.size()) {
        emit(Tok::kInvalid, begin);  // unterminated string: the rest of the line
      } else {
        ++i;
        emit(Tok::kString, begin);
      }
    } else if (c == '-' && at(1) == '>') {
      i += 2;
      emit(Tok::kArrow, begin);
    } else if (c == ':' && at(1) == ':') {
      i += 2;
      emit(Tok::kScope, begin);
    } else if (c == '.' && at(1) == '.' && at(2) == '.') {
      i += 3;
      emit(Tok::kEllipsis, begin);
    } else if (std::string_view("()[],*?!|=.-").find(c) != std::string_view::npos) {
      ++i;
      emit(Tok::kPunct, begin);
    } else {
      ++i;
      emit(Tok::kInvalid, begin);
    }
  }
  tokens.push_back({Tok::kEnd, src.substr(src.size()), src.size() + 1});
  return tokens;
}

// Resolves the escapes of a quoted string literal (the text includes the quotes).
std::string unquote(std::string_view literal) {
  std::string out;
  for (std::size_t i = 1; i + 1 < literal.size(); ++i) {
    char c = literal[i];
    if (c == '\\' && i + 2 < literal.size()) {
      c = literal[++i];
      switch (c) {
        case 'n':
          c = '\n';
          break;
        case 't':
          c = '\t';
          break;
        case 'r':
          c = '\r';
          break;
        case '0':
          c = '\0';
          break;
        default:
          break;  // \\ \" \' and anything else: the character itself
      }
    }
    out += c;
  }
  return out;
}

// =============================================================================================
// 4. Parser
// =============================================================================================

// A default value as written, before it is checked against the argument's type.
struct RawScalar {
  enum Form : std::uint8_t { kInt, kFloat, kBool, kNone, kString, kIdent } form;
  std::string text;
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;  // unquoted string, or identifier
};

struct RawDefault {
  bool is_list = false;
  RawScalar scalar{};            // when !is_list
  std::vector<RawScalar> elems;  // when is_list
  std::string text;              // canonical text
};

// A scalar default against a base type: the kind and value, or nullopt when it does not fit.
std::optional<DefaultValue> classify_scalar(TypeKind kind, const RawScalar& raw) {
  DefaultValue v;
  v.text = raw.text;
  const auto set = [&](DefaultKind k, DefaultValue::Value value) {
    v.kind = k;
    v.value = std::move(value);
    return std::optional<DefaultValue>(std::move(v));
  };
  const bool number = raw.form == RawScalar::kInt || raw.form == RawScalar::kFloat;
  const double as_double = raw.form == RawScalar::kInt ? static_cast<double>(raw.i) : raw.d;
  switch (kind) {
    case TypeKind::kInt:
    case TypeKind::kSymInt:
      if (raw.form == RawScalar::kInt) return set(DefaultKind::kInt, raw.i);
      if (raw.form == RawScalar::kIdent) return set(DefaultKind::kEnumIdentifier, raw.s);
      break;
    case TypeKind::kFloat:
    case TypeKind::kComplex:
      if (number) return set(DefaultKind::kFloat, as_double);
      break;
    case TypeKind::kBool:
      if (raw.form == RawScalar::kBool) return set(DefaultKind::kBool, raw.b);
      break;
    case TypeKind::kScalar:
    case TypeKind::kAny:
      if (raw.form == RawScalar::kInt) return set(DefaultKind::kInt, raw.i);
      if (raw.form == RawScalar::kFloat) return set(DefaultKind::kFloat, raw.d);
      if (raw.form == RawScalar::kBool) return set(DefaultKind::kBool, raw.b);
      if (kind == TypeKind::kAny && raw.form == RawScalar::kString)
        return set(DefaultKind::kString, raw.s);
      if (kind == TypeKind::kAny && raw.form == RawScalar::kIdent)
        return set(DefaultKind::kEnumIdentifier, raw.s);
      break;
    case TypeKind::kStr:
    case TypeKind::kDimname:
      if (raw.form == RawScalar::kString) return set(DefaultKind::kString, raw.s);
      break;
    case TypeKind::kScalarType:
    case TypeKind::kLayout:
    case TypeKind::kMemoryFormat:
      // PyTorch prints these enums by number (`ScalarType? dtype=4` for long).
      if (raw.form == RawScalar::kInt) return set(DefaultKind::kInt, raw.i);
      if (raw.form == RawScalar::kIdent) return set(DefaultKind::kEnumIdentifier, raw.s);
      break;
    case TypeKind::kDevice:
      if (raw.form == RawScalar::kIdent) return set(DefaultKind::kEnumIdentifier, raw.s);
      if (raw.form == RawScalar::kString) return set(DefaultKind::kString, raw.s);
      break;
    default:  // Tensor, Generator, Storage, Stream: only None (handled by the caller)
      break;
  }
  return std::nullopt;
}

// Elements (a written list, or one bare scalar repeated N times) against a list element type.
std::optional<DefaultValue> classify_list(const Type& elem, const std::vector<RawScalar>& elems,
                                          std::string text) {
  DefaultValue v;
  v.text = std::move(text);
  const auto all = [&](auto pred) { return std::all_of(elems.begin(), elems.end(), pred); };
  const auto is_int = [](const RawScalar& r) { return r.form == RawScalar::kInt; };
  const auto is_number = [](const RawScalar& r) {
    return r.form == RawScalar::kInt || r.form == RawScalar::kFloat;
  };
  const auto is_bool = [](const RawScalar& r) { return r.form == RawScalar::kBool; };
  const TypeKind kind = elem.kind();
  if ((kind == TypeKind::kInt || kind == TypeKind::kSymInt) && all(is_int)) {
    std::vector<std::int64_t> values;
    for (const auto& r : elems) values.push_back(r.i);
    v.kind = DefaultKind::kIntList;
    v.value = std::move(values);
  } else if (kind == TypeKind::kFloat && all(is_number)) {
    std::vector<double> values;
    for (const auto& r : elems) values.push_back(is_int(r) ? static_cast<double>(r.i) : r.d);
    v.kind = DefaultKind::kFloatList;
    v.value = std::move(values);
  } else if (kind == TypeKind::kBool && all(is_bool)) {
    std::vector<bool> values;
    for (const auto& r : elems) values.push_back(r.b);
    v.kind = DefaultKind::kBoolList;
    v.value = std::move(values);
  } else {
    return std::nullopt;
  }
  return v;
}

// A default against the argument's full type.
std::optional<DefaultValue> classify_default(const Type& type, const RawDefault& raw) {
  if (!raw.is_list && raw.scalar.form == RawScalar::kNone) {
    if (!type.is_optional() && type.kind() != TypeKind::kAny) return std::nullopt;
    DefaultValue v;
    v.kind = DefaultKind::kNone;
    v.text = raw.text;
    return v;
  }
  if (type.is_optional()) return classify_default(type.elem(), raw);
  if (type.is_list()) {
    if (raw.is_list) return classify_list(type.elem(), raw.elems, raw.text);
    // PyTorch lets a bare scalar stand for a fixed-size list: `int[2] padding=0`.
    if (!type.size()) return std::nullopt;
    std::vector<RawScalar> repeated(static_cast<std::size_t>(*type.size()), raw.scalar);
    return classify_list(type.elem(), repeated, raw.text);
  }
  if (raw.is_list) {
    if (type.kind() != TypeKind::kAny) return std::nullopt;
    // Any: classify by the elements themselves.
    for (TypeKind k : {TypeKind::kInt, TypeKind::kFloat, TypeKind::kBool}) {
      if (auto v = classify_list(Type::base(k), raw.elems, raw.text)) return v;
    }
    return std::nullopt;
  }
  return classify_scalar(type.kind(), raw.scalar);
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src), tokens_(tokenize(src)) {}

  FunctionSchema schema() {
    FunctionSchema s;
    parse_name(s);
    parse_arguments(s);
    expect_kind(Tok::kArrow, "'->'");
    parse_returns(s);
    expect_end();
    validate(s);
    return s;
  }

  Type type_only() {
    auto [type, alias] = parse_type(/*allow_alias=*/false);
    expect_end();
    return type;
  }

  Argument argument_only() {
    Argument a = parse_argument(/*is_return=*/false);
    expect_end();
    return a;
  }

 private:
  // --- token access and errors ---------------------------------------------------------------

  const Token& peek(std::size_t k = 0) const {
    return tokens_[std::min(pos_ + k, tokens_.size() - 1)];
  }
  Token next() {
    Token t = peek();
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool accept(char punct) {
    if (!peek().is(punct)) return false;
    next();
    return true;
  }
  void expect(char punct, std::string_view expected) {
    if (!accept(punct)) fail_expected(expected);
  }
  Token expect_kind(Tok kind, std::string_view expected) {
    if (peek().kind != kind) fail_expected(expected);
    return next();
  }
  void expect_end() {
    if (peek().kind != Tok::kEnd) fail_expected("end of schema");
  }

  static std::string describe(const Token& t) {
    if (t.kind == Tok::kEnd) return "end of input";
    std::string text(t.text.substr(0, 24));
    if (t.text.size() > 24) text += "...";
    for (char& c : text) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    if (t.kind == Tok::kInvalid && (t.text[0] == '"' || t.text[0] == '\'')) {
      return "unterminated string " + text;
    }
    return "'" + text + "'";
  }

  [[noreturn]] void fail_expected(std::string_view expected) const {
    fail_at(peek().col, "expected " + std::string(expected) + " but found " + describe(peek()));
  }

  // The message, then the schema line with a caret under the column.
  [[noreturn]] void fail_at(std::size_t col, const std::string& message) const {
    std::string line(src_);
    for (char& c : line) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = ' ';
    }
    std::string caret(col - 1, ' ');
    caret += '^';
    throw Error(ErrorCode::kSchemaParse, "schema parse error at column " + std::to_string(col) +
                                             ": " + message + "\n" + line + "\n" + caret);
  }

  // --- name ------------------------------------------------------------------------------------

  // [ns::]name[.overload]
  void parse_name(FunctionSchema& s) {
    s.name = std::string(expect_kind(Tok::kIdent, "operator name").text);
    if (peek().kind == Tok::kScope) {
      next();
      s.ns = std::move(s.name);
      s.name = std::string(expect_kind(Tok::kIdent, "operator name after '::'").text);
    }
    if (accept('.')) {
      s.overload_name = std::string(expect_kind(Tok::kIdent, "overload name after '.'").text);
    }
  }

  // --- arguments -------------------------------------------------------------------------------

  // '(' [item (',' item)*] ')' where item is an argument, `*` (once), or a final `...`.
  void parse_arguments(FunctionSchema& s) {
    expect('(', "'('");
    if (accept(')')) return;
    bool kwarg_only = false;
    for (;;) {
      if (peek().kind == Tok::kEllipsis) {
        next();
        s.is_vararg = true;
        expect(')', "')' after '...'");
        return;
      }
      if (peek().is('*')) {
        if (kwarg_only) fail_expected("an argument (only one '*' is allowed)");
        next();
        kwarg_only = true;
        expect(',', "',' after '*'");
        continue;
      }
      arg_cols_.push_back(peek().col);
      Argument a = parse_argument(/*is_return=*/false);
      a.kwarg_only = kwarg_only;
      s.arguments.push_back(std::move(a));
      if (accept(')')) return;
      expect(',', "')' or ','");
    }
  }

  // type [name] ['=' default]; returns have an optional name and no default.
  Argument parse_argument(bool is_return) {
    Argument a;
    auto [type, alias] = parse_type(/*allow_alias=*/true);
    a.type = std::move(type);
    a.alias_info = std::move(alias);
    if (is_return) {
      if (peek().kind == Tok::kIdent) a.name = std::string(next().text);
      return a;
    }
    a.name = std::string(expect_kind(Tok::kIdent, "argument name").text);
    if (accept('=')) a.default_value = parse_default(a.type);
    return a;
  }

  // --- types -----------------------------------------------------------------------------------

  // base [alias] ('?' | '[' [N] ']')*
  std::pair<Type, std::optional<AliasInfo>> parse_type(bool allow_alias) {
    const Token& t = peek();
    if (t.kind != Tok::kIdent) fail_expected("a type");
    const auto base = base_type_from_name(t.text);
    if (!base) fail_at(t.col, "unknown type '" + std::string(t.text) + "'");
    next();
    Type type = Type::base(*base);
    std::optional<AliasInfo> alias;
    if (peek().is('(') && allow_alias) {
      if (*base != TypeKind::kTensor) {
        fail_at(peek().col,
                "alias annotations are only allowed on Tensor, not on " + std::string(t.text));
      }
      alias = parse_alias();
    }
    for (;;) {
      if (peek().is('?')) {
        if (type.is_optional()) fail_expected("'[' or a name (optional of optional)");
        next();
        type = Type::optional(std::move(type));
      } else if (peek().is('[')) {
        next();
        std::optional<std::int64_t> size;
        if (peek().kind == Tok::kNumber) {
          const Token n = next();
          std::int64_t value = 0;
          const auto [end, ec] =
              std::from_chars(n.text.data(), n.text.data() + n.text.size(), value);
          if (ec != std::errc() || end != n.text.data() + n.text.size() || value < 1 ||
              value > kMaxFixedListSize) {
            fail_at(n.col, "list size must be an integer in [1, " +
                               std::to_string(kMaxFixedListSize) + "], got '" +
                               std::string(n.text) + "'");
          }
          size = value;
        }
        expect(']', size ? "']'" : "list size or ']'");
        type = Type::list(std::move(type), size);
      } else {
        return {std::move(type), std::move(alias)};
      }
    }
  }

  // '(' set ['!'] ['->' set] ')'
  AliasInfo parse_alias() {
    expect('(', "'('");
    AliasInfo info;
    info.before_set = parse_alias_set();
    info.is_write = accept('!');
    if (peek().kind == Tok::kArrow) {
      next();
      info.after_set = parse_alias_set();
    }
    expect(')', info.after_set.empty() ? (info.is_write ? "'->' or ')'" : "'|', '!', '->' or ')'")
                                       : "'|' or ')'");
    return info;
  }

  // name ('|' name)*, where a name is an identifier or the wildcard `*`.
  std::vector<std::string> parse_alias_set() {
    std::vector<std::string> set;
    do {
      const Token& t = peek();
      if (t.kind != Tok::kIdent && !t.is('*')) fail_expected("an alias set name or '*'");
      if (contains(set, t.text)) fail_at(t.col, "alias set '" + std::string(t.text) + "' repeats");
      set.emplace_back(next().text);
    } while (accept('|'));
    return set;
  }

  // --- defaults --------------------------------------------------------------------------------

  DefaultValue parse_default(const Type& type) {
    const std::size_t col = peek().col;
    RawDefault raw;
    if (accept('[')) {
      raw.is_list = true;
      if (!accept(']')) {
        for (;;) {
          raw.elems.push_back(parse_raw_scalar());
          if (accept(']')) break;
          expect(',', "']' or ','");
        }
      }
      std::vector<std::string> texts;
      for (const auto& e : raw.elems) texts.push_back(e.text);
      raw.text = "[" + join(texts, ", ") + "]";
    } else {
      raw.scalar = parse_raw_scalar();
      raw.text = raw.scalar.text;
    }
    auto value = classify_default(type, raw);
    if (!value) {
      fail_at(col, "default value " + raw.text + " does not fit type " + type.to_string());
    }
    return std::move(*value);
  }

  // A number, True/False/None, inf/-inf/nan, a string literal or an enum identifier.
  RawScalar parse_raw_scalar() {
    const Token& t = peek();
    RawScalar r{};
    r.text = std::string(t.text);
    if (t.kind == Tok::kNumber) {
      next();
      const char* begin = t.text.data();
      const char* end = begin + t.text.size();
      const bool is_float = t.text.find_first_of(".eE") != std::string_view::npos;
      std::from_chars_result res{};
      if (is_float) {
        r.form = RawScalar::kFloat;
        res = std::from_chars(begin, end, r.d);
      } else {
        r.form = RawScalar::kInt;
        res = std::from_chars(begin, end, r.i);
      }
      if (res.ec != std::errc() || res.ptr != end) {
        fail_at(t.col, "number '" + r.text + "' is out of range");
      }
    } else if (t.kind == Tok::kString) {
      next();
      r.form = RawScalar::kString;
      r.s = unquote(t.text);
    } else if (t.is('-') && peek(1).kind == Tok::kIdent && peek(1).text == "inf") {
      next();
      next();
      r.form = RawScalar::kFloat;
      r.text = "-inf";
      r.d = -std::numeric_limits<double>::infinity();
    } else if (t.kind == Tok::kIdent) {
      next();
      if (t.text == "True" || t.text == "False") {
        r.form = RawScalar::kBool;
        r.b = t.text == "True";
      } else if (t.text == "None") {
        r.form = RawScalar::kNone;
      } else if (t.text == "inf") {
        r.form = RawScalar::kFloat;
        r.d = std::numeric_limits<double>::infinity();
      } else if (t.text == "nan") {
        r.form = RawScalar::kFloat;
        r.d = std::numeric_limits<double>::quiet_NaN();
      } else {
        r.form = RawScalar::kIdent;
        r.s = r.text;
      }
    } else {
      fail_expected("a default value");
    }
    return r;
  }

  // --- returns ---------------------------------------------------------------------------------

  // '...' | '(' [ret (',' ret)* [',' '...']] ')' | ret
  void parse_returns(FunctionSchema& s) {
    if (peek().kind == Tok::kEllipsis) {
      next();
      s.is_varret = true;
      return;
    }
    if (!accept('(')) {
      ret_cols_.push_back(peek().col);
      s.returns.push_back(parse_argument(/*is_return=*/true));
      return;
    }
    if (accept(')')) return;
    for (;;) {
      if (peek().kind == Tok::kEllipsis) {
        next();
        s.is_varret = true;
        expect(')', "')' after '...'");
        return;
      }
      ret_cols_.push_back(peek().col);
      s.returns.push_back(parse_argument(/*is_return=*/true));
      if (accept(')')) return;
      expect(',', "')' or ','");
    }
  }

  // --- validation ------------------------------------------------------------------------------

  // What the grammar cannot say: unique names, and write returns naming declared alias sets.
  void validate(const FunctionSchema& s) const {
    check_unique_names(s.arguments, arg_cols_, "argument");
    check_unique_names(s.returns, ret_cols_, "return");
    for (std::size_t j = 0; j < s.returns.size(); ++j) {
      const Argument& r = s.returns[j];
      if (!r.is_write()) continue;
      for (const std::string& set : r.alias_info->before_set) {
        if (set == "*") continue;
        const bool declared =
            std::any_of(s.arguments.begin(), s.arguments.end(), [&](const Argument& a) {
              return a.alias_info && contains(a.alias_info->all_sets(), set);
            });
        if (!declared) {
          fail_at(ret_cols_[j],
                  "return writes alias set '" + set + "', which no argument declares");
        }
      }
    }
  }

  void check_unique_names(const std::vector<Argument>& args, const std::vector<std::size_t>& cols,
                          std::string_view what) const {
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i].name.empty()) continue;
      for (std::size_t k = 0; k < i; ++k) {
        if (args[k].name == args[i].name) {
          fail_at(cols[i], "duplicate " + std::string(what) + " name '" + args[i].name + "'");
        }
      }
    }
  }

  std::string_view src_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  std::vector<std::size_t> arg_cols_;  // column of each argument, for validation errors
  std::vector<std::size_t> ret_cols_;  // column of each return
};

}  // namespace

FunctionSchema parse_schema(std::string_view schema) { return Parser(schema).schema(); }

Type parse_type(std::string_view type) { return Parser(type).type_only(); }

Argument parse_argument(std::string_view argument) { return Parser(argument).argument_only(); }

}  // namespace opconform
