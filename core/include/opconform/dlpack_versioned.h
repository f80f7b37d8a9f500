/* DLPack 1.x versioned managed tensors, in plain C, under opconform's names.
 *
 * Debian ships DLPack 0.6, which has no `DLManagedTensorVersioned`; a newer dlpack.h included
 * elsewhere in the same program would, so the structs are defined here under OUR names
 * (`OpcDLManagedTensorVersioned`, `OpcDLPackVersion`, OPC_DLPACK_* flags). The layout is the 1.x
 * spec's, field for field (opconform/core/dlpack.h checks it with static_asserts), so a pointer
 * to a producer's `DLManagedTensorVersioned` can be cast to ours and back.
 *
 * Shared by the C++ core (opconform/core/dlpack.h) and the plugin ABI (opconform/plugin.h). */
#ifndef OPCONFORM_DLPACK_VERSIONED_H_
#define OPCONFORM_DLPACK_VERSIONED_H_

#include <dlpack/dlpack.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The DLPack ABI version a versioned tensor was made for (1.x spec: `DLPackVersion`). */
typedef struct OpcDLPackVersion {
  uint32_t major; /* an ABI break bumps this: consumers must reject a major they do not know */
  uint32_t minor; /* compatible additions */
} OpcDLPackVersion;

/* The versions we produce; we accept any minor of OPC_DLPACK_MAJOR_VERSION on import. */
#define OPC_DLPACK_MAJOR_VERSION 1
#define OPC_DLPACK_MINOR_VERSION 0

/* DLPack's type code for bool (DLPack 1.x kDLBool; the 0.6 header has no name for it), with
 * bits = 8. C plugins use it through opconform/plugin.h. */
#define OPC_DL_BOOL 6

/* The tensor's memory must not be written by the consumer. */
#define OPC_DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0)
/* The producer copied the data for this export (the consumer is its only user). */
#define OPC_DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1)

/* DLPack 1.x's `DLManagedTensorVersioned`, field for field: version first (so a consumer can
 * check it before touching anything else), then manager_ctx, deleter, flags and the tensor. */
typedef struct OpcDLManagedTensorVersioned {
  OpcDLPackVersion version;
  /* The producer's bookkeeping (for our exports: the context holding the tensor alive). */
  void* manager_ctx;
  /* Called once by the consumer when it no longer needs the tensor; may be null. */
  void (*deleter)(struct OpcDLManagedTensorVersioned* self);
  /* OPC_DLPACK_FLAG_BITMASK_* bits. */
  uint64_t flags;
  DLTensor dl_tensor;
} OpcDLManagedTensorVersioned;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPCONFORM_DLPACK_VERSIONED_H_ */
