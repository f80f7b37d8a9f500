// Plugin value decoder (adapters/src/plugin_call.cpp: OpcValue -> IValue): an in-process plugin
// whose kernels return whatever the fuzz bytes say — wrong tags, missing or extra list items,
// NULL and malformed tensors (bad dtype, version, strides, byte_offset), the argument handed back
// or viewed, one tensor returned twice, strings and lists from ctx->alloc, failing statuses — for
// ops with every kind of return, called for real, under FakeTensorMode and through autograd.
// It speaks plugin ABI version 2, so the fuzz reaches version 2's values too: returns that claim
// to alias an argument (any or none), None for a Tensor return, symbolic size handles (real ones
// from a fake argument with a symbolic size, near-handles, handles of nothing) in new_tensor and in
// returned descriptors, and ctx->sym_* on fuzzed operands.
// The call must either throw opconform::Error or return values of the schema's types whose
// tensors are readable; the plugin's own tensors must be released exactly once (ASan/LSan).
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "fuzz_support.h"
#include "opconform/adapters/loader.h"
#include "opconform/core/dlpack.h"
#include "opconform/core/fake_tensor.h"
#include "opconform/core/registry.h"
#include "opconform/plugin.h"

namespace {

using namespace opconform;
using opconform::fuzz::plausible;

// One schema per kind of return the decoder knows. The first two have autograd formulas.
constexpr const char* kSchemas[] = {
    "fuzz::one(Tensor x) -> Tensor",
    "fuzz::pair(Tensor x) -> (Tensor, Tensor)",
    "fuzz::maybe(Tensor x) -> Tensor?",
    "fuzz::many(Tensor x) -> Tensor[]",
    "fuzz::numbers(Tensor x) -> (int, float, bool, Scalar, SymInt)",
    "fuzz::kinds(Tensor x) -> (ScalarType, str, int?, float?, Scalar?)",
    "fuzz::scale_(Tensor(a!) x) -> Tensor(a!)",
    "fuzz::alias(Tensor(a) x) -> Tensor(a)",
    "fuzz::nothing(Tensor x) -> ()",
};
constexpr int kOps = sizeof kSchemas / sizeof kSchemas[0];
constexpr int kOpsWithBackward = 2;

// The script the kernels read: the rest of the fuzz input.
FuzzedDataProvider* script = nullptr;
// Which return slots of the last real call carried a string or list whose size is negative: a
// lie that no decoded value may come from.
std::vector<bool> lied_about_size;

// A plugin-owned managed tensor over its own buffer, freed by its deleter.
struct Owned {
  OpcDLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
  std::vector<uint8_t> buffer;
};

void delete_owned(OpcDLManagedTensorVersioned* self) { delete static_cast<Owned*>(self->manager_ctx); }

DLDataType some_dtype(FuzzedDataProvider& in) {
  static constexpr DLDataType kValid[] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLInt, 64, 1}, {kDLInt, 8, 1},
                                          {kDLUInt, 8, 1},   {kDLFloat, 16, 1}, {kOpcDLBool, 8, 1}};
  if (in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0) return in.PickValueInArray(kValid);
  return DLDataType{in.ConsumeIntegral<uint8_t>(), in.ConsumeIntegral<uint8_t>(), in.ConsumeIntegral<uint16_t>()};
}

// A size below zero: a lie about a string's or list's length that the host must refuse.
int64_t negative(FuzzedDataProvider& in) { return -1 - (plausible<int64_t>(in, 0, 2) & INT64_MAX); }

// Sizes and strides of a fuzzed tensor. Real (not fake) tensors are kept small: a plugin that
// asks new_tensor for terabytes is refused by the allocator, which under libFuzzer's malloc limit
// reads as a crash. `keep_overflow`: sizes whose extent overflows int64 stay in (new_tensor must
// reject them); a plugin's own tensor always holds the memory it describes. `item`: bytes per element.
struct Geometry {
  std::vector<int64_t> shape, strides;
  bool null_strides = false;
};

// A size as a version-2 fake kernel may give one: a handle (of the call's first symbolic size, of
// none, or one raw C arithmetic on a handle made), or a plain number.
int64_t some_size(FuzzedDataProvider& in, bool fake, int64_t lo, int64_t hi) {
  if (!fake || in.ConsumeIntegralInRange<uint8_t>(0, 3) != 0) return plausible<int64_t>(in, lo, hi);
  const int64_t k = in.ConsumeIntegralInRange<int64_t>(0, 3);
  const int64_t handle = OPC_SYM_HANDLE_BASE + k * OPC_SYM_HANDLE_STEP;
  return in.ConsumeBool() ? handle : handle + in.ConsumeIntegralInRange<int64_t>(-2, 2);
}

Geometry some_geometry(FuzzedDataProvider& in, bool fake, bool keep_overflow, size_t item) {
  Geometry g;
  const int ndim = in.ConsumeIntegralInRange<int>(0, 3);
  for (int d = 0; d < ndim; ++d) g.shape.push_back(some_size(in, fake, 0, 4));
  g.null_strides = in.ConsumeBool();
  for (int d = 0; d < ndim; ++d) g.strides.push_back(some_size(in, fake, 0, 8));
  if (fake) return g;
  // Elements reached, and the contiguous stride of the current dimension, saturated at 2^63 so
  // that the 128-bit products cannot overflow.
  const __int128 limit = static_cast<__int128>(1) << 63;
  __int128 extent = 1, row = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    const __int128 size = g.shape[d] < 0 ? -static_cast<__int128>(g.shape[d]) : g.shape[d];
    const __int128 stride = g.null_strides ? row : (g.strides[d] < 0 ? -static_cast<__int128>(g.strides[d]) : g.strides[d]);
    if (size > 0) extent = std::min(limit, extent + (size - 1) * stride);
    row = std::min(limit, row * (size > 0 ? size : 1));
  }
  const bool overflows = extent * static_cast<__int128>(item) >= limit || row >= limit;
  if ((extent > (1 << 16) || row > (1 << 16)) && !(keep_overflow && overflows)) {
    for (auto& s : g.shape) s = s > 0 ? 1 : s;  // keep the signs, drop the size
  }
  return g;
}

// The bytes a descriptor reaches from `data` (0 when it has no element or is malformed enough
// that the importer must refuse it before reading).
size_t reached_bytes(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, uint64_t byte_offset,
                     size_t item) {
  __int128 last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) return 0;
    const __int128 stride = strides[d] < 0 ? -static_cast<__int128>(strides[d]) : strides[d];
    last += static_cast<__int128>(shape[d] - 1) * stride;
  }
  const __int128 bytes = static_cast<__int128>(byte_offset) + (last + 1) * static_cast<__int128>(item);
  return bytes > (1 << 24) ? 0 : static_cast<size_t>(bytes);
}

// A tensor of the plugin's own: a malformed descriptor sometimes, but its memory really holds
// what the descriptor reaches (a plugin that lies about memory is beyond any host's help).
OpcDLManagedTensorVersioned* own_tensor(FuzzedDataProvider& in, bool fake) {
  auto owned = std::make_unique<Owned>();
  const DLDataType dtype = some_dtype(in);
  const size_t item = std::max<size_t>(1, (dtype.bits + 7) / 8);
  const Geometry g = some_geometry(in, fake, /*keep_overflow=*/false, item);
  OpcDLManagedTensorVersioned& m = owned->managed;
  m.version.major = in.ConsumeIntegralInRange<uint8_t>(0, 15) != 0 ? 1 : in.ConsumeIntegral<uint32_t>();
  m.flags = in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0 ? in.ConsumeIntegral<uint64_t>() : 0;
  m.manager_ctx = owned.get();
  m.deleter = delete_owned;
  DLTensor& t = m.dl_tensor;
  t.dtype = dtype;
  t.device = DLDevice{kDLCPU, 0};
  owned->shape = g.shape;
  owned->strides = g.strides;
  t.ndim = static_cast<int32_t>(g.shape.size());
  t.shape = owned->shape.data();
  t.strides = g.null_strides ? nullptr : owned->strides.data();
  // Any byte_offset without memory behind it (fake); a real one stays inside the buffer.
  t.byte_offset = fake ? plausible<uint64_t>(in, 0, 16) : in.ConsumeIntegralInRange<uint64_t>(0, 16);
  if (!fake) {
    const auto strides = g.null_strides ? contiguous_strides(g.shape) : g.strides;
    owned->buffer.assign(reached_bytes(g.shape, strides, t.byte_offset, item) + 16, 0);
    const bool is_bool = t.dtype.code == kOpcDLBool;
    for (size_t i = 0; i < owned->buffer.size(); ++i) owned->buffer[i] = is_bool ? i % 2 : static_cast<uint8_t>(i * 37);
    t.data = owned->buffer.data() + in.ConsumeIntegralInRange<size_t>(0, 1) * 8;
  }
  return &owned.release()->managed;
}

// A view into the argument (the same dtype, inside its memory): the host must make it a view.
OpcDLManagedTensorVersioned* view_of(FuzzedDataProvider& in, const OpcDLManagedTensorVersioned* arg) {
  const DLTensor& a = arg->dl_tensor;
  if (a.data == nullptr || a.ndim != 1 || a.shape[0] < 1) return nullptr;
  const int64_t n = a.shape[0];
  auto owned = std::make_unique<Owned>();
  const int64_t start = in.ConsumeIntegralInRange<int64_t>(0, n - 1);
  const int64_t stride = in.ConsumeIntegralInRange<int64_t>(0, 2);
  const int64_t room = stride == 0 ? n : (n - 1 - start) / stride + 1;
  owned->shape = {in.ConsumeIntegralInRange<int64_t>(0, room)};
  owned->strides = {stride};
  OpcDLManagedTensorVersioned& m = owned->managed;
  m.version.major = 1;
  m.manager_ctx = owned.get();
  m.deleter = delete_owned;
  m.dl_tensor = a;
  m.dl_tensor.shape = owned->shape.data();
  m.dl_tensor.strides = owned->strides.data();
  m.dl_tensor.byte_offset = a.byte_offset + static_cast<uint64_t>(start) * ((a.dtype.bits + 7) / 8);
  return &owned.release()->managed;
}

struct Kernel {
  const OpcCallContext* ctx;
  const OpcValue* args;
  int64_t num_args;
  std::vector<OpcDLManagedTensorVersioned*> returned;  // tensors already written, to repeat

  // `allow_own`: whether a tensor of the plugin's own may be made (not where the host cannot
  // see it: in a list whose items pointer or size the plugin lies about, its tensors are lost by
  // the plugin itself).
  OpcDLManagedTensorVersioned* tensor(FuzzedDataProvider& in, bool allow_own) {
    const bool fake = ctx->is_fake != 0;
    OpcDLManagedTensorVersioned* m = nullptr;
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0:
      case 1: {
        const DLDataType dtype = some_dtype(in);
        const Geometry g = some_geometry(in, fake, /*keep_overflow=*/true, std::max<size_t>(1, (dtype.bits + 7) / 8));
        m = ctx->new_tensor(ctx->host, dtype, static_cast<int32_t>(g.shape.size()), g.shape.data(),
                            g.null_strides ? nullptr : g.strides.data());
        break;
      }
      case 2: m = allow_own ? own_tensor(in, fake) : nullptr; break;
      case 3: m = num_args > 0 && args[0].tag == OPC_TAG_TENSOR ? args[0].u.tensor : nullptr; break;
      case 4:
        m = allow_own && num_args > 0 && args[0].tag == OPC_TAG_TENSOR && !fake ? view_of(in, args[0].u.tensor) : nullptr;
        break;
      case 5: m = returned.empty() ? nullptr : returned[in.ConsumeIntegralInRange<size_t>(0, returned.size() - 1)]; break;
      default: m = nullptr; break;
    }
    if (m != nullptr) returned.push_back(m);
    return m;
  }

  OpcValue value(FuzzedDataProvider& in, bool in_list, bool allow_own) {
    OpcValue v{};
    v.tag = in.ConsumeIntegralInRange<uint8_t>(0, 15) != 0 ? in.ConsumeIntegralInRange<int32_t>(0, 7)
                                                            : in.ConsumeIntegral<int32_t>();
    switch (v.tag) {
      case OPC_TAG_TENSOR:
        v.u.tensor = tensor(in, allow_own);
        // Version 2: a claim to alias argument 0 (true or not), an argument that does not exist, or none.
        v.alias = in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0 ? in.ConsumeIntegralInRange<uint32_t>(1, 3) : 0;
        break;
      case OPC_TAG_INT: v.u.i = in.ConsumeIntegral<int64_t>(); break;
      case OPC_TAG_DOUBLE: v.u.d = in.ConsumeFloatingPoint<double>(); break;
      case OPC_TAG_BOOL: v.u.b = plausible<int32_t>(in, 0, 1); break;
      case OPC_TAG_COMPLEX: v.u.c.re = in.ConsumeFloatingPoint<double>(), v.u.c.im = in.ConsumeFloatingPoint<double>(); break;
      case OPC_TAG_STRING: {
        const std::string s = in.ConsumeRandomLengthString(16);
        char* data = static_cast<char*>(ctx->alloc(ctx->host, s.size()));
        if (data != nullptr) std::memcpy(data, s.data(), s.size());
        v.u.s.data = in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0 ? data : nullptr;
        // The size may be negative (a lie the host must refuse), never larger than the memory.
        v.u.s.size = in.ConsumeBool() ? static_cast<int64_t>(s.size()) : negative(in);
        break;
      }
      case OPC_TAG_LIST: {
        // Lists hold no lists: no schema returns one, and their tensors would be nobody's.
        if (in_list) {
          v.tag = OPC_TAG_NONE;
          break;
        }
        const int64_t n = in.ConsumeIntegralInRange<int64_t>(0, 4);
        const bool null_items = in.ConsumeIntegralInRange<uint8_t>(0, 15) == 0;
        const bool negative_size = in.ConsumeIntegralInRange<uint8_t>(0, 7) == 0;
        auto* items = static_cast<OpcValue*>(ctx->alloc(ctx->host, sizeof(OpcValue) * static_cast<size_t>(n)));
        if (items == nullptr) break;
        for (int64_t i = 0; i < n; ++i) items[i] = value(in, true, !null_items && !negative_size);
        v.u.list.items = null_items ? nullptr : items;
        v.u.list.size = negative_size ? negative(in) : n;
        break;
      }
      default: break;  // NONE, or a tag nobody knows
    }
    return v;
  }
};

OpcStatus fuzz_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, void*) {
  try {
    FuzzedDataProvider& in = *script;
    Kernel k{ctx, args, num_args, {}};
    // Some returns are left as they came (NONE): a kernel that writes too few.
    for (int64_t j = 0; j < num_returns; ++j)
      if (in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0) returns[j] = k.value(in, false, true);
    if (!ctx->is_fake) {
      lied_about_size.assign(static_cast<size_t>(num_returns), false);
      for (int64_t j = 0; j < num_returns; ++j)
        lied_about_size[j] = (returns[j].tag == OPC_TAG_STRING && returns[j].u.s.size < 0) ||
                             (returns[j].tag == OPC_TAG_LIST && returns[j].u.list.size < 0);
    }
    // Version 2's symbolic arithmetic on fuzzed operands (handles of the call or not): an answer
    // or an error status, never a crash.
    if (in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0) {
      int64_t out = 0;
      int32_t truth = 0;
      const int64_t a = some_size(in, true, -2, 8), b = some_size(in, true, -2, 8);
      (void)ctx->sym_binary(ctx->host, in.ConsumeIntegralInRange<int32_t>(0, 8), a, b, &out);
      (void)ctx->sym_compare(ctx->host, in.ConsumeIntegralInRange<int32_t>(0, 7), a, b, &truth);
      (void)ctx->sym_guard_int(ctx->host, a, &out);
    }
    // The host-side helpers with bad arguments, which must answer NULL and set an error.
    if (in.ConsumeIntegralInRange<uint8_t>(0, 7) == 0) {
      std::vector<int64_t> bad_shape(kMaxDLPackDims + 8, 2);  // as many sizes as any ndim below
      bad_shape[0] = -1;
      if (ctx->new_tensor(ctx->host, some_dtype(in), in.ConsumeIntegralInRange<int32_t>(-2, kMaxDLPackDims + 8),
                          bad_shape.data(), nullptr) !=
          nullptr)
        ctx->set_error(ctx->host, nullptr);
      if (ctx->alloc(ctx->host, ~size_t{0} - in.ConsumeIntegral<uint8_t>()) != nullptr) fuzz::fail("alloc of ~2^64 bytes answered");
    }
    const uint8_t status = in.ConsumeIntegralInRange<uint8_t>(0, 15);
    if (status < 12) return OPC_OK;
    if (status < 15) ctx->set_error(ctx->host, in.ConsumeBool() ? "fuzzed failure" : nullptr);
    return status == 15 ? in.ConsumeIntegral<int32_t>() : OPC_ERROR;
  } catch (...) {
    return OPC_ERROR;  // nothing may cross the ABI
  }
}

OpcStatus register_fuzz_ops(const OpcRegistrar* r) {
  for (int i = 0; i < kOps; ++i) {
    const std::string schema = kSchemas[i];
    const std::string name = schema.substr(0, schema.find('('));
    OpcStatus s = r->define(r->host, kSchemas[i]);
    if (s == OPC_OK) s = r->impl(r->host, name.c_str(), OPC_KERNEL_CPU, fuzz_kernel, nullptr);
    if (s == OPC_OK) s = r->impl(r->host, name.c_str(), OPC_KERNEL_FAKE, fuzz_kernel, nullptr);
    if (s == OPC_OK && i < kOpsWithBackward) s = r->impl(r->host, name.c_str(), OPC_KERNEL_BACKWARD, fuzz_kernel, nullptr);
    if (s != OPC_OK) return s;
  }
  return OPC_OK;
}

OPCONFORM_PLUGIN(fuzz_plugin, "fuzz-values", "1", register_fuzz_ops)

// Whether a returned value has the type the schema gives it.
bool has_type(const IValue& v, const Type& type) {
  if (type.is_optional()) return v.is_none() || has_type(v, type.elem());
  switch (type.kind()) {
    case TypeKind::kTensor: return v.tag() == IValue::Tag::Tensor;  // undefined: None in version 2
    case TypeKind::kInt: return v.tag() == IValue::Tag::Int;
    case TypeKind::kSymInt: return v.tag() == IValue::Tag::Int || v.tag() == IValue::Tag::SymInt;
    case TypeKind::kFloat: return v.tag() == IValue::Tag::Double;
    case TypeKind::kBool: return v.tag() == IValue::Tag::Bool;
    case TypeKind::kScalar:
      return v.tag() == IValue::Tag::Int || v.tag() == IValue::Tag::Double || v.tag() == IValue::Tag::Bool ||
             v.tag() == IValue::Tag::Complex;
    case TypeKind::kScalarType: return v.tag() == IValue::Tag::DType;
    case TypeKind::kStr: return v.tag() == IValue::Tag::String;
    case TypeKind::kList: return v.tag() == IValue::Tag::TensorList;
    default: return false;
  }
}

// Reads every element of a real tensor (ASan sees any byte outside its memory).
void read_all(const Tensor& t) {
  if (!t.defined() || t.is_fake() || t.is_meta_data()) return;
  Tensor copy = empty(t.sizes(), TensorOptions(t.dtype()));
  copy.copy_(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Registry registry;
  static auto library = adapters::load_plugin(fuzz_plugin(), registry);

  FuzzedDataProvider in(data, size);
  script = &in;
  const int op_index = in.ConsumeIntegralInRange<int>(0, kOps - 1);
  const std::string schema = kSchemas[op_index];
  const OperatorHandle op = registry.get(schema.substr(0, schema.find('(')));
  const uint8_t mode = in.ConsumeIntegralInRange<uint8_t>(0, 3);  // 0, 1: real; 2: fake; 3: autograd
  static constexpr DType kArgDtypes[] = {DType::Float32, DType::Float64, DType::Int64, DType::UInt8};
  const DType dtype = mode == 3 ? DType::Float64 : in.PickValueInArray(kArgDtypes);
  // The argument: a 1-d tensor, sometimes a view with a storage offset.
  const int64_t n = in.ConsumeIntegralInRange<int64_t>(0, 8);
  const int64_t offset = in.ConsumeIntegralInRange<int64_t>(0, 2);
  Tensor base = ones({n + offset}, TensorOptions(dtype));
  Tensor x = base.narrow(0, offset, n);

  std::optional<FakeTensorMode> fake_mode;
  std::optional<FakeTensorModeGuard> fake_guard;
  if (mode == 2) {
    const bool symbolic = in.ConsumeBool();  // a symbolic size (n >= 2): the kernel gets a real handle
    x = fake_mode.emplace().from_tensor(x, symbolic);
    if (symbolic) fake_guard.emplace(*fake_mode);
  }
  if (mode == 3) {
    if (op_index >= kOpsWithBackward) return 0;
    x = x.detach();
    x.set_requires_grad(true);
  }
  Stack stack{IValue(x)};
  lied_about_size.clear();
  try {
    op.call_boxed(stack);
  } catch (const Error&) {
    return 0;
  }
  const auto& returns = op.schema().returns;
  FUZZ_CHECK(stack.size() == returns.size(), "'", op.name(), "' returned ", stack.size(), " values for ",
             returns.size(), " in the schema");
  for (size_t i = 0; i < returns.size(); ++i) {
    FUZZ_CHECK(has_type(stack[i], returns[i].type), "'", op.name(), "' return ", i, " is not a ",
               returns[i].type.to_string());
    FUZZ_CHECK(i >= lied_about_size.size() || !lied_about_size[i] || stack[i].is_none(), "'", op.name(),
               "' return ", i, " was decoded from a string or list of negative size");
    if (stack[i].is_tensor()) read_all(stack[i].to_tensor());
    if (stack[i].tag() == IValue::Tag::TensorList)
      for (const Tensor& t : stack[i].to_tensor_list()) read_all(t);
  }
  // Autograd: the backward formula (the same fuzzed kernel) returns one gradient per argument.
  if (mode == 3 && stack[0].is_tensor()) {
    const Tensor y = stack[0].to_tensor();
    if (!y.requires_grad() || !is_floating(y.dtype())) return 0;
    try {
      y.backward(ones(y.sizes(), TensorOptions(y.dtype())));
    } catch (const Error&) {
      return 0;
    }
    read_all(x.grad());
  }
  return 0;
}
