// Symbolic integers: expression nodes, canonical arithmetic, ranges and deciding comparisons.
#include "opconform/core/symint.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_set>

#include "opconform/core/shape_env.h"

namespace opconform {
namespace {

using Kind = SymNode::Kind;
using NodePtr = std::shared_ptr<SymNode>;

[[noreturn]] void throw_overflow() {
  throw Error(ErrorCode::kInvalidArgument, "integer overflow in symbolic size arithmetic");
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw_overflow();
  return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw_overflow();
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw_overflow();
  return r;
}
// Python's a // b and a % b: the quotient rounds toward negative infinity, the remainder takes
// the sign of the divisor.
int64_t python_floordiv(int64_t a, int64_t b) {
  OPCONFORM_CHECK(b != 0, ErrorCode::kInvalidArgument, "symbolic size arithmetic: division by zero");
  if (a == INT64_MIN && b == -1) throw_overflow();
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t python_mod(int64_t a, int64_t b) {
  OPCONFORM_CHECK(b != 0, ErrorCode::kInvalidArgument, "symbolic size arithmetic: modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t apply(Kind kind, int64_t a, int64_t b) {
  switch (kind) {
    case Kind::Add: return checked_add(a, b);
    case Kind::Sub: return checked_sub(a, b);
    case Kind::Mul: return checked_mul(a, b);
    case Kind::FloorDiv: return python_floordiv(a, b);
    case Kind::Mod: return python_mod(a, b);
    default: throw Error(ErrorCode::kInternal, "SymNode: not a binary kind");
  }
}

// ---------------------------------------------------------------- printing

// Python precedence: sums bind loosest, then products / floor division / modulo, then atoms.
int precedence(const SymNode& n) {
  switch (n.kind()) {
    case Kind::Add:
    case Kind::Sub: return 1;
    case Kind::Mul:
    case Kind::FloorDiv:
    case Kind::Mod: return 2;
    case Kind::Constant: return n.constant_value() < 0 ? 1 : 3;
    case Kind::Symbol: return 3;
  }
  return 3;
}

std::string print(const SymNode& n);

std::string wrapped(const SymNode& n, bool parens) { return parens ? "(" + print(n) + ")" : print(n); }

std::string print(const SymNode& n) {
  switch (n.kind()) {
    case Kind::Constant: return std::to_string(n.constant_value());
    case Kind::Symbol: return n.symbol().name;
    case Kind::Add: return print(*n.lhs()) + " + " + wrapped(*n.rhs(), precedence(*n.rhs()) < 2);
    case Kind::Sub: return print(*n.lhs()) + " - " + wrapped(*n.rhs(), precedence(*n.rhs()) < 2);
    case Kind::Mul: {
      // Floor division and modulo inside a product get parentheses for readability.
      auto side = [](const SymNode& c) {
        return wrapped(c, precedence(c) < 2 || c.kind() == Kind::FloorDiv || c.kind() == Kind::Mod);
      };
      // A negative coefficient (only the first term of a canonical sum has one) reads "-s0*2".
      if (n.rhs()->is_constant() && n.rhs()->constant_value() < 0 && n.rhs()->constant_value() != INT64_MIN) {
        int64_t c = -n.rhs()->constant_value();
        return "-" + side(*n.lhs()) + (c == 1 ? "" : "*" + std::to_string(c));
      }
      return side(*n.lhs()) + "*" + side(*n.rhs());
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      const char* op = n.kind() == Kind::FloorDiv ? "//" : " % ";
      return wrapped(*n.lhs(), precedence(*n.lhs()) < 3) + op + wrapped(*n.rhs(), precedence(*n.rhs()) < 3);
    }
  }
  return "?";
}

// ---------------------------------------------------------------- canonical form
//
// Note [Canonical form]: an expression is kept as a sum of terms coefficient * atom * atom...,
// where atoms are symbols and floor division / modulo nodes (opaque to the sum). Terms are
// ordered by their atoms (backed symbols before unbacked, by number; opaque atoms after, by
// spelling) and the constant comes last: "s0*2 + s1 - 3". Equal expressions written differently
// then get the same tree, so their difference folds to a constant.

int atom_cmp(const SymNode* a, const SymNode* b) {
  if (a == b) return 0;
  if (a->is_symbol() != b->is_symbol()) return a->is_symbol() ? -1 : 1;
  if (a->is_symbol()) {
    bool ua = a->is_unbacked_symbol(), ub = b->is_unbacked_symbol();
    if (ua != ub) return ua ? 1 : -1;
    if (a->symbol().index != b->symbol().index) return a->symbol().index < b->symbol().index ? -1 : 1;
    return a < b ? -1 : 1;  // same name from two ShapeEnvs: distinct, in some fixed order
  }
  int c = print(*a).compare(print(*b));
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

using Monomial = std::vector<NodePtr>;  // atoms, sorted by atom_cmp; empty for the constant
struct MonomialLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      int c = atom_cmp(a[i].get(), b[i].get());
      if (c != 0) return c < 0;
    }
    return a.size() < b.size();
  }
};
using Poly = std::map<Monomial, int64_t, MonomialLess>;

void add_term(Poly& p, const Monomial& m, int64_t coeff) {
  auto [it, inserted] = p.emplace(m, coeff);
  if (!inserted) it->second = checked_add(it->second, coeff);
  if (it->second == 0) p.erase(it);
}

std::optional<int64_t> as_constant(const Poly& p) {
  if (p.empty()) return 0;
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return std::nullopt;
}

Poly product(const Poly& a, const Poly& b);

Poly to_poly(const NodePtr& n) {
  Poly p;
  switch (n->kind()) {
    case Kind::Constant:
      if (n->constant_value() != 0) p[{}] = n->constant_value();
      return p;
    case Kind::Symbol:
    case Kind::FloorDiv:
    case Kind::Mod:
      p[{n}] = 1;
      return p;
    case Kind::Add:
    case Kind::Sub: {
      p = to_poly(n->lhs());
      int64_t sign = n->kind() == Kind::Add ? 1 : -1;
      for (const auto& [m, c] : to_poly(n->rhs())) add_term(p, m, checked_mul(c, sign));
      return p;
    }
    case Kind::Mul: return product(to_poly(n->lhs()), to_poly(n->rhs()));
  }
  return p;
}

NodePtr from_poly(const Poly& p) {
  // coefficient * atom * atom ...; a coefficient of 1 is left out.
  auto term = [](const Monomial& m, int64_t coeff) {
    if (m.empty()) return SymNode::make_constant(coeff);
    NodePtr prod = m.front();
    for (size_t i = 1; i < m.size(); ++i) prod = SymNode::make_binary(Kind::Mul, prod, m[i]);
    return coeff == 1 ? prod : SymNode::make_binary(Kind::Mul, prod, SymNode::make_constant(coeff));
  };
  NodePtr acc;
  auto append = [&](const Monomial& m, int64_t c) {
    if (!acc) acc = term(m, c);  // the first term keeps its sign: "-s0 + 2"
    else if (c > 0 || c == INT64_MIN) acc = SymNode::make_binary(Kind::Add, acc, term(m, c));
    else acc = SymNode::make_binary(Kind::Sub, acc, term(m, -c));
  };
  for (const auto& [m, c] : p) {
    if (!m.empty()) append(m, c);
  }
  if (auto constant = p.find(Monomial{}); constant != p.end()) append({}, constant->second);  // last
  return acc ? acc : SymNode::make_constant(0);
}

Poly product(const Poly& a, const Poly& b) {
  Poly p;
  for (const auto& [ma, ca] : a) {
    for (const auto& [mb, cb] : b) {
      Monomial m;
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m),
                 [](const NodePtr& x, const NodePtr& y) { return atom_cmp(x.get(), y.get()) < 0; });
      add_term(p, m, checked_mul(ca, cb));
    }
  }
  return p;
}

// Splits p into k * quotient + rest, where quotient collects the terms whose coefficients k
// divides exactly. (k*q + rest) // k == q + rest // k and (k*q + rest) % k == rest % k hold for
// every integer q, so the split normalises floor division and modulo by a constant.
// The constant term c splits too (c = k*(c // k) + c % k), so "(s0 + 4) % 3" is "(s0 + 1) % 3".
std::pair<Poly, Poly> split_divisible(const Poly& p, int64_t k) {
  Poly quotient, rest;
  for (const auto& [m, c] : p) {
    if (c % k == 0) {
      quotient[m] = c / k;
    } else if (m.empty()) {
      if (int64_t q = python_floordiv(c, k); q != 0) quotient[m] = q;
      rest[m] = python_mod(c, k);
    } else {
      rest[m] = c;
    }
  }
  return {quotient, rest};
}

Poly sum(Poly a, const Poly& b) {
  for (const auto& [m, c] : b) add_term(a, m, c);
  return a;
}

Poly atom(NodePtr n) {
  Poly p;
  p[{std::move(n)}] = 1;
  return p;
}

Poly canonical_binary(Kind kind, const Poly& a, const Poly& b) {
  auto ca = as_constant(a), cb = as_constant(b);
  if (ca && cb) {
    Poly p;
    int64_t v = apply(kind, *ca, *cb);
    if (v != 0) p[{}] = v;
    return p;
  }
  switch (kind) {
    case Kind::Add: return sum(a, b);
    case Kind::Sub: {
      Poly r = a;
      for (const auto& [m, c] : b) add_term(r, m, checked_mul(c, -1));
      return r;
    }
    case Kind::Mul: return product(a, b);
    case Kind::FloorDiv:
    case Kind::Mod: {
      const bool div = kind == Kind::FloorDiv;
      OPCONFORM_CHECK(!cb || *cb != 0, ErrorCode::kInvalidArgument, "symbolic size arithmetic: ",
                      div ? "division" : "modulo", " by zero");
      if (ca && *ca == 0) return {};
      if (cb && *cb == 1) return div ? a : Poly{};
      if (cb && *cb > 1) {
        auto [quotient, rest] = split_divisible(a, *cb);
        Poly r;
        if (auto rc = as_constant(rest)) {
          if (int64_t v = apply(kind, *rc, *cb); v != 0) r[{}] = v;
        } else {
          r = atom(SymNode::make_binary(kind, from_poly(rest), from_poly(b)));
        }
        return div ? sum(quotient, r) : r;
      }
      return atom(SymNode::make_binary(kind, from_poly(a), from_poly(b)));
    }
    default: throw Error(ErrorCode::kInternal, "canonical_binary: not a binary kind");
  }
}

// ---------------------------------------------------------------- ranges

using Range = std::pair<int64_t, int64_t>;

int64_t clamp128(__int128 v) {
  if (v < INT64_MIN) return INT64_MIN;
  if (v > INT64_MAX) return INT64_MAX;
  return static_cast<int64_t>(v);
}

// Note: the values of every (sub)expression are int64 (evaluation throws on overflow), so the
// saturated bounds below are still sound.
Range range_of(const SymNode& n) {
  switch (n.kind()) {
    case Kind::Constant: return {n.constant_value(), n.constant_value()};
    case Kind::Symbol: return {n.symbol().min, n.symbol().max};
    case Kind::Add: {
      auto [a0, a1] = range_of(*n.lhs());
      auto [b0, b1] = range_of(*n.rhs());
      return {clamp128(__int128(a0) + b0), clamp128(__int128(a1) + b1)};
    }
    case Kind::Sub: {
      auto [a0, a1] = range_of(*n.lhs());
      auto [b0, b1] = range_of(*n.rhs());
      return {clamp128(__int128(a0) - b1), clamp128(__int128(a1) - b0)};
    }
    case Kind::Mul: {
      auto [a0, a1] = range_of(*n.lhs());
      auto [b0, b1] = range_of(*n.rhs());
      __int128 c[] = {__int128(a0) * b0, __int128(a0) * b1, __int128(a1) * b0, __int128(a1) * b1};
      return {clamp128(*std::min_element(c, c + 4)), clamp128(*std::max_element(c, c + 4))};
    }
    case Kind::FloorDiv: {
      auto [a0, a1] = range_of(*n.lhs());
      auto [b0, b1] = range_of(*n.rhs());
      if (b0 <= 0 && b1 >= 0) return {INT64_MIN, INT64_MAX};
      // With the divisor's sign fixed, x // y is monotonic in each argument: corners bound it.
      int64_t c[4];
      int i = 0;
      for (int64_t x : {a0, a1}) {
        for (int64_t y : {b0, b1}) c[i++] = (x == INT64_MIN && y == -1) ? INT64_MAX : python_floordiv(x, y);
      }
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case Kind::Mod: {
      auto [a0, a1] = range_of(*n.lhs());
      auto [b0, b1] = range_of(*n.rhs());
      if (b0 > 0) return {0, a0 >= 0 ? std::min(a1, b1 - 1) : b1 - 1};
      if (b1 < 0) return {b0 + 1, 0};
      return {INT64_MIN, INT64_MAX};
    }
  }
  return {INT64_MIN, INT64_MAX};
}

// ---------------------------------------------------------------- comparisons

CompareOp negate(CompareOp op) {
  switch (op) {
    case CompareOp::EQ: return CompareOp::NE;
    case CompareOp::NE: return CompareOp::EQ;
    case CompareOp::LT: return CompareOp::GE;
    case CompareOp::LE: return CompareOp::GT;
    case CompareOp::GT: return CompareOp::LE;
    case CompareOp::GE: return CompareOp::LT;
  }
  return op;
}

bool holds(int64_t diff, CompareOp op) {
  switch (op) {
    case CompareOp::EQ: return diff == 0;
    case CompareOp::NE: return diff != 0;
    case CompareOp::LT: return diff < 0;
    case CompareOp::LE: return diff <= 0;
    case CompareOp::GT: return diff > 0;
    case CompareOp::GE: return diff >= 0;
  }
  return false;
}

// `diff op 0` for every diff in [lo, hi], if that is the same answer throughout.
std::optional<bool> decide_by_range(Range r, CompareOp op) {
  auto [lo, hi] = r;
  bool at_lo = holds(lo, op), at_hi = holds(hi, op);
  switch (op) {
    case CompareOp::EQ:
    case CompareOp::NE:
      if (lo == hi) return at_lo;
      if (lo > 0 || hi < 0) return op == CompareOp::NE;
      return std::nullopt;
    default:
      // Order relations against 0 are monotonic in diff: both ends agree, so does the middle.
      if (at_lo == at_hi) return at_lo;
      return std::nullopt;
  }
}

}  // namespace

// ---------------------------------------------------------------- SymNode

std::shared_ptr<SymNode> SymNode::make_constant(int64_t value) {
  auto n = std::shared_ptr<SymNode>(new SymNode());
  n->kind_ = Kind::Constant;
  n->constant_ = value;
  return n;
}

std::shared_ptr<SymNode> SymNode::make_symbol(SymbolInfo info) {
  OPCONFORM_CHECK(info.min <= info.max, ErrorCode::kInvalidArgument, "symbol ", info.name, ": empty range [",
                  info.min, ", ", info.max, "]");
  auto n = std::shared_ptr<SymNode>(new SymNode());
  n->kind_ = Kind::Symbol;
  n->symbol_ = std::make_shared<const SymbolInfo>(std::move(info));
  return n;
}

std::shared_ptr<SymNode> SymNode::make_binary(Kind kind, std::shared_ptr<SymNode> lhs, std::shared_ptr<SymNode> rhs) {
  OPCONFORM_CHECK(kind != Kind::Constant && kind != Kind::Symbol && lhs && rhs, ErrorCode::kInternal,
                  "SymNode::make_binary: a binary kind and two operands are needed");
  auto n = std::shared_ptr<SymNode>(new SymNode());
  n->kind_ = kind;
  n->lhs_ = std::move(lhs);
  n->rhs_ = std::move(rhs);
  return n;
}

std::string SymNode::to_string() const { return print(*this); }

int64_t SymNode::evaluate(const std::function<int64_t(const SymNode& symbol)>& value_of) const {
  switch (kind_) {
    case Kind::Constant: return constant_;
    case Kind::Symbol: return value_of(*this);
    default: return apply(kind_, lhs_->evaluate(value_of), rhs_->evaluate(value_of));
  }
}

std::vector<const SymNode*> SymNode::free_symbols() const {
  std::vector<const SymNode*> out;
  std::unordered_set<const SymNode*> seen;
  auto walk = [&](auto&& self, const SymNode& n) -> void {
    if (n.is_symbol()) {
      if (seen.insert(&n).second) out.push_back(&n);
    } else if (!n.is_constant()) {
      self(self, *n.lhs_);
      self(self, *n.rhs_);
    }
  };
  walk(walk, *this);
  return out;
}

std::pair<int64_t, int64_t> SymNode::value_range() const { return range_of(*this); }

std::string_view to_string(CompareOp op) {
  switch (op) {
    case CompareOp::EQ: return "==";
    case CompareOp::NE: return "!=";
    case CompareOp::LT: return "<";
    case CompareOp::LE: return "<=";
    case CompareOp::GT: return ">";
    case CompareOp::GE: return ">=";
  }
  return "?";
}

// ---------------------------------------------------------------- SymInt

void SymInt::throw_symbolic() const {
  throw Error(ErrorCode::kInvalidArgument,
              "a symbolic size was used where a concrete integer is needed: " + node_->to_string());
}

std::optional<int64_t> SymInt::hint() const {
  if (!node_) return value_;
  for (const SymNode* s : node_->free_symbols()) {
    if (!s->symbol().hint) return std::nullopt;
  }
  return node_->evaluate([](const SymNode& s) { return *s.symbol().hint; });
}

std::string SymInt::to_string() const { return node_ ? node_->to_string() : std::to_string(value_); }

namespace detail {

SymInt sym_binary(SymNode::Kind kind, const SymInt& a, const SymInt& b) {
  Poly r = canonical_binary(kind, to_poly(a.as_node()), to_poly(b.as_node()));
  return SymInt(from_poly(r));
}

bool sym_compare(const SymInt& a, const SymInt& b, CompareOp op) {
  // Note [Deciding comparisons] in symint.h. Everything is decided on `a - b op 0`.
  SymInt diff = a - b;
  if (auto c = diff.maybe_as_int()) return holds(*c, op);
  if (auto by_range = decide_by_range(diff.node()->value_range(), op)) return *by_range;

  auto symbols = diff.node()->free_symbols();
  bool all_backed = std::all_of(symbols.begin(), symbols.end(),
                                [](const SymNode* s) { return s->symbol().hint.has_value(); });
  if (!all_backed) {
    throw Error(ErrorCode::kInvalidArgument,
                concat("data-dependent expression ", a.to_string(), " ", to_string(op), " ", b.to_string(),
                       " cannot be decided (unbacked symbol from get_ctx().new_dynamic_size())"));
  }
  bool result = holds(*diff.hint(), op);
  // The guard is the comparison as the caller wrote it, negated when it was false.
  for (const SymNode* s : symbols) {
    if (auto env = s->symbol().env.lock()) {
      record_guard(*env, a, result ? op : negate(op), b);
      break;
    }
  }
  return result;
}

}  // namespace detail
bool holds(int64_t a, CompareOp op, int64_t b) {
  switch (op) {
    case CompareOp::EQ: return a == b;
    case CompareOp::NE: return a != b;
    case CompareOp::LT: return a < b;
    case CompareOp::LE: return a <= b;
    case CompareOp::GT: return a > b;
    case CompareOp::GE: return a >= b;
  }
  return false;
}

}  // namespace opconform
