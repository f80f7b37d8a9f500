#include "plugin_call.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>

#include "opconform/core/cuda.h"
#include "opconform/core/default_value.h"
#include "opconform/core/detail/biased_count.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/error.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/generator.h"
#include "opconform/core/tensor.h"
#include "library_message.h"

namespace opconform::adapters::detail {
namespace {

// ABI version 1 gives fake kernels concrete sizes only. A fake argument with symbolic sizes (graph
// capture) is therefore specialized: each symbol is compared with its hint, which records the
// guard "s0 == 3" in its ShapeEnv (PyTorch's guard_int), so a graph captured through a plugin's
// fake kernel is replayed only at the sizes its outputs were computed for, never wrongly at others.
// An unbacked (data-dependent) size has no hint to specialize to: that is an error. A version-2
// kernel asks for the same with ctx->sym_guard_int.
int64_t specialize_to_hint(const SymInt& s) {
  if (!s.is_symbolic()) return *s.maybe_as_int();
  const auto hint = s.hint();
  OPCONFORM_CHECK(hint.has_value(), ErrorCode::kNotImplemented, "a plugin's fake kernel takes a concrete size here, "
                  "and the data-dependent size ", s.to_string(), " has no value to give it");
  const bool holds = s == SymInt(*hint);  // records the guard
  (void)holds;
  return *hint;
}

void specialize_to_hints(const Tensor& t) {
  for (const SymInt& s : t.sym_sizes()) specialize_to_hint(s);
  for (const SymInt& s : t.sym_strides()) specialize_to_hint(s);
}

// The same for SymInt arguments (x.sym_size(0) passed to an op), alone or in a list.
void specialize_to_hints(const IValue& v) {
  if (const SymInt* s = v.get_if<SymInt>()) specialize_to_hint(*s);
  if (const auto* list = v.get_if<GenericList>())
    for (const IValue& item : *list->elements) specialize_to_hints(item);
}

// Note [Symbolic sizes across the ABI]: in a fake call of a version-2 plugin each symbolic size
// crosses as a handle naming an entry of the call's table (plugin.h: OPC_SYM_HANDLE_*); sizes the
// kernel computes from handles come back through ctx->sym_*, which add entries. Every size the
// kernel hands back is decoded here: a plain size, or exactly a handle of this call. Anything else
// (raw C arithmetic on a handle) is refused, never read as a size. The table lives for the call.
class SymTable {
 public:
  int64_t encode(const SymInt& s) {
    if (auto v = s.maybe_as_int()) return *v;
    OPCONFORM_CHECK(static_cast<int64_t>(entries_.size()) < OPC_SYM_HANDLE_LIMIT, ErrorCode::kInvalidArgument,
                    "too many symbolic values in one call");
    entries_.push_back(s);
    return OPC_SYM_HANDLE_BASE + static_cast<int64_t>(entries_.size() - 1) * OPC_SYM_HANDLE_STEP;
  }
  SymInt decode(int64_t v, std::string_view what) const {
    if (v >= 0) return SymInt(v);
    if (OPC_IS_SYM_HANDLE(v) && (v - OPC_SYM_HANDLE_BASE) % OPC_SYM_HANDLE_STEP == 0) {
      const auto index = static_cast<size_t>((v - OPC_SYM_HANDLE_BASE) / OPC_SYM_HANDLE_STEP);
      if (index < entries_.size()) return entries_[index];
    }
    throw Error(ErrorCode::kInvalidArgument,
                ::opconform::detail::concat(what, " is ", v, ": neither a size nor a symbolic handle of this call (a size computed from "
                                        "handles must come from ctx->sym_binary)"));
  }

 private:
  std::vector<SymInt> entries_;
};

// A data-less managed tensor for fake calls: the descriptor's arrays live beside it.
struct FakeManaged {
  OpcDLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
};

void delete_fake(OpcDLManagedTensorVersioned* self) {
  if (self != nullptr) delete static_cast<FakeManaged*>(self->manager_ctx);
}

OpcDLManagedTensorVersioned* make_fake_managed(DLDataType dtype, DLDevice device, std::vector<int64_t> shape,
                                               std::vector<int64_t> strides) {
  auto* f = new FakeManaged;
  f->shape = std::move(shape);
  f->strides = std::move(strides);
  f->managed.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
  f->managed.manager_ctx = f;
  f->managed.deleter = delete_fake;
  f->managed.dl_tensor.data = nullptr;
  f->managed.dl_tensor.device = device;
  f->managed.dl_tensor.ndim = static_cast<int32_t>(f->shape.size());
  f->managed.dl_tensor.dtype = dtype;
  f->managed.dl_tensor.shape = f->shape.data();
  f->managed.dl_tensor.strides = f->strides.data();
  f->managed.dl_tensor.byte_offset = 0;
  return &f->managed;
}

void release(OpcDLManagedTensorVersioned* m) {
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

// A tensor the host handed to the kernel, and the schema argument it belongs to.
struct ArgTensor {
  OpcDLManagedTensorVersioned* managed;
  Tensor tensor;
  size_t arg_index;
};

// Everything one call allocates on the host side; the destructor frees what is left, whatever
// path the call took (a failing status, a malformed result, an exception).
struct CallArena {
  bool fake = false;
  uint32_t abi_version = OPC_PLUGIN_ABI_VERSION_1;
  Device device = Device::cpu();
  SymTable syms;            // Note [Symbolic sizes across the ABI]
  size_t current_arg = 0;   // the argument to_value is converting
  std::string error;
  std::vector<std::shared_ptr<Storage>> blocks;     // ctx->alloc (storages: guarded as tensors are)
  std::deque<std::string> strings;                  // string arguments
  std::deque<std::vector<OpcValue>> lists;          // list arguments
  std::vector<ArgTensor> args;                                        // argument tensors (host-owned)
  std::vector<OpcDLManagedTensorVersioned*> created;                  // new_tensor, not yet returned
  std::vector<std::pair<OpcDLManagedTensorVersioned*, Tensor>> taken; // results already imported
  std::vector<OpcDLManagedTensorVersioned*> foreign;  // the plugin's own returned tensors, not yet imported

  ~CallArena() {
    for (auto& a : args) release(a.managed);
    for (auto* m : created) release(m);
    for (auto* m : foreign) release(m);
  }

  // Ownership of m passed to a Tensor (from_dlpack): forget it.
  void handed_over(OpcDLManagedTensorVersioned* m) {
    std::erase(created, m);
    std::erase(foreign, m);
  }

  // Version 2: sizes may cross as handles (fake calls), returns may say what they alias, None
  // stands for an undefined tensor.
  bool v2() const { return abi_version >= 2; }
  bool symbolic() const { return fake && v2(); }

  bool is_argument(const OpcDLManagedTensorVersioned* m) const {
    for (const auto& a : args)
      if (a.managed == m) return true;
    return false;
  }

  // Every tensor the plugin returned that is its own (neither an argument nor from new_tensor):
  // from now on the arena releases it unless it is imported, whatever path the call takes.
  void adopt_returns(const std::vector<OpcValue>& returns) {
    auto adopt = [&](OpcDLManagedTensorVersioned* m) {
      if (m == nullptr || is_argument(m) || std::find(created.begin(), created.end(), m) != created.end() ||
          std::find(foreign.begin(), foreign.end(), m) != foreign.end())
        return;
      foreign.push_back(m);
    };
    for (const OpcValue& v : returns) {
      if (v.tag == OPC_TAG_TENSOR) adopt(v.u.tensor);
      if (v.tag == OPC_TAG_LIST && v.u.list.items != nullptr && v.u.list.size > 0 && v.u.list.size <= (1 << 20))
        for (int64_t i = 0; i < v.u.list.size; ++i)
          if (v.u.list.items[i].tag == OPC_TAG_TENSOR) adopt(v.u.list.items[i].u.tensor);
    }
  }

  // A returned tensor whose memory lies inside an argument's storage is a view of that argument:
  // it is made as one (sharing the storage, its version counter and lifetime), not imported as a
  // separate memory block that would dangle when the argument dies.
  // `only`: the argument a version-2 return says it aliases (nullopt: any).
  std::optional<Tensor> view_of_argument(const DLTensor& d, std::optional<size_t> only = std::nullopt) const {
    DType dtype;
    try {
      dtype = from_dlpack_dtype(d.dtype);
    } catch (const Error&) {
      return std::nullopt;
    }
    if (d.data == nullptr || d.ndim < 0 || d.ndim > kMaxDLPackDims || (d.ndim > 0 && d.shape == nullptr)) return std::nullopt;
    const char* first = static_cast<const char*>(d.data) + d.byte_offset;
    for (const auto& a : args) {
      const Tensor& t = a.tensor;
      if (only && a.arg_index != *only) continue;
      if (!t.defined() || t.is_fake() || t.dtype() != dtype || t.storage() == nullptr) continue;
      const char* base = static_cast<const char*>(t.storage()->data());
      if (base == nullptr || first < base || first >= base + t.storage()->nbytes()) continue;
      const int64_t item = static_cast<int64_t>(itemsize(dtype));
      if ((first - base) % item != 0) continue;
      std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
      std::vector<int64_t> strides = d.strides != nullptr ? std::vector<int64_t>(d.strides, d.strides + d.ndim)
                                                          : contiguous_strides(shape);
      try {
        return t.as_strided(shape, strides, (first - base) / item);
      } catch (const Error&) {
        return std::nullopt;  // out of the argument's storage: not a view of it
      }
    }
    return std::nullopt;
  }

  OpcDLManagedTensorVersioned* export_tensor(const Tensor& t, bool writable) {
    OpcDLManagedTensorVersioned* m = nullptr;
    if (fake || t.is_fake() || t.is_meta_data()) {
      const DLDevice dev = t.device().is_meta() ? DLDevice{kDLCPU, 0} : to_dlpack_device(t.device());
      std::vector<int64_t> sizes, strides;
      if (symbolic()) {
        for (const SymInt& s : t.sym_sizes()) sizes.push_back(syms.encode(s));
        for (const SymInt& s : t.sym_strides()) strides.push_back(syms.encode(s));
      } else {
        if (t.has_symbolic_sizes()) specialize_to_hints(t);
        sizes.assign(t.sizes().begin(), t.sizes().end());
        strides.assign(t.strides().begin(), t.strides().end());
      }
      m = make_fake_managed(to_dlpack_dtype(t.dtype()), dev, std::move(sizes), std::move(strides));
      // Version 2: a fake view's offset is part of what its fake kernel predicts (version 1 gave 0).
      if (v2()) m->dl_tensor.byte_offset = static_cast<uint64_t>(t.storage_offset()) * itemsize(t.dtype());
    } else {
      m = to_dlpack_versioned(t);
    }
    if (!writable) m->flags |= OPC_DLPACK_FLAG_BITMASK_READ_ONLY;
    args.push_back({m, t, current_arg});
    return m;
  }

  OpcValue to_value(const IValue& v, bool writable) {
    OpcValue out{};
    using T = IValue::Tag;
    switch (v.tag()) {
      case T::None: out.tag = OPC_TAG_NONE; break;
      case T::Int: out.tag = OPC_TAG_INT, out.u.i = v.to_int(); break;
      case T::SymInt: {
        const SymInt& s = *v.get_if<SymInt>();
        out.tag = OPC_TAG_INT, out.u.i = symbolic() ? syms.encode(s) : concrete_stand_in(s);
        break;
      }
      case T::Double: out.tag = OPC_TAG_DOUBLE, out.u.d = *v.get_if<double>(); break;
      case T::Bool: out.tag = OPC_TAG_BOOL, out.u.b = v.to_bool() ? 1 : 0; break;
      case T::Complex: {
        const complex128 c = *v.get_if<complex128>();
        out.tag = OPC_TAG_COMPLEX, out.u.c.re = c.real(), out.u.c.im = c.imag();
        break;
      }
      case T::DType: out.tag = OPC_TAG_INT, out.u.i = scalar_type_number(*v.get_if<DType>()); break;
      case T::Layout: out.tag = OPC_TAG_INT, out.u.i = static_cast<int64_t>(*v.get_if<Layout>()); break;
      case T::MemoryFormat: out.tag = OPC_TAG_INT, out.u.i = static_cast<int64_t>(*v.get_if<MemoryFormat>()); break;
      case T::Device: return string_value(v.get_if<Device>()->to_string());
      case T::String: return string_value(v.to_string_ref());
      case T::Tensor:
        if (!v.to_tensor().defined()) break;  // an undefined tensor crosses as None
        out.tag = OPC_TAG_TENSOR, out.u.tensor = export_tensor(v.to_tensor(), writable);
        break;
      case T::IntList: return list_of(*v.get_if<std::vector<int64_t>>(), writable);
      case T::DoubleList: return list_of(*v.get_if<std::vector<double>>(), writable);
      case T::BoolList: {
        std::vector<IValue> items;
        for (bool b : *v.get_if<std::vector<bool>>()) items.emplace_back(b);
        return list_of(items, writable);
      }
      case T::TensorList: return list_of(v.to_tensor_list(), writable);
      case T::OptionalTensorList: {
        std::vector<IValue> items;
        for (const auto& t : *v.get_if<std::vector<std::optional<Tensor>>>())
          items.push_back(t ? IValue(*t) : IValue());
        return list_of(items, writable);
      }
      case T::GenericList: return list_of(v.to_generic_list(), writable);
    }
    return out;
  }

  OpcValue string_value(std::string s) {
    strings.push_back(std::move(s));
    OpcValue out{};
    out.tag = OPC_TAG_STRING;
    out.u.s.data = strings.back().data();
    out.u.s.size = static_cast<int64_t>(strings.back().size());
    return out;
  }

  template <typename T>
  OpcValue list_of(const std::vector<T>& items, bool writable) {
    std::vector<OpcValue> values;
    values.reserve(items.size());
    for (const auto& item : items) values.push_back(to_value(IValue(item), writable));
    lists.push_back(std::move(values));
    OpcValue out{};
    out.tag = OPC_TAG_LIST;
    out.u.list.items = lists.back().data();
    out.u.list.size = static_cast<int64_t>(lists.back().size());
    return out;
  }
};

// ---- the callbacks of OpcCallContext (C linkage types; nothing may throw out of them) ----

void* arena_alloc(void* host, size_t bytes) {
  auto* a = static_cast<CallArena*>(host);
  if (bytes > (size_t{1} << 48)) return nullptr;  // no such request is real; (bytes + 15) must not wrap
  try {
    // A Storage, so that the memory_safety check guards scratch memory too (Note [Memory
    // guards]); the size rounded to 16 keeps the ABI's alignment under any placement.
    a->blocks.push_back(Storage::allocate(std::max<size_t>(16, (bytes + 15) / 16 * 16), Device::cpu()));
    return a->blocks.back()->data();
  } catch (...) {
    return nullptr;
  }
}

void arena_set_error(void* host, const char* message) {
  try {
    static_cast<CallArena*>(host)->error = library_message(message);  // Note [A library's message has a size]
  } catch (...) {
  }
}

OpcDLManagedTensorVersioned* arena_new_tensor(void* host, DLDataType dtype, int32_t ndim, const int64_t* shape,
                                              const int64_t* strides) {
  auto* a = static_cast<CallArena*>(host);
  try {
    OPCONFORM_CHECK(ndim >= 0 && ndim <= kMaxDLPackDims, ErrorCode::kInvalidArgument, "new_tensor: ndim ", ndim,
                    " out of range");
    OPCONFORM_CHECK(ndim == 0 || shape != nullptr, ErrorCode::kInvalidArgument, "new_tensor: shape is NULL");
    const DType d = from_dlpack_dtype(dtype);
    std::vector<int64_t> sizes(shape, shape + ndim);
    std::vector<int64_t> symbolic_strides;
    if (a->symbolic() && strides == nullptr) {
      // Contiguous strides of symbolic sizes are symbolic too (Note [Symbolic sizes across the ABI]).
      std::vector<SymInt> sym;
      for (int64_t s : sizes) sym.push_back(a->syms.decode(s, "new_tensor: a size"));
      for (const SymInt& s : contiguous_strides(std::span<const SymInt>(sym))) symbolic_strides.push_back(a->syms.encode(s));
      strides = symbolic_strides.data();
    }
    auto check_size = [&](int64_t s, const char* what) {
      if (a->symbolic()) {
        const SymInt v = a->syms.decode(s, std::string("new_tensor: a ") + what);
        OPCONFORM_CHECK(!v.maybe_as_int() || *v.maybe_as_int() >= 0, ErrorCode::kInvalidArgument, "new_tensor: negative ",
                        what, " ", s);
        return;
      }
      OPCONFORM_CHECK(s >= 0, ErrorCode::kInvalidArgument, "new_tensor: negative ", what, " ", s);
    };
    for (int64_t s : sizes) check_size(s, "size");
    std::vector<int64_t> st = strides != nullptr || a->symbolic() ? std::vector<int64_t>(strides, strides + ndim)
                                                                  : contiguous_strides(sizes);
    for (int64_t s : st) check_size(s, "stride");
    OpcDLManagedTensorVersioned* m = nullptr;
    if (a->fake) {
      m = make_fake_managed(dtype, to_dlpack_device(a->device), std::move(sizes), std::move(st));
    } else {
      Tensor t = empty_strided(sizes, st, TensorOptions{d, a->device});
      // Zeroed host memory: an output a kernel leaves unwritten must not hand the host bytes
      // that are no value of its dtype (a bool byte of 190 is undefined to load; found by
      // fuzz/plugin_value). Device memory is left as allocated.
      if (t.device().is_cpu() && t.storage()->nbytes() > 0) std::memset(t.storage()->data(), 0, t.storage()->nbytes());
      m = to_dlpack_versioned(t);
    }
    a->created.push_back(m);
    return m;
  } catch (const std::exception& e) {
    arena_set_error(host, e.what());
    return nullptr;
  }
}

// ---- version 2: symbolic arithmetic (Note [Symbolic sizes across the ABI]) ----

// Runs f, turning an exception into OPC_INVALID_ARGUMENT with its message.
template <typename F>
OpcStatus sym_guarded(void* host, F&& f) {
  try {
    f(*static_cast<CallArena*>(host));
    return OPC_OK;
  } catch (const std::exception& e) {
    arena_set_error(host, e.what());
    return OPC_INVALID_ARGUMENT;
  }
}

OpcStatus arena_sym_binary(void* host, OpcSymOp op, int64_t a, int64_t b, int64_t* out) {
  return sym_guarded(host, [&](CallArena& arena) {
    OPCONFORM_CHECK(out != nullptr, ErrorCode::kInvalidArgument, "sym_binary: out is NULL");
    const SymInt x = arena.syms.decode(a, "sym_binary: a"), y = arena.syms.decode(b, "sym_binary: b");
    SymInt r;
    switch (op) {
      case OPC_SYM_ADD: r = x + y; break;
      case OPC_SYM_SUB: r = x - y; break;
      case OPC_SYM_MUL: r = x * y; break;
      case OPC_SYM_FLOORDIV: r = floordiv(x, y); break;
      case OPC_SYM_MOD: r = mod(x, y); break;
      case OPC_SYM_MAX: r = x >= y ? x : y; break;
      case OPC_SYM_MIN: r = x <= y ? x : y; break;
      default: throw Error(ErrorCode::kInvalidArgument, "sym_binary: unknown operation " + std::to_string(op));
    }
    *out = arena.syms.encode(r);
  });
}

OpcStatus arena_sym_compare(void* host, OpcSymCompare cmp, int64_t a, int64_t b, int32_t* out) {
  return sym_guarded(host, [&](CallArena& arena) {
    OPCONFORM_CHECK(out != nullptr, ErrorCode::kInvalidArgument, "sym_compare: out is NULL");
    const SymInt x = arena.syms.decode(a, "sym_compare: a"), y = arena.syms.decode(b, "sym_compare: b");
    bool r = false;
    switch (cmp) {  // each decided as Note [Deciding comparisons] (symint.h) says, guards recorded
      case OPC_SYM_EQ: r = x == y; break;
      case OPC_SYM_NE: r = x != y; break;
      case OPC_SYM_LT: r = x < y; break;
      case OPC_SYM_LE: r = x <= y; break;
      case OPC_SYM_GT: r = x > y; break;
      case OPC_SYM_GE: r = x >= y; break;
      default: throw Error(ErrorCode::kInvalidArgument, "sym_compare: unknown comparison " + std::to_string(cmp));
    }
    *out = r ? 1 : 0;
  });
}

OpcStatus arena_sym_guard_int(void* host, int64_t a, int64_t* out) {
  return sym_guarded(host, [&](CallArena& arena) {
    OPCONFORM_CHECK(out != nullptr, ErrorCode::kInvalidArgument, "sym_guard_int: out is NULL");
    *out = specialize_to_hint(arena.syms.decode(a, "sym_guard_int: a"));
  });
}

std::string_view status_name(OpcStatus s) {
  switch (s) {
    case OPC_OK: return "OPC_OK";
    case OPC_ERROR: return "OPC_ERROR";
    case OPC_NOT_IMPLEMENTED: return "OPC_NOT_IMPLEMENTED";
    case OPC_INVALID_ARGUMENT: return "OPC_INVALID_ARGUMENT";
    case OPC_OUT_OF_MEMORY: return "OPC_OUT_OF_MEMORY";
    case OPC_ABI_MISMATCH: return "OPC_ABI_MISMATCH";
    default: return "an unknown status";
  }
}

ErrorCode error_code_of(OpcStatus s) {
  switch (s) {
    case OPC_NOT_IMPLEMENTED: return ErrorCode::kNotImplemented;
    case OPC_ERROR:
    case OPC_INVALID_ARGUMENT: return ErrorCode::kInvalidArgument;
    default: return ErrorCode::kInternal;
  }
}

// Note [Causes are values] (core/error.h): what the status says, as a reason.
ErrorReason error_reason_of(OpcStatus s) {
  switch (s) {
    case OPC_NOT_IMPLEMENTED: return ErrorReason::kLibraryNotImplemented;
    case OPC_INVALID_ARGUMENT: return ErrorReason::kInvalidArgument;
    default: return ErrorReason::kLibraryError;
  }
}

bool is_tensor_type(const Type& t) {
  return t.kind() == TypeKind::kTensor || (t.is_optional() && t.elem().kind() == TypeKind::kTensor);
}

}  // namespace

namespace {

// A real kernel reached with fake tensors (the registry has no fake kernel for the op, nor a
// fallback at DispatchKey::Fake, so dispatch fell through to the backend) would get NULL data
// pointers and crash: C++ kernels get an error on data access, a plugin gets this one.
void refuse_data_less_tensors(const std::vector<IValue>& args, const std::string& where) {
  // Data-less: fake, or meta (export_tensor hands both over with NULL data).
  auto data_less = [](const Tensor& t) { return t.defined() && (t.is_fake() || t.is_meta_data()); };
  for (const auto& v : args) {
    bool any_fake = false;
    if (const Tensor* t = v.get_if<Tensor>()) any_fake = data_less(*t);
    if (const auto* list = v.get_if<std::vector<Tensor>>())
      for (const Tensor& t : *list) any_fake = any_fake || data_less(t);
    if (const auto* list = v.get_if<std::vector<std::optional<Tensor>>>())
      for (const auto& t : *list) any_fake = any_fake || (t && data_less(*t));
    OPCONFORM_CHECK_BECAUSE(!any_fake, ErrorCode::kNotImplemented, ErrorReason::kNoFakeKernel, where,
                            " was called with fake (data-less) tensors: the operator has no fake kernel; the plugin "
                            "registers one as OPC_KERNEL_FAKE");
  }
}

// The device of the call: the first tensor argument's (in a list too), else a Device argument's.
Device device_of_call(const std::vector<IValue>& args) {
  std::optional<Device> device;
  for (const auto& v : args) {
    if (device) break;
    if (const Tensor* t = v.get_if<Tensor>(); t != nullptr && t->defined()) device = t->device();
    if (const auto* list = v.get_if<std::vector<Tensor>>(); list != nullptr && !list->empty()) device = list->front().device();
  }
  for (const auto& v : args)
    if (const Device* d = v.get_if<Device>(); d != nullptr && !device) device = *d;
  return device && !device->is_meta() ? *device : Device::cpu();
}

// A write through DLPack bypasses the tensors' version counters: count one for each argument
// the schema lets the kernel write (as an in-place call through the Tensor API would).
void bump_written_versions(const std::vector<IValue>& args, const std::vector<bool>& writable) {
  for (size_t i = 0; i < args.size() && i < writable.size(); ++i) {
    if (!writable[i]) continue;
    if (const Tensor* t = args[i].get_if<Tensor>(); t != nullptr && t->defined()) t->bump_version();
    if (const auto* list = args[i].get_if<std::vector<Tensor>>())
      for (const Tensor& t : *list) t.bump_version();
  }
}

// The tensor a fake kernel describes (sizes, strides, byte offset, dtype), made as a fake tensor
// (inside the fake kernel's FakeTensorMode the factory makes one; a byte_offset becomes its
// storage offset). Version 2: sizes and strides may be handles (symbolic), and `base`, the
// argument the return says it aliases, makes it a view of that argument. Checked: a fake kernel
// can describe more elements than int64 holds, and the sums overflowed (found by fuzz/plugin_value).
Tensor fake_return_tensor(const DLTensor& d, const CallArena& arena, const Tensor* base) {
  OPCONFORM_CHECK(d.ndim >= 0 && d.ndim <= kMaxDLPackDims && (d.ndim == 0 || d.shape != nullptr), ErrorCode::kDLPack,
                  "bad ndim/shape");
  std::vector<SymInt> sym_shape, sym_st;
  for (int i = 0; i < d.ndim; ++i) sym_shape.push_back(arena.syms.decode(d.shape[i], "a size"));
  if (d.strides != nullptr) {
    for (int i = 0; i < d.ndim; ++i) sym_st.push_back(arena.syms.decode(d.strides[i], "a stride"));
  } else {
    sym_st = contiguous_strides(std::span<const SymInt>(sym_shape));
  }
  // The concrete stand-ins bound the storage (Note [Concrete sizes of symbolic fakes]).
  std::vector<int64_t> shape, st;
  bool symbolic = false;
  for (int i = 0; i < d.ndim; ++i) {
    shape.push_back(concrete_stand_in(sym_shape[i]));
    st.push_back(concrete_stand_in(sym_st[i]));
    symbolic = symbolic || sym_shape[i].is_symbolic() || sym_st[i].is_symbolic();
  }
  int64_t extent = 1;
  for (int i = 0; i < d.ndim; ++i) {
    OPCONFORM_CHECK(shape[i] >= 0 && st[i] >= 0, ErrorCode::kDLPack, "negative size or stride");
    int64_t reach = 0;
    OPCONFORM_CHECK(shape[i] == 0 || (!__builtin_mul_overflow(shape[i] - 1, st[i], &reach) &&
                                      !__builtin_add_overflow(extent, reach, &extent)),
                    ErrorCode::kDLPack, "sizes ", shape_string(shape), " with strides ", shape_string(st),
                    " reach beyond int64 elements");
  }
  const DType dtype = from_dlpack_dtype(d.dtype);
  const uint64_t item = itemsize(dtype);
  OPCONFORM_CHECK(d.byte_offset % item == 0, ErrorCode::kDLPack, "byte_offset ", d.byte_offset,
                  " is not a multiple of the item size");
  const int64_t offset = static_cast<int64_t>(d.byte_offset / item);
  int64_t storage_size = 0;
  OPCONFORM_CHECK(!__builtin_add_overflow(offset, extent, &storage_size), ErrorCode::kDLPack, "byte_offset ",
                  d.byte_offset, " puts the tensor beyond int64 elements");
  const TensorOptions options{dtype, arena.device};
  if (base != nullptr) {
    OPCONFORM_CHECK(base->dtype() == dtype, ErrorCode::kDLPack, "it says it is a view of an argument of dtype ",
                    name(base->dtype()), " but has dtype ", name(dtype));
    return symbolic ? base->as_strided(sym_shape, sym_st, offset) : base->as_strided(shape, st, offset);
  }
  if (symbolic) {
    return offset == 0 ? empty_strided(sym_shape, sym_st, options)
                       : empty({storage_size}, options).as_strided(sym_shape, sym_st, offset);
  }
  return offset == 0 ? empty_strided(shape, st, options) : empty({storage_size}, options).as_strided(shape, st, offset);
}

// The argument tensor a version-2 return says it aliases (OpcValue.alias); null when it says none.
const Tensor* claimed_base(const CallArena& arena, const OpcValue& v) {
  if (!arena.v2() || v.alias == 0) return nullptr;
  for (const auto& a : arena.args)
    if (a.arg_index == v.alias - 1 && a.tensor.defined()) return &a.tensor;
  throw Error(ErrorCode::kDLPack, "it says it aliases argument " + std::to_string(v.alias - 1) +
                                      ", which is not a tensor the kernel was given");
}

// One result tensor: an argument handed back, a tensor already taken, a view of an argument, or
// a new one imported. What is not imported stays with the arena, which releases it.
Tensor take_return_tensor(CallArena& arena, const OpcValue& v, size_t index, const std::string& where) {
  OpcDLManagedTensorVersioned* m = v.u.tensor;
  OPCONFORM_CHECK(m != nullptr, ErrorCode::kSchemaMismatch, where, ": return ", index, " is a NULL tensor");
  for (auto& a : arena.args)
    if (a.managed == m) return a.tensor;
  for (auto& [p, t] : arena.taken)
    if (p == m) return t;
  Tensor t;
  try {
    const Tensor* base = claimed_base(arena, v);
    if (arena.fake) {
      t = fake_return_tensor(m->dl_tensor, arena, base);
    } else if (auto view = arena.view_of_argument(
                   m->dl_tensor, base != nullptr ? std::optional<size_t>(v.alias - 1) : std::nullopt)) {
      t = *view;
    } else if (base != nullptr && m->dl_tensor.ndim > 0 && m->dl_tensor.shape != nullptr &&
               std::find(m->dl_tensor.shape, m->dl_tensor.shape + m->dl_tensor.ndim, 0) !=
                   m->dl_tensor.shape + m->dl_tensor.ndim) {
      // An empty view reaches no memory, so none can be checked: it keeps the offset it gives from
      // the argument's storage (ATen's slice of an empty tensor at start 1 has offset 1), read as
      // numbers (the storage of an empty argument may have no address at all).
      const DLTensor& d = m->dl_tensor;
      std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
      const auto item = static_cast<int64_t>(base->itemsize());
      const auto start = reinterpret_cast<uintptr_t>(base->storage() != nullptr ? base->storage()->data() : nullptr);
      const int64_t bytes = static_cast<int64_t>(reinterpret_cast<uintptr_t>(d.data) + d.byte_offset - start);
      const bool whole = bytes >= 0 && bytes % item == 0;
      t = base->as_strided(shape, d.strides != nullptr ? std::vector<int64_t>(d.strides, d.strides + d.ndim)
                                                       : contiguous_strides(shape),
                           whole ? bytes / item : base->storage_offset());
    } else if (base != nullptr) {
      throw Error(ErrorCode::kDLPack, "it says it is a view of argument " + std::to_string(v.alias - 1) +
                                          ", but its memory does not lie inside that argument's");
    } else {
      t = from_dlpack(m);  // owns m from here on
      arena.handed_over(m);
    }
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kDLPack, where + ": return " + std::to_string(index) + " is not a valid tensor: " + e.what());
  }
  arena.taken.emplace_back(m, t);
  return t;
}

// Return `i` as its schema type says, or a kSchemaMismatch naming what the kernel gave.
IValue convert_return(CallArena& arena, const OpcValue& v, const Type& type, size_t i, const std::string& where) {
  auto mismatch = [&](std::string_view got) {
    return Error(ErrorCode::kSchemaMismatch, where + ": return " + std::to_string(i) + " should be " + type.to_string() +
                                                 ", the kernel gave " + std::string(got));
  };
  if (v.tag == OPC_TAG_NONE && type.is_optional()) return IValue();
  if (is_tensor_type(type)) {
    // Version 2: None for a Tensor return is an undefined tensor (plugin.h, "Absent returns").
    if (v.tag == OPC_TAG_NONE && arena.v2()) return IValue(Tensor());
    if (v.tag != OPC_TAG_TENSOR) throw mismatch("tag " + std::to_string(v.tag));
    return IValue(take_return_tensor(arena, v, i, where));
  }
  const Type& present = type.is_optional() ? type.elem() : type;  // Tensor[]? is a Tensor[] when given
  const TypeKind k = present.kind();
  if (k == TypeKind::kList && present.elem().kind() == TypeKind::kTensor) {
    if (v.tag != OPC_TAG_LIST || (v.u.list.size > 0 && v.u.list.items == nullptr)) throw mismatch("no tensor list");
    // Found by fuzz/plugin_value: a negative size read as an empty list.
    if (v.u.list.size < 0) throw mismatch("a list of size " + std::to_string(v.u.list.size));
    std::vector<Tensor> tensors;
    for (int64_t j = 0; j < v.u.list.size; ++j) {
      // Version 2: a None item is an undefined tensor (a gradient list with no gradient for one element).
      if (v.u.list.items[j].tag == OPC_TAG_NONE && arena.v2()) {
        tensors.emplace_back();
        continue;
      }
      if (v.u.list.items[j].tag != OPC_TAG_TENSOR) throw mismatch("a list with a non-tensor item");
      tensors.push_back(take_return_tensor(arena, v.u.list.items[j], i, where));
    }
    return IValue(std::move(tensors));
  }
  if (k == TypeKind::kSymInt && v.tag == OPC_TAG_INT && arena.symbolic()) {
    try {
      return IValue(arena.syms.decode(v.u.i, "the value"));
    } catch (const Error& e) {
      throw mismatch(e.what());
    }
  }
  if ((k == TypeKind::kInt || k == TypeKind::kSymInt) && v.tag == OPC_TAG_INT) return IValue(v.u.i);
  if (k == TypeKind::kFloat && v.tag == OPC_TAG_DOUBLE) return IValue(v.u.d);
  if (k == TypeKind::kBool && v.tag == OPC_TAG_BOOL) return IValue(v.u.b != 0);
  if (k == TypeKind::kScalar) {
    if (v.tag == OPC_TAG_INT) return IValue(v.u.i);
    if (v.tag == OPC_TAG_DOUBLE) return IValue(v.u.d);
    if (v.tag == OPC_TAG_BOOL) return IValue(v.u.b != 0);
    if (v.tag == OPC_TAG_COMPLEX) return IValue(complex128(v.u.c.re, v.u.c.im));
  }
  if (k == TypeKind::kScalarType && v.tag == OPC_TAG_INT) {
    auto d = dtype_of_scalar_type_number(v.u.i);
    if (!d) throw mismatch("ScalarType number " + std::to_string(v.u.i));
    return IValue(*d);
  }
  if (k == TypeKind::kStr && v.tag == OPC_TAG_STRING && (v.u.s.size == 0 || v.u.s.data != nullptr) && v.u.s.size >= 0)
    return IValue(std::string(v.u.s.data, static_cast<size_t>(v.u.s.size)));
  throw mismatch("tag " + std::to_string(v.tag));
}

}  // namespace

std::vector<IValue> call_plugin_kernel(const PluginKernel& kernel, const PluginCallSite& site,
                                       const std::vector<IValue>& args, bool seeded) {
  const bool fake = site.fake;
  const std::string where = "operator '" + site.op_name + "', plugin '" + site.library + "' (" + site.kind + " kernel)";
  if (!fake) refuse_data_less_tensors(args, where);
  CallArena arena;
  arena.fake = fake;
  arena.abi_version = site.abi_version;
  arena.device = device_of_call(args);
  if (fake && !arena.symbolic())
    for (const auto& v : args) specialize_to_hints(v);
  std::vector<OpcValue> in;
  in.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    arena.current_arg = i;
    in.push_back(arena.to_value(args[i], i < site.writable.size() && site.writable[i]));
  }

  std::vector<OpcValue> out(site.returns.size());
  OpcCallContext ctx{};
  ctx.version = site.abi_version;  // the plugin's own (plugin.h, "Migration from version 1")
  ctx.size = sizeof(OpcCallContext);
  ctx.host = &arena;
  ctx.op_name = site.op_name.c_str();
  ctx.is_fake = fake ? 1 : 0;
  ctx.alloc = arena_alloc;
  ctx.new_tensor = arena_new_tensor;
  ctx.set_error = arena_set_error;
  if (arena.v2()) {
    // A fresh seed per random call from the host's generator: one generator state, one seed (Philox's
    // offset stays 0 here: every call has its own seed).
    if (seeded && !fake) ctx.seed = default_generator().below(UINT64_MAX), ctx.offset = 0;
    ctx.sym_binary = arena_sym_binary;
    ctx.sym_compare = arena_sym_compare;
    ctx.sym_guard_int = arena_sym_guard_int;
  }
  OpcStatus status;
  {
    // The kernel may hold its own locks while it asks for an output (ctx->new_tensor): no tensor
    // queued to this thread is destroyed meanwhile (Note [Biased reference counts]).
    const opconform::detail::DeferCountMerges foreign_code_runs;
    const opconform::cuda::KernelTimer timed(!fake && arena.device.is_cuda());  // Note [The kernels' own time]
    status = kernel.fn(&ctx, in.data(), static_cast<int64_t>(in.size()), out.data(), static_cast<int64_t>(out.size()),
                       kernel.user_data);
  }
  arena.adopt_returns(out);  // released on every path below unless imported
  if (status != OPC_OK) {
    throw Error(error_code_of(status), error_reason_of(status), where + " returned " + std::string(status_name(status)) +
                                           (arena.error.empty() ? std::string(" (no message)") : ": " + arena.error));
  }
  if (!fake) bump_written_versions(args, site.writable);
  std::vector<IValue> results;
  results.reserve(site.returns.size());
  for (size_t i = 0; i < site.returns.size(); ++i)
    results.push_back(convert_return(arena, out[i], site.returns[i].type, i, where));
  return results;
}

}  // namespace opconform::adapters::detail
