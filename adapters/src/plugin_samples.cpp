#include "plugin_samples.h"

#include <cstring>
#include <deque>
#include <exception>

#include "opconform/core/default_value.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/error.h"
#include "opconform/core/tensor.h"
#include "library_message.h"

namespace opconform::adapters::detail {
namespace {

// One run of a builder: the draw it calls, what it made, the first exception a draw raised.
struct DrawBridge {
  SampleDraw& draw;
  std::vector<std::pair<OpcDLManagedTensorVersioned*, Tensor>> made;
  std::deque<std::vector<unsigned char>> blocks;  // draw->alloc
  std::exception_ptr first;
  std::string error;  // the builder's set_error

  explicit DrawBridge(SampleDraw& d) : draw(d) {}
  DrawBridge(const DrawBridge&) = delete;
  DrawBridge& operator=(const DrawBridge&) = delete;
  ~DrawBridge() {
    for (auto& [m, t] : made)
      if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }

  OpcStatus out_tensor(Tensor t, OpcValue* out) {
    OpcDLManagedTensorVersioned* m = to_dlpack_versioned(t);
    made.emplace_back(m, std::move(t));
    out->tag = OPC_TAG_TENSOR, out->alias = 0, out->u.tensor = m;
    return OPC_OK;
  }

  const Tensor* tensor_of(const OpcDLManagedTensorVersioned* m) const {
    for (const auto& [p, t] : made)
      if (p == m) return &t;
    return nullptr;
  }
};

DrawBridge& bridge(void* host) { return *static_cast<DrawBridge*>(host); }

// Runs one draw; an exception is kept (the first one) and becomes an error status.
template <typename F>
OpcStatus guarded_draw(void* host, F&& f) noexcept {
  DrawBridge& b = bridge(host);
  if (b.first) return OPC_ERROR;  // the builder went on after a failed draw: refuse every further one
  try {
    return f(b);
  } catch (const Error& e) {
    b.first = std::current_exception();
    return e.code() == ErrorCode::kInvalidArgument ? OPC_INVALID_ARGUMENT : OPC_ERROR;
  } catch (...) {
    b.first = std::current_exception();
    return OPC_ERROR;
  }
}

std::vector<int64_t> sizes_of(int32_t ndim, const int64_t* sizes) {
  OPCONFORM_CHECK(ndim >= 0 && ndim <= OPC_SAMPLE_MAX_RANK && (ndim == 0 || sizes != nullptr),
                  ErrorCode::kInvalidArgument, "a sample builder asked for a tensor of rank ", ndim,
                  " (0..", OPC_SAMPLE_MAX_RANK, ", sizes not NULL)");
  std::vector<int64_t> out(sizes, sizes + ndim);
  for (int64_t s : out)
    OPCONFORM_CHECK(s >= 0, ErrorCode::kInvalidArgument, "a sample builder asked for a negative size ", s);
  return out;
}

ValueConstraint values_of(const OpcValueConstraint* c) {
  ValueConstraint v;
  if (c == nullptr) return v;
  if (c->flags & OPC_VALUES_MIN) v.min = c->min;
  if (c->flags & OPC_VALUES_MAX) v.max = c->max;
  v.positive = (c->flags & OPC_VALUES_POSITIVE) != 0;
  v.allow_nan = (c->flags & OPC_VALUES_NO_NAN) == 0;
  v.allow_inf = (c->flags & OPC_VALUES_NO_INF) == 0;
  return v;
}

OpcStatus draw_integer(void* host, int64_t lo, int64_t hi, int64_t* out) {
  return guarded_draw(host, [&](DrawBridge& b) { return *out = b.draw.integer(lo, hi), OPC_OK; });
}
OpcStatus draw_coin(void* host, int32_t percent, int32_t* out) {
  return guarded_draw(host, [&](DrawBridge& b) { return *out = b.draw.coin(percent) ? 1 : 0, OPC_OK; });
}
OpcStatus draw_real(void* host, double lo, double hi, double* out) {
  return guarded_draw(host, [&](DrawBridge& b) { return *out = b.draw.real(lo, hi), OPC_OK; });
}
OpcStatus draw_dtype(void* host, const DLDataType* allowed, int64_t n, DLDataType* out) {
  return guarded_draw(host, [&](DrawBridge& b) {
    OPCONFORM_CHECK(n >= 0 && n <= 64 && (n == 0 || allowed != nullptr), ErrorCode::kInvalidArgument,
                    "a sample builder passed ", n, " allowed dtypes");
    std::vector<DType> list;
    for (int64_t i = 0; i < n; ++i) list.push_back(from_dlpack_dtype(allowed[i]));
    *out = to_dlpack_dtype(b.draw.dtype(list));
    return OPC_OK;
  });
}
OpcStatus draw_shape(void* host, int32_t min_rank, int32_t max_rank, int64_t min_size, int32_t allow_empty,
                     int64_t* sizes, int32_t* rank) {
  return guarded_draw(host, [&](DrawBridge& b) {
    OPCONFORM_CHECK(max_rank <= OPC_SAMPLE_MAX_RANK, ErrorCode::kInvalidArgument, "a sample builder asked for rank up to ",
                    max_rank, " (at most ", OPC_SAMPLE_MAX_RANK, ")");
    const auto s = b.draw.shape(min_rank, max_rank, min_size, allow_empty != 0);
    std::copy(s.begin(), s.end(), sizes);
    *rank = static_cast<int32_t>(s.size());
    return OPC_OK;
  });
}
OpcStatus draw_size(void* host, int32_t allow_empty, int64_t* out) {
  return guarded_draw(host, [&](DrawBridge& b) { return *out = b.draw.size(allow_empty != 0), OPC_OK; });
}
OpcStatus draw_tensor(void* host, int32_t ndim, const int64_t* sizes, DLDataType dtype, const OpcValueConstraint* values,
                      int32_t mutable_input, OpcValue* out) {
  return guarded_draw(host, [&](DrawBridge& b) {
    return b.out_tensor(b.draw.tensor(sizes_of(ndim, sizes), from_dlpack_dtype(dtype), values_of(values),
                                      mutable_input != 0),
                        out);
  });
}
OpcStatus draw_index_tensor(void* host, int32_t ndim, const int64_t* sizes, int64_t lo, int64_t hi, OpcValue* out) {
  return guarded_draw(host, [&](DrawBridge& b) { return b.out_tensor(b.draw.index_tensor(sizes_of(ndim, sizes), lo, hi), out); });
}
// The values the builder computed, in a drawn tensor's place: its device and layout are drawn
// (never an expanded one, which could not hold them), its values overwritten.
OpcStatus draw_tensor_of(void* host, int32_t ndim, const int64_t* sizes, DLDataType dtype, const double* values,
                         OpcValue* out) {
  return guarded_draw(host, [&](DrawBridge& b) {
    std::vector<int64_t> shape = sizes_of(ndim, sizes);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    OPCONFORM_CHECK(n == 0 || values != nullptr, ErrorCode::kInvalidArgument, "tensor_of: values is NULL");
    Tensor t = b.draw.tensor(shape, from_dlpack_dtype(dtype), {}, /*mutable_input=*/true);
    if (n > 0) t.copy_(from_vector(std::vector<double>(values, values + n), shape));
    return b.out_tensor(std::move(t), out);
  });
}
void* draw_alloc(void* host, size_t bytes) {
  if (bytes > (size_t{1} << 32)) return nullptr;
  try {
    // 16-byte aligned: the vector's storage comes from operator new.
    auto& block = bridge(host).blocks.emplace_back((bytes + 15) / 16 * 16 + 16);
    return block.data();
  } catch (...) {
    return nullptr;
  }
}
void draw_set_error(void* host, const char* message) {
  try {
    bridge(host).error = library_message(message);
  } catch (...) {
  }
}

std::string tag_text(const OpcValue& v) { return "a value of tag " + std::to_string(v.tag); }

// The builder's value for an argument of type `type` (never optional here).
IValue value_of(const DrawBridge& b, const OpcValue& v, const Type& type, const std::string& where);

IValue list_of(const DrawBridge& b, const OpcValue& v, const Type& elem, const std::string& where) {
  OPCONFORM_CHECK(v.tag == OPC_TAG_LIST && v.u.list.size >= 0 && v.u.list.size <= (1 << 20) &&
                      (v.u.list.size == 0 || v.u.list.items != nullptr),
                  ErrorCode::kInvalidArgument, where, " should be a list, the builder gave ", tag_text(v));
  const OpcValue* items = v.u.list.items;
  const size_t n = static_cast<size_t>(v.u.list.size);
  switch (elem.kind()) {
    case TypeKind::kInt:
    case TypeKind::kSymInt: {
      std::vector<int64_t> out;
      for (size_t i = 0; i < n; ++i) out.push_back(value_of(b, items[i], elem, where).to_int());
      return IValue(std::move(out));
    }
    case TypeKind::kFloat: {
      std::vector<double> out;
      for (size_t i = 0; i < n; ++i) out.push_back(value_of(b, items[i], elem, where).to_double());
      return IValue(std::move(out));
    }
    case TypeKind::kBool: {
      std::vector<bool> out;
      for (size_t i = 0; i < n; ++i) out.push_back(value_of(b, items[i], elem, where).to_bool());
      return IValue(std::move(out));
    }
    case TypeKind::kTensor: {
      std::vector<Tensor> out;
      for (size_t i = 0; i < n; ++i) out.push_back(value_of(b, items[i], elem, where).to_tensor());
      return IValue(std::move(out));
    }
    case TypeKind::kOptional:
      if (elem.elem().kind() == TypeKind::kTensor) {
        std::vector<std::optional<Tensor>> out;
        for (size_t i = 0; i < n; ++i) {
          if (items[i].tag == OPC_TAG_NONE) out.emplace_back();
          else out.emplace_back(value_of(b, items[i], elem.elem(), where).to_tensor());
        }
        return IValue(std::move(out));
      }
      [[fallthrough]];
    default: {
      std::vector<IValue> out;
      for (size_t i = 0; i < n; ++i) out.push_back(value_of(b, items[i], elem, where));
      return IValue::list(std::move(out));
    }
  }
}

IValue value_of(const DrawBridge& b, const OpcValue& v, const Type& type, const std::string& where) {
  auto wrong = [&] {
    return Error(ErrorCode::kInvalidArgument, where + " should be " + type.to_string() + ", the builder gave " + tag_text(v));
  };
  if (type.is_optional()) return v.tag == OPC_TAG_NONE ? IValue() : value_of(b, v, type.elem(), where);
  switch (type.kind()) {
    case TypeKind::kTensor: {
      if (v.tag != OPC_TAG_TENSOR) throw wrong();
      const Tensor* t = b.tensor_of(v.u.tensor);
      OPCONFORM_CHECK(t != nullptr, ErrorCode::kInvalidArgument, where,
                      " is a tensor this draw did not make (a builder's tensors come from draw->tensor, "
                      "index_tensor or tensor_of)");
      return IValue(*t);
    }
    case TypeKind::kInt:
    case TypeKind::kSymInt:
      if (v.tag != OPC_TAG_INT) throw wrong();
      return IValue(v.u.i);
    case TypeKind::kFloat:
      if (v.tag == OPC_TAG_DOUBLE) return IValue(v.u.d);
      if (v.tag == OPC_TAG_INT) return IValue(static_cast<double>(v.u.i));
      throw wrong();
    case TypeKind::kBool:
      if (v.tag != OPC_TAG_BOOL) throw wrong();
      return IValue(v.u.b != 0);
    case TypeKind::kScalar:
      if (v.tag == OPC_TAG_INT) return IValue(v.u.i);
      if (v.tag == OPC_TAG_DOUBLE) return IValue(v.u.d);
      if (v.tag == OPC_TAG_BOOL) return IValue(v.u.b != 0);
      if (v.tag == OPC_TAG_COMPLEX) return IValue(complex128(v.u.c.re, v.u.c.im));
      throw wrong();
    case TypeKind::kScalarType: {
      if (v.tag != OPC_TAG_INT) throw wrong();
      auto d = dtype_of_scalar_type_number(v.u.i);
      OPCONFORM_CHECK(d.has_value(), ErrorCode::kInvalidArgument, where, ": no dtype has ScalarType number ", v.u.i);
      return IValue(*d);
    }
    case TypeKind::kLayout:
      if (v.tag != OPC_TAG_INT) throw wrong();
      return IValue(static_cast<Layout>(v.u.i));
    case TypeKind::kMemoryFormat:
      if (v.tag != OPC_TAG_INT) throw wrong();
      return IValue(static_cast<MemoryFormat>(v.u.i));
    case TypeKind::kStr:
    case TypeKind::kDevice: {
      if (v.tag != OPC_TAG_STRING || v.u.s.size < 0 || (v.u.s.size > 0 && v.u.s.data == nullptr)) throw wrong();
      std::string s(v.u.s.data, static_cast<size_t>(v.u.s.size));
      return type.kind() == TypeKind::kStr ? IValue(std::move(s)) : IValue(Device::parse(s));
    }
    case TypeKind::kList: return list_of(b, v, type.elem(), where);
    default:
      throw Error(ErrorCode::kNotImplemented, where + ": a sample builder cannot give a " + type.to_string());
  }
}

}  // namespace

SampleBuilder make_plugin_sample_builder(OpcSampleBuilderFn fn, void* user_data, FunctionSchema schema,
                                         std::string library, uint32_t abi_version) {
  return [fn, user_data, schema = std::move(schema), library = std::move(library), abi_version](SampleDraw& draw) -> Stack {
    const std::string op = schema.full_name();
    DrawBridge b(draw);
    OpcSampleDraw c{};
    c.version = abi_version, c.size = sizeof(OpcSampleDraw), c.host = &b;  // the plugin's own version
    c.integer = draw_integer, c.coin = draw_coin, c.real = draw_real, c.dtype = draw_dtype, c.shape = draw_shape;
    c.dim_size = draw_size;
    c.tensor = draw_tensor, c.index_tensor = draw_index_tensor, c.tensor_of = draw_tensor_of;
    c.alloc = draw_alloc, c.set_error = draw_set_error;
    std::vector<OpcValue> args(schema.arguments.size());
    OpcStatus status = OPC_ERROR;
    try {
      status = fn(&c, args.data(), static_cast<int64_t>(args.size()), user_data);
    } catch (...) {
      throw Error(ErrorCode::kInternal, "the sample builder of '" + op + "' in plugin '" + library +
                                            "' threw a C++ exception across the C ABI");
    }
    if (b.first) std::rethrow_exception(b.first);  // Note [Plugin sample builders]
    if (status != OPC_OK) {
      throw Error(ErrorCode::kInvalidArgument, "the sample builder of '" + op + "' in plugin '" + library +
                                                   "' returned status " + std::to_string(status) +
                                                   (b.error.empty() ? std::string(" (no message)") : ": " + b.error));
    }
    Stack stack;
    for (size_t i = 0; i < args.size(); ++i) {
      const Argument& a = schema.arguments[i];
      stack.push_back(value_of(b, args[i], a.type,
                               "argument '" + a.name + "' built by the sample builder of '" + op + "' in plugin '" +
                                   library + "'"));
    }
    return stack;
  };
}

}  // namespace opconform::adapters::detail
