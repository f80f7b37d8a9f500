#include "opconform/core/ivalue.h"

#include <sstream>

namespace opconform {

IValue::IValue(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: v_ = s.to<bool>(); break;
    case Scalar::Kind::Int: v_ = s.to<int64_t>(); break;
    case Scalar::Kind::Float: v_ = s.to<double>(); break;
    case Scalar::Kind::Complex: v_ = s.to<complex128>(); break;
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
  }
  return "?";
}

void IValue::throw_type_error(const char* expected) const {
  throw Error(ErrorCode::kSchemaMismatch,
              detail::concat("expected a value of type ", expected, " but got ", type_name(), " (", repr(), ")"));
}

double IValue::to_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(v_));
  return get<double>("float");
}

Scalar IValue::to_scalar() const {
  switch (tag()) {
    case Tag::Int: return Scalar(std::get<int64_t>(v_));
    case Tag::Double: return Scalar(std::get<double>(v_));
    case Tag::Bool: return Scalar(std::get<bool>(v_));
    case Tag::Complex: return Scalar(std::get<complex128>(v_));
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
      const auto& a = std::get<std::vector<std::optional<Tensor>>>(v_);
      const auto& b = std::get<std::vector<std::optional<Tensor>>>(other.v_);
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
      double a = std::get<double>(v_), b = std::get<double>(other.v_);
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
      const Tensor& t = std::get<Tensor>(v_);
      if (!t.defined()) { out << "Tensor(undefined)"; break; }
      out << "Tensor(" << t.dtype() << "[";
      for (int64_t d = 0; d < t.dim(); ++d) out << (d ? ", " : "") << t.size(d);
      out << "], " << t.device() << ")";
      break;
    }
    case Tag::Int: out << std::get<int64_t>(v_); break;
    case Tag::Double: out.precision(17); out << std::get<double>(v_); break;
    case Tag::Bool: out << (std::get<bool>(v_) ? "True" : "False"); break;
    case Tag::Complex: out << Scalar(std::get<complex128>(v_)); break;
    case Tag::String: out << '"' << std::get<std::string>(v_) << '"'; break;
    case Tag::DType: out << std::get<DType>(v_); break;
    case Tag::Device: out << std::get<Device>(v_); break;
    case Tag::Layout: out << to_string(std::get<Layout>(v_)); break;
    case Tag::MemoryFormat: out << to_string(std::get<MemoryFormat>(v_)); break;
    case Tag::IntList: list(std::get<std::vector<int64_t>>(v_), [&](int64_t v) { out << v; }); break;
    case Tag::DoubleList: list(std::get<std::vector<double>>(v_), [&](double v) { out << v; }); break;
    case Tag::BoolList: {
      const auto& l = std::get<std::vector<bool>>(v_);
      out << "[";
      for (size_t i = 0; i < l.size(); ++i) out << (i ? ", " : "") << (l[i] ? "True" : "False");
      out << "]";
      break;
    }
    case Tag::TensorList:
      list(std::get<std::vector<Tensor>>(v_), [&](const Tensor& t) { out << IValue(t).repr(); });
      break;
    case Tag::OptionalTensorList:
      list(std::get<std::vector<std::optional<Tensor>>>(v_),
           [&](const std::optional<Tensor>& t) { out << (t ? IValue(*t).repr() : "None"); });
      break;
    case Tag::GenericList: list(to_generic_list(), [&](const IValue& v) { out << v.repr(); }); break;
  }
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const IValue& v) { return out << v.repr(); }

}  // namespace opconform
