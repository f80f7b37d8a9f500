// DLPack import and export; the rules are documented in opconform/core/dlpack.h.
//
// Import is two steps: validate() reads the DLTensor field by field and either throws
// Error(kDLPack) or returns a Layout (where the storage starts, how big it is, the tensor's
// metadata); adopt() then wraps that memory in a Storage whose release callback runs the managed
// tensor's deleter. Nothing in validate() touches the managed tensor's ownership.
#include "opconform/core/dlpack.h"

#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "opconform/core/error.h"

namespace opconform {

namespace {

// The DLDeviceType enum of the 0.6 header has no fixed underlying type; a corrupt value outside
// its enumerators must not be loaded as the enum (undefined behaviour, flagged by UBSan), so the
// device type is read as the 32-bit integer it is.
static_assert(sizeof(DLDeviceType) == sizeof(int32_t));

#define OPC_DLPACK_CHECK(cond, ...) OPCONFORM_CHECK(cond, ErrorCode::kDLPack, "DLPack tensor: ", __VA_ARGS__)

int32_t device_type_code(const DLDevice& device) {
  int32_t code;
  std::memcpy(&code, &device.device_type, sizeof(code));
  return code;
}

const char* dtype_code_name(uint8_t code) {
  switch (code) {
    case kDLInt: return "int";
    case kDLUInt: return "uint";
    case kDLFloat: return "float";
    case kDLOpaqueHandle: return "opaque handle";
    case kDLBfloat: return "bfloat";
    case kDLComplex: return "complex";
    case kOpcDLBool: return "bool";
    default: return "unknown";
  }
}

std::string address_str(uintptr_t address) {
  std::ostringstream out;
  out << "0x" << std::hex << address;
  return out.str();
}

// Alignment of one element: alignof of the C++ type holding it.
size_t element_alignment(DType dtype) {
  return visit_dtype(dtype, [](auto tag) { return alignof(typename decltype(tag)::type); });
}

// What validate() found: everything needed to build the tensor.
struct Layout {
  void* base = nullptr;  // where the storage starts
  size_t nbytes = 0;     // storage size, up to the last byte of the last element reached
  Device device;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;  // in elements
};

// Checks every field of `t`, in the order listed in dlpack.h, and computes the storage layout.
// Throws Error(kDLPack) on the first problem; never dereferences a pointer it has not checked.
Layout validate(const DLTensor& t) {
  Layout layout;

  // Device and dtype.
  layout.device = from_dlpack_device(t.device);
  layout.dtype = from_dlpack_dtype(t.dtype);
  const int64_t item = static_cast<int64_t>(itemsize(layout.dtype));

  // Rank and shape.
  OPC_DLPACK_CHECK(t.ndim >= 0, "ndim is negative (", t.ndim, ")");
  OPC_DLPACK_CHECK(t.ndim <= kMaxDLPackDims, "ndim ", t.ndim, " exceeds the maximum of ", kMaxDLPackDims);
  const int64_t ndim = t.ndim;
  OPC_DLPACK_CHECK(ndim == 0 || t.shape != nullptr, "shape is null for a tensor of ndim ", ndim);
  layout.sizes.assign(t.shape, t.shape + ndim);
  int64_t numel = 1;        // the element count
  int64_t count_guard = 1;  // product with zeros counted as one: must fit (numel(), strides)
  for (int64_t d = 0; d < ndim; ++d) {
    const int64_t size = layout.sizes[d];
    OPC_DLPACK_CHECK(size >= 0, "dimension ", d, " has negative size ", size);
    OPC_DLPACK_CHECK(!__builtin_mul_overflow(count_guard, size == 0 ? 1 : size, &count_guard), "shape ",
                     shape_string(IntArrayRef(t.shape, static_cast<size_t>(ndim))), " has more elements than fit in int64");
    numel *= size;  // cannot overflow: |numel| <= count_guard
  }

  // Strides (in elements). Null: compact row-major.
  if (t.strides == nullptr) {
    layout.strides = contiguous_strides(layout.sizes);
  } else {
    layout.strides.assign(t.strides, t.strides + ndim);
    for (int64_t d = 0; d < ndim; ++d) {
      OPC_DLPACK_CHECK(layout.strides[d] >= 0, "dimension ", d, " has negative stride ", layout.strides[d],
                       " (negative strides are not supported)");
    }
  }

  // Extent: the offset (in elements) of the farthest element, then in bytes with byte_offset.
  // Checked for every dimension of size >= 1, even when another dimension is empty, so that no
  // later arithmetic on these sizes and strides can overflow.
  int64_t last = 0;
  for (int64_t d = 0; d < ndim; ++d) {
    if (layout.sizes[d] == 0) continue;
    int64_t reach = 0;
    OPC_DLPACK_CHECK(!__builtin_mul_overflow(layout.sizes[d] - 1, layout.strides[d], &reach) &&
                         !__builtin_add_overflow(last, reach, &last),
                     "shape ", shape_string(IntArrayRef(layout.sizes.data(), static_cast<size_t>(ndim))), " with strides ",
                     shape_string(IntArrayRef(layout.strides.data(), static_cast<size_t>(ndim))), " reaches beyond int64 elements");
  }
  int64_t extent_bytes = 0;  // bytes from the first element to the end of the last one
  OPC_DLPACK_CHECK(last < std::numeric_limits<int64_t>::max() && !__builtin_mul_overflow(last + 1, item, &extent_bytes),
                   "shape ", shape_string(IntArrayRef(layout.sizes.data(), static_cast<size_t>(ndim))), " with strides ",
                   shape_string(IntArrayRef(layout.strides.data(), static_cast<size_t>(ndim))), " spans more than int64 bytes of ", name(layout.dtype));
  if (numel == 0) extent_bytes = 0;
  OPC_DLPACK_CHECK(t.byte_offset <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "byte_offset ",
                   t.byte_offset, " does not fit in int64");
  const int64_t byte_offset = static_cast<int64_t>(t.byte_offset);
  int64_t total_bytes = 0;  // from `data` to the end of the last element
  OPC_DLPACK_CHECK(!__builtin_add_overflow(byte_offset, extent_bytes, &total_bytes), "byte_offset ", byte_offset,
                   " plus the tensor's extent of ", extent_bytes, " bytes overflows int64");

  // Data pointer and alignment.
  const uintptr_t data = reinterpret_cast<uintptr_t>(t.data);
  OPC_DLPACK_CHECK(data != 0 || numel == 0, "data is null but the tensor has ", numel, " elements");
  if (data != 0) {
    uintptr_t end = 0;
    OPC_DLPACK_CHECK(!__builtin_add_overflow(data, static_cast<uintptr_t>(total_bytes), &end), "data ",
                     address_str(data), " plus ", total_bytes, " bytes wraps around the address space");
  }
  if (numel > 0) {
    const uintptr_t first = data + static_cast<uintptr_t>(byte_offset);
    const size_t align = element_alignment(layout.dtype);
    OPC_DLPACK_CHECK(first % align == 0, "first element at ", address_str(first), " (data ", address_str(data),
                     " + byte_offset ", byte_offset, ") is not aligned to ", align, " bytes as ", name(layout.dtype),
                     " requires");
  }

  // Where the storage starts: fold byte_offset into the storage offset when it is a whole number
  // of elements (this round-trips our own exports), else start the storage at the first element.
  const bool whole_elements = byte_offset % item == 0;
  layout.storage_offset = whole_elements ? byte_offset / item : 0;
  if (data == 0) {
    layout.base = nullptr;
    layout.nbytes = 0;
  } else if (whole_elements) {
    layout.base = t.data;
    layout.nbytes = static_cast<size_t>(total_bytes);
  } else {
    layout.base = static_cast<char*>(t.data) + byte_offset;
    layout.nbytes = static_cast<size_t>(extent_bytes);
  }
  return layout;
}

// Builds the tensor over the validated memory. `managed`'s deleter runs once, when the storage
// dies — but only once adopt() has returned: if anything here throws, the partly built storage
// is released WITHOUT calling the deleter, and the caller still owns `managed`.
template <typename Managed>
Tensor adopt(Managed* managed, const Layout& layout, bool read_only) {
  struct Owner {
    Managed* managed;
    bool armed = false;  // set once the tensor is handed out
  };
  auto owner = std::make_shared<Owner>(Owner{managed});
  auto release = [owner] {
    if (owner->armed && owner->managed->deleter != nullptr) owner->managed->deleter(owner->managed);
  };
  auto storage = Storage::wrap(layout.base, layout.nbytes, layout.device, std::move(release), read_only);
  Tensor tensor = make_tensor(std::move(storage), layout.sizes, layout.strides, layout.storage_offset, layout.dtype);
  owner->armed = true;
  return tensor;
}

// ---- export ----

// What an exported managed tensor points back to: the tensor (keeping its storage alive) and the
// shape and strides arrays the DLTensor refers to.
template <typename Managed>
struct ExportContext {
  Managed managed{};
  Tensor tensor;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

template <typename Managed>
void delete_export(Managed* self) {
  if (self != nullptr) delete static_cast<ExportContext<Managed>*>(self->manager_ctx);
}

template <typename Managed>
ExportContext<Managed>* export_context(const Tensor& t) {
  OPCONFORM_CHECK(t.defined(), ErrorCode::kDLPack, "to_dlpack: the tensor is undefined");
  OPCONFORM_CHECK(!t.device().is_meta() && !t.key_set().has(DispatchKey::Fake) && t.storage()->has_data(),
                  ErrorCode::kDLPack, "to_dlpack: cannot export a tensor without memory (a ",
                  t.key_set().has(DispatchKey::Fake) ? "fake" : "meta", " tensor on ", t.device().to_string(),
                  ") to DLPack");
  const DLDevice device = to_dlpack_device(t.device());

  auto ctx = std::make_unique<ExportContext<Managed>>();
  ctx->tensor = t;
  ctx->shape.assign(t.sizes().begin(), t.sizes().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());

  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.storage()->data();
  dl.device = device;
  dl.ndim = static_cast<int>(t.dim());
  dl.dtype = to_dlpack_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = static_cast<uint64_t>(t.storage_offset()) * t.itemsize();
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = &delete_export<Managed>;
  return ctx.release();
}

}  // namespace

// ---------------------------------------------------------------- mappings

DLDataType to_dlpack_dtype(DType dtype) {
  auto make = [](uint8_t code, uint8_t bits) { return DLDataType{code, bits, 1}; };
  switch (dtype) {
    case DType::Bool: return make(kOpcDLBool, 8);
    case DType::UInt8: return make(kDLUInt, 8);
    case DType::Int8: return make(kDLInt, 8);
    case DType::Int16: return make(kDLInt, 16);
    case DType::Int32: return make(kDLInt, 32);
    case DType::Int64: return make(kDLInt, 64);
    case DType::Float16: return make(kDLFloat, 16);
    case DType::BFloat16: return make(kDLBfloat, 16);
    case DType::Float32: return make(kDLFloat, 32);
    case DType::Float64: return make(kDLFloat, 64);
    case DType::Complex64: return make(kDLComplex, 64);
    case DType::Complex128: return make(kDLComplex, 128);
  }
  throw Error(ErrorCode::kInternal, "to_dlpack_dtype: unknown dtype");
}

DType from_dlpack_dtype(DLDataType dtype) {
  OPC_DLPACK_CHECK(dtype.lanes == 1, "dtype has ", dtype.lanes,
                   " lanes (vector types are not supported; lanes must be 1)");
  const int code = dtype.code;
  const int bits = dtype.bits;
  std::optional<DType> result;
  switch (code) {
    case kDLInt:
      if (bits == 8) result = DType::Int8;
      if (bits == 16) result = DType::Int16;
      if (bits == 32) result = DType::Int32;
      if (bits == 64) result = DType::Int64;
      break;
    case kDLUInt:
      if (bits == 8) result = DType::UInt8;
      break;
    case kDLFloat:
      if (bits == 16) result = DType::Float16;
      if (bits == 32) result = DType::Float32;
      if (bits == 64) result = DType::Float64;
      break;
    case kDLBfloat:
      if (bits == 16) result = DType::BFloat16;
      break;
    case kDLComplex:
      if (bits == 64) result = DType::Complex64;
      if (bits == 128) result = DType::Complex128;
      break;
    case kOpcDLBool:
      if (bits == 8) result = DType::Bool;
      break;
    default: throw Error(ErrorCode::kDLPack, detail::concat("DLPack tensor: unsupported dtype code ", code));
  }
  OPC_DLPACK_CHECK(result.has_value(), "unsupported dtype: code ", code, " (", dtype_code_name(dtype.code), ") with ",
                   bits, " bits");
  return *result;
}

DLDevice to_dlpack_device(Device device) {
  DLDevice out;
  int32_t type = 0;
  switch (device.type) {
    case DeviceType::CPU:
      type = kDLCPU;
      out.device_id = 0;
      break;
    case DeviceType::CUDA:
      type = kDLCUDA;
      out.device_id = device.index < 0 ? 0 : device.index;
      break;
    default:
      throw Error(ErrorCode::kDLPack,
                  detail::concat("to_dlpack: device '", device.to_string(), "' has no DLPack device type"));
  }
  std::memcpy(&out.device_type, &type, sizeof(type));
  return out;
}

Device from_dlpack_device(DLDevice device) {
  const int32_t type = device_type_code(device);
  const int id = device.device_id;
  switch (type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: plain CPU memory to us
      OPC_DLPACK_CHECK(id >= 0, "negative device id ", id, " for device type ", type);
      return Device::cpu();
    case kDLCUDA:
      OPC_DLPACK_CHECK(id >= 0, "negative device id ", id, " for device type ", type, " (CUDA)");
      OPC_DLPACK_CHECK(id <= std::numeric_limits<int16_t>::max(), "CUDA device id ", id, " is out of range");
      return Device::cuda(static_cast<int16_t>(id));
    default: throw Error(ErrorCode::kDLPack, detail::concat("DLPack tensor: unsupported DLPack device type ", type));
  }
}

// ---------------------------------------------------------------- import

Tensor from_dlpack(DLManagedTensor* managed) {
  OPC_DLPACK_CHECK(managed != nullptr, "the managed tensor pointer is null");
  Layout layout = validate(managed->dl_tensor);
  return adopt(managed, layout, /*read_only=*/false);
}

Tensor from_dlpack(OpcDLManagedTensorVersioned* managed) {
  OPC_DLPACK_CHECK(managed != nullptr, "the managed tensor pointer is null");
  OPC_DLPACK_CHECK(managed->version.major == OPC_DLPACK_MAJOR_VERSION, "unsupported DLPack major version ",
                   managed->version.major, " (expected ", OPC_DLPACK_MAJOR_VERSION, ")");
  Layout layout = validate(managed->dl_tensor);
  const bool read_only = (managed->flags & OPC_DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  return adopt(managed, layout, read_only);
}

// ---------------------------------------------------------------- export

DLManagedTensor* to_dlpack(const Tensor& t) { return &export_context<DLManagedTensor>(t)->managed; }

OpcDLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t) {
  auto* ctx = export_context<OpcDLManagedTensorVersioned>(t);
  ctx->managed.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
  ctx->managed.flags = t.storage()->read_only() ? OPC_DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return &ctx->managed;
}

}  // namespace opconform
