// ShapeEnv: symbol creation, guard recording and checking.
#include "opconform/core/shape_env.h"

#include <algorithm>
#include <sstream>

namespace opconform {
namespace {

thread_local ShapeEnv* tls_current_shape_env = nullptr;

std::string bound_str(int64_t v, bool upper) {
  if (upper && v == INT64_MAX) return "inf";
  if (!upper && v == INT64_MIN) return "-inf";
  return std::to_string(v);
}

std::string range_str(const SymNode::SymbolInfo& s) {
  return "[" + bound_str(s.min, false) + ", " + bound_str(s.max, true) + "]";
}

// "s0 = 2 (x.size(0)), s1 = 3": the values a guard was evaluated with, with their sources.
std::string describe_values(const std::vector<const SymNode*>& symbols, const std::map<std::string, int64_t>& bindings) {
  std::string out;
  for (const SymNode* s : symbols) {
    if (!out.empty()) out += ", ";
    out += s->symbol().name + " = " + std::to_string(bindings.at(s->symbol().name));
    if (!s->symbol().source.empty()) out += " (" + s->symbol().source + ")";
  }
  return out;
}

}  // namespace

void detail::record_guard(ShapeEnvState& state, const SymInt& lhs, CompareOp op, const SymInt& rhs) {
  std::string text = lhs.to_string() + " " + std::string(to_string(op)) + " " + rhs.to_string();
  std::lock_guard<std::mutex> lock(state.mutex);
  for (const auto& g : state.guards) {
    if (g.text == text) return;
  }
  state.guards.push_back(Guard{lhs.as_node(), rhs.as_node(), op, std::move(text)});
}

std::string GuardCheckResult::to_string() const {
  std::string out;
  for (const auto& f : failures) {
    if (!out.empty()) out += "\n";
    out += "guard " + f.guard + " failed: " + f.reason;
  }
  return out;
}

ShapeEnv::ShapeEnv() : state_(std::make_shared<detail::ShapeEnvState>()) {}
ShapeEnv::~ShapeEnv() = default;

SymInt ShapeEnv::create_symbol(int64_t hint, std::string source) {
  OPCONFORM_CHECK(hint >= 0, ErrorCode::kInvalidArgument, "create_symbol: a size cannot be negative, got ", hint,
                  source.empty() ? "" : " for ", source);
  if (hint < 2) return SymInt(hint);  // 0 and 1 are specialised (see the header)
  std::lock_guard<std::mutex> lock(state_->mutex);
  SymNode::SymbolInfo info;
  info.index = state_->next_backed++;
  info.name = "s" + std::to_string(info.index);
  info.source = std::move(source);
  info.hint = hint;
  info.min = 2;
  info.max = INT64_MAX;
  info.env = state_;
  auto node = SymNode::make_symbol(std::move(info));
  state_->symbols.push_back(node);
  return SymInt(node);
}

SymInt ShapeEnv::create_unbacked(int64_t min, int64_t max, std::string source) {
  OPCONFORM_CHECK(min <= max, ErrorCode::kInvalidArgument, "create_unbacked: empty range [", min, ", ", max, "]");
  std::lock_guard<std::mutex> lock(state_->mutex);
  SymNode::SymbolInfo info;
  info.index = state_->next_unbacked++;
  info.name = "u" + std::to_string(info.index);
  info.source = std::move(source);
  info.min = min;
  info.max = max;
  info.env = state_;
  auto node = SymNode::make_symbol(std::move(info));
  state_->symbols.push_back(node);
  return SymInt(node);
}

std::vector<std::string> ShapeEnv::guards() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<std::string> out;
  for (const auto& g : state_->guards) out.push_back(g.text);
  return out;
}

std::vector<ShapeEnv::GuardRecord> ShapeEnv::guard_records() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<GuardRecord> out;
  for (const auto& g : state_->guards) out.push_back({SymInt(g.lhs), SymInt(g.rhs), g.op, g.text});
  return out;
}

std::vector<SymNode::SymbolInfo> ShapeEnv::symbols() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<SymNode::SymbolInfo> out;
  for (const auto& s : state_->symbols) out.push_back(s->symbol());
  return out;
}

int64_t ShapeEnv::evaluate(const SymInt& value, const std::map<std::string, int64_t>& bindings) const {
  if (auto c = value.maybe_as_int()) return *c;
  return value.node()->evaluate([&](const SymNode& s) {
    auto it = bindings.find(s.symbol().name);
    OPCONFORM_CHECK(it != bindings.end(), ErrorCode::kInvalidArgument, "evaluate: no value bound for symbol ",
                    s.symbol().name, " in ", value.to_string());
    return it->second;
  });
}

void ShapeEnv::bind(std::map<std::string, int64_t>& bindings, std::span<const SymInt> symbolic,
                    std::span<const int64_t> concrete) {
  OPCONFORM_CHECK(symbolic.size() == concrete.size(), ErrorCode::kInvalidArgument, "bind: ", symbolic.size(),
                  " symbolic values but ", concrete.size(), " concrete ones");
  for (size_t i = 0; i < symbolic.size(); ++i) {
    const SymInt& s = symbolic[i];
    if (auto c = s.maybe_as_int()) {
      OPCONFORM_CHECK(*c == concrete[i], ErrorCode::kInvalidArgument, "bind: entry ", i, " is ", *c,
                      " in the traced shape but ", concrete[i], " now");
      continue;
    }
    // Compound expressions (s0*2) are checked by guards, not solved for their symbols.
    if (!s.node()->is_symbol()) continue;
    const std::string& name = s.node()->symbol().name;
    auto [it, inserted] = bindings.emplace(name, concrete[i]);
    OPCONFORM_CHECK(inserted || it->second == concrete[i], ErrorCode::kInvalidArgument, "bind: ", name,
                    " would be both ", it->second, " and ", concrete[i]);
  }
}

GuardCheckResult ShapeEnv::check(const std::map<std::string, int64_t>& bindings) const {
  GuardCheckResult result;
  std::vector<std::shared_ptr<SymNode>> symbols;
  std::vector<detail::Guard> guards;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    symbols = state_->symbols;
    guards = state_->guards;
  }
  // The ranges are assumptions too (backed symbols are >= 2): a value outside one fails.
  for (const auto& s : symbols) {
    const auto& info = s->symbol();
    auto it = bindings.find(info.name);
    if (it == bindings.end() || (it->second >= info.min && it->second <= info.max)) continue;
    result.failures.push_back({info.name + " in " + range_str(info),
                               info.name + " = " + std::to_string(it->second) + " is outside its range" +
                                   (info.source.empty() ? "" : " (" + info.source + ")")});
  }
  for (const auto& g : guards) {
    std::vector<const SymNode*> used = g.lhs->free_symbols();
    for (const SymNode* s : g.rhs->free_symbols()) {
      if (std::find(used.begin(), used.end(), s) == used.end()) used.push_back(s);
    }
    std::string missing;
    for (const SymNode* s : used) {
      if (!bindings.count(s->symbol().name)) missing += (missing.empty() ? "" : ", ") + s->symbol().name;
    }
    if (!missing.empty()) {
      result.failures.push_back({g.text, "no value for " + missing});
      continue;
    }
    auto value_of = [&](const SymNode& s) { return bindings.at(s.symbol().name); };
    try {
      if (!holds(g.lhs->evaluate(value_of), g.op, g.rhs->evaluate(value_of))) {
        result.failures.push_back({g.text, "false for " + describe_values(used, bindings)});
      }
    } catch (const Error& e) {  // e.g. a division by zero for these values
      result.failures.push_back({g.text, e.message() + " for " + describe_values(used, bindings)});
    }
  }
  return result;
}

ShapeEnv* ShapeEnv::current() { return tls_current_shape_env; }

ShapeEnvGuard::ShapeEnvGuard(ShapeEnv* env) : previous_(tls_current_shape_env) { tls_current_shape_env = env; }
ShapeEnvGuard::~ShapeEnvGuard() { tls_current_shape_env = previous_; }

}  // namespace opconform
