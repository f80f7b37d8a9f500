// The torch bridge (torch_bridge.h): any c10::OperatorHandle as boxed opconform kernels.
// Moved out of the ATen adapter unchanged in behaviour; the ATen adapter (adapters/aten) and the
// TORCH_LIBRARY adapter (adapters/torch_library) link it.
//
// One boxed kernel serves every op (user_data: the op's entry). It converts the host's tagged
// values into c10::IValues following the entry's schema types, calls the op and converts the
// returns. The host's argument list must match the library's (same count, compatible kinds: SymInt
// spelled int is the same at a call); should it differ, the call fails with OPC_NOT_IMPLEMENTED
// saying so.
//
// Tensors cross zero-copy both ways:
//   - in: the host's DLPack 1.x tensor becomes an at::Tensor over the same memory (a c10::Storage
//     whose DataPtr has no deleter: the host owns the memory). This is done by hand rather than
//     with at::fromDLPack because 1.13's fromDLPack ignores byte_offset, maps no DLPack dtype to
//     bool, and sizes the storage without the storage offset; here the host's byte_offset becomes
//     the storage offset again, so ATen sees the host's storage/offset split (as_strided's
//     storage_offset then means the same on both sides);
//   - out: an at::Tensor becomes a heap OpcDLManagedTensorVersioned holding a reference to it; the
//     host's deleter call drops it. A view of an argument is returned as such, over the argument's
//     memory (the host, which owns that memory, must keep it alive as long as the view). A return
//     that IS an argument (in-place and out= ops returning self/out) is written as the argument's
//     own pointer. Either way its OpcValue.alias names the argument (ABI 2): ATen's own answer
//     (same StorageImpl), the only one a fake call has;
//   - fake calls: arguments become meta tensors of the same sizes, strides, storage offset and
//     dtype (a symbolic size, ABI 2, is pinned to its value with ctx->sym_guard_int); returns are
//     data-less descriptors (data NULL) of the meta result's sizes, strides and storage offset (as
//     byte_offset).
//
// The backward operators (register_backward_ops) re-run the op under autograd on leaves over the
// host's memory (arguments the op writes are cloned first, so the host's memory is never written)
// and ask torch::autograd::grad for the gradients. Returns whose incoming gradient is all zeros are
// left out, as PyTorch's engine leaves out outputs that do not reach the loss. A random op
// (nondeterministic_seeded) seeds ATen's generators from the call's seed (ABI 2), and its backward
// replays its forward call's draw: the forward records the seed, keyed by its returned data.
#include "torch_bridge.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/Logging.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/version.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

// Note [One bridge for ATen 1.13 and 2.x]: the version differences the bridge meets are few and
// spelled here, so one source builds against Debian's libtorch 1.13 and PyTorch 2.11's
// libraries: from 2.1 on, Storage::data() is const and writable memory is mutable_data().
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define OPC_TORCH_STORAGE_DATA(storage) (storage).mutable_data()
#else
#define OPC_TORCH_STORAGE_DATA(storage) (storage).data()
#endif

namespace opconform::torch_bridge {

// Note [No C++ backtraces for c10 errors]: libtorch 1.13 builds every c10::Error's message with a
// symbolised C++ backtrace (dladdr per frame, milliseconds each), and a conformance run provokes
// errors by design: an ATen check spent 45% of its time in _dl_addr on float16 samples that ATen
// 1.13 has no kernel for. The bridge reports only what_without_backtrace(), so it asks c10 for no
// backtrace at all when the plugin is loaded. From 2.3 on c10 symbolises lazily (only when the full
// what() is read), and its fetcher has another type: left alone there.
#if TORCH_VERSION_MAJOR < 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 3)
[[maybe_unused]] const bool no_c10_backtraces = [] {
  c10::SetStackTraceFetcher([] { return std::string(); });
  return true;
}();
#endif

[[noreturn]] void fail(OpcStatus status, std::string message) { throw KernelError{status, std::move(message)}; }

std::string first_line(std::string_view text) {
  const size_t end = text.find('\n');
  return std::string(text.substr(0, end));
}

OpcStatus classify_by_type(const c10::Error&) { return OPC_INVALID_ARGUMENT; }

std::map<std::string, OpEntry>& entries() {
  static std::map<std::string, OpEntry> by_name;
  return by_name;
}

const std::string& torch_label() {
  static const std::string label =
      "ATen " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  return label;
}

namespace {

// DLPack 1.x's kDLBool (missing from the 0.6 header ATen ships).
constexpr uint8_t kDLBoolCode = OPC_DL_BOOL;

// ---------------------------------------------------------------- dtypes

std::optional<at::ScalarType> scalar_type_of(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLInt:
      if (t.bits == 8) return at::kChar;
      if (t.bits == 16) return at::kShort;
      if (t.bits == 32) return at::kInt;
      if (t.bits == 64) return at::kLong;
      break;
    case kDLUInt:
      if (t.bits == 8) return at::kByte;
      break;
    case kDLFloat:
      if (t.bits == 16) return at::kHalf;
      if (t.bits == 32) return at::kFloat;
      if (t.bits == 64) return at::kDouble;
      break;
    case kDLBfloat:
      if (t.bits == 16) return at::kBFloat16;
      break;
    case kDLComplex:
      if (t.bits == 64) return at::kComplexFloat;
      if (t.bits == 128) return at::kComplexDouble;
      break;
    case kDLBoolCode:
      if (t.bits == 8) return at::kBool;
      break;
    default:
      break;
  }
  return std::nullopt;
}

DLDataType dl_dtype_of(at::ScalarType type) {
  auto make = [](uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; };
  switch (type) {
    case at::kBool: return make(kDLBoolCode, 8);
    case at::kByte: return make(kDLUInt, 8);
    case at::kChar: return make(kDLInt, 8);
    case at::kShort: return make(kDLInt, 16);
    case at::kInt: return make(kDLInt, 32);
    case at::kLong: return make(kDLInt, 64);
    case at::kHalf: return make(kDLFloat, 16);
    case at::kBFloat16: return make(kDLBfloat, 16);
    case at::kFloat: return make(kDLFloat, 32);
    case at::kDouble: return make(kDLFloat, 64);
    case at::kComplexFloat: return make(kDLComplex, 64);
    case at::kComplexDouble: return make(kDLComplex, 128);
    default:
      fail(OPC_NOT_IMPLEMENTED, std::string("ATen returned a tensor of dtype ") + c10::toString(type) +
                                    ", which opconform has no DLPack dtype for");
  }
}

// ---------------------------------------------------------------- tensors in

// A size as a number: a symbolic size's handle (ABI 2 fake calls) becomes its value, pinned there by
// a guard the host records (ATen 1.13's meta tensors have concrete sizes only; Note [Symbolic sizes
// are pinned]). Any other value is returned as it is.
int64_t concrete_size(int64_t v, const OpcCallContext* ctx, const std::string& what) {
  if (!OPC_IS_SYM_HANDLE(v)) return v;
  if (ctx == nullptr || !OPC_HAS_FIELD(ctx, OpcCallContext, sym_guard_int) || ctx->sym_guard_int == nullptr) {
    fail(OPC_INVALID_ARGUMENT, what + " holds a symbolic size, and the host's call context has no sym_guard_int");
  }
  int64_t value = 0;
  const OpcStatus status = ctx->sym_guard_int(ctx->host, v, &value);
  if (status != OPC_OK) fail(status, what + ": the host's sym_guard_int refused a symbolic size");
  return value;
}

// Note [Symbolic sizes are pinned]: a fake call of an ABI-2 host may pass symbolic sizes as
// handles. The bridge makes ATen meta tensors from them, which take numbers, so each handle is
// pinned to its value with ctx->sym_guard_int (the host's guard says the result holds at that
// size only), as the host itself did for version 1. A real symbolic meta call (a c10::SymNodeImpl
// calling ctx->sym_*, 2.x only) is not done.

// The at::Tensor over a host tensor's memory (or, in a fake call, a meta tensor of its metadata).
at::Tensor import_tensor(const OpcDLManagedTensorVersioned* managed, bool fake, const std::string& what,
                         const OpcCallContext* ctx) {
  if (managed == nullptr) fail(OPC_INVALID_ARGUMENT, what + " is a null tensor");
  if (managed->version.major != OPC_DLPACK_MAJOR_VERSION) {
    fail(OPC_ABI_MISMATCH, what + " is a DLPack " + std::to_string(managed->version.major) + ".x tensor (expected " +
                               std::to_string(OPC_DLPACK_MAJOR_VERSION) + ".x)");
  }
  const DLTensor& t = managed->dl_tensor;
  const std::optional<at::ScalarType> type = scalar_type_of(t.dtype);
  if (!type) {
    fail(OPC_NOT_IMPLEMENTED, what + " has DLPack dtype (code " + std::to_string(t.dtype.code) + ", bits " +
                                  std::to_string(t.dtype.bits) + ", lanes " + std::to_string(t.dtype.lanes) +
                                  "), which " + torch_label() + " has no dtype for");
  }
  const bool on_cuda = t.device.device_type == kDLCUDA;
  if (!fake && t.device.device_type != kDLCPU && !(on_cuda && at::hasCUDA())) {
    fail(OPC_NOT_IMPLEMENTED, what + " is on DLPack device type " + std::to_string(static_cast<int>(t.device.device_type)) +
                                  ", which this libtorch has no kernels for (CPU" + (at::hasCUDA() ? " and CUDA)" : " only)"));
  }
  if (t.ndim < 0 || (t.ndim > 0 && t.shape == nullptr)) fail(OPC_INVALID_ARGUMENT, what + " has a malformed shape");
  std::vector<int64_t> sizes(t.shape, t.shape + t.ndim);
  for (int64_t& size : sizes) size = concrete_size(size, ctx, what);
  std::vector<int64_t> strides;
  if (t.strides != nullptr) {
    strides.assign(t.strides, t.strides + t.ndim);
    for (int64_t& stride : strides) stride = concrete_size(stride, ctx, what);
  } else {
    strides.assign(sizes.size(), 1);
    for (int64_t d = t.ndim - 2; d >= 0; --d) strides[d] = strides[d + 1] * std::max<int64_t>(sizes[d + 1], 1);
  }
  const int64_t item = static_cast<int64_t>(c10::elementSize(*type));
  int64_t numel = 1;
  int64_t last = 0;  // offset (elements) of the farthest element
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) fail(OPC_INVALID_ARGUMENT, what + " has a negative size or stride");
    numel *= sizes[d];
    if (sizes[d] > 0) last += (sizes[d] - 1) * strides[d];
  }
  const int64_t extent = numel == 0 ? 0 : (last + 1) * item;
  const int64_t byte_offset = concrete_size(static_cast<int64_t>(t.byte_offset), ctx, what);
  if (byte_offset < 0) fail(OPC_INVALID_ARGUMENT, what + " has a negative byte_offset");
  // The host's storage starts at `data`; a byte offset of whole elements is its storage offset.
  const bool whole = byte_offset % item == 0;
  const int64_t storage_offset = whole ? byte_offset / item : 0;
  // An empty tensor claims no bytes: the host's memory behind its storage offset may not exist (a
  // 0-size view at offset 1 of an empty buffer), and ATen's clone_preserve_strides copies the whole
  // storage (copy, select_scatter, slice_scatter under vmap: SIGSEGV with ATen 2.11). ATen checks
  // no bounds for a view without elements, so the storage offset is kept as the host gave it.
  const size_t nbytes = numel == 0 ? 0 : static_cast<size_t>(whole ? byte_offset + extent : extent);

  const c10::Device device = fake      ? c10::Device(c10::kMeta)
                             : on_cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(t.device.device_id))
                                       : c10::Device(c10::kCPU);
  void* base = fake || t.data == nullptr ? nullptr : (whole ? t.data : static_cast<char*>(t.data) + byte_offset);
  // No deleter: the host owns the memory; the tensor lives no longer than the call (or than
  // a return that aliases it, which the host ties to the argument's storage).
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, c10::DataPtr(base, device),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage),
      c10::DispatchKeySet(fake ? c10::DispatchKey::Meta : on_cuda ? c10::DispatchKey::CUDA : c10::DispatchKey::CPU),
      caffe2::TypeMeta::fromScalarType(*type));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  tensor.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  return tensor;
}

// ---------------------------------------------------------------- tensors out

struct ExportContext {
  OpcDLManagedTensorVersioned managed{};
  at::Tensor tensor;  // keeps the storage (and, for a view, the argument's memory wrapper) alive
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

void delete_export(OpcDLManagedTensorVersioned* self) {
  if (self != nullptr) delete static_cast<ExportContext*>(self->manager_ctx);
}

// Zero-copy export of an ATen CPU or CUDA tensor: the host calls the deleter once.
OpcDLManagedTensorVersioned* export_tensor(at::Tensor t) {
  if (t.layout() != at::kStrided) fail(OPC_NOT_IMPLEMENTED, "ATen returned a non-strided tensor");
  if (!t.device().is_cpu() && !t.device().is_cuda())
    fail(OPC_ERROR, "ATen returned a tensor on " + t.device().str() + ", not cpu or cuda");
  if (t.is_conj() || t.is_neg()) t = t.resolve_conj().resolve_neg();  // lazy conjugate/negative bits
  auto ctx = std::make_unique<ExportContext>();
  ctx->tensor = t;
  ctx->shape.assign(t.sizes().begin(), t.sizes().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());
  OpcDLManagedTensorVersioned& m = ctx->managed;
  m.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
  m.manager_ctx = ctx.get();
  m.deleter = &delete_export;
  m.flags = 0;
  DLTensor& dl = m.dl_tensor;
  dl.data = OPC_TORCH_STORAGE_DATA(t.storage());
  dl.device = t.device().is_cuda() ? DLDevice{kDLCUDA, static_cast<int32_t>(t.device().index())} : DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype_of(t.scalar_type());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.element_size();
  return &ctx.release()->managed;
}

// A fake call's return: a data-less descriptor of the meta result (data NULL), its storage
// offset as byte_offset — ctx->new_tensor has no storage offset, and a view's offset is part of
// the metadata a fake kernel must predict.
OpcDLManagedTensorVersioned* export_meta(const at::Tensor& t) {
  auto ctx = std::make_unique<ExportContext>();
  ctx->shape.assign(t.sizes().begin(), t.sizes().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());
  OpcDLManagedTensorVersioned& m = ctx->managed;
  m.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
  m.manager_ctx = ctx.get();
  m.deleter = &delete_export;
  m.flags = 0;
  DLTensor& dl = m.dl_tensor;
  dl.data = nullptr;
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype_of(t.scalar_type());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.element_size();
  return &ctx.release()->managed;
}

// ---------------------------------------------------------------- arguments

// One tensor the call imported: to recognise a return that is an argument or a view of one. It is
// held until the call ends: a TensorImpl or StorageImpl freed earlier (a gradient left out) could
// be reused at the same address by a result, which would then pass for that argument.
struct Input {
  at::Tensor tensor;
  const c10::TensorImpl* impl;
  const c10::StorageImpl* storage;  // its own: import_tensor makes one per tensor
  OpcDLManagedTensorVersioned* managed;
  int64_t arg;  // schema index of the argument holding it
};

// The tensors of one call's arguments; `arg` is the argument being imported.
struct CallState {
  const OpcCallContext* ctx;
  const OpEntry& entry;
  bool fake;
  std::vector<Input> inputs;
  int64_t arg = 0;
};

const char* tag_name(OpcTag tag) {
  switch (tag) {
    case OPC_TAG_NONE: return "None";
    case OPC_TAG_TENSOR: return "Tensor";
    case OPC_TAG_INT: return "int";
    case OPC_TAG_DOUBLE: return "float";
    case OPC_TAG_BOOL: return "bool";
    case OPC_TAG_COMPLEX: return "complex";
    case OPC_TAG_STRING: return "str";
    case OPC_TAG_LIST: return "list";
    default: return "an unknown tag";
  }
}

[[noreturn]] void type_mismatch(const std::string& what, const c10::Type& type, const OpcValue& v,
                                const std::string& label) {
  fail(OPC_NOT_IMPLEMENTED, what + ": " + label + "'s schema has " + type.str() + " where the host passed " +
                                tag_name(v.tag) + " (the host's schema differs from " + label + "'s)");
}

at::Tensor tensor_arg(const OpcValue& v, const c10::Type& type, const std::string& what, CallState& call) {
  const std::string& label = call.entry.label;
  if (v.tag != OPC_TAG_TENSOR) type_mismatch(what, type, v, label);
  at::Tensor t = import_tensor(v.u.tensor, call.fake, what, call.ctx);
  call.inputs.push_back({t, t.unsafeGetTensorImpl(), t.storage().unsafeGetStorageImpl(), v.u.tensor, call.arg});
  return t;
}

// An int (a SymInt in a fake call may be a handle: pinned, Note [Symbolic sizes are pinned]; in a
// real call every size is concrete and a value in the handles' range is an ordinary int).
int64_t int_arg(const OpcValue& v, const c10::Type& type, const std::string& what, const CallState& call) {
  if (v.tag == OPC_TAG_INT) return call.fake ? concrete_size(v.u.i, call.ctx, what) : v.u.i;
  if (v.tag == OPC_TAG_BOOL) return v.u.b != 0;
  type_mismatch(what, type, v, call.entry.label);
}

double float_arg(const OpcValue& v, const c10::Type& type, const std::string& what, const std::string& label) {
  if (v.tag == OPC_TAG_DOUBLE) return v.u.d;
  if (v.tag == OPC_TAG_INT) return static_cast<double>(v.u.i);
  if (v.tag == OPC_TAG_BOOL) return v.u.b != 0;
  type_mismatch(what, type, v, label);
}

bool bool_arg(const OpcValue& v, const c10::Type& type, const std::string& what, const std::string& label) {
  if (v.tag == OPC_TAG_BOOL) return v.u.b != 0;
  if (v.tag == OPC_TAG_INT && (v.u.i == 0 || v.u.i == 1)) return v.u.i != 0;
  type_mismatch(what, type, v, label);
}

c10::IValue scalar_arg(const OpcValue& v, const c10::Type& type, const std::string& what, const std::string& label) {
  switch (v.tag) {
    case OPC_TAG_INT: return c10::IValue(v.u.i);
    case OPC_TAG_DOUBLE: return c10::IValue(v.u.d);
    case OPC_TAG_BOOL: return c10::IValue(v.u.b != 0);
    case OPC_TAG_COMPLEX: return c10::IValue(c10::complex<double>(v.u.c.re, v.u.c.im));
    default: type_mismatch(what, type, v, label);
  }
}

// One argument as ATen's schema type wants it. `n` is the static length of an int[N] (a single
// int broadcasts to it, as in PyTorch).
c10::IValue to_ivalue(const OpcValue& v, const c10::TypePtr& type, c10::optional<int32_t> n, const std::string& what,
                      CallState& call) {
  using c10::TypeKind;
  const std::string& label = call.entry.label;
  switch (type->kind()) {
    case TypeKind::OptionalType:
      if (v.tag == OPC_TAG_NONE) {
        // A fake call of a factory: its tensors go on the meta device.
        if (call.fake && type->castRaw<c10::OptionalType>()->getElementType()->kind() == TypeKind::DeviceObjType) {
          return c10::IValue(c10::Device(c10::kMeta));
        }
        return c10::IValue();
      }
      return to_ivalue(v, type->castRaw<c10::OptionalType>()->getElementType(), n, what, call);
    case TypeKind::TensorType: return c10::IValue(tensor_arg(v, *type, what, call));
    case TypeKind::IntType:
    case TypeKind::SymIntType:
    case TypeKind::ScalarTypeType:
    case TypeKind::LayoutType:
    case TypeKind::MemoryFormatType: return c10::IValue(int_arg(v, *type, what, call));
    case TypeKind::FloatType: return c10::IValue(float_arg(v, *type, what, label));
    case TypeKind::BoolType: return c10::IValue(bool_arg(v, *type, what, label));
    case TypeKind::ComplexType:
      if (v.tag == OPC_TAG_COMPLEX) return c10::IValue(c10::complex<double>(v.u.c.re, v.u.c.im));
      return c10::IValue(c10::complex<double>(float_arg(v, *type, what, label), 0.0));
    case TypeKind::NumberType: return scalar_arg(v, *type, what, label);
    case TypeKind::StringType:
      if (v.tag != OPC_TAG_STRING) type_mismatch(what, *type, v, label);
      return c10::IValue(std::string(v.u.s.data, static_cast<size_t>(v.u.s.size)));
    case TypeKind::DeviceObjType: {
      if (v.tag != OPC_TAG_STRING) type_mismatch(what, *type, v, label);
      if (call.fake) return c10::IValue(c10::Device(c10::kMeta));
      const std::string device(v.u.s.data, static_cast<size_t>(v.u.s.size));
      try {
        return c10::IValue(c10::Device(device));
      } catch (const c10::Error&) {
        fail(OPC_INVALID_ARGUMENT, what + ": '" + device + "' is not a device ATen knows");
      }
    }
    case TypeKind::GeneratorType:
      if (v.tag != OPC_TAG_NONE) type_mismatch(what, *type, v, label);
      return c10::IValue();
    case TypeKind::ListType: {
      const c10::TypePtr& element = type->castRaw<c10::ListType>()->getElementType();
      // A single value for an int[N] / float[N] broadcasts.
      std::vector<OpcValue> broadcast;
      const OpcValue* items = nullptr;
      int64_t size = 0;
      if (v.tag == OPC_TAG_LIST) {
        items = v.u.list.items;
        size = v.u.list.size;
        if (size > 0 && items == nullptr) fail(OPC_INVALID_ARGUMENT, what + " is a list without items");
      } else if ((v.tag == OPC_TAG_INT || v.tag == OPC_TAG_DOUBLE || v.tag == OPC_TAG_BOOL) && n) {
        broadcast.assign(static_cast<size_t>(*n), v);
        items = broadcast.data();
        size = *n;
      } else {
        type_mismatch(what, *type, v, label);
      }
      auto item_what = [&](int64_t i) { return what + "[" + std::to_string(i) + "]"; };
      switch (element->kind()) {
        case TypeKind::IntType:
        case TypeKind::SymIntType: {
          c10::List<int64_t> list;
          list.reserve(static_cast<size_t>(size));
          for (int64_t i = 0; i < size; ++i) list.push_back(int_arg(items[i], *element, item_what(i), call));
          return c10::IValue(std::move(list));
        }
        case TypeKind::FloatType: {
          c10::List<double> list;
          for (int64_t i = 0; i < size; ++i) list.push_back(float_arg(items[i], *element, item_what(i), label));
          return c10::IValue(std::move(list));
        }
        case TypeKind::BoolType: {
          c10::List<bool> list;
          for (int64_t i = 0; i < size; ++i) list.push_back(bool_arg(items[i], *element, item_what(i), label));
          return c10::IValue(std::move(list));
        }
        case TypeKind::TensorType: {
          c10::List<at::Tensor> list;
          for (int64_t i = 0; i < size; ++i) list.push_back(tensor_arg(items[i], *element, item_what(i), call));
          return c10::IValue(std::move(list));
        }
        case TypeKind::OptionalType: {
          if (element->castRaw<c10::OptionalType>()->getElementType()->kind() != TypeKind::TensorType) break;
          c10::List<c10::optional<at::Tensor>> list;
          for (int64_t i = 0; i < size; ++i) {
            if (items[i].tag == OPC_TAG_NONE) {
              list.push_back(c10::nullopt);
            } else {
              list.push_back(tensor_arg(items[i], *element, item_what(i), call));
            }
          }
          return c10::IValue(std::move(list));
        }
        case TypeKind::NumberType: {
          c10::impl::GenericList list(c10::NumberType::get());
          for (int64_t i = 0; i < size; ++i) list.push_back(scalar_arg(items[i], *element, item_what(i), label));
          return c10::IValue(std::move(list));
        }
        default:
          break;
      }
      fail(OPC_NOT_IMPLEMENTED, what + ": the adapter cannot pass a " + type->str());
    }
    default:
      fail(OPC_NOT_IMPLEMENTED, what + ": the adapter cannot pass a " + type->str());
  }
}

// The host's arguments as the op's stack, by the entry's schema.
torch::jit::Stack make_stack(const OpEntry& entry, const OpcValue* args, int64_t num_args, CallState& call) {
  const auto& arguments = entry.handle.schema().arguments();
  if (num_args != static_cast<int64_t>(arguments.size())) {
    fail(OPC_NOT_IMPLEMENTED, "the host passed " + std::to_string(num_args) + " arguments but " + entry.label + "'s schema has " +
                                  std::to_string(arguments.size()) + " (" + entry.schema_string +
                                  "): the host's schema differs from " + entry.label + "'s");
  }
  torch::jit::Stack stack;
  stack.reserve(arguments.size());
  for (size_t i = 0; i < arguments.size(); ++i) {
    const c10::Argument& a = arguments[i];
    call.arg = static_cast<int64_t>(i);
    stack.push_back(to_ivalue(args[i], a.type(), a.N(), "argument '" + a.name() + "'", call));
  }
  return stack;
}

// ---------------------------------------------------------------- returns

char* host_alloc(const CallState& call, size_t bytes) {
  void* p = call.ctx->alloc(call.ctx->host, bytes);
  if (p == nullptr) fail(OPC_OUT_OF_MEMORY, "the host's alloc failed");
  return static_cast<char*>(p);
}

// The argument a returned tensor shares its StorageImpl with (a view of it, or the argument
// itself): -1 when none. Every imported tensor has its own StorageImpl, so this names exactly one.
int64_t aliased_argument(const at::Tensor& t, const CallState& call) {
  if (!t.has_storage()) return -1;
  const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  for (const Input& input : call.inputs)
    if (input.storage == storage) return input.arg;
  return -1;
}

// A returned tensor: the argument's own pointer for a return that is an argument (in-place / out=),
// else an export; alias names the argument it is (a view of), in real and fake calls alike.
void tensor_out(at::Tensor t, OpcValue& out, const CallState& call) {
  out.tag = OPC_TAG_TENSOR;
  for (const Input& input : call.inputs) {
    if (input.impl == t.unsafeGetTensorImpl()) {
      out.u.tensor = input.managed;
      out.alias = OPC_ALIAS_OF(input.arg);
      return;
    }
  }
  // Lazy conjugate/negative bits are resolved into new memory (no longer a view) before asking;
  // an efficient zero tensor (ATen's derivative of a constant) has no memory and is made real.
  if (t.is_conj() || t.is_neg()) t = t.resolve_conj().resolve_neg();
  if (t._is_zerotensor()) t = at::zeros(t.sizes(), t.options());
  const int64_t arg = aliased_argument(t, call);
  if (arg >= 0) out.alias = OPC_ALIAS_OF(arg);
  if (!call.fake) {
    out.u.tensor = export_tensor(t);
    return;
  }
  if (!t.is_meta()) fail(OPC_ERROR, "ATen's meta kernel returned a tensor on " + t.device().str());
  out.u.tensor = export_meta(t);
}

// One return value. On failure, what was already written is released by free_returns.
void from_ivalue(const c10::IValue& iv, OpcValue& out, const CallState& call) {
  out = OpcValue{};
  if (iv.isNone()) {
    out.tag = OPC_TAG_NONE;
  } else if (iv.isTensor()) {
    const at::Tensor& t = iv.toTensor();
    if (!t.defined()) {
      out.tag = OPC_TAG_NONE;
      return;
    }
    tensor_out(t, out, call);
  } else if (iv.isInt()) {
    out.tag = OPC_TAG_INT;
    out.u.i = iv.toInt();
  } else if (iv.isSymInt()) {
    out.tag = OPC_TAG_INT;
    out.u.i = iv.toSymInt().expect_int();
  } else if (iv.isDouble()) {
    out.tag = OPC_TAG_DOUBLE;
    out.u.d = iv.toDouble();
  } else if (iv.isBool()) {
    out.tag = OPC_TAG_BOOL;
    out.u.b = iv.toBool() ? 1 : 0;
  } else if (iv.isComplexDouble()) {
    const c10::complex<double> c = iv.toComplexDouble();
    out.tag = OPC_TAG_COMPLEX;
    out.u.c.re = c.real();
    out.u.c.im = c.imag();
  } else if (iv.isString()) {
    const std::string& s = iv.toStringRef();
    char* data = host_alloc(call, s.size() + 1);
    std::memcpy(data, s.data(), s.size());
    out.tag = OPC_TAG_STRING;
    out.u.s.data = data;
    out.u.s.size = static_cast<int64_t>(s.size());
  } else if (iv.isList()) {
    const c10::List<c10::IValue> list = iv.toList();
    auto* items = reinterpret_cast<OpcValue*>(host_alloc(call, sizeof(OpcValue) * std::max<size_t>(list.size(), 1)));
    for (size_t i = 0; i < list.size(); ++i) items[i] = OpcValue{};
    out.tag = OPC_TAG_LIST;
    out.u.list.items = items;
    out.u.list.size = static_cast<int64_t>(list.size());
    for (size_t i = 0; i < list.size(); ++i) from_ivalue(list.get(i), items[i], call);
  } else {
    fail(OPC_NOT_IMPLEMENTED, "ATen returned a " + iv.tagKind() + ", which the adapter cannot pass back");
  }
}

// Releases the tensors of returns written before a failure (not the arguments returned as such).
void free_value(OpcValue& v, const CallState& call) {
  if (v.tag == OPC_TAG_TENSOR && v.u.tensor != nullptr) {
    bool is_argument = false;
    for (const Input& input : call.inputs) is_argument = is_argument || input.managed == v.u.tensor;
    if (!is_argument && v.u.tensor->deleter != nullptr) v.u.tensor->deleter(v.u.tensor);
  } else if (v.tag == OPC_TAG_LIST) {
    for (int64_t i = 0; i < v.u.list.size; ++i) free_value(v.u.list.items[i], call);
  }
  v = OpcValue{};
}

void write_returns(const torch::jit::Stack& stack, OpcValue* returns, int64_t num_returns, const CallState& call,
                   const OpEntry& entry) {
  if (static_cast<int64_t>(stack.size()) != num_returns) {
    fail(OPC_NOT_IMPLEMENTED, entry.label + "'s op returned " + std::to_string(stack.size()) + " values but the host expects " +
                                  std::to_string(num_returns) + " (" + entry.schema_string +
                                  "): the host's schema differs from " + entry.label + "'s");
  }
  for (int64_t i = 0; i < num_returns; ++i) returns[i] = OpcValue{};
  try {
    for (int64_t i = 0; i < num_returns; ++i) from_ivalue(stack[static_cast<size_t>(i)], returns[i], call);
  } catch (...) {
    for (int64_t i = 0; i < num_returns; ++i) free_value(returns[i], call);
    throw;
  }
}

// ---------------------------------------------------------------- random ops

// Note [Seeded random ops]: a random op (nondeterministic_seeded) draws from ATen's default
// generators, which the bridge seeds before each real call from the call's seed and offset (ABI 2:
// ctx->seed, ctx->offset), so one seed gives the same values. The two are folded into one 64-bit
// seed (splitmix64), given to the CPU generator and, for a call on a CUDA device, to that device's
// generator with set_current_seed (in 1.13 and 2.x, which also starts CUDA's Philox offset at 0:
// no 2.x-only set_offset, and no need for an offset that is a multiple of 4). A host whose call
// context has no seed gets a fresh nondeterministic one.
//
// The backward operators re-run the op under autograd, and that re-run must draw what the forward
// call drew (native_dropout's mask): the forward call records its seed keyed by the address of its
// first returned tensor's data; the backward, which receives the forward's returns, finds it and
// seeds again. Only the most recent calls are kept. (A random op running on another thread between
// the seeding and the draw would change the draw: one random call at a time, as in opconform's
// workers.)
struct SeedRecord {
  const void* key;
  uint64_t seed;
};

std::mutex& seed_mutex() {
  static std::mutex m;
  return m;
}
std::deque<SeedRecord>& seed_records() {
  static std::deque<SeedRecord> records;
  return records;
}
constexpr size_t kMaxSeedRecords = 4096;

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t call_seed(const OpcCallContext* ctx) {
  if (OPC_HAS_FIELD(ctx, OpcCallContext, offset)) return splitmix64(ctx->seed ^ splitmix64(ctx->offset));
  return c10::detail::getNonDeterministicRandom();
}

// The CUDA device of a call: its first CUDA tensor's or CUDA device argument's.
c10::optional<c10::Device> cuda_device_of(const torch::jit::Stack& stack) {
  auto cuda = [](const c10::IValue& iv) -> c10::optional<c10::Device> {
    if (iv.isTensor() && iv.toTensor().defined() && iv.toTensor().is_cuda()) return iv.toTensor().device();
    if (iv.isDevice() && iv.toDevice().is_cuda()) return iv.toDevice();
    return c10::nullopt;
  };
  for (const c10::IValue& iv : stack) {
    if (auto device = cuda(iv)) return device;
    if (!iv.isList()) continue;
    const c10::List<c10::IValue> list = iv.toList();
    for (size_t k = 0; k < list.size(); ++k)
      if (auto device = cuda(list.get(k))) return device;
  }
  return c10::nullopt;
}

void seed_generator(at::Generator gen, uint64_t seed) {
  std::lock_guard<std::mutex> lock(gen.mutex());  // ATen's Note [Acquire lock when using random generators]
  gen.set_current_seed(seed);
}

// Seeds the CPU generator, and the call's CUDA device's when it has one (a CUDA libtorch).
void seed_generators(uint64_t seed, const torch::jit::Stack& stack) {
  seed_generator(at::detail::getDefaultCPUGenerator(), seed);
  if (!at::hasCUDA()) return;
  if (const c10::optional<c10::Device> device = cuda_device_of(stack))
    seed_generator(at::globalContext().defaultGenerator(*device), seed);
}

const void* data_key(const OpcValue& v) {
  if (v.tag != OPC_TAG_TENSOR || v.u.tensor == nullptr || v.u.tensor->dl_tensor.data == nullptr) return nullptr;
  return static_cast<const char*>(v.u.tensor->dl_tensor.data) + v.u.tensor->dl_tensor.byte_offset;
}

void record_seed(const OpcValue* returns, int64_t num_returns, uint64_t seed) {
  for (int64_t i = 0; i < num_returns; ++i) {
    if (const void* key = data_key(returns[i])) {
      std::lock_guard<std::mutex> lock(seed_mutex());
      auto& records = seed_records();
      records.push_back({key, seed});
      if (records.size() > kMaxSeedRecords) records.pop_front();
      return;
    }
  }
}

// The seed recorded for the forward call whose returns these are; nullopt when the returns hold
// no data (empty: nothing drawn matters). Fails when none was recorded.
std::optional<uint64_t> find_seed(const OpcValue* returns, int64_t num_returns) {
  std::lock_guard<std::mutex> lock(seed_mutex());
  const auto& records = seed_records();
  for (int64_t i = 0; i < num_returns; ++i) {
    if (const void* key = data_key(returns[i])) {
      for (auto it = records.rbegin(); it != records.rend(); ++it)
        if (it->key == key) return it->seed;
      fail(OPC_NOT_IMPLEMENTED, "the backward of a random op needs the seed of its forward call, and none was "
                                "recorded for these returns (was the forward run by this plugin?)");
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- the kernels

// OPC_KERNEL_CPU/CUDA and OPC_KERNEL_FAKE: the op through the dispatcher.
OpcStatus call_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, void* user_data, bool fake) {
  const OpEntry* entry = static_cast<const OpEntry*>(user_data);
  return guarded(ctx, entry, [&] {
    CallState call{ctx, *entry, fake, {}};
    torch::jit::Stack stack = make_stack(*entry, args, num_args, call);
    const bool seeded = entry->seeded && !fake;
    const uint64_t seed = seeded ? call_seed(ctx) : 0;
    if (seeded) seed_generators(seed, stack);
    {
      // Note [The forward call skips autograd]: the host runs its own autograd (or calls the
      // plugin's backward operator, which re-runs the op with grad), so the forward call needs no
      // graph and no version counters. InferenceMode takes the Autograd and ADInplaceOrView layers
      // out of ATen's dispatch (NoGradGuard still ran them): measured on the ATen check, ATen's
      // dispatcher was 9% of all CPU, a quarter of the time inside the plugin's calls.
      c10::InferenceMode no_autograd;
      entry->handle.callBoxed(stack);
    }
    write_returns(stack, returns, num_returns, call, *entry);
    if (seeded) record_seed(returns, num_returns, seed);
  });
}

// ---------------------------------------------------------------- backward operators

bool differentiable(at::ScalarType t) { return at::isFloatingType(t) || at::isComplexType(t); }

// The backward's leaves: every floating/complex tensor argument (and Tensor[] item) of the stack,
// detached and requiring grad (arguments the op writes are cloned after, so the re-run never
// writes the host's memory). leaf_of: per argument, its leaf indices (-1: not a leaf).
struct Leaves {
  std::vector<at::Tensor> tensors;
  std::vector<std::vector<int64_t>> leaf_of;
};

Leaves make_leaves(const c10::FunctionSchema& schema, torch::jit::Stack& stack, int64_t n) {
  Leaves leaves;
  leaves.leaf_of.resize(static_cast<size_t>(n));
  auto make_leaf = [&](at::Tensor& t, bool written, std::vector<int64_t>& slots) {
    if (!t.defined() || !differentiable(t.scalar_type())) {
      slots.push_back(-1);
      return;
    }
    t = t.detach().requires_grad_(true);
    leaves.tensors.push_back(t);
    slots.push_back(static_cast<int64_t>(leaves.tensors.size()) - 1);
    if (written) t = t.clone();  // the re-run must not write the host's memory
  };
  for (int64_t i = 0; i < n; ++i) {
    const c10::Argument& a = schema.arguments()[static_cast<size_t>(i)];
    const bool written = a.alias_info() != nullptr && a.alias_info()->isWrite();
    c10::IValue& iv = stack[static_cast<size_t>(i)];
    if (iv.isTensor()) {
      at::Tensor t = iv.toTensor();
      make_leaf(t, written, leaves.leaf_of[static_cast<size_t>(i)]);
      iv = c10::IValue(t);
    } else if (iv.isTensorList()) {
      c10::List<at::Tensor> list = iv.toTensorList();
      for (size_t k = 0; k < list.size(); ++k) {
        at::Tensor t = list.get(k);
        make_leaf(t, written, leaves.leaf_of[static_cast<size_t>(i)]);
        list.set(k, t);
      }
      iv = c10::IValue(list);
    }
  }
  return leaves;
}

// The op re-run under autograd; a random op draws again what its forward call drew (Note [Seeded
// random ops]; a fake call draws nothing).
void rerun_with_grad(const OpEntry& entry, torch::jit::Stack& stack, const OpcValue* forward_returns, int64_t r,
                     bool fake) {
  if (entry.seeded && !fake) {
    if (const std::optional<uint64_t> seed = find_seed(forward_returns, r)) seed_generators(*seed, stack);
  }
  at::AutoGradMode enable(true);
  entry.handle.callBoxed(stack);
}

// Whether every element is zero (-0.0 counts, NaN does not: as `!t.ne(0).any()`). A CPU tensor of
// a (non-float8) floating or complex dtype is read in place: the three ATen calls (ne, any, item) for every
// gradient of every backward call were a tenth of gradcheck's time on the ATen 1.13 check.
bool all_zero(const at::Tensor& t) {
  const at::ScalarType st = t.scalar_type();
  const bool readable = st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16 ||
                        st == at::kComplexFloat || st == at::kComplexDouble;
  if (t.device().type() != c10::DeviceType::CPU || !readable) return !t.ne(0).any().item<bool>();
  const at::Tensor c = t.contiguous();
  bool zero = true;
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(at::kHalf, at::kBFloat16, st, "all_zero", [&] {
    const scalar_t* p = c.data_ptr<scalar_t>();
    for (int64_t i = 0, n = c.numel(); i < n && zero; ++i) zero = p[i] == scalar_t(0);
  });
  return zero;
}

// A return that gets a gradient argument in the backward op's schema: Tensor, Tensor?, Tensor[], Tensor?[].
bool has_gradient(const c10::TypePtr& t) {
  if (holds_tensor(t)) return true;
  if (t->kind() != c10::TypeKind::ListType) return false;
  const c10::TypePtr& element = t->castRaw<c10::ListType>()->getElementType();
  return element->kind() == c10::TypeKind::OptionalType &&
         element->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
}

// The forward schema's counts: arguments, returns, gradients (returns with has_gradient).
struct Layout {
  int64_t n = 0, r = 0, g = 0;
};

Layout layout_of(const c10::FunctionSchema& schema) {
  Layout l;
  l.n = static_cast<int64_t>(schema.arguments().size());
  l.r = static_cast<int64_t>(schema.returns().size());
  for (const auto& ret : schema.returns()) l.g += has_gradient(ret.type()) ? 1 : 0;
  return l;
}

// Differentiable outputs of the re-run paired with their incoming gradients. slot_of: per gradient
// argument, which pair each of its values became (-1: none; a list gradient has one per item).
struct Incoming {
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> grads;
  std::vector<std::vector<int64_t>> slot_of;
};

// The gradients arrive one per return with has_gradient, from argument `first_arg` on (a Tensor[]
// return's as one list). With `as_leaves` (the second derivative) they become leaves requiring
// grad, and an all-zero one is kept: the derivative with respect to it is not zero.
Incoming pair_outputs(const c10::FunctionSchema& schema, const torch::jit::Stack& outs, const OpcValue* grads,
                      int64_t first_arg, CallState& call, bool as_leaves) {
  const auto& returns = schema.returns();
  if (outs.size() != returns.size()) fail(OPC_ERROR, "the re-run of the op returned another number of values");
  Incoming in;
  auto pair = [&](const at::Tensor& out, const OpcValue& g, const std::string& what, std::vector<int64_t>& slots) {
    slots.push_back(-1);
    if (g.tag == OPC_TAG_NONE || !out.defined() || !out.requires_grad()) return;
    at::Tensor grad = tensor_arg(g, *c10::TensorType::get(), what, call);
    // A gradient that is all zeros is left out, as PyTorch's engine leaves out the gradients of
    // outputs that do not reach the loss (undefined, not zeros): some formulas take another path
    // when such a gradient is defined (native_group_norm's double-backward form), with the same
    // value when it is zero. A fake call has no values to look at.
    if (!as_leaves && !call.fake && grad.numel() > 0 && all_zero(grad)) return;
    if (as_leaves) grad = grad.detach().requires_grad_(true);
    slots.back() = static_cast<int64_t>(in.grads.size());
    in.outputs.push_back(out);
    in.grads.push_back(grad);
  };
  int64_t k = 0;
  for (size_t j = 0; j < returns.size(); ++j) {
    if (!has_gradient(returns[j].type())) continue;
    call.arg = first_arg + k;
    const OpcValue& g = grads[k++];
    const std::string what = "argument " + std::to_string(call.arg) + " (the gradient of return " + std::to_string(j) + ")";
    std::vector<int64_t>& slots = in.slot_of.emplace_back();
    const c10::IValue& out = outs[j];
    if (!out.isList()) {
      pair(out.isTensor() ? out.toTensor() : at::Tensor(), g, what, slots);
      continue;
    }
    if (g.tag == OPC_TAG_NONE) continue;
    if (g.tag != OPC_TAG_LIST || (g.u.list.size > 0 && g.u.list.items == nullptr))
      type_mismatch(what, *returns[j].type(), g, call.entry.label);
    const c10::List<c10::IValue> list = out.toList();
    for (int64_t i = 0; i < g.u.list.size; ++i) {
      const c10::IValue item = static_cast<size_t>(i) < list.size() ? list.get(static_cast<size_t>(i)) : c10::IValue();
      pair(item.isTensor() ? item.toTensor() : at::Tensor(), g.u.list.items[i], what + "[" + std::to_string(i) + "]",
           slots);
    }
  }
  return in;
}

// One returned gradient from its slots (indices into `grads`, -1: none): a tensor or None, or for
// a list argument a list of them (None when it has no slots).
c10::IValue gradient_value(const std::vector<int64_t>& slots, bool list, const std::vector<at::Tensor>& grads) {
  auto grad = [&](int64_t s) {
    return s < 0 || !grads[static_cast<size_t>(s)].defined() ? c10::optional<at::Tensor>()
                                                              : c10::optional<at::Tensor>(grads[static_cast<size_t>(s)]);
  };
  if (slots.empty()) return c10::IValue();
  if (!list) {
    const c10::optional<at::Tensor> g = grad(slots[0]);
    return g ? c10::IValue(*g) : c10::IValue();
  }
  c10::List<c10::optional<at::Tensor>> items;
  for (int64_t s : slots) items.push_back(grad(s));
  return c10::IValue(std::move(items));
}

bool is_list(const c10::TypePtr& t) { return t->kind() == c10::TypeKind::ListType; }

// One gradient (or None) per schema argument; a Tensor[] argument gets a list.
torch::jit::Stack gradient_stack(const c10::FunctionSchema& schema, const Leaves& leaves,
                                 const std::vector<at::Tensor>& leaf_grads, int64_t n) {
  torch::jit::Stack result;
  for (int64_t i = 0; i < n; ++i) {
    result.push_back(gradient_value(leaves.leaf_of[static_cast<size_t>(i)],
                                    is_list(schema.arguments()[static_cast<size_t>(i)].type()), leaf_grads));
  }
  return result;
}

// A gradient sharing memory with an argument of the call (add's gradient IS its incoming gradient)
// is copied: a backward operator's schema has no alias annotations.
void unalias(torch::jit::Stack& result, const CallState& call) {
  auto owned = [&](const at::Tensor& t) { return t.defined() && aliased_argument(t, call) >= 0 ? t.clone() : t; };
  for (c10::IValue& iv : result) {
    if (iv.isTensor()) {
      iv = c10::IValue(owned(iv.toTensor()));
    } else if (iv.isList()) {
      c10::List<c10::IValue> list = iv.toList();  // shares the list's items
      for (size_t k = 0; k < list.size(); ++k)
        if (list.get(k).isTensor()) list.set(k, c10::IValue(owned(list.get(k).toTensor())));
    }
  }
}

// torch::autograd::grad, allow_unused, keeping the graph when making one. (A derivative ATen 1.13
// does not have and a failing formula both surface from its engine as std::runtime_error: no type
// tells them apart, so both stay errors.)
std::vector<at::Tensor> autograd_grad(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                                      const std::vector<at::Tensor>& grads, bool create_graph) {
  return torch::autograd::grad(outputs, inputs, grads, /*retain_graph=*/create_graph, create_graph,
                               /*allow_unused=*/true);
}

void expect_counts(const OpEntry& entry, int64_t num_args, int64_t want_args, int64_t num_returns,
                   int64_t want_returns) {
  if (num_args == want_args && num_returns == want_returns) return;
  fail(OPC_NOT_IMPLEMENTED, "the host passed " + std::to_string(num_args) + " arguments for " +
                                std::to_string(num_returns) + " returns, but " + entry.name + " of " + entry.label +
                                "'s schema (" + entry.schema_string + ") takes " + std::to_string(want_args) +
                                " for " + std::to_string(want_returns) + ": the host derived another schema");
}

// "<ns>_backward::<op>": [the op's arguments, its returns, one gradient per return with
// has_gradient] -> one gradient (or None) per op argument. The op is re-run under autograd on
// leaves over the host's memory and torch::autograd::grad gives the gradients.
void first_derivative(const OpEntry& entry, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, CallState& call) {
  const c10::FunctionSchema& schema = entry.handle.schema();
  const Layout l = layout_of(schema);
  expect_counts(entry, num_args, l.n + l.r + l.g, num_returns, l.n);
  torch::jit::Stack stack = make_stack(entry, args, l.n, call);
  const Leaves leaves = make_leaves(schema, stack, l.n);
  std::vector<at::Tensor> leaf_grads(leaves.tensors.size());
  if (!leaves.tensors.empty()) {
    rerun_with_grad(entry, stack, args + l.n, l.r, call.fake);
    const Incoming in = pair_outputs(schema, stack, args + l.n + l.r, l.n + l.r, call, /*as_leaves=*/false);
    if (!in.outputs.empty()) leaf_grads = autograd_grad(in.outputs, leaves.tensors, in.grads, /*create_graph=*/false);
  }
  torch::jit::Stack result = gradient_stack(schema, leaves, leaf_grads, l.n);
  unalias(result, call);
  write_returns(result, returns, num_returns, call, entry);
}

// The first derivatives (per op argument, `first` indexed by leaf) that depend on a leaf, paired
// with their incoming gradients `gg` (one per op argument, a list for a list argument).
Incoming pair_first_derivatives(const Leaves& leaves, const std::vector<at::Tensor>& first, const OpcValue* gg,
                                int64_t first_arg, CallState& call) {
  Incoming pairs;
  for (size_t i = 0; i < leaves.leaf_of.size(); ++i) {
    const std::vector<int64_t>& slots = leaves.leaf_of[i];
    const OpcValue& g = gg[i];
    if (slots.empty() || g.tag == OPC_TAG_NONE) continue;
    call.arg = first_arg + static_cast<int64_t>(i);
    const std::string what = "argument " + std::to_string(call.arg);
    const bool list = g.tag == OPC_TAG_LIST;
    if (list && g.u.list.size > 0 && g.u.list.items == nullptr) fail(OPC_INVALID_ARGUMENT, what + " is a list without items");
    for (size_t k = 0; k < slots.size(); ++k) {
      const OpcValue* item = list ? (static_cast<int64_t>(k) < g.u.list.size ? &g.u.list.items[k] : nullptr)
                                  : (k == 0 ? &g : nullptr);
      if (slots[k] < 0 || item == nullptr || item->tag == OPC_TAG_NONE) continue;
      const at::Tensor& f = first[static_cast<size_t>(slots[k])];
      if (!f.defined() || !f.requires_grad()) continue;  // constant in every leaf
      pairs.outputs.push_back(f);
      pairs.grads.push_back(tensor_arg(*item, *c10::TensorType::get(), what, call));
    }
  }
  return pairs;
}

// "<ns>_backward2::<op>", the backward operator's backward: [the backward op's arguments (the op's
// arguments, its returns, their gradients), its returns (one gradient per op argument), one
// gradient for each of those] -> one value per backward-op argument. The op is re-run under
// autograd with leaves for its arguments and for the incoming gradients, the first derivative is
// taken with a graph and differentiated again. The op's returns get None: the re-run recomputes
// them from the arguments, so their part of the total derivative flows through the arguments'.
// This op has no backward of its own: a third derivative is not offered.
void second_derivative(const OpEntry& entry, const OpcValue* args, int64_t num_args, OpcValue* returns,
                       int64_t num_returns, CallState& call) {
  const c10::FunctionSchema& schema = entry.handle.schema();
  const Layout l = layout_of(schema);
  const int64_t m = l.n + l.r + l.g;  // the backward op's arguments
  expect_counts(entry, num_args, m + 2 * l.n, num_returns, m);
  torch::jit::Stack stack = make_stack(entry, args, l.n, call);
  const Leaves leaves = make_leaves(schema, stack, l.n);
  torch::jit::Stack result;
  if (leaves.tensors.empty()) {
    result.resize(static_cast<size_t>(m));
    write_returns(result, returns, num_returns, call, entry);
    return;
  }
  rerun_with_grad(entry, stack, args + l.n, l.r, call.fake);
  const Incoming in = pair_outputs(schema, stack, args + l.n + l.r, l.n + l.r, call, /*as_leaves=*/true);
  std::vector<at::Tensor> first(leaves.tensors.size());
  if (!in.outputs.empty()) first = autograd_grad(in.outputs, leaves.tensors, in.grads, /*create_graph=*/true);
  const Incoming twice = pair_first_derivatives(leaves, first, args + m + l.n, m + l.n, call);
  std::vector<at::Tensor> inputs = leaves.tensors;
  inputs.insert(inputs.end(), in.grads.begin(), in.grads.end());
  std::vector<at::Tensor> second(inputs.size());
  if (!twice.outputs.empty()) second = autograd_grad(twice.outputs, inputs, twice.grads, /*create_graph=*/false);
  const auto split = second.begin() + static_cast<std::ptrdiff_t>(leaves.tensors.size());
  result = gradient_stack(schema, leaves, std::vector<at::Tensor>(second.begin(), split), l.n);
  result.resize(static_cast<size_t>(l.n + l.r));  // the op's returns: None
  const std::vector<at::Tensor> grad_grads(split, second.end());
  size_t k = 0;
  for (const auto& ret : schema.returns())
    if (has_gradient(ret.type())) result.push_back(gradient_value(in.slot_of[k++], is_list(ret.type()), grad_grads));
  unalias(result, call);
  write_returns(result, returns, num_returns, call, entry);
}

// The backward operators' kernels (user_data: the entry of order 1 or 2). A fake call runs ATen's
// autograd on meta tensors; where ATen cannot (a formula that reads values, a derivative without a
// meta kernel), the backward is reported unsupported and the host says it is not captured.
OpcStatus derivative_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data, bool fake) {
  const OpEntry* entry = static_cast<const OpEntry*>(user_data);
  return guarded(ctx, entry, [&] {
    CallState call{ctx, *entry, fake, {}};
    at::AutoGradMode enable(true);
    try {
      if (entry->derivative == 2) {
        second_derivative(*entry, args, num_args, returns, num_returns, call);
      } else {
        first_derivative(*entry, args, num_args, returns, num_returns, call);
      }
    } catch (const c10::Error& e) {
      if (!fake) throw;
      fail(OPC_NOT_IMPLEMENTED, entry->label + "'s autograd cannot run this backward on meta tensors: " +
                                    first_line(e.what_without_backtrace()));
    }
  });
}

OpcStatus derivative_call_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  return derivative_kernel(ctx, args, num_args, returns, num_returns, user_data, /*fake=*/false);
}

OpcStatus derivative_fake_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  return derivative_kernel(ctx, args, num_args, returns, num_returns, user_data, /*fake=*/true);
}

}  // namespace

OpcStatus call_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                     int64_t num_returns, void* user_data) {
  return call_kernel(ctx, args, num_args, returns, num_returns, user_data, /*fake=*/false);
}

OpcStatus fake_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, void* user_data) {
  return call_kernel(ctx, args, num_args, returns, num_returns, user_data, /*fake=*/true);
}

// ---------------------------------------------------------------- registration

std::string backward_op_name(const std::string& op, int order) {
  const char* suffix = order == 1 ? "_backward" : "_backward2";
  const size_t sep = op.find("::");
  if (sep == std::string::npos) return op + suffix;
  return op.substr(0, sep) + suffix + op.substr(sep);
}

// Order 1 is the op's backward, order 2 the backward's; order 2 gets no backward (no third order).
OpcStatus register_backward_ops(const OpcRegistrar* r, const OpEntry& forward, bool cuda, bool fake) {
  if (!OPC_HAS_FIELD(r, OpcRegistrar, declare_backward_op) || r->declare_backward_op == nullptr) return OPC_OK;
  std::string of = forward.name;
  for (int order = 1; order <= 2; ++order) {
    const std::string name = backward_op_name(forward.name, order);
    OpEntry& entry = entries().try_emplace(name, forward).first->second;
    entry.name = name;
    entry.derivative = order;
    OpcStatus status = r->declare_backward_op(r->host, of.c_str(), name.c_str());
    if (status == OPC_OK) status = r->impl(r->host, name.c_str(), OPC_KERNEL_CPU, &derivative_call_kernel, &entry);
    if (status == OPC_OK && cuda) status = r->impl(r->host, name.c_str(), OPC_KERNEL_CUDA, &derivative_call_kernel, &entry);
    if (status == OPC_OK && fake) status = r->impl(r->host, name.c_str(), OPC_KERNEL_FAKE, &derivative_fake_kernel, &entry);
    if (status != OPC_OK) return status;
    of = name;
  }
  return OPC_OK;
}

bool holds_tensor(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::TensorType) return true;
  if (t->kind() == c10::TypeKind::OptionalType)
    return t->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  if (t->kind() == c10::TypeKind::ListType)
    return t->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
  return false;
}

bool has_tensor_argument(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments())
    if (holds_tensor(a.type())) return true;
  return false;
}

bool has_tensor_return(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.returns()) {
    const c10::TypePtr& t = a.type();
    if (t->kind() == c10::TypeKind::TensorType) return true;
    if (t->kind() == c10::TypeKind::ListType &&
        t->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType)
      return true;
  }
  return false;
}

// Ops whose meta call works: a meta kernel, or a composite kernel in the computed table.
bool has_meta_kernel(const c10::OperatorHandle& handle) {
  return handle.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta);
}

std::string qualified_name(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace opconform::torch_bridge
