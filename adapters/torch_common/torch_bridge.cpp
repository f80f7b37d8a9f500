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
//     own pointer;
//   - fake calls: arguments become meta tensors of the same sizes, strides, storage offset and
//     dtype; returns are data-less descriptors (data NULL) of the meta result's sizes, strides and
//     storage offset (as byte_offset).
//
// The backward formula re-runs the op under autograd on leaves over the host's memory (arguments
// the op writes are cloned first, so the host's memory is never written) and asks
// torch::autograd::grad for the gradients. Returns whose incoming gradient is all zeros are left
// out, as PyTorch's engine leaves out outputs that do not reach the loss. A random op
// (nondeterministic_seeded: native_dropout) replays its forward call's draw: the forward records
// the CPU generator's state, keyed by its returned data.
#include "torch_bridge.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
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

// The at::Tensor over a host tensor's memory (or, in a fake call, a meta tensor of its metadata).
at::Tensor import_tensor(const OpcDLManagedTensorVersioned* managed, bool fake, const std::string& what) {
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
  const std::vector<int64_t> sizes(t.shape, t.shape + t.ndim);
  std::vector<int64_t> strides;
  if (t.strides != nullptr) {
    strides.assign(t.strides, t.strides + t.ndim);
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
  const int64_t byte_offset = static_cast<int64_t>(t.byte_offset);
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

// The tensors of one call's arguments: to recognise a return that is an argument.
struct CallState {
  const OpcCallContext* ctx;
  const OpEntry& entry;
  bool fake;
  std::vector<std::pair<const c10::TensorImpl*, OpcDLManagedTensorVersioned*>> inputs;
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
  at::Tensor t = import_tensor(v.u.tensor, call.fake, what);
  call.inputs.emplace_back(t.unsafeGetTensorImpl(), v.u.tensor);
  return t;
}

int64_t int_arg(const OpcValue& v, const c10::Type& type, const std::string& what, const std::string& label) {
  if (v.tag == OPC_TAG_INT) return v.u.i;
  if (v.tag == OPC_TAG_BOOL) return v.u.b != 0;
  type_mismatch(what, type, v, label);
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
    case TypeKind::MemoryFormatType: return c10::IValue(int_arg(v, *type, what, label));
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
          for (int64_t i = 0; i < size; ++i) list.push_back(int_arg(items[i], *element, item_what(i), label));
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

OpcDLManagedTensorVersioned* tensor_out(const at::Tensor& t, const CallState& call) {
  for (const auto& [impl, managed] : call.inputs) {
    if (impl == t.unsafeGetTensorImpl()) return managed;  // in-place / out=: the argument itself
  }
  if (!call.fake) return export_tensor(t);
  if (!t.is_meta()) fail(OPC_ERROR, "ATen's meta kernel returned a tensor on " + t.device().str());
  return export_meta(t);
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
    out.u.tensor = tensor_out(t, call);
    out.tag = OPC_TAG_TENSOR;
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
    for (const auto& input : call.inputs) is_argument = is_argument || input.second == v.u.tensor;
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

// The backward formula re-runs the op under autograd; for an op that draws random numbers
// (native_dropout) the re-run must draw what the forward call drew. The forward call of such an
// op records the CPU generator's state from before the call, keyed by the address of its first
// returned tensor's data; the backward, which receives the forward's returns, finds it and replays
// the draw. Only the most recent calls are kept. (A random op running on another thread while
// the state is swapped in would draw from it: the replay assumes one random call at a time.)
struct SeedRecord {
  const void* key;
  at::Tensor state;
};

std::mutex& seed_mutex() {
  static std::mutex m;
  return m;
}
std::deque<SeedRecord>& seed_records() {
  static std::deque<SeedRecord> records;
  return records;
}
constexpr size_t kMaxSeedRecords = 2048;  // about 5 KB each

at::Tensor generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

const void* data_key(const OpcValue& v) {
  if (v.tag != OPC_TAG_TENSOR || v.u.tensor == nullptr || v.u.tensor->dl_tensor.data == nullptr) return nullptr;
  return static_cast<const char*>(v.u.tensor->dl_tensor.data) + v.u.tensor->dl_tensor.byte_offset;
}

void record_seed(const OpcValue* returns, int64_t num_returns, const at::Tensor& state) {
  for (int64_t i = 0; i < num_returns; ++i) {
    if (const void* key = data_key(returns[i])) {
      std::lock_guard<std::mutex> lock(seed_mutex());
      auto& records = seed_records();
      records.push_back({key, state});
      if (records.size() > kMaxSeedRecords) records.pop_front();
      return;
    }
  }
}

// The generator state recorded for the forward call whose returns these are: nullopt when none was
// recorded; an undefined tensor when the returns hold no data (empty: nothing was drawn that matters).
std::optional<at::Tensor> find_seed(const OpcValue* returns, int64_t num_returns) {
  std::lock_guard<std::mutex> lock(seed_mutex());
  const auto& records = seed_records();
  for (int64_t i = 0; i < num_returns; ++i) {
    if (const void* key = data_key(returns[i])) {
      for (auto it = records.rbegin(); it != records.rend(); ++it)
        if (it->key == key) return it->state;
      return std::nullopt;
    }
  }
  return at::Tensor();
}

// ---------------------------------------------------------------- the kernels

// OPC_KERNEL_CPU and OPC_KERNEL_FAKE: the op through the dispatcher.
OpcStatus call_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                      int64_t num_returns, void* user_data, bool fake) {
  const OpEntry* entry = static_cast<const OpEntry*>(user_data);
  return guarded(ctx, entry, [&] {
    CallState call{ctx, *entry, fake, {}};
    torch::jit::Stack stack = make_stack(*entry, args, num_args, call);
    const at::Tensor seed = entry->seeded && !fake ? generator_state() : at::Tensor();
    {
      // Note [The forward call skips autograd]: the host runs its own autograd (or asks for the
      // plugin's backward, which re-runs the op with grad), so the forward call needs no graph
      // and no version counters. InferenceMode takes the Autograd and ADInplaceOrView layers out
      // of ATen's dispatch (NoGradGuard still ran them): measured on the ATen check, ATen's
      // dispatcher was 9% of all CPU, a quarter of the time inside the plugin's calls.
      c10::InferenceMode no_autograd;
      entry->handle.callBoxed(stack);
    }
    write_returns(stack, returns, num_returns, call, *entry);
    if (seed.defined()) record_seed(returns, num_returns, seed);
  });
}

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

// The op re-run under autograd; a random op replays its forward call's draw (see "random ops").
void rerun_with_grad(const OpEntry& entry, torch::jit::Stack& stack, const OpcValue* forward_returns, int64_t r) {
  at::Tensor replay;
  if (entry.seeded) {
    std::optional<at::Tensor> found = find_seed(forward_returns, r);
    if (!found) {
      fail(OPC_NOT_IMPLEMENTED, "the backward of a random op needs the generator state of its forward call, and none "
                                "was recorded for these returns (was the forward run by this plugin?)");
    }
    replay = *found;
  }
  at::AutoGradMode enable(true);
  if (!replay.defined()) {
    entry.handle.callBoxed(stack);
    return;
  }
  const at::Tensor current = generator_state();
  set_generator_state(replay);
  try {
    entry.handle.callBoxed(stack);
  } catch (...) {
    set_generator_state(current);
    throw;
  }
  set_generator_state(current);
}

// Each differentiable tensor output of the re-run paired with its incoming gradient.
struct OutputGrads {
  std::vector<at::Tensor> outputs;
  std::vector<at::Tensor> grads;
};

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

OutputGrads pair_outputs(const torch::jit::Stack& stack, const OpcValue* incoming, int64_t num_tensor_returns) {
  OutputGrads paired;
  // A gradient that is all zeros is left out, as PyTorch's engine leaves out the gradients of
  // outputs that do not reach the loss (undefined, not zeros): some formulas take another path
  // when such a gradient is defined (native_group_norm's double-backward form), with the same
  // value when it is zero.
  auto pair = [&](const at::Tensor& out, const OpcValue& g, const std::string& what) {
    if (g.tag == OPC_TAG_NONE || !out.defined() || !out.requires_grad()) return;
    at::Tensor grad = import_tensor(g.tag == OPC_TAG_TENSOR ? g.u.tensor : nullptr, false, what);
    if (grad.numel() > 0 && all_zero(grad)) return;
    paired.outputs.push_back(out);
    paired.grads.push_back(grad);
  };
  // The gradients come one per returned tensor, a Tensor[] return's items one by one (or, from
  // a host that keeps them together, as one list).
  int64_t next_grad = 0;
  for (size_t k = 0; k < stack.size() && next_grad < num_tensor_returns; ++k) {
    const c10::IValue& out = stack[k];
    if (out.isTensor()) {
      pair(out.toTensor(), incoming[next_grad], "gradient " + std::to_string(next_grad));
      ++next_grad;
    } else if (out.isTensorList()) {
      const c10::List<at::Tensor> list = out.toTensorList();
      if (incoming[next_grad].tag == OPC_TAG_LIST) {
        const OpcValue& g = incoming[next_grad];
        for (size_t j = 0; j < list.size() && static_cast<int64_t>(j) < g.u.list.size; ++j) {
          pair(list.get(j), g.u.list.items[j], "gradient " + std::to_string(next_grad) + "[" + std::to_string(j) + "]");
        }
        ++next_grad;
      } else {
        for (size_t j = 0; j < list.size() && next_grad < num_tensor_returns; ++j, ++next_grad) {
          pair(list.get(j), incoming[next_grad], "gradient " + std::to_string(next_grad));
        }
      }
    }
  }
  return paired;
}

// One gradient (or None) per schema argument; a Tensor[] argument gets a list.
torch::jit::Stack gradient_stack(const c10::FunctionSchema& schema, const Leaves& leaves,
                                 const std::vector<at::Tensor>& leaf_grads, int64_t n) {
  torch::jit::Stack result;
  for (int64_t i = 0; i < n; ++i) {
    const auto& slots = leaves.leaf_of[static_cast<size_t>(i)];
    if (slots.empty()) {
      result.emplace_back();
    } else if (schema.arguments()[static_cast<size_t>(i)].type()->kind() == c10::TypeKind::ListType) {
      c10::List<c10::optional<at::Tensor>> list;
      for (int64_t s : slots) {
        list.push_back(s < 0 ? c10::optional<at::Tensor>()
                             : c10::optional<at::Tensor>(leaf_grads[static_cast<size_t>(s)]));
      }
      result.emplace_back(std::move(list));
    } else {
      const int64_t s = slots[0];
      result.emplace_back(s < 0 ? c10::IValue() : c10::IValue(leaf_grads[static_cast<size_t>(s)]));
    }
  }
  return result;
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

// OPC_KERNEL_BACKWARD: args are [the call's arguments..., its returns..., one gradient per tensor
// return]; writes one gradient (or None) per schema argument. The op is re-run under autograd on
// leaves over the host's memory (arguments the op writes are cloned first) and
// torch::autograd::grad gives the gradients.
OpcStatus backward_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* grads,
                          int64_t num_grads, void* user_data) {
  const OpEntry* entry = static_cast<const OpEntry*>(user_data);
  return guarded(ctx, entry, [&] {
    const c10::FunctionSchema& schema = entry->handle.schema();
    const int64_t n = static_cast<int64_t>(schema.arguments().size());
    const int64_t r = static_cast<int64_t>(schema.returns().size());
    if (num_grads != n) {
      fail(OPC_NOT_IMPLEMENTED, "the host expects " + std::to_string(num_grads) + " gradients but " + entry->label +
                                    "'s schema has " + std::to_string(n) + " arguments (" + entry->schema_string + ")");
    }
    const int64_t num_tensor_returns = num_args - n - r;
    if (num_tensor_returns < 0) fail(OPC_INVALID_ARGUMENT, "too few values for a backward call");
    CallState call{ctx, *entry, false, {}};
    torch::jit::Stack stack = make_stack(*entry, args, n, call);
    const Leaves leaves = make_leaves(schema, stack, n);
    if (leaves.tensors.empty()) {
      for (int64_t i = 0; i < n; ++i) grads[i] = OpcValue{};
      return;
    }
    rerun_with_grad(*entry, stack, args + n, r);
    const OutputGrads paired = pair_outputs(stack, args + n + r, num_tensor_returns);
    std::vector<at::Tensor> leaf_grads(leaves.tensors.size());
    if (!paired.outputs.empty()) {
      leaf_grads = torch::autograd::grad(paired.outputs, leaves.tensors, paired.grads, /*retain_graph=*/false,
                                         /*create_graph=*/false, /*allow_unused=*/true);
    }
    const torch::jit::Stack result = gradient_stack(schema, leaves, leaf_grads, n);
    CallState out_call{ctx, *entry, false, {}};  // gradients are never arguments
    write_returns(result, grads, num_grads, out_call, *entry);
  });
}

// ---------------------------------------------------------------- registration

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
