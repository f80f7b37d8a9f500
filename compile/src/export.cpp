// The graph text format: the writer (Graph::to_string, export_graph) and the reader (load_graph).
//
// Note [Graph text format]: one line per item; `#` never starts a comment.
//
//   text     := header body* return write_back* [guards] [symbols]
//   header   := 'graph(' [def (', ' def)*] '):'
//   body     := '  ' node | '  unused ' def
//   node     := [outs ' = '] ['functional '] op '(' [arg (', ' arg)*] ')'
//   outs     := group (', ' group)* [' | ' defs] | '| ' defs
//   group    := def | '[' [defs] ']'              -- one schema return: a value, or a Tensor[] return
//   def      := ref ['#' id] [': ' meta]          -- no meta: a value that is not a tensor
//   ref      := '%' (id | identifier | string)
//   meta     := dtype '[' [expr (', ' expr)*] ']' ['{' attr (', ' attr)* '}']
//   attr     := 'stride=[' exprs ']' | 'offset=' expr | 'device=' device | 'requires_grad'
//   return   := '  return (' [arg (', ' arg)*] ')'
//   write_back := '  write_back ' ref ' <- ' ref
//   guards   := 'guards: ' expr cmp expr (', ' expr cmp expr)*
//   symbols  := 'symbols: ' identifier ' = ' ref '.size(' int ')' (', ' ...)*
//
// Value ids. An unnamed value is written by its id (%3). A named value is written by its name and
// takes, when loaded, its position among the definitions (inputs, then node outputs, then
// `unused` lines, in text order) as its id; the writer adds `#id` to a definition when that
// position is not its id. Every slot of Graph::values is defined exactly once: values no input or
// node defines are listed as `unused`. A name that is not an identifier is quoted (%"a b").
//
// Groups. A node's outputs are grouped by Node::return_sizes: a return of one value is written
// bare, any other as a bracketed group (`[]` for none); outputs past the returns (the new values
// of the arguments a functional node writes) follow ` | `.
//
// Constants: see export.h. A plain list `[..]` is read as Tensor[] when it holds references (and
// as Tensor?[] when it also holds None), else as int[], float[] or bool[] when every element is
// one of these, else as a generic list; the writer adds a prefix (`Tensor[`, `Tensor?[`, `float[`,
// `bool[`, `list[`) exactly when that reading would be wrong.
//
// Symbolic expressions are written by SymNode::to_string. The reader rebuilds a tree that prints
// the same (raw nodes, no re-canonicalisation, so symbol order and shape are kept). The one
// subtlety is the minus sign: a product with a negative constant factor prints as "-s0*2", and a
// negative constant prints unparenthesised only where no operator binds it (at the top, first in
// a sum, inside parentheses); elsewhere an unparenthesised "-3" is the product 3*-1.
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "opconform/compile/export.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/strides.h"
#include "opconform/core/layout.h"

namespace opconform::compile {
namespace {

using NodePtr = std::shared_ptr<SymNode>;
using Kind = SymNode::Kind;

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s) {
    if (!is_ident_char(c)) return false;
  }
  return true;
}

bool is_op_char(char c) { return is_ident_char(c) || c == ':' || c == '.' || c == '<' || c == '>' || c == '-'; }

// Operator names are written bare when they look like one ("aten::add.Tensor", "wrap_kernel::<f>").
bool is_bare_op_name(std::string_view s) {
  if (s.find("::") == std::string_view::npos) return false;
  for (char c : s) {
    if (!is_op_char(c)) return false;
  }
  return true;
}

std::string quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// The shortest spelling that reads back to the same double, always with a '.' or an exponent so
// that it never reads as an int.
std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string join_symints(const std::vector<SymInt>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i].to_string();
  return out;
}

// Whether `strides` are the row-major strides of `sizes` (compared as text: no guards, no throws).
bool has_contiguous_strides(const TensorMeta& m) {
  if (m.strides.size() != m.sizes.size()) return false;
  std::vector<SymInt> expected;
  try {
    expected = contiguous_strides(m.sizes);
  } catch (const Error&) {
    return false;  // overflow: such strides are written out
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].to_string() != m.strides[i].to_string()) return false;
  }
  return true;
}

// How the reader types a plain `[..]` of constants.
IValue::Tag inferred_list_tag(const std::vector<IValue>& elements) {
  if (elements.empty()) return IValue::Tag::IntList;
  const IValue::Tag first = elements.front().tag();
  for (const IValue& e : elements) {
    if (e.tag() != first) return IValue::Tag::GenericList;
  }
  switch (first) {
    case IValue::Tag::Int: return IValue::Tag::IntList;
    case IValue::Tag::Double: return IValue::Tag::DoubleList;
    case IValue::Tag::Bool: return IValue::Tag::BoolList;
    default: return IValue::Tag::GenericList;
  }
}

std::string format_tensor_constant(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  std::string out = "tensor(" + std::string(name(t.dtype())) + "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "], " + t.device().to_string() + ")";
}

void write_ivalue(std::string& out, const IValue& v) {
  auto list = [&](const char* prefix, const auto& elements, auto&& write) {
    out += prefix;
    out += '[';
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i) out += ", ";
      write(elements[i]);
    }
    out += ']';
  };
  switch (v.tag()) {
    case IValue::Tag::None: out += "None"; break;
    case IValue::Tag::Int: out += std::to_string(*v.get_if<int64_t>()); break;
    case IValue::Tag::Double: out += format_double(*v.get_if<double>()); break;
    case IValue::Tag::Bool: out += *v.get_if<bool>() ? "True" : "False"; break;
    case IValue::Tag::Complex: {
      const complex128& c = *v.get_if<complex128>();
      out += "complex(" + format_double(c.real()) + ", " + format_double(c.imag()) + ")";
      break;
    }
    case IValue::Tag::DType: out += "torch." + std::string(name(*v.get_if<DType>())); break;
    case IValue::Tag::Device: out += "device(" + v.get_if<Device>()->to_string() + ")"; break;
    case IValue::Tag::Layout: out += "torch." + std::string(to_string(*v.get_if<Layout>())); break;
    case IValue::Tag::MemoryFormat: out += "torch." + std::string(to_string(*v.get_if<MemoryFormat>())); break;
    case IValue::Tag::Tensor: out += format_tensor_constant(*v.get_if<Tensor>()); break;
    case IValue::Tag::String: out += quote(*v.get_if<std::string>()); break;
    case IValue::Tag::IntList:
      list("", *v.get_if<std::vector<int64_t>>(), [&](int64_t i) { out += std::to_string(i); });
      break;
    case IValue::Tag::DoubleList: {
      const auto& l = *v.get_if<std::vector<double>>();
      list(l.empty() ? "float" : "", l, [&](double d) { out += format_double(d); });
      break;
    }
    case IValue::Tag::BoolList: {
      const auto& l = *v.get_if<std::vector<bool>>();
      list(l.empty() ? "bool" : "", l, [&](bool b) { out += b ? "True" : "False"; });
      break;
    }
    case IValue::Tag::TensorList:
      list("const Tensor", *v.get_if<std::vector<Tensor>>(),
           [&](const Tensor& t) { out += format_tensor_constant(t); });
      break;
    case IValue::Tag::OptionalTensorList:
      list("const Tensor?", *v.get_if<std::vector<std::optional<Tensor>>>(),
           [&](const std::optional<Tensor>& t) { out += t ? format_tensor_constant(*t) : "None"; });
      break;
    case IValue::Tag::GenericList: {
      const GenericList& g = *v.get_if<GenericList>();
      static const std::vector<IValue> kEmpty;
      const auto& elements = g.elements ? *g.elements : kEmpty;
      list(inferred_list_tag(elements) == IValue::Tag::GenericList ? "" : "list", elements,
           [&](const IValue& e) { write_ivalue(out, e); });
      break;
    }
    case IValue::Tag::SymInt: out += v.get_if<SymInt>()->to_string(); break;
  }
}

void write_arg(std::string& out, const Graph& g, const Arg& arg) {
  if (const Ref* r = std::get_if<Ref>(&arg)) {
    out += value_name(g, r->id);
  } else if (const RefList* l = std::get_if<RefList>(&arg)) {
    bool has_ref = false, has_none = false;
    for (const auto& item : l->items) (item ? has_ref : has_none) = true;
    if (!has_ref || has_none != l->optional_items) out += l->optional_items ? "Tensor?" : "Tensor";
    out += '[';
    for (size_t i = 0; i < l->items.size(); ++i) {
      if (i) out += ", ";
      out += l->items[i] ? value_name(g, l->items[i]->id) : "None";
    }
    out += ']';
  } else {
    write_ivalue(out, std::get<IValue>(arg));
  }
}

class Writer {
 public:
  explicit Writer(const Graph& g) : g_(g) {}

  std::string run() {
    std::set<ValueId> defined;
    out_ += "graph(";
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      if (i) out_ += ", ";
      def(g_.inputs[i]);
      defined.insert(g_.inputs[i]);
    }
    out_ += "):\n";
    for (const Node& n : g_.nodes) {
      node(n);
      defined.insert(n.outputs.begin(), n.outputs.end());
    }
    for (ValueId id = 0; id < g_.values.size(); ++id) {
      if (defined.count(id)) continue;
      out_ += "  unused ";
      def(id);
      out_ += '\n';
    }
    out_ += "  return (";
    args(g_.outputs);
    out_ += ")\n";
    for (const auto& wb : g_.write_backs) {
      out_ += "  write_back " + input_name(wb.input) + " <- " + value_name(g_, wb.value.id) + "\n";
    }
    if (!g_.guards.empty()) {
      out_ += "guards: ";
      for (size_t i = 0; i < g_.guards.size(); ++i) {
        const Guard& gd = g_.guards[i];
        out_ += (i ? ", " : "") + gd.lhs.to_string() + " " + std::string(to_string(gd.op)) + " " + gd.rhs.to_string();
      }
      out_ += '\n';
    }
    if (!g_.symbol_sources.empty()) {
      out_ += "symbols: ";
      for (size_t i = 0; i < g_.symbol_sources.size(); ++i) {
        const SymbolSource& s = g_.symbol_sources[i];
        out_ += (i ? ", " : "") + s.symbol + " = " + input_name(s.input) + ".size(" + std::to_string(s.dim) + ")";
      }
      out_ += '\n';
    }
    return std::move(out_);
  }

 private:
  std::string input_name(size_t input) const {
    if (input < g_.inputs.size()) return value_name(g_, g_.inputs[input]);
    return "%?input" + std::to_string(input);  // a broken graph: does not load
  }

  void def(ValueId id) {
    out_ += value_name(g_, id);
    if (id < g_.values.size()) {
      const Value& v = g_.values[id];
      if (!v.name.empty() && id != definitions_) out_ += "#" + std::to_string(id);
      if (v.tensor) out_ += ": " + meta_to_string(*v.tensor);
    }
    ++definitions_;
  }

  void defs(const std::vector<ValueId>& ids, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      if (i > begin) out_ += ", ";
      def(ids[i]);
    }
  }

  void args(const std::vector<Arg>& a) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out_ += ", ";
      write_arg(out_, g_, a[i]);
    }
  }

  void node(const Node& n) {
    out_ += "  ";
    size_t k = 0;
    for (size_t r = 0; r < n.return_sizes.size(); ++r) {
      if (r) out_ += ", ";
      size_t size = n.return_sizes[r];
      if (size == 1 && k < n.outputs.size()) {
        def(n.outputs[k++]);
        continue;
      }
      size_t end = k + std::min(size, n.outputs.size() - k);
      out_ += '[';
      defs(n.outputs, k, end);
      out_ += ']';
      k = end;
    }
    if (k < n.outputs.size()) {
      out_ += n.return_sizes.empty() ? "| " : " | ";
      defs(n.outputs, k, n.outputs.size());
    }
    if (!n.return_sizes.empty() || !n.outputs.empty()) out_ += " = ";
    if (n.functional) out_ += "functional ";
    out_ += is_bare_op_name(n.op) ? n.op : quote(n.op);
    out_ += '(';
    args(n.args);
    out_ += ")\n";
  }

  const Graph& g_;
  std::string out_;
  size_t definitions_ = 0;  // Note [Graph text format]: a named value's implied id
};

// ============================================================================ reader

constexpr int kMaxDepth = 100;  // nesting of parentheses, lists and minus signs

// A reference as written: by id or by name (resolved once every definition is known).
struct RawRef {
  std::optional<ValueId> id;
  std::string name;
  size_t line = 0, column = 0;
};

// One line being read.
class Cursor {
 public:
  Cursor(std::string_view text, size_t line_no) : text_(text), line_(line_no) {}

  [[noreturn]] void fail(std::string_view expected) const { fail_at(pos_, expected); }
  [[noreturn]] void fail_at(size_t pos, std::string_view expected) const {
    std::string got;
    if (pos >= text_.size()) {
      got = "the end of the line";
    } else {
      std::string_view rest = text_.substr(pos, 24);
      got = quote(rest);
      if (pos + rest.size() < text_.size()) got += "...";
    }
    throw Error(ErrorCode::kInvalidArgument,
                detail::concat("load_graph: line ", line_, ", column ", pos + 1, ": expected ", expected, ", got ", got));
  }

  size_t line() const { return line_; }
  size_t pos() const { return pos_; }
  void set_pos(size_t p) { pos_ = p; }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  std::string_view rest() const { return text_.substr(std::min(pos_, text_.size())); }
  std::string_view slice(size_t begin, size_t end) const { return text_.substr(begin, end - begin); }
  void advance(size_t n = 1) { pos_ = std::min(pos_ + n, text_.size()); }

  bool consume(std::string_view s) {
    if (!rest().starts_with(s)) return false;
    pos_ += s.size();
    return true;
  }
  // A keyword: `s` not followed by an identifier character.
  bool consume_word(std::string_view s) {
    if (!rest().starts_with(s) || is_ident_char(peek(s.size()))) return false;
    pos_ += s.size();
    return true;
  }
  void expect(std::string_view s, std::string_view what) {
    if (!consume(s)) fail(what);
  }
  void expect_end() {
    if (!at_end()) fail("the end of the line");
  }
  void skip_spaces() {
    while (peek() == ' ') ++pos_;
  }
  std::string_view identifier() {
    size_t start = pos_;
    if (!is_ident_start(peek())) return {};
    while (is_ident_char(peek())) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  // Unsigned decimal digits; nullopt (and the position kept) when there are none or they
  // overflow uint64.
  std::optional<uint64_t> unsigned_integer() {
    size_t start = pos_;
    while (is_digit(peek())) ++pos_;
    if (pos_ == start) return std::nullopt;
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (ec != std::errc()) {
      pos_ = start;
      return std::nullopt;
    }
    return v;
  }
  std::string quoted_string() {
    if (!consume("\"")) fail("'\"'");
    std::string out;
    while (true) {
      if (at_end()) fail("'\"' closing the string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = peek();
      advance();
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          auto hex = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            return -1;
          };
          int hi = hex(peek()), lo = hex(peek(1));
          if (hi < 0 || lo < 0) fail("two hex digits after \\x");
          advance(2);
          out += static_cast<char>(hi * 16 + lo);
          break;
        }
        default: set_pos(pos_ - 1); fail("an escape (\\\" \\\\ \\n \\t \\r \\xHH)");
      }
    }
  }

 private:
  std::string_view text_;
  size_t line_;
  size_t pos_ = 0;
};

// A definition as written, before ids are assigned.
struct Def {
  RawRef ref;
  std::optional<ValueId> explicit_id;  // `#id`
  std::optional<TensorMeta> meta;
};

// A node line read up to its operator (the rest is read once every definition is known).
struct PendingNode {
  size_t line_index = 0;
  size_t op_pos = 0;
  std::vector<size_t> outputs;  // indices into the definitions
  std::vector<size_t> return_sizes;
};

class Reader {
 public:
  explicit Reader(std::string_view text) {
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      lines_.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  }

  Graph run() {
    read_symbol_sources();
    read_definitions();
    assign_ids();
    for (const PendingNode& p : pending_) read_node_rest(p);
    read_tail();
    return std::move(g_);
  }

 private:
  enum class Section { Header, Body, WriteBacks, Guards, Symbols };

  Cursor cursor(size_t index) const { return Cursor(lines_[index], index + 1); }

  // ---- pass 0: where each symbol comes from (for SymbolInfo::source), before any is made
  void read_symbol_sources() {
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (!lines_[i].starts_with("symbols: ")) continue;
      Cursor c = cursor(i);
      symbol_entries_ = read_symbols_line(c);
      for (const auto& e : symbol_entries_) {
        std::string input = e.ref.id ? std::to_string(*e.ref.id) : e.ref.name;
        symbol_source_text_.emplace(e.symbol, input + ".size(" + std::to_string(e.dim) + ")");
      }
      return;
    }
  }

  struct SymbolEntry {
    std::string symbol;
    RawRef ref;
    size_t dim = 0;
  };
  std::vector<SymbolEntry> read_symbols_line(Cursor& c) {
    std::vector<SymbolEntry> out;
    c.expect("symbols: ", "'symbols: '");
    do {
      SymbolEntry e;
      e.symbol = std::string(c.identifier());
      if (e.symbol.empty()) c.fail("a symbol name");
      c.expect(" = ", "' = ' after the symbol name");
      e.ref = read_ref(c);
      c.expect(".size(", "'.size(' after the input");
      auto dim = c.unsigned_integer();
      if (!dim) c.fail("a dimension");
      e.dim = static_cast<size_t>(*dim);
      c.expect(")", "')' after the dimension");
      out.push_back(std::move(e));
    } while (c.consume(", "));
    c.expect_end();
    return out;
  }

  // ---- pass 1: the header, node outputs and `unused` lines (every definition)
  void read_definitions() {
    Section section = Section::Header;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (lines_[i].empty()) continue;
      Cursor c = cursor(i);
      if (section == Section::Header) {
        read_header(c);
        section = Section::Body;
        continue;
      }
      if (c.consume("guards: ")) {
        if (section != Section::WriteBacks) c.fail_at(0, section == Section::Body ? "a return line before the guards" : "one guards line, before the symbols");
        section = Section::Guards;
        guards_line_ = i;
        continue;
      }
      if (c.consume("symbols: ")) {
        if (section == Section::Body || section == Section::Symbols) {
          c.fail_at(0, section == Section::Body ? "a return line before the symbols" : "one symbols line");
        }
        section = Section::Symbols;
        continue;
      }
      if (!c.consume("  ")) c.fail("two spaces starting a node, return or write_back line");
      if (c.consume("return (")) {
        if (section != Section::Body) c.fail_at(0, "one return line");
        section = Section::WriteBacks;
        return_line_ = i;
        continue;
      }
      if (c.consume("write_back ")) {
        if (section != Section::WriteBacks) c.fail_at(0, "write_back lines right after the return line");
        write_back_lines_.push_back(i);
        continue;
      }
      if (section != Section::Body) c.fail_at(0, "the guards or symbols line (nodes come before the return line)");
      if (c.consume("unused ")) {
        read_def(c);
        c.expect_end();
        continue;
      }
      read_node_outputs(c, i);
    }
    if (section == Section::Header) Cursor(lines_.front(), 1).fail("'graph(' starting the text");
    if (section == Section::Body) Cursor("", lines_.size()).fail("a return line ('  return (...)')");
  }

  void read_header(Cursor& c) {
    c.expect("graph(", "'graph(' starting the text");
    if (!c.consume("):")) {
      do {
        header_defs_.push_back(read_def(c));
      } while (c.consume(", "));
      c.expect("):", "'):' closing the inputs");
    }
    c.expect_end();
  }

  void read_node_outputs(Cursor& c, size_t line_index) {
    PendingNode p;
    p.line_index = line_index;
    char first = c.peek();
    if (first == '%' || first == '[') {
      do {
        if (c.consume("[")) {
          size_t size = 0;
          if (!c.consume("]")) {
            do {
              p.outputs.push_back(read_def(c));
              ++size;
            } while (c.consume(", "));
            c.expect("]", "']' closing a group of outputs");
          }
          p.return_sizes.push_back(size);
        } else {
          p.outputs.push_back(read_def(c));
          p.return_sizes.push_back(1);
        }
      } while (c.consume(", "));
      if (c.consume(" | ")) read_extra_outputs(c, p);
      c.expect(" = ", "' = ' after the outputs");
    } else if (c.consume("| ")) {
      read_extra_outputs(c, p);
      c.expect(" = ", "' = ' after the outputs");
    }
    p.op_pos = c.pos();
    pending_.push_back(std::move(p));
  }

  void read_extra_outputs(Cursor& c, PendingNode& p) {
    do {
      p.outputs.push_back(read_def(c));
    } while (c.consume(", "));
  }

  RawRef read_ref(Cursor& c) {
    RawRef r;
    r.line = c.line();
    r.column = c.pos();
    c.expect("%", "a value ('%')");
    if (is_digit(c.peek())) {
      auto v = c.unsigned_integer();
      if (!v || *v > UINT32_MAX) c.fail("a value id below 2^32");
      r.id = static_cast<ValueId>(*v);
    } else if (c.peek() == '"') {
      r.name = c.quoted_string();
      if (r.name.empty()) c.fail_at(r.column, "a value name that is not empty");
    } else {
      r.name = std::string(c.identifier());
      if (r.name.empty()) c.fail("a value id or name after '%'");
    }
    return r;
  }

  // Reads a definition; returns its index among the definitions.
  size_t read_def(Cursor& c) {
    Def d;
    d.ref = read_ref(c);
    if (c.consume("#")) {
      auto v = c.unsigned_integer();
      if (!v || *v > UINT32_MAX) c.fail("a value id after '#'");
      if (d.ref.id) c.fail_at(c.pos() - 1, "no '#id' after a value written by its id");
      d.explicit_id = static_cast<ValueId>(*v);
    }
    if (c.consume(": ")) d.meta = read_meta(c);
    defs_.push_back(std::move(d));
    return defs_.size() - 1;
  }

  TensorMeta read_meta(Cursor& c) {
    TensorMeta m;
    size_t start = c.pos();
    std::string_view dtype_name = c.identifier();
    std::optional<DType> dtype;
    for (int t = 0; t < kNumDTypes; ++t) {
      if (name(static_cast<DType>(t)) == dtype_name) dtype = static_cast<DType>(t);
    }
    if (!dtype) c.fail_at(start, "a dtype (float32, int64, ...)");
    m.dtype = *dtype;
    c.expect("[", "'[' before the sizes");
    m.sizes = read_symint_list(c);
    bool have_strides = false;
    if (c.consume("{")) {
      do {
        if (c.consume("stride=[")) {
          m.strides = read_symint_list(c);
          have_strides = true;
        } else if (c.consume("offset=")) {
          m.storage_offset = SymInt(read_sum(c, 0));
        } else if (c.consume("device=")) {
          size_t begin = c.pos();
          while (!c.at_end() && c.peek() != ',' && c.peek() != '}') c.advance();
          std::string text(c.slice(begin, c.pos()));
          try {
            m.device = Device::parse(text);
          } catch (const Error& e) {
            c.fail_at(begin, "a device (" + e.message() + ")");
          }
        } else if (c.consume_word("requires_grad")) {
          m.requires_grad = true;
        } else {
          c.fail("stride=, offset=, device= or requires_grad");
        }
      } while (c.consume(", "));
      c.expect("}", "'}' closing the tensor attributes");
    }
    if (!have_strides) {
      try {
        m.strides = contiguous_strides(m.sizes);
      } catch (const Error& e) {
        c.fail_at(start, "sizes whose strides fit in int64 (" + e.message() + ")");
      }
    }
    return m;
  }

  // After '[': expressions up to ']'.
  std::vector<SymInt> read_symint_list(Cursor& c) {
    std::vector<SymInt> out;
    if (c.consume("]")) return out;
    do {
      out.emplace_back(read_sum(c, 0));
    } while (c.consume(", "));
    c.expect("]", "']' closing the list");
    return out;
  }

  // ---- ids
  void assign_ids() {
    const size_t count = defs_.size();
    std::vector<int64_t> owner(count, -1);  // slot -> definition
    def_ids_.resize(count);
    for (size_t k = 0; k < count; ++k) {
      const Def& d = defs_[k];
      Cursor c(lines_[d.ref.line - 1], d.ref.line);
      ValueId id = d.ref.id ? *d.ref.id : (d.explicit_id ? *d.explicit_id : static_cast<ValueId>(k));
      if (id >= count) {
        c.fail_at(d.ref.column, detail::concat("a value id below ", count, " (the text defines ", count, " values)"));
      }
      if (owner[id] >= 0) {
        c.fail_at(d.ref.column, detail::concat("a value defined once (value ", id, " is defined before, on line ",
                                               defs_[owner[id]].ref.line, ")"));
      }
      if (!d.ref.name.empty() && !names_.emplace(d.ref.name, id).second) {
        c.fail_at(d.ref.column, "a value name used once (%" + d.ref.name + " is defined before)");
      }
      owner[id] = static_cast<int64_t>(k);
      def_ids_[k] = id;
    }
    g_.values.resize(count);
    for (size_t k = 0; k < count; ++k) {
      Value& v = g_.values[def_ids_[k]];
      v.id = def_ids_[k];
      v.name = defs_[k].ref.name;
      v.tensor = std::move(defs_[k].meta);
    }
    for (size_t k : header_defs_) g_.inputs.push_back(def_ids_[k]);
  }

  ValueId resolve(const RawRef& r) const {
    if (r.id) {
      if (*r.id >= g_.values.size()) {
        Cursor(lines_[r.line - 1], r.line).fail_at(r.column, detail::concat("a defined value (there is no %", *r.id, ")"));
      }
      return *r.id;
    }
    auto it = names_.find(r.name);
    if (it == names_.end()) {
      Cursor(lines_[r.line - 1], r.line).fail_at(r.column, "a defined value (there is no %" + r.name + ")");
    }
    return it->second;
  }

  size_t resolve_input(const RawRef& r) const {
    ValueId id = resolve(r);
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      if (g_.inputs[i] == id) return i;
    }
    Cursor(lines_[r.line - 1], r.line).fail_at(r.column, "an input of the graph");
  }

  // ---- pass 2: operators, arguments and the tail
  void read_node_rest(const PendingNode& p) {
    Cursor c = cursor(p.line_index);
    c.set_pos(p.op_pos);
    Node n;
    for (size_t k : p.outputs) n.outputs.push_back(def_ids_[k]);
    n.return_sizes = p.return_sizes;
    n.functional = c.consume("functional ");
    if (c.peek() == '"') {
      n.op = c.quoted_string();
    } else {
      size_t start = c.pos();
      while (is_op_char(c.peek())) c.advance();
      n.op = std::string(lines_[p.line_index].substr(start, c.pos() - start));
      if (n.op.empty()) c.fail("an operator name");
    }
    c.expect("(", "'(' after the operator name");
    n.args = read_args(c, ")");
    c.expect_end();
    g_.nodes.push_back(std::move(n));
  }

  // Arguments up to `close`, which is consumed.
  std::vector<Arg> read_args(Cursor& c, std::string_view close) {
    std::vector<Arg> out;
    if (c.consume(close)) return out;
    do {
      out.push_back(read_arg(c));
    } while (c.consume(", "));
    c.expect(close, "', ' or '" + std::string(close) + "' after an argument");
    return out;
  }

  void read_tail() {
    {
      Cursor c = cursor(return_line_);
      c.expect("  return (", "'  return ('");
      g_.outputs = read_args(c, ")");
      c.expect_end();
    }
    for (size_t i : write_back_lines_) {
      Cursor c = cursor(i);
      c.expect("  write_back ", "'  write_back '");
      RawRef input = read_ref(c);
      c.expect(" <- ", "' <- ' after the input");
      RawRef value = read_ref(c);
      c.expect_end();
      g_.write_backs.push_back({resolve_input(input), Ref{resolve(value)}});
    }
    if (guards_line_) {
      Cursor c = cursor(*guards_line_);
      c.expect("guards: ", "'guards: '");
      do {
        Guard gd;
        gd.lhs = SymInt(read_sum(c, 0));
        c.skip_spaces();
        static constexpr std::pair<const char*, CompareOp> kOps[] = {
            {"==", CompareOp::EQ}, {"!=", CompareOp::NE}, {"<=", CompareOp::LE},
            {">=", CompareOp::GE}, {"<", CompareOp::LT},  {">", CompareOp::GT}};
        bool found = false;
        for (const auto& [text, op] : kOps) {
          if (c.consume(text)) {
            gd.op = op;
            found = true;
            break;
          }
        }
        if (!found) c.fail("a comparison (==, !=, <, <=, >, >=)");
        c.skip_spaces();
        gd.rhs = SymInt(read_sum(c, 0));
        gd.text = gd.lhs.to_string() + " " + std::string(to_string(gd.op)) + " " + gd.rhs.to_string();
        g_.guards.push_back(std::move(gd));
      } while (c.consume(", "));
      c.expect_end();
    }
    for (const auto& e : symbol_entries_) {
      g_.symbol_sources.push_back({e.symbol, resolve_input(e.ref), e.dim});
    }
  }

  // ---- arguments and constants
  Arg read_arg(Cursor& c) {
    if (c.peek() == '%') return Ref{resolve(read_ref(c))};
    if (c.consume("Tensor?[")) return read_ref_list(c, true);
    if (c.consume("Tensor[")) return read_ref_list(c, false);
    if (c.peek() == '[') {
      c.advance();
      return read_plain_list(c, /*refs_allowed=*/true, 1);
    }
    return read_value(c, 0);
  }

  RefList read_ref_list(Cursor& c, bool optional_items) {
    RefList l;
    l.optional_items = optional_items;
    if (c.consume("]")) return l;
    do {
      if (c.consume_word("None")) l.items.push_back(std::nullopt);
      else if (c.peek() == '%') l.items.push_back(Ref{resolve(read_ref(c))});
      else c.fail("a value ('%') or None in a list of tensors");
    } while (c.consume(", "));
    c.expect("]", "']' closing the list");
    return l;
  }

  // After '[': a Tensor[] / Tensor?[] when it holds references, else a list constant.
  Arg read_plain_list(Cursor& c, bool refs_allowed, int depth) {
    std::vector<std::optional<Ref>> refs;
    std::vector<IValue> values;
    bool has_ref = false, has_value = false;
    size_t start = c.pos();
    if (!c.consume("]")) {
      do {
        if (refs_allowed && c.peek() == '%') {
          refs.push_back(Ref{resolve(read_ref(c))});
          has_ref = true;
        } else {
          IValue v = read_value(c, depth);
          if (v.tag() != IValue::Tag::None) has_value = true;
          refs.push_back(std::nullopt);
          values.push_back(std::move(v));
        }
        if (has_ref && has_value) c.fail_at(start, "a list of values or of constants, not both");
      } while (c.consume(", "));
      c.expect("]", "', ' or ']' in a list");
    }
    if (has_ref) {
      RefList l;
      l.items = std::move(refs);
      l.optional_items = std::any_of(l.items.begin(), l.items.end(), [](const auto& i) { return !i; });
      return l;
    }
    switch (inferred_list_tag(values)) {
      case IValue::Tag::IntList: {
        std::vector<int64_t> l;
        for (const auto& v : values) l.push_back(*v.get_if<int64_t>());
        return IValue(std::move(l));
      }
      case IValue::Tag::DoubleList: {
        std::vector<double> l;
        for (const auto& v : values) l.push_back(*v.get_if<double>());
        return IValue(std::move(l));
      }
      case IValue::Tag::BoolList: {
        std::vector<bool> l;
        for (const auto& v : values) l.push_back(*v.get_if<bool>());
        return IValue(std::move(l));
      }
      default: return IValue::list(std::move(values));
    }
  }

  // After the prefix's '[': elements read by read_value, which must have kind `want` (or None
  // where `none_ok`).
  std::vector<IValue> read_typed_elements(Cursor& c, int depth, const char* what,
                                          const std::function<bool(const IValue&)>& ok) {
    std::vector<IValue> out;
    if (c.consume("]")) return out;
    do {
      size_t start = c.pos();
      IValue v = read_value(c, depth);
      if (!ok(v)) c.fail_at(start, what);
      out.push_back(std::move(v));
    } while (c.consume(", "));
    c.expect("]", "', ' or ']' in a list");
    return out;
  }

  IValue read_value(Cursor& c, int depth) {
    if (depth > kMaxDepth) c.fail("less nesting");
    if (c.consume_word("None")) return IValue();
    if (c.consume_word("True")) return IValue(true);
    if (c.consume_word("False")) return IValue(false);
    if (c.consume_word("nan")) return IValue(std::nan(""));
    if (c.consume_word("inf")) return IValue(HUGE_VAL);
    if (c.consume_word("-inf")) return IValue(-HUGE_VAL);
    if (c.peek() == '"') return IValue(c.quoted_string());
    if (c.consume("torch.")) {
      size_t start = c.pos();
      std::string_view word = c.identifier();
      for (int t = 0; t < kNumDTypes; ++t) {
        if (name(static_cast<DType>(t)) == word) return IValue(static_cast<DType>(t));
      }
      if (auto l = parse_layout(word); l && to_string(*l) == word) return IValue(*l);
      if (auto m = parse_memory_format(word); m && to_string(*m) == word) return IValue(*m);
      c.fail_at(start, "a dtype, layout or memory format after 'torch.'");
    }
    if (c.consume("device(")) {
      size_t begin = c.pos();
      while (!c.at_end() && c.peek() != ')') c.advance();
      std::string text(c.slice(begin, c.pos()));
      c.expect(")", "')' closing the device");
      try {
        return IValue(Device::parse(text));
      } catch (const Error& e) {
        c.fail_at(begin, "a device (" + e.message() + ")");
      }
    }
    if (c.consume("complex(")) {
      double re = read_double(c);
      c.expect(", ", "', ' between the real and imaginary parts");
      double im = read_double(c);
      c.expect(")", "')' closing the complex number");
      return IValue(complex128(re, im));
    }
    if (c.consume("tensor(")) {
      if (!c.consume("undefined)")) c.fail("'undefined)': tensor constants cannot be loaded (the text has no data)");
      return IValue(Tensor());
    }
    if (c.consume("list[")) {
      return IValue::list(read_typed_elements(c, depth + 1, "a constant", [](const IValue&) { return true; }));
    }
    if (c.consume("float[")) {
      auto e = read_typed_elements(c, depth + 1, "a float", [](const IValue& v) { return v.is_double(); });
      std::vector<double> l;
      for (const auto& v : e) l.push_back(*v.get_if<double>());
      return IValue(std::move(l));
    }
    if (c.consume("bool[")) {
      auto e = read_typed_elements(c, depth + 1, "True or False", [](const IValue& v) { return v.is_bool(); });
      std::vector<bool> l;
      for (const auto& v : e) l.push_back(*v.get_if<bool>());
      return IValue(std::move(l));
    }
    if (c.consume("const Tensor?[")) {
      auto e = read_typed_elements(c, depth + 1, "tensor(undefined) or None",
                                   [](const IValue& v) { return v.is_none() || v.is_tensor(); });
      std::vector<std::optional<Tensor>> l;
      for (const auto& v : e) l.push_back(v.is_none() ? std::nullopt : std::optional<Tensor>(v.to_tensor()));
      return IValue(std::move(l));
    }
    if (c.consume("const Tensor[")) {
      auto e = read_typed_elements(c, depth + 1, "tensor(undefined)", [](const IValue& v) { return v.is_tensor(); });
      std::vector<Tensor> l;
      for (const auto& v : e) l.push_back(v.to_tensor());
      return IValue(std::move(l));
    }
    if (c.peek() == '[') {
      size_t start = c.pos();
      c.advance();
      Arg a = read_plain_list(c, /*refs_allowed=*/false, depth + 1);
      if (!std::holds_alternative<IValue>(a)) c.fail_at(start, "a constant");
      return std::get<IValue>(std::move(a));
    }
    // A float has a '.' or an exponent; anything else numeric is an int or an expression.
    if (is_digit(c.peek()) || (c.peek() == '-' && is_digit(c.peek(1)))) {
      std::string_view r = c.rest();
      size_t i = r[0] == '-' ? 1 : 0;
      while (i < r.size() && is_digit(r[i])) ++i;
      bool is_float = false;
      if (i < r.size() && r[i] == '.') {
        is_float = true;
        ++i;
        while (i < r.size() && is_digit(r[i])) ++i;
      }
      if (i < r.size() && (r[i] == 'e' || r[i] == 'E')) {
        size_t j = i + 1;
        if (j < r.size() && (r[j] == '+' || r[j] == '-')) ++j;
        if (j < r.size() && is_digit(r[j])) {
          is_float = true;
          i = j;
          while (i < r.size() && is_digit(r[i])) ++i;
        }
      }
      if (is_float) return IValue(read_double(c));
    }
    if (c.peek() == '-' || c.peek() == '(' || is_digit(c.peek()) || is_ident_start(c.peek())) {
      SymInt s(read_sum(c, depth));
      return IValue(s);
    }
    c.fail("a value");
  }

  double read_double(Cursor& c) {
    if (c.consume_word("nan")) return std::nan("");
    if (c.consume_word("inf")) return HUGE_VAL;
    if (c.consume_word("-inf")) return -HUGE_VAL;
    std::string_view r = c.rest();
    double d = 0;
    auto [end, ec] = std::from_chars(r.data(), r.data() + r.size(), d);
    if (ec != std::errc() || end == r.data()) c.fail("a float");
    std::string_view used(r.data(), end - r.data());
    if (used.find_first_of(".eE") == std::string_view::npos) c.fail("a float (with '.' or an exponent)");
    c.advance(used.size());
    return d;
  }

  // ---- symbolic expressions (Note [Graph text format]: the minus sign)
  NodePtr symbol(const std::string& name) {
    auto it = symbols_.find(name);
    if (it != symbols_.end()) return it->second;
    SymNode::SymbolInfo info;
    info.name = name;
    if (auto s = symbol_source_text_.find(name); s != symbol_source_text_.end()) info.source = s->second;
    size_t digits = name.size();
    while (digits > 0 && is_digit(name[digits - 1])) --digits;
    info.min = (name[0] == 's' && digits == 1 && name.size() > 1) ? 2 : 0;  // s<N>: a size
    if (digits < name.size()) {
      int64_t index = 0;
      auto [end, ec] = std::from_chars(name.data() + digits, name.data() + name.size(), index);
      if (ec == std::errc()) info.index = index;
    }
    NodePtr n = SymNode::make_symbol(std::move(info));
    symbols_.emplace(name, n);
    return n;
  }

  // sum := term ((' + ' | ' - ') term)*
  NodePtr read_sum(Cursor& c, int depth) {
    if (depth > kMaxDepth) c.fail("less nesting");
    NodePtr acc = read_term(c, depth, /*negative_constant_ok=*/true);
    while (true) {
      size_t save = c.pos();
      c.skip_spaces();
      Kind kind;
      if (c.peek() == '+') kind = Kind::Add;
      else if (c.peek() == '-') kind = Kind::Sub;
      else {
        c.set_pos(save);
        return acc;
      }
      c.advance();
      c.skip_spaces();
      acc = SymNode::make_binary(kind, acc, read_term(c, depth, /*negative_constant_ok=*/false));
    }
  }

  struct Factor {
    NodePtr node;                     // null for the literal 2^63 (only "-9223372036854775808")
    std::optional<uint64_t> literal;  // a bare integer literal
  };

  Factor read_factor(Cursor& c, int depth) {
    if (is_digit(c.peek())) {
      size_t start = c.pos();
      auto v = c.unsigned_integer();
      if (!v || *v > uint64_t(INT64_MAX) + 1) c.fail_at(start, "an integer that fits in int64");
      return {*v <= uint64_t(INT64_MAX) ? SymNode::make_constant(static_cast<int64_t>(*v)) : nullptr, *v};
    }
    if (c.consume("(")) {
      NodePtr n = read_sum(c, depth + 1);
      c.expect(")", "')' closing the expression");
      return {n, std::nullopt};
    }
    std::string name(c.identifier());
    if (name.empty()) c.fail("a number, a symbol or '('");
    return {symbol(name), std::nullopt};
  }

  NodePtr need(const Factor& f, Cursor& c, size_t pos) {
    if (!f.node) c.fail_at(pos, "an integer that fits in int64");
    return f.node;
  }

  // term := ['-'] factor (('*' | '//' | ' % ') factor)*; a factor after an operator may itself be a
  // negated term (raw trees print "s1*-s0*2"), which then ends the term.
  NodePtr read_term(Cursor& c, int depth, bool negative_constant_ok) {
    if (depth > kMaxDepth) c.fail("less nesting");
    const bool negative = c.consume("-");
    if (negative && c.peek() == '-') {
      return SymNode::make_binary(Kind::Mul, read_term(c, depth + 1, false), SymNode::make_constant(-1));
    }
    std::vector<Factor> factors;
    std::vector<size_t> positions;
    std::vector<Kind> ops;
    positions.push_back(c.pos());
    factors.push_back(read_factor(c, depth));
    while (true) {
      size_t save = c.pos();
      c.skip_spaces();
      Kind kind;
      if (c.consume("//")) kind = Kind::FloorDiv;
      else if (c.consume("*")) kind = Kind::Mul;
      else if (c.consume("%")) kind = Kind::Mod;
      else {
        c.set_pos(save);
        break;
      }
      c.skip_spaces();
      ops.push_back(kind);
      positions.push_back(c.pos());
      if (c.peek() == '-') {
        factors.push_back({read_term(c, depth + 1, false), std::nullopt});
        break;
      }
      factors.push_back(read_factor(c, depth));
    }
    // Products read left to right, unless a later factor is a negative constant: Mul(acc, -3)
    // would print as "-acc*3", so such a chain (printed from a right-nested product) nests right.
    auto fold = [&](size_t count) {
      bool nest_right = false;
      for (size_t i = 1; i < count; ++i) {
        const NodePtr& f = factors[i].node;
        nest_right = nest_right || (f && f->is_constant() && f->constant_value() < 0 && f->constant_value() != INT64_MIN);
      }
      for (size_t i = 0; i + 1 < count; ++i) nest_right = nest_right && ops[i] == Kind::Mul;
      if (nest_right) {
        NodePtr acc = need(factors[count - 1], c, positions[count - 1]);
        for (size_t i = count - 1; i-- > 0;) acc = SymNode::make_binary(Kind::Mul, need(factors[i], c, positions[i]), acc);
        return acc;
      }
      NodePtr acc = need(factors[0], c, positions[0]);
      for (size_t i = 1; i < count; ++i) acc = SymNode::make_binary(ops[i - 1], acc, need(factors[i], c, positions[i]));
      return acc;
    };
    if (!negative) return fold(factors.size());
    const size_t n = factors.size();
    if (n == 1 && factors[0].literal) {
      uint64_t v = *factors[0].literal;
      if (negative_constant_ok && v != 0) {  // "-0" is 0*-1: the constant prints "0"
        return SymNode::make_constant(v == uint64_t(INT64_MAX) + 1 ? INT64_MIN : -static_cast<int64_t>(v));
      }
      return SymNode::make_binary(Kind::Mul, need(factors[0], c, positions[0]), SymNode::make_constant(-1));
    }
    // "-a*b*3" is Mul(a*b, -3), but only when a*b prints back as itself, i.e. does not end in a
    // negative constant (that chain was printed from -(a*b*3), the form below).
    const bool before_last_negative = n >= 3 && factors[n - 2].node && factors[n - 2].node->is_constant() &&
                                      factors[n - 2].node->constant_value() < 0 &&
                                      factors[n - 2].node->constant_value() != INT64_MIN;
    if (n >= 2 && ops.back() == Kind::Mul && factors.back().literal && *factors.back().literal >= 2 &&
        *factors.back().literal <= uint64_t(INT64_MAX) && !before_last_negative) {
      return SymNode::make_binary(Kind::Mul, fold(n - 1),
                                  SymNode::make_constant(-static_cast<int64_t>(*factors.back().literal)));
    }
    return SymNode::make_binary(Kind::Mul, fold(n), SymNode::make_constant(-1));
  }

  std::vector<std::string_view> lines_;
  Graph g_;
  std::vector<Def> defs_;
  std::vector<ValueId> def_ids_;
  std::vector<size_t> header_defs_;
  std::vector<PendingNode> pending_;
  std::map<std::string, ValueId> names_;
  std::map<std::string, NodePtr> symbols_;
  std::map<std::string, std::string> symbol_source_text_;
  std::vector<SymbolEntry> symbol_entries_;
  std::optional<size_t> guards_line_;
  size_t return_line_ = 0;
  std::vector<size_t> write_back_lines_;
};

}  // namespace

std::string value_name(const Graph& g, ValueId id) {
  if (id < g.values.size() && !g.values[id].name.empty()) {
    const std::string& n = g.values[id].name;
    return "%" + (is_identifier(n) ? n : quote(n));
  }
  return "%" + std::to_string(id);
}

std::string meta_to_string(const TensorMeta& m) {
  std::string out = std::string(name(m.dtype)) + "[" + join_symints(m.sizes) + "]";
  std::vector<std::string> attrs;
  if (!has_contiguous_strides(m)) attrs.push_back("stride=[" + join_symints(m.strides) + "]");
  if (m.storage_offset.is_symbolic() || m.storage_offset.maybe_as_int() != 0) {
    attrs.push_back("offset=" + m.storage_offset.to_string());
  }
  if (!(m.device == Device::cpu())) attrs.push_back("device=" + m.device.to_string());
  if (m.requires_grad) attrs.push_back("requires_grad");
  if (!attrs.empty()) {
    out += "{";
    for (size_t i = 0; i < attrs.size(); ++i) out += (i ? ", " : "") + attrs[i];
    out += "}";
  }
  return out;
}

std::string arg_to_string(const Graph& graph, const Arg& arg) {
  std::string out;
  write_arg(out, graph, arg);
  return out;
}

std::string export_graph(const Graph& graph) { return Writer(graph).run(); }

Graph load_graph(std::string_view text) { return Reader(text).run(); }

}  // namespace opconform::compile
