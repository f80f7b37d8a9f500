// DLPack: zero-copy exchange of tensors with other frameworks (PyTorch, NumPy, CuPy, JAX, ...).
//
// Two wire forms are supported, for import and for export:
//   * DLPack 0.6  — `DLManagedTensor`, from the system's <dlpack/dlpack.h> (Debian ships 0.6,
//                   ATen ships the same header with the same include guard).
//   * DLPack 1.x  — `DLManagedTensorVersioned`. The 0.6 header does not have it, and a newer
//                   dlpack.h included elsewhere in the same program would, so we define it here
//                   under OUR names (`OpcDLManagedTensorVersioned`, `OpcDLPackVersion`, OPC_*
//                   flags). The layout is identical to the 1.x spec (checked by static_asserts
//                   below), so a pointer to a producer's `DLManagedTensorVersioned` can be cast to
//                   `OpcDLManagedTensorVersioned*` and back.
//
// Ownership
// ---------
// Import (`from_dlpack`) takes ownership of the managed tensor ONLY WHEN IT RETURNS. The returned
// tensor's Storage wraps `dl_tensor.data` without copying, and the managed tensor's `deleter` runs
// exactly once, when the last tensor sharing that storage (the result and every view of it) dies.
// When `from_dlpack` throws — a malformed or unsupported descriptor (Error with
// ErrorCode::kDLPack), or any other exception such as std::bad_alloc — the deleter is NOT called
// and the caller still owns the managed tensor (and must call its deleter itself). A null
// `deleter` is allowed: there is then nothing to call.
//
// Export (`to_dlpack`, `to_dlpack_versioned`) returns a heap-allocated managed tensor whose
// `manager_ctx` keeps a reference to the tensor (and so to its storage) alive; the shape and
// strides arrays belong to that context. The consumer calls `deleter(self)` exactly once when
// done; that frees the context and drops the reference. No memory is copied.
//
// What an imported descriptor must look like (checked field by field, in this order; the first
// violation throws Error(kDLPack) with a message naming the field and the offending value):
//   1. the managed pointer is not null;
//   2. (versioned only) `version.major == 1`; any minor version is accepted; flags other than
//      READ_ONLY are ignored (IS_COPIED is informational; 1.1's sub-byte padding flag concerns
//      dtypes we reject anyway);
//   3. device: kDLCPU -> cpu; kDLCUDA -> cuda:device_id; kDLCUDAHost (pinned host memory, which
//      the CPU reads and writes directly) -> cpu. Every other device type is rejected
//      ("unsupported DLPack device type N"). `device_id` must be >= 0 (and <= 32767 for CUDA);
//      it is ignored for CPU memory. Import does not ask the CUDA runtime whether that GPU
//      exists: it only wraps the pointer (a CPU-only build can hold, not read, a CUDA tensor);
//   4. dtype: lanes must be 1 (no vector types); (code, bits) must be one of
//        kDLInt 8/16/32/64, kDLUInt 8, kDLFloat 16/32/64, kDLBfloat 16, kDLComplex 64/128,
//        bool = code 6 (`kOpcDLBool`; 1.x's kDLBool, missing from the 0.6 header) with 8 bits.
//      uint8 is never read as bool: kDLUInt 8 is uint8;
//   5. 0 <= ndim <= 64 (`kMaxDLPackDims`); `shape` is not null when ndim > 0;
//   6. every size is >= 0, and the product of the sizes (zeros counted as one) fits in int64;
//   7. `strides` may be null, meaning compact row-major; otherwise every stride is >= 0 —
//      negative strides are not supported by opconform tensors and are rejected (stride 0, as
//      produced by broadcasting/expand, is fine);
//   8. the byte extent — byte_offset + (offset of the last element reached + 1) * itemsize —
//      fits in int64 and does not wrap the address space;
//   9. `data` is not null when the tensor has elements (an empty tensor may have null data);
//  10. the first element, `data + byte_offset`, is aligned to its element type (alignof of the
//      C++ type: 1 for bool/uint8/int8, 2 for 16-bit types, 4 for int32/float32/complex64,
//      8 for int64/float64/complex128). DLPack's 256-byte alignment of `data` is NOT required:
//      most producers do not honour it. Empty tensors are not checked.
//
// byte_offset: the first element is at `data + byte_offset`. When byte_offset is a multiple of
// the itemsize, the storage starts at `data` and byte_offset / itemsize becomes the tensor's
// storage offset (so export -> import round-trips the storage offset); otherwise the storage
// starts at `data + byte_offset` with storage offset 0.
// The storage's size is computed from the largest element reached: it covers the bytes from its
// start up to and including the last byte of that element (for an empty tensor: up to the first
// element; when `data` is null: zero bytes).
//
// Read-only memory: a versioned descriptor with OPC_DLPACK_FLAG_BITMASK_READ_ONLY imports as a
// read-only storage — every write through the Tensor API (fill_, copy_, set, mutable_data_ptr)
// throws Error(kReadOnly). Read-only storages export with the flag set through the versioned
// path. The 0.6 form has no way to say "read-only": `to_dlpack` of a read-only tensor still
// works, and it is then up to the consumer not to write (the caller decides whether to use it).
//
// Export writes `data` = the storage's base pointer and `byte_offset` = storage_offset *
// itemsize (the spec's intended use of byte_offset), always with explicit strides (never null),
// device {kDLCPU, 0} or {kDLCUDA, index}. Meta and fake tensors (no memory) and vendor device
// types (no DLPack device type) cannot be exported: Error(kDLPack).
#pragma once

#include <dlpack/dlpack.h>

#include <stddef.h>
#include <stdint.h>

#include "opconform/dlpack_versioned.h"

#ifdef __cplusplus
// Layout checks against the 1.x spec (LP64: 8-byte pointers).
static_assert(sizeof(OpcDLPackVersion) == 8, "DLPackVersion is two uint32_t");
static_assert(offsetof(OpcDLPackVersion, major) == 0 && offsetof(OpcDLPackVersion, minor) == 4);
static_assert(offsetof(OpcDLManagedTensorVersioned, version) == 0);
static_assert(offsetof(OpcDLManagedTensorVersioned, manager_ctx) == 8);
static_assert(offsetof(OpcDLManagedTensorVersioned, deleter) == 8 + sizeof(void*));
static_assert(offsetof(OpcDLManagedTensorVersioned, flags) == 8 + 2 * sizeof(void*));
static_assert(offsetof(OpcDLManagedTensorVersioned, dl_tensor) == 16 + 2 * sizeof(void*));
static_assert(sizeof(OpcDLManagedTensorVersioned) == 16 + 2 * sizeof(void*) + sizeof(DLTensor));
static_assert(sizeof(DLTensor) == 48 || sizeof(void*) != 8, "DLTensor layout (LP64)");

#include <cstdint>

#include "opconform/core/tensor.h"

namespace opconform {

// DLPack's type code for bool (1.x `kDLBool`); the 0.6 header has no name for it.
inline constexpr uint8_t kOpcDLBool = OPC_DL_BOOL;
// The largest ndim an imported descriptor may have.
inline constexpr int kMaxDLPackDims = 64;

// ---- import (zero copy) ----
// Views the memory of a DLPack 0.6 managed tensor. On success the tensor owns `managed` (its
// deleter runs once, when the last view of the storage dies); on any exception the caller keeps
// ownership and the deleter has not run. Malformed descriptors: Error(kDLPack).
Tensor from_dlpack(DLManagedTensor* managed);
// The same for a DLPack 1.x versioned managed tensor; READ_ONLY gives a read-only storage.
Tensor from_dlpack(OpcDLManagedTensorVersioned* managed);

// ---- export (zero copy) ----
// A DLPack 0.6 managed tensor viewing t's memory. The caller (consumer) must call its deleter
// once. Read-only tensors export too (0.6 cannot mark them). Meta/fake/vendor: Error(kDLPack).
DLManagedTensor* to_dlpack(const Tensor& t);
// A DLPack 1.0 versioned managed tensor viewing t's memory; READ_ONLY set for read-only storages.
OpcDLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t);

// ---- mappings (exposed for tests and bindings) ----
// DLPack dtype of a DType (lanes 1).
DLDataType to_dlpack_dtype(DType dtype);
// The DType of a DLPack dtype; throws Error(kDLPack) naming code, bits and lanes when unsupported.
DType from_dlpack_dtype(DLDataType dtype);
// DLPack device of a Device; throws Error(kDLPack) for meta and vendor devices.
DLDevice to_dlpack_device(Device device);
// The Device of a DLPack device; throws Error(kDLPack) for unsupported types and bad ids.
Device from_dlpack_device(DLDevice device);

}  // namespace opconform
#endif  // __cplusplus
