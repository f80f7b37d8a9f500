#include "opconform/core/ivalue.h"

#include <sstream>

namespace opconform {

IValue::IValue(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: *this = IValue(s.to<bool>()); break;
    case Scalar::Kind::Int: *this = IValue(s.to<int64_t>()); break;
    case Scalar::Kind::Float: *this = IValue(s.to<double>()); break;
    case Scalar::Kind::Complex: *this = IValue(s.to<complex128>()); break;
  }
}

void IValue::destroy_slow() noexcept {
  switch (tag_) {
    case Tag::Tensor: p_.tensor.~Tensor(); break;
    case Tag::String: p_.str.~basic_string(); break;
    case Tag::IntList: p_.int_list.~vector(); break;
    case Tag::DoubleList: p_.double_list.~vector(); break;
    case Tag::BoolList: p_.bool_list.~vector(); break;
    case Tag::TensorList: p_.tensor_list.~vector(); break;
    case Tag::OptionalTensorList: p_.optional_tensor_list.~vector(); break;
    case Tag::GenericList: p_.generic_list.~GenericList(); break;
    case Tag::SymInt: p_.symint.~SymInt(); break;
    default: break;
  }
  tag_ = Tag::None;
}

void IValue::copy_from(const IValue& o) {
  switch (o.tag_) {
    case Tag::Tensor: new (&p_.tensor) Tensor(o.p_.tensor); break;
    case Tag::String: new (&p_.str) std::string(o.p_.str); break;
    case Tag::IntList: new (&p_.int_list) std::vector<int64_t>(o.p_.int_list); break;
    case Tag::DoubleList: new (&p_.double_list) std::vector<double>(o.p_.double_list); break;
    case Tag::BoolList: new (&p_.bool_list) std::vector<bool>(o.p_.bool_list); break;
    case Tag::TensorList: new (&p_.tensor_list) std::vector<Tensor>(o.p_.tensor_list); break;
    case Tag::OptionalTensorList:
      new (&p_.optional_tensor_list) std::vector<std::optional<Tensor>>(o.p_.optional_tensor_list);
      break;
    case Tag::GenericList: new (&p_.generic_list) GenericList(o.p_.generic_list); break;
    case Tag::SymInt: new (&p_.symint) SymInt(o.p_.symint); break;
    default: p_.raw = o.p_.raw; break;
  }
}

void IValue::move_from(IValue&& o) noexcept {
  switch (o.tag_) {
    case Tag::Tensor: new (&p_.tensor) Tensor(std::move(o.p_.tensor)); break;
    case Tag::String: new (&p_.str) std::string(std::move(o.p_.str)); break;
    case Tag::IntList: new (&p_.int_list) std::vector<int64_t>(std::move(o.p_.int_list)); break;
    case Tag::DoubleList: new (&p_.double_list) std::vector<double>(std::move(o.p_.double_list)); break;
    case Tag::BoolList: new (&p_.bool_list) std::vector<bool>(std::move(o.p_.bool_list)); break;
    case Tag::TensorList: new (&p_.tensor_list) std::vector<Tensor>(std::move(o.p_.tensor_list)); break;
    case Tag::OptionalTensorList:
      new (&p_.optional_tensor_list) std::vector<std::optional<Tensor>>(std::move(o.p_.optional_tensor_list));
      break;
    case Tag::GenericList: new (&p_.generic_list) GenericList(std::move(o.p_.generic_list)); break;
    case Tag::SymInt: new (&p_.symint) SymInt(std::move(o.p_.symint)); break;
    default: p_.raw = o.p_.raw; break;
  }
}

std::string_view IValue::type_name() const {
  switch (tag()) {
    case Tag::None: return "None";
    case Tag::Tensor: return "Tensor";
    case Tag::Int: return "int";
    case Tag::Double: return "float";
    case Tag::Bool: return "bool";
    case Tag::Complex: return "complex";
    case Tag::String: return "str";
    case Tag::DType: return "ScalarType";
    case Tag::Device: return "Device";
    case Tag::Layout: return "Layout";
    case Tag::MemoryFormat: return "MemoryFormat";
    case Tag::IntList: return "int[]";
    case Tag::DoubleList: return "float[]";
    case Tag::BoolList: return "bool[]";
    case Tag::TensorList: return "Tensor[]";
    case Tag::OptionalTensorList: return "Tensor?[]";
    case Tag::GenericList: return "list";
    case Tag::SymInt: return "SymInt";
  }
  return "?";
}

void IValue::throw_type_error(const char* expected) const {
  throw Error(ErrorCode::kSchemaMismatch,
              detail::concat("expected a value of type ", expected, " but got ", type_name(), " (", repr(), ")"));
}

double IValue::to_double() const {
  if (is_int()) return static_cast<double>(p_.i);
  return get<double>("float");
}

Scalar IValue::to_scalar() const {
  switch (tag()) {
    case Tag::Int: return Scalar(p_.i);
    case Tag::Double: return Scalar(p_.d);
    case Tag::Bool: return Scalar(p_.b);
    case Tag::Complex: return Scalar(p_.c);
    default: break;
  }
  throw_type_error("Scalar");
}

bool IValue::identical(const IValue& other) const {
  if (tag() != other.tag()) return false;
  switch (tag()) {
    case Tag::Tensor: return to_tensor().is_same(other.to_tensor());
    case Tag::TensorList: {
      const auto& a = to_tensor_list();
      const auto& b = other.to_tensor_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_same(b[i])) return false;
      }
      return true;
    }
    case Tag::OptionalTensorList: {
      const auto& a = p_.optional_tensor_list;
      const auto& b = other.p_.optional_tensor_list;
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].has_value() != b[i].has_value()) return false;
        if (a[i] && !a[i]->is_same(*b[i])) return false;
      }
      return true;
    }
    case Tag::GenericList: {
      const auto& a = to_generic_list();
      const auto& b = other.to_generic_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].identical(b[i])) return false;
      }
      return true;
    }
    case Tag::Double: {
      double a = p_.d, b = other.p_.d;
      return a == b || (a != a && b != b);
    }
    default: return repr() == other.repr();
  }
}

std::string IValue::repr() const {
  std::ostringstream out;
  auto list = [&](const auto& elements, auto&& print) {
    out << "[";
    for (size_t i = 0; i < elements.size(); ++i) {
      if (i) out << ", ";
      print(elements[i]);
    }
    out << "]";
  };
  switch (tag()) {
    case Tag::None: out << "None"; break;
    case Tag::Tensor: {
      const Tensor& t = p_.tensor;
      if (!t.defined()) { out << "Tensor(undefined)"; break; }
      out << "Tensor(" << t.dtype() << "[";
      for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
      out << "], " << t.device() << ")";
      break;
    }
    case Tag::Int: out << p_.i; break;
    case Tag::Double: out.precision(17); out << p_.d; break;
    case Tag::Bool: out << (p_.b ? "True" : "False"); break;
    case Tag::Complex: out << Scalar(p_.c); break;
    case Tag::String: out << '"' << p_.str << '"'; break;
    case Tag::DType: out << p_.dtype; break;
    case Tag::Device: out << p_.device; break;
    case Tag::Layout: out << to_string(p_.layout); break;
    case Tag::MemoryFormat: out << to_string(p_.memory_format); break;
    case Tag::IntList: list(p_.int_list, [&](int64_t v) { out << v; }); break;
    case Tag::DoubleList: list(p_.double_list, [&](double v) { out << v; }); break;
    case Tag::BoolList: {
      const auto& l = p_.bool_list;
      out << "[";
      for (size_t i = 0; i < l.size(); ++i) out << (i ? ", " : "") << (l[i] ? "True" : "False");
      out << "]";
      break;
    }
    case Tag::TensorList:
      list(p_.tensor_list, [&](const Tensor& t) { out << IValue(t).repr(); });
      break;
    case Tag::OptionalTensorList:
      list(p_.optional_tensor_list,
           [&](const std::optional<Tensor>& t) { out << (t ? IValue(*t).repr() : "None"); });
      break;
    case Tag::GenericList: list(to_generic_list(), [&](const IValue& v) { out << v.repr(); }); break;
    case Tag::SymInt: out << p_.symint.to_string(); break;
  }
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const IValue& v) { return out << v.repr(); }

IValue map_tensors(const IValue& v, const std::function<Tensor(const Tensor&)>& fn) {
  auto apply = [&](const Tensor& t) { return t.defined() ? fn(t) : t; };
  switch (v.tag()) {
    case IValue::Tag::Tensor: return IValue(apply(v.to_tensor()));
    case IValue::Tag::TensorList: {
      std::vector<Tensor> out;
      for (const Tensor& t : v.to_tensor_list()) out.push_back(apply(t));
      return IValue(std::move(out));
    }
    case IValue::Tag::OptionalTensorList: {
      std::vector<std::optional<Tensor>> out;
      for (const auto& t : *v.get_if<std::vector<std::optional<Tensor>>>()) {
        out.push_back(t ? std::optional<Tensor>(apply(*t)) : std::nullopt);
      }
      return IValue(std::move(out));
    }
    case IValue::Tag::GenericList: {
      std::vector<IValue> out;
      for (const IValue& e : v.to_generic_list()) out.push_back(map_tensors(e, fn));
      return IValue::list(std::move(out));
    }
    default: return v;
  }
}

}  // namespace opconform
