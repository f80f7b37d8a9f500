/* opconform/plugin.h — the C ABI through which an operator library offers its kernels to opconform.
 *
 * Plain C (C99), no opconform C++ header needed: C, C++, Rust or Zig can implement it. This header
 * is the documentation of the boundary.
 *
 * A plugin is a shared library that exports one function:
 *
 *     const OpcPlugin* opconform_plugin(void);
 *
 * returning a pointer to a static OpcPlugin. The host (opconform's loader) reads `abi_version`
 * first and refuses a plugin built for another ABI major, then calls `register_ops` once with a
 * registrar. Through the registrar the plugin defines operators (schema strings in the PyTorch
 * schema language) and implements operators: a kernel per device type, a fake kernel (shapes
 * only), an autograd formula. Implementing an operator the host already knows — a Core ATen op
 * of opconform's reference, "aten::add.Tensor" — needs no definition: the host takes the schema
 * from its reference registry. Defining it anyway with a schema that differs is reported.
 *
 *     static int32_t my_add(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
 *                           OpcValue* returns, int64_t num_returns, void* user_data);
 *     static int32_t register_ops(const OpcRegistrar* r) {
 *       return r->impl(r->host, "aten::add.Tensor", OPC_KERNEL_CPU, my_add, NULL);
 *     }
 *     static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), "mylib", "1.0",
 *                                      register_ops};
 *     OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &plugin; }
 *
 * Versioning: every struct starts with a version field (`abi_version`, or `version` set to
 * OPC_PLUGIN_ABI_VERSION) followed by its size in bytes where the struct may grow; every enum
 * value is numbered explicitly and never reused. A compatible addition appends fields and keeps
 * the major; a breaking change bumps OPC_PLUGIN_ABI_VERSION.
 *
 * Calling convention (one for every kernel, boxed): a kernel receives the call's arguments as an
 * array of tagged values in schema order (defaults filled in by the host), writes one tagged
 * value per schema return, and returns an OpcStatus. On any status but OPC_OK it should call
 * ctx->set_error with a message naming the argument; the host turns it into an error naming the
 * operator. No C++ exception may cross this boundary: a C++ plugin catches everything.
 *
 * Memory:
 *   - Arguments are borrowed for the duration of the call. Tensor arguments are DLPack 1.x managed
 *     tensors owned by the host: read (and, for arguments the schema marks written, write) their
 *     memory; never call their deleter. Arguments the schema does not mark written carry
 *     OPC_DLPACK_FLAG_BITMASK_READ_ONLY: writing them is a finding ("undeclared mutation").
 *   - Returned tensors pass ownership to the host: either make them with ctx->new_tensor (host
 *     memory, nothing to free; the easy way: tensors from new_tensor that are not returned, such as
 *     scratch buffers, are freed after the call), or hand over your own managed tensor whose
 *     deleter the host calls once. Returning an argument (an in-place op returning self) is written as
 *     OPC_TAG_TENSOR with the argument's own pointer: the host recognises it and does not free it.
 *   - Lists and strings in returns point into memory from ctx->alloc, owned by the host and freed
 *     after the call.
 *
 * Fake kernels (OPC_KERNEL_FAKE) compute output metadata only: their tensor arguments have
 * data == NULL, and ctx->new_tensor gives data-less tensors. Sizes are concrete (the hint values
 * of symbolic sizes). Autograd formulas (OPC_KERNEL_BACKWARD) receive
 *     [the call's arguments..., its returns..., one gradient per returned tensor (each element of
 *      a Tensor[] return counts; none when absent)]
 * and return one value per schema argument: the gradient (a tensor) or none; for a Tensor[]
 * argument, a list with one gradient per element of it (a tensor or none), or none.
 *
 * Views: a returned tensor whose memory lies inside an argument's (same dtype) is a view of that
 * argument: return your own managed tensor pointing there (zero copy), and the host makes it a
 * view sharing the argument's storage. In a fake call, a view's storage offset is its byte_offset
 * (data stays NULL); that it aliases an argument cannot be said in version 1.
 *
 * Lifetimes: the registrar is valid only during register_ops, the call context and the arguments
 * only during the call. A returned managed tensor must not live in ctx->alloc memory (that is
 * freed after the call, before the host is done with the tensor).
 *
 * Autograd formulas get one gradient value per argument back; a Tensor[] argument (cat's) cannot
 * receive gradients in version 1, and a formula gets the arguments as they are after the call (an
 * in-place op's formula sees self already written).
 *
 * Threads and processes: opconform's harness calls a plugin's kernels from one thread per worker
 * process; a host that calls from several threads honours OPC_PLUGIN_FLAG_NOT_THREAD_SAFE. The
 * harness runs kernels in worker processes that it kills when a kernel crashes or hangs. Random
 * ops cannot be seeded through the ABI in version 1. */
#ifndef OPCONFORM_PLUGIN_H_
#define OPCONFORM_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "opconform/dlpack_versioned.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. The host refuses a plugin whose abi_version differs. */
#define OPC_PLUGIN_ABI_VERSION 1
/* The minor revision: 1.0 = the original structs; 1.1 appended plugin options, declare_op (per-op
 * data: dtypes, input constraints, tolerances, sample builders, the reference's fake kernel) and
 * set_error to the registrar. A minor revision only appends fields: read a field the other side
 * filled only when its `size` covers it (OPC_HAS_FIELD). */
#define OPC_PLUGIN_ABI_MINOR 1

/* True when a struct the other side filled (it starts with version/abi_version and size) is large
 * enough to hold `field`. */
#define OPC_HAS_FIELD(ptr, type, field) \
  ((ptr) != NULL && (ptr)->size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* The symbol every plugin exports (a function: const OpcPlugin* opconform_plugin(void)). */
#define OPC_PLUGIN_ENTRY_POINT "opconform_plugin"

#if defined(_WIN32)
#define OPC_EXPORT __declspec(dllexport)
#else
#define OPC_EXPORT __attribute__((visibility("default")))
#endif

/* Status codes: what a kernel or a registrar call returns. */
typedef int32_t OpcStatus;
enum {
  OPC_OK = 0,
  OPC_ERROR = 1,              /* a failure; the message says what */
  OPC_NOT_IMPLEMENTED = 2,    /* this dtype / device / argument combination is not supported */
  OPC_INVALID_ARGUMENT = 3,   /* the arguments violate the op's contract (a user error) */
  OPC_OUT_OF_MEMORY = 4,
  OPC_ABI_MISMATCH = 5,       /* a struct version the callee does not know */
};

/* The tag of a value. */
typedef int32_t OpcTag;
enum {
  OPC_TAG_NONE = 0,       /* None (an absent optional) */
  OPC_TAG_TENSOR = 1,     /* .tensor: a DLPack 1.x managed tensor */
  OPC_TAG_INT = 2,        /* .i: int, SymInt; also ScalarType, Layout, MemoryFormat (PyTorch's numbers) */
  OPC_TAG_DOUBLE = 3,     /* .d: float */
  OPC_TAG_BOOL = 4,       /* .b: 0 or 1 */
  OPC_TAG_COMPLEX = 5,    /* .c: complex */
  OPC_TAG_STRING = 6,     /* .s: str, Device ("cpu", "cuda:0"); not NUL-terminated, use .size */
  OPC_TAG_LIST = 7,       /* .list: int[], float[], bool[], Tensor[], Tensor?[], Scalar[] */
};

/* One argument or return. Scalar arguments arrive with the tag of their value (INT, DOUBLE,
 * BOOL or COMPLEX); a list's items carry their own tags. */
typedef struct OpcValue {
  OpcTag tag;
  uint32_t reserved; /* zero */
  union {
    OpcDLManagedTensorVersioned* tensor;
    int64_t i;
    double d;
    int32_t b;
    struct {
      double re, im;
    } c;
    struct {
      const char* data;
      int64_t size;
    } s;
    struct {
      struct OpcValue* items;
      int64_t size;
    } list;
  } u;
} OpcValue;

/* What the host passes to every kernel call. */
typedef struct OpcCallContext {
  uint32_t version;  /* OPC_PLUGIN_ABI_VERSION */
  uint32_t size;     /* sizeof(OpcCallContext) as the host knows it */
  void* host;        /* pass back to the functions below */
  const char* op_name;  /* "aten::add.Tensor": for messages */
  int32_t is_fake;      /* 1 in a fake kernel call: tensors have no data */
  int32_t reserved;
  /* Host-owned scratch memory, 16-byte aligned, freed after the call (NULL when out of memory). */
  void* (*alloc)(void* host, size_t bytes);
  /* A new tensor in host memory, compact row-major when strides is NULL, on the device of the
   * call (data-less in a fake call). Returning it hands it to the host; one not returned is freed
   * after the call. NULL (with an error set) on a bad descriptor or when out of memory. */
  OpcDLManagedTensorVersioned* (*new_tensor)(void* host, DLDataType dtype, int32_t ndim, const int64_t* shape,
                                             const int64_t* strides);
  /* The message of a failing status (copied; the last call wins). */
  void (*set_error)(void* host, const char* message);
} OpcCallContext;

/* A kernel, a fake kernel or an autograd formula: see the calling convention at the top. */
typedef OpcStatus (*OpcKernelFn)(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                 OpcValue* returns, int64_t num_returns, void* user_data);

/* What a registrar's impl registers. */
typedef int32_t OpcKernelKind;
enum {
  OPC_KERNEL_CPU = 1,       /* real kernel for CPU tensors */
  OPC_KERNEL_CUDA = 2,      /* real kernel for CUDA tensors (device memory) */
  OPC_KERNEL_FAKE = 3,      /* output metadata only */
  OPC_KERNEL_BACKWARD = 4,  /* the autograd formula */
};

/* ---- ABI 1.1: options, per-op data, sample builders ---------------------------------------- */

/* One option a plugin takes, given on the command line as `--plugin-option NAME=VALUE`. The host
 * refuses unknown names, a missing REQUIRED option and a repeated non-REPEATABLE one before
 * register_ops runs; it does not substitute defaults (the plugin applies them; default_value is
 * for help text). */
typedef struct OpcOptionSpec {
  const char* name;           /* "extension" */
  const char* help;           /* one line */
  const char* default_value;  /* NULL: none */
  uint32_t flags;             /* OPC_OPTION_* */
  uint32_t reserved;          /* zero */
} OpcOptionSpec;
enum { OPC_OPTION_REQUIRED = 1, OPC_OPTION_REPEATABLE = 2 };

/* One value given on the command line; a repeatable option appears once per occurrence, in order. */
typedef struct OpcOption {
  const char* name;
  const char* value;
} OpcOption;

/* Values an argument's elements (a tensor's, a number's, a list's) take. */
enum {
  OPC_VALUES_MIN = 1,       /* >= min */
  OPC_VALUES_MAX = 2,       /* <= max */
  OPC_VALUES_POSITIVE = 4,  /* > 0 */
  OPC_VALUES_NO_NAN = 8,    /* NaN is never generated and is rejected */
  OPC_VALUES_NO_INF = 16,   /* likewise +-inf */
};
typedef struct OpcValueConstraint {
  uint32_t flags; /* OPC_VALUES_* */
  uint32_t reserved;
  double min, max; /* read when the flags say so (inclusive) */
} OpcValueConstraint;

/* The constraint of one schema argument, by name. */
typedef struct OpcArgConstraint {
  const char* name;
  const DLDataType* dtypes; /* tensors: the accepted dtypes; NULL/0: any */
  int64_t num_dtypes;
  OpcValueConstraint values;
  int32_t min_rank;  /* tensors */
  int32_t max_rank;  /* -1: the run's */
  int32_t allow_none; /* optional arguments: 1 = None may be generated */
  int32_t reserved;
} OpcArgConstraint;

/* A relation between two arguments (b unused for the one-argument kinds). */
typedef int32_t OpcRelationKind;
enum {
  OPC_REL_SAME_SHAPE = 1,
  OPC_REL_BROADCASTABLE = 2,
  OPC_REL_SAME_DTYPE = 3,
  OPC_REL_DIM_IN_RANGE = 4,              /* int (or int[]) a is a dimension of tensor b */
  OPC_REL_SIZE_POSITIVE = 5,             /* a has no zero */
  OPC_REL_LIST_LENGTH_EQUALS_RANK = 6,   /* int[] a has rank(b) elements */
  OPC_REL_ELEMENTS_SAME_SHAPE = 7,       /* the tensors of Tensor[] a have one shape */
};
typedef struct OpcRelation {
  OpcRelationKind kind;
  int32_t reserved;
  const char* a;
  const char* b;
} OpcRelation;

/* An op's own tolerance for one dtype (replaces the defaults). */
typedef struct OpcTolerance {
  DLDataType dtype;
  uint32_t reserved;
  double rtol, atol;
  int64_t max_ulp;    /* < 0: none */
  const char* reason; /* required: why the math needs it (shown in reports) */
} OpcTolerance;

struct OpcSampleDraw;
/* Builds one sample's arguments from draws (see "Sample builders" below). */
typedef OpcStatus (*OpcSampleBuilderFn)(const struct OpcSampleDraw* draw, OpcValue* args, int64_t num_args,
                                        void* user_data);

/* What a definer says about an op beyond its schema. */
enum {
  OPC_OP_ADDRESSES_STORAGE = 1, /* reads its input's storage through sizes/strides of its own (as_strided) */
  OPC_OP_LAYOUT_QUERY = 2,      /* its result is the input's layout itself (sym_stride) */
  /* "My fake kernel is the reference's": for an op the plugin implements by name (a reference op),
   * the host answers fake calls with the reference's fake kernel, so test_faketensor compares the
   * plugin's real outputs (sizes, strides, dtype) with PyTorch's meta semantics. Register no
   * OPC_KERNEL_FAKE for such an op. Refused for an op the plugin defined itself. */
  OPC_OP_REFERENCE_FAKE = 4,
};

/* declare_op's argument. For an op the plugin implements by name (the reference's), only dtypes and
 * OPC_OP_REFERENCE_FAKE may be given: the reference's constraints, builder and tolerances stay. */
typedef struct OpcOpSpec {
  uint32_t version; /* OPC_PLUGIN_ABI_VERSION */
  uint32_t size;    /* sizeof(OpcOpSpec) */
  const char* op_name; /* qualified, with overload: "torchvision::roi_align" */
  const DLDataType* dtypes; /* the dtypes its kernels support (as declare_dtypes); NULL/0: unchanged */
  int64_t num_dtypes;
  const OpcArgConstraint* args;
  int64_t num_args;
  const OpcRelation* relations;
  int64_t num_relations;
  const OpcTolerance* tolerances;
  int64_t num_tolerances;
  uint64_t flags; /* OPC_OP_* */
  OpcSampleBuilderFn sample_builder; /* NULL: samples from the schema and the constraints */
  void* sample_user_data;            /* passed to the builder; read-only (builders are re-run) */
  const char* family;                /* NULL allowed */
  const char* doc;                   /* one line; NULL allowed */
} OpcOpSpec;

/* Sample builders. Where constraints cannot say what a valid input is (boxes with x1 < x2, a batch
 * index column below the batch size), a plugin builds the arguments itself from the host's draws.
 * Every choice must come from a draw: the builder is re-run to shrink a failing sample and to
 * replay it, so it is a pure function of its draws and user_data. It writes one value per schema
 * argument (num_args, defaults included). Tensors must be ones this draw returned (host-owned:
 * never call their deleter); lists live in draw->alloc memory. On a failing status from a draw,
 * return that status at once. The builder runs in the process that runs the cases (a worker),
 * never in the probe. Tensor data may be read only on CPU samples. */
#define OPC_SAMPLE_MAX_RANK 16
typedef struct OpcSampleDraw {
  uint32_t version; /* OPC_PLUGIN_ABI_VERSION */
  uint32_t size;    /* sizeof(OpcSampleDraw) as the host knows it */
  void* host;
  OpcStatus (*integer)(void* host, int64_t lo, int64_t hi, int64_t* out); /* inclusive */
  OpcStatus (*coin)(void* host, int32_t percent_true, int32_t* out);
  OpcStatus (*real)(void* host, double lo, double hi, double* out);
  /* One of the run's sample dtypes, or of `allowed` when num_allowed > 0. */
  OpcStatus (*dtype)(void* host, const DLDataType* allowed, int64_t num_allowed, DLDataType* out);
  /* Sizes of rank in [min_rank, max_rank], each >= min_size (sometimes 0 when allow_empty). */
  OpcStatus (*shape)(void* host, int32_t min_rank, int32_t max_rank, int64_t min_size, int32_t allow_empty,
                     int64_t* sizes /* OPC_SAMPLE_MAX_RANK */, int32_t* rank);
  /* One size (sometimes 0 when allow_empty). */
  OpcStatus (*dim_size)(void* host, int32_t allow_empty, int64_t* out);
  /* A tensor with drawn values (values: NULL = any), on the sample's device, in a drawn layout. */
  OpcStatus (*tensor)(void* host, int32_t ndim, const int64_t* sizes, DLDataType dtype,
                      const OpcValueConstraint* values, int32_t mutable_input, OpcValue* out);
  /* An int64 tensor with values in [lo, hi]. */
  OpcStatus (*index_tensor)(void* host, int32_t ndim, const int64_t* sizes, int64_t lo, int64_t hi, OpcValue* out);
  /* A tensor holding exactly these values (row-major, converted to dtype), on the sample's device:
   * for values the builder computed from draws. */
  OpcStatus (*tensor_of)(void* host, int32_t ndim, const int64_t* sizes, DLDataType dtype, const double* values,
                         OpcValue* out);
  /* Memory for list items, freed after the builder returns (NULL when out of memory). */
  void* (*alloc)(void* host, size_t bytes);
  /* The message of a failing builder status. */
  void (*set_error)(void* host, const char* message);
} OpcSampleDraw;

/* What register_ops receives. Every function returns OPC_OK or an error status (with a message
 * the host keeps, naming the plugin); register_ops should pass a failing status on. */
typedef struct OpcRegistrar {
  uint32_t version;  /* OPC_PLUGIN_ABI_VERSION */
  uint32_t size;     /* sizeof(OpcRegistrar) as the host knows it */
  void* host;
  /* Defines an operator: "mylib::scale(Tensor x, float alpha=1.0) -> Tensor" (qualified name
   * required). Defining an op of the host's reference checks the schema against it. */
  OpcStatus (*define)(void* host, const char* schema);
  /* Registers fn for the operator (qualified name with overload: "aten::add.Tensor"). user_data
   * is passed back on every call. One function per op and kind. */
  OpcStatus (*impl)(void* host, const char* op_name, OpcKernelKind kind, OpcKernelFn fn, void* user_data);
  /* Declares the dtypes the op's kernels support (DLPack dtypes; the host checks only these).
   * Optional: without it the reference's dtypes are used. */
  OpcStatus (*declare_dtypes)(void* host, const char* op_name, const DLDataType* dtypes, int64_t count);
  /* 1 when the host has a schema for op_name (its reference knows the op), else 0. An adapter of a
   * large library (ATen) offers only the ops the host can check. */
  int32_t (*host_knows)(void* host, const char* op_name);
  /* ---- 1.1 (check with OPC_HAS_FIELD(r, OpcRegistrar, <member>)) ---- */
  /* The options given on the command line: valid during register_ops only (copy what you keep). */
  const OpcOption* options;
  int64_t num_options;
  /* Why register_ops fails ("extension '/x.so': dlopen: ..."): shown with the failing status. */
  void (*set_error)(void* host, const char* message);
  /* Per-op data (OpcOpSpec). A bad spec is a load problem of that op, not of the library. */
  OpcStatus (*declare_op)(void* host, const OpcOpSpec* spec);
} OpcRegistrar;

/* Plugin flags. */
enum {
  OPC_PLUGIN_FLAG_NOT_THREAD_SAFE = 1,
};

/* What opconform_plugin() returns: a static object, valid while the library is loaded. */
typedef struct OpcPlugin {
  uint32_t abi_version;   /* OPC_PLUGIN_ABI_VERSION: read before anything else */
  uint32_t size;          /* sizeof(OpcPlugin) */
  const char* name;       /* "myvendor-ops": names the library in reports */
  const char* version;    /* the library's own version, free text */
  OpcStatus (*register_ops)(const OpcRegistrar* registrar);
  uint64_t flags;         /* OPC_PLUGIN_FLAG_* */
  /* ---- 1.1 ---- */
  const OpcOptionSpec* options; /* the options it takes; NULL with 0: none */
  int64_t num_options;
} OpcPlugin;

typedef const OpcPlugin* (*OpcPluginEntryFn)(void);

/* Registration macros, for C and C++ alike.
 *
 *   OPCONFORM_PLUGIN(my_ops, "my-ops", "1.0", register_ops)
 *     defines `const OpcPlugin* my_ops(void)`. A library linked into the program (no dlopen) is
 *     loaded with opconform::adapters::load_plugin(my_ops(), registry): the same explicit entry
 *     point and the same boxed calls as a shared library, so it is checked the same way.
 *   OPCONFORM_EXPORT_PLUGIN(my_ops)
 *     exports it as the shared library's entry point (one per shared library). */
#ifdef __cplusplus
#define OPC_EXTERN_C extern "C"
#else
#define OPC_EXTERN_C
#endif
#define OPCONFORM_PLUGIN(ident, plugin_name, plugin_version, register_fn)                                  \
  const OpcPlugin* ident(void) {                                                                           \
    static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), plugin_name, plugin_version, \
                                     register_fn, 0, NULL, 0};                                             \
    return &plugin;                                                                                        \
  }
/*   OPCONFORM_PLUGIN_WITH_OPTIONS(my_ops, "my-ops", "1.0", register_ops, specs, n)
 *     the same, taking the options `specs` (an array of n OpcOptionSpec). */
#define OPCONFORM_PLUGIN_WITH_OPTIONS(ident, plugin_name, plugin_version, register_fn, option_specs, count) \
  const OpcPlugin* ident(void) {                                                                          \
    static const OpcPlugin plugin = {OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), plugin_name, plugin_version, \
                                     register_fn, 0, option_specs, count};                               \
    return &plugin;                                                                                       \
  }
#define OPCONFORM_EXPORT_PLUGIN(ident) \
  OPC_EXTERN_C OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return ident(); }

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPCONFORM_PLUGIN_H_ */
