// opconform schema language — PyTorch's FunctionSchema, parsed, printed and queried.
//
// An operator is declared by one schema string, exactly as PyTorch writes it in
// native_functions.yaml and as torch.library.define() accepts it:
//
//   aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
//   ^ns   ^name ^overload      ^type  ^name      ^kwarg-only marker  ^alias annotation
//
// This header gives that language a value representation (Type, AliasInfo, DefaultValue,
// Argument, FunctionSchema), a parser (parse_schema / parse_type / parse_argument) and a printer
// (FunctionSchema::to_string) with the guarantee print(parse(s)) == s for every schema written
// in PyTorch's canonical form, plus the alias queries that the rest of opconform (dispatcher,
// conformance checks) needs: which arguments an operator writes, which outputs may alias which
// inputs, and what kind of operator it is (functional / inplace / out / mutable / view).
//
// Design notes
// - Everything here is a plain value type with structural operator==; schemas are small, copies
//   are cheap, and tests compare whole schemas.
// - Defaults keep their source text (so printing is exact, e.g. `1e-05` stays `1e-05`, not
//   `1.0000000000000001e-05`) and a classified, parsed value for consumers.
// - Errors: malformed schema text throws Error(ErrorCode::kSchemaParse) whose message names the
//   1-based column, what was expected and what was found, followed by the schema line and a caret
//   line. Out-of-range queries throw Error(ErrorCode::kInvalidArgument).
// - Scope: the grammar of native_functions.yaml (no TorchScript generics such as `t`, `Dict(...)`,
//   `Future(...)`, tuple types). `...` varargs/varrets are supported as in PyTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace opconform {

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

// The kinds of a schema type. The first group are leaf ("base") types named by one identifier in
// the schema language; kList and kOptional are the two type constructors (`T[]`, `T[N]`, `T?`).
enum class TypeKind : std::uint8_t {
  kTensor,
  kInt,
  kSymInt,
  kFloat,
  kBool,
  kStr,
  kScalar,
  kScalarType,
  kDevice,
  kLayout,
  kMemoryFormat,
  kGenerator,
  kDimname,
  kStorage,
  kStream,
  kComplex,
  kAny,
  kList,      // T[] or T[N]; elem() is T, size() is N when fixed
  kOptional,  // T?; elem() is T
};

// The schema spelling of a base kind ("Tensor", "SymInt", ...); "List"/"Optional" for the
// constructors (which have no spelling of their own).
std::string_view to_string(TypeKind kind);

struct AliasInfo;

// A schema type: a small immutable recursive value. `Tensor?[]` is List(Optional(Tensor)),
// `int[2]` is List(int, size 2), `int[1]?` is Optional(List(int, size 1)). The element is shared
// (immutable), so copying a Type is cheap and never deep.
class Type {
 public:
  // Tensor, so that Type is default-constructible (containers, aggregates).
  Type() : kind_(TypeKind::kTensor) {}
  // A base type; throws kInvalidArgument for kList/kOptional (use list()/optional()).
  static Type base(TypeKind kind);
  // `elem[]` or, with a size, `elem[size]` (1 <= size <= 4096; kInvalidArgument otherwise).
  static Type list(Type elem, std::optional<std::int64_t> size = std::nullopt);
  // `elem?`. Optional of optional is rejected (kInvalidArgument), as in PyTorch.
  static Type optional(Type elem);

  TypeKind kind() const noexcept { return kind_; }
  bool is_list() const noexcept { return kind_ == TypeKind::kList; }
  bool is_optional() const noexcept { return kind_ == TypeKind::kOptional; }
  bool is_base() const noexcept { return !is_list() && !is_optional(); }
  // The element type of a list or optional; throws kInvalidArgument on a base type.
  const Type& elem() const;
  // The fixed size N of `T[N]`; nullopt for `T[]` and for non-lists.
  std::optional<std::int64_t> size() const noexcept { return size_; }
  // The base kind once every list/optional layer is peeled off (`Tensor?[]` -> kTensor).
  TypeKind base_kind() const noexcept;
  // True when the base kind is Tensor: the only types that may carry an alias annotation.
  bool is_tensor_like() const noexcept { return base_kind() == TypeKind::kTensor; }

  // Canonical spelling, e.g. "Tensor?[]", "SymInt[2]", "int[1]?".
  std::string to_string() const { return to_string(nullptr); }
  // The same with an alias annotation printed right after the `Tensor` base, as PyTorch writes
  // it: "Tensor(a!)[]", "Tensor(a)?". `alias` may be null. Requires is_tensor_like() if non-null.
  std::string to_string(const AliasInfo* alias) const;

  friend bool operator==(const Type& a, const Type& b);

 private:
  TypeKind kind_;
  std::shared_ptr<const Type> elem_;  // set iff kList / kOptional
  std::optional<std::int64_t> size_;  // only for kList
};

// ---------------------------------------------------------------------------------------------
// Alias annotations
// ---------------------------------------------------------------------------------------------

// An alias annotation on a Tensor argument or return: `(a)`, `(a!)`, `(a -> *)`,
// `(a! -> a|b)`. The before-set names the alias sets the value belongs to on entry, `!` says the
// operator writes it, and the optional after-set names the sets it belongs to on exit (`*` is the
// wildcard set: "may alias anything", used e.g. by split, whose outputs escape into a list).
// Set names are kept in source order so that printing is exact; "*" may appear as a member.
struct AliasInfo {
  std::vector<std::string> before_set;  // never empty
  std::vector<std::string> after_set;   // empty: no `->` was written (after == before)
  bool is_write = false;

  // The sets on exit: after_set if `->` was written, else before_set.
  const std::vector<std::string>& effective_after_set() const noexcept {
    return after_set.empty() ? before_set : after_set;
  }
  bool before_has_wildcard() const noexcept;
  bool after_has_wildcard() const noexcept;
  // Everything this value may belong to: before ∪ after (source order, no duplicates).
  std::vector<std::string> all_sets() const;
  // The text inside the parentheses: "a!", "a -> *", "a! -> a|b".
  std::string to_string() const;

  friend bool operator==(const AliasInfo&, const AliasInfo&) = default;
};

// ---------------------------------------------------------------------------------------------
// Default values
// ---------------------------------------------------------------------------------------------

// What a default value is, decided from both its text and the argument's type: `float p=2` is
// kFloat (2.0), `Scalar alpha=1` is kInt, `int[2] padding=0` is kIntList ({0, 0}: PyTorch
// broadcasts a bare int to a fixed-size int list), `int[1] dim=[]` is kIntList ({}).
enum class DefaultKind : std::uint8_t {
  kNone,            // None (optional types, Any)
  kBool,            // True / False
  kInt,             // 1, -1; also ScalarType/Layout/MemoryFormat by number (`dtype=4`), as
                    // PyTorch prints them
  kFloat,           // 1e-05, 2., 0.01, inf, -inf, nan (also an int literal for float/complex)
  kIntList,         // [0, 1], [], or a bare int for int[N]
  kFloatList,       // [0.5, 1.], [], or a bare number for float[N]
  kBoolList,        // [True, False], [], or a bare bool for bool[N]
  kString,          // "none", 'str' (value holds the unquoted, unescaped text)
  kEnumIdentifier,  // Mean, contiguous_format, long, strided (value holds the identifier)
};

std::string_view to_string(DefaultKind kind);

struct DefaultValue {
  DefaultKind kind = DefaultKind::kNone;
  // The canonical source text, printed back verbatim after `=`. Lists are re-joined with ", "
  // (`[0,1]` becomes `[0, 1]`); everything else is exactly as written.
  std::string text = "None";
  // The parsed value; the alternative follows `kind`:
  //   kNone: monostate; kBool: bool; kInt: int64_t; kFloat: double; kIntList: vector<int64_t>;
  //   kFloatList: vector<double>; kBoolList: vector<bool>; kString, kEnumIdentifier: string.
  using Value = std::variant<std::monostate, bool, std::int64_t, double, std::vector<std::int64_t>,
                             std::vector<double>, std::vector<bool>, std::string>;
  Value value;

  // Structural equality (kind, text, value). A `nan` default never equals itself.
  friend bool operator==(const DefaultValue&, const DefaultValue&) = default;
};

// ---------------------------------------------------------------------------------------------
// Arguments and returns
// ---------------------------------------------------------------------------------------------

// One formal argument or return: `Tensor(a!) out`, `int[2] stride=[]`, or for returns the bare
// `Tensor(a)` / named `Tensor values`.
struct Argument {
  Type type;
  std::string name;                           // may be empty for returns
  std::optional<DefaultValue> default_value;  // never set on returns
  bool kwarg_only = false;                    // declared after `*`
  std::optional<AliasInfo> alias_info;        // only on tensor-like types

  bool is_write() const noexcept { return alias_info && alias_info->is_write; }
  // "Tensor(a!) out", "Scalar alpha=1", "Tensor" (no `*`: that belongs to the argument list).
  std::string to_string() const;

  friend bool operator==(const Argument&, const Argument&) = default;
};

// What an operator does with its arguments (torchgen's SchemaKind, plus view).
enum class SchemaKind : std::uint8_t {
  kFunctional,  // writes nothing and returns fresh values
  kInplace,     // foo_(Tensor(a!) self, ...) -> Tensor(a!) (or -> () for list forms)
  kOut,         // writes kwarg-only `out` tensors and returns them (or returns nothing)
  kMutable,     // writes some argument but is neither inplace nor out
  kView,        // writes nothing, but some return aliases an input (`Tensor(a) self -> Tensor(a)`)
};

std::string_view to_string(SchemaKind kind);

// ---------------------------------------------------------------------------------------------
// FunctionSchema
// ---------------------------------------------------------------------------------------------

// A whole operator schema. The fields are public: a schema is data, built by the parser or by
// hand (tests, generators); the member functions are queries over it.
struct FunctionSchema {
  std::string ns;             // "aten"; empty when the schema names no namespace
  std::string name;           // "add_"
  std::string overload_name;  // "Tensor"; empty for the default overload
  std::vector<Argument> arguments;
  std::vector<Argument> returns;
  bool is_vararg = false;  // `(..., ...)`: trailing `...` in the argument list
  bool is_varret = false;  // `-> ...`

  // "ns::name" (or "name" without a namespace).
  std::string qualified_name() const;
  // "ns::name.overload" (or qualified_name() for the default overload).
  std::string full_name() const;
  // The canonical PyTorch form:
  //   aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
  // One return prints bare (even when named), zero or several print in parentheses.
  std::string to_string() const;

  // --- queries; indices are positions in `arguments` / `returns` -----------------------------

  SchemaKind kind() const;
  // Whether argument i is written (`Tensor(a!)`); kInvalidArgument if i is out of range.
  bool is_mutable(std::size_t arg_index) const;
  // Whether any argument is written.
  bool is_mutable() const;
  // Indices of the written arguments, ascending.
  std::vector<std::size_t> mutable_arguments() const;
  // Whether return j may alias argument i: both carry alias annotations and return j's before-set
  // intersects argument i's before ∪ after sets, or either side involves the wildcard set `*`.
  // kInvalidArgument if j or i is out of range.
  bool may_alias(std::size_t return_index, std::size_t arg_index) const;
  // For each return, the arguments it may alias (ascending), per may_alias().
  std::vector<std::vector<std::size_t>> output_aliases() const;
  // The position of the argument with this name.
  std::optional<std::size_t> argument_index(std::string_view arg_name) const;
  // How many arguments are keyword-only (declared after `*`).
  std::size_t num_kwarg_only() const;

  friend bool operator==(const FunctionSchema&, const FunctionSchema&) = default;
};

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

// Parses a full schema: `[ns::]name[.overload](args) -> returns`. Beyond the grammar it checks
// what PyTorch checks: argument names (and return names) do not repeat, `*` appears at most once,
// defaults fit their types (`bool b=3`, `int x="s"`, `Tensor t=1` are rejected; `None` needs an
// optional type), alias annotations appear only on Tensor types, and every alias set written by
// a return (`-> Tensor(a!)`) is declared on some argument. Throws Error(kSchemaParse).
FunctionSchema parse_schema(std::string_view schema);

// Parses one type, e.g. "Tensor?[]", "int[2]", "SymInt[]?". Alias annotations are not part of a
// type (they belong to an argument): use parse_argument for "Tensor(a!)". Throws kSchemaParse.
Type parse_type(std::string_view type);

// Parses one argument, e.g. "Tensor(a!) out", "int[2] stride=[]", "str reduce=\"mean\"".
// The result is positional (kwarg_only false). Throws kSchemaParse.
Argument parse_argument(std::string_view argument);

}  // namespace opconform
