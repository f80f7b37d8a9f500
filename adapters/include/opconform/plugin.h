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
 * data == NULL, and ctx->new_tensor gives data-less tensors. In version 1 sizes are concrete (the
 * hint values of symbolic sizes, each pinned by a guard). In version 2 a size may be symbolic: see
 * "Symbolic sizes" below. Autograd formulas (OPC_KERNEL_BACKWARD) receive
 *     [the call's arguments..., its returns..., one gradient per returned tensor (each element of
 *      a Tensor[] return counts; none when absent)]
 * and return one value per schema argument: the gradient (a tensor) or none; for a Tensor[]
 * argument, a list with one gradient per element of it (a tensor or none), or none. A formula is
 * compiled code the host cannot differentiate or capture: version 2's backward operators can be
 * both (declare_backward_op below).
 *
 * Views: a returned tensor whose memory lies inside an argument's (same dtype) is a view of that
 * argument: return your own managed tensor pointing there (zero copy), and the host makes it a
 * view sharing the argument's storage. In a fake call, a view's storage offset is its byte_offset
 * (data stays NULL). From version 2 a returned tensor says which argument it is a view of in its
 * OpcValue's `alias` (OPC_ALIAS_OF(i)), in real and fake calls alike: that is how a fake call says
 * it (a real call's memory says it too; a real view that claims another argument is refused).
 *
 * Lifetimes: the registrar is valid only during register_ops, the call context and the arguments
 * only during the call. A returned managed tensor must not live in ctx->alloc memory (that is
 * freed after the call, before the host is done with the tensor).
 *
 * In version 1 a formula gets the arguments as they are after the call (an in-place op's formula
 * sees self already written); in version 2 a backward (formula or operator) gets the arguments the
 * op writes as they were before the call (the host keeps copies), as PyTorch's formulas do.
 *
 * Threads and processes: opconform's harness calls a plugin's kernels from one thread per worker
 * process; a host that calls from several threads honours OPC_PLUGIN_FLAG_NOT_THREAD_SAFE. The
 * harness runs kernels in worker processes that it kills when a kernel crashes or hangs.
 *
 * Version 2 (OPC_PLUGIN_ABI_VERSION 2). What version 1 could not carry, each costing real libraries
 * results that said nothing about them:
 *   - Symbolic sizes in fake calls. The design is PyTorch's SymInt: arithmetic on symbolic values
 *     through the host. A size (in a shape, a stride, a SymInt argument or return)
 *     may be a handle, an int64 that names a symbolic expression of the call ("s0", "s0*s1 + 1");
 *     OPC_IS_SYM_HANDLE tells one. A fake kernel that copies sizes copies handles as they are; one
 *     that computes with them calls ctx->sym_binary (+, -, *, //, %, max, min) and decides branches
 *     with ctx->sym_compare, which records the assumption as a guard, as `if s0 > 3:` does in
 *     PyTorch. Why this and not output metadata as expressions: a fake kernel stays one ordinary
 *     function of its inputs, written once in the library's language, for every op however its
 *     sizes are computed (convolution's formula, cat's sum, a data-dependent branch), and the host
 *     sees every decision it made, so a captured graph carries exactly the guards it needs. Raw
 *     C arithmetic on a handle gives a value that is no handle; the host refuses it naming the op,
 *     never reads it as a size. A kernel that needs a concrete value calls ctx->sym_guard_int,
 *     which pins the size (the graph then replays at that size only). Storage offsets stay
 *     concrete: a fake argument's byte_offset is its storage offset (0 in version 1), and a fake
 *     view's byte_offset must be a plain number too (ctx->sym_guard_int gives a symbolic
 *     stride's value where an offset needs one).
 *   - Views in fake calls: OpcValue.alias (above).
 *   - Backward as an operator (registrar->declare_backward_op): the backward is an op with its own
 *     schema and kernels (CPU, CUDA, fake, and its own backward), dispatched and captured like any
 *     op, so it can be differentiated again (gradgradcheck) and captured into graphs.
 *   - A random source in the call: ctx->seed and ctx->offset (PyTorch's Philox generator state).
 *     For an op the host knows draws random numbers (tagged nondeterministic_seeded: the reference's
 *     random ops, or OPC_OP_RANDOM), each call gets a fresh seed drawn from opconform's own seeded
 *     generator and offset 0: the same generator state gives the same seed, so a kernel that draws
 *     only from (seed, offset) repeats its values exactly, and checks compare seeded runs.
 *   - Absent returns: OPC_TAG_NONE is accepted for a Tensor return (not only a Tensor? one) and
 *     becomes an undefined tensor, PyTorch's C++ spelling of "not computed" (ATen's
 *     convolution_backward with a false output_mask): a library that returns undefined tensors
 *     writes OPC_TAG_NONE for them (so may an item of a Tensor[] return: a gradient list with no
 *     gradient for one element). In version 1 that is refused as a schema mismatch.
 *
 * Migration from version 1: set abi_version (or use the macros, which write OPC_PLUGIN_ABI_VERSION)
 * to 2, then check the fake kernels: every size a fake kernel computes with must go through
 * ctx->sym_binary / ctx->sym_compare (a version-1 fake kernel that only copies sizes is already
 * correct). Nothing else changes meaning: the new fields are additions, a version-2 plugin need
 * not use them. A plugin that keeps abi_version 1 (OPC_PLUGIN_ABI_VERSION_1) loads and is checked
 * as before: concrete sizes pinned by guards, no alias field read, no seed, None refused for a
 * Tensor return. The host sets `version` in the structs it fills (OpcCallContext, OpcRegistrar,
 * OpcSampleDraw) to the plugin's own abi_version. */
#ifndef OPCONFORM_PLUGIN_H_
#define OPCONFORM_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "opconform/dlpack_versioned.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. The host loads plugins of OPC_PLUGIN_ABI_VERSION_1 up to this
 * version and refuses any other abi_version. */
#define OPC_PLUGIN_ABI_VERSION 2
/* The oldest version the host still loads, with its own meaning (see "Version 2" above). */
#define OPC_PLUGIN_ABI_VERSION_1 1
/* The minor revision. 1.0 = the original structs; 1.1 appended plugin options, declare_op (per-op
 * data: dtypes, input constraints, tolerances, sample builders, the reference's fake kernel) and
 * set_error to the registrar; 2.0 = version 2 (symbolic sizes, aliases, backward operators, seeds,
 * absent returns). A minor revision only appends fields: read a field the other side filled only
 * when its `size` covers it (OPC_HAS_FIELD). */
#define OPC_PLUGIN_ABI_MINOR 0

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
  /* Version 2, a returned tensor (or Tensor[] item) only: OPC_ALIAS_OF(i) when it is a view of
   * argument i, else 0. Zero everywhere else (and in version 1, where the host ignores it). */
  uint32_t alias;
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

/* OpcValue.alias of a tensor that is a view of argument `index` (schema order). */
#define OPC_ALIAS_OF(index) ((uint32_t)(index) + 1u)

/* ---- Version 2: symbolic sizes (see "Version 2" at the top) -------------------------------- */

/* A handle names one symbolic expression of the call: OPC_SYM_HANDLE_BASE + k * OPC_SYM_HANDLE_STEP
 * for the k-th expression. Handles are negative (no size is), and spaced so that raw arithmetic on
 * one (h + 1, h * 2) gives a value that is no handle and is refused. Concrete sizes stay plain
 * non-negative numbers, and the host gives a concrete value wherever a size is not symbolic. */
#define OPC_SYM_HANDLE_BASE (-(INT64_C(1) << 62))
#define OPC_SYM_HANDLE_STEP (INT64_C(1) << 24)
#define OPC_SYM_HANDLE_LIMIT (INT64_C(1) << 30) /* handles per call */
/* Whether v is in the handles' range (the host checks it is exactly one). */
#define OPC_IS_SYM_HANDLE(v) \
  ((v) >= OPC_SYM_HANDLE_BASE && (v) < OPC_SYM_HANDLE_BASE + OPC_SYM_HANDLE_LIMIT * OPC_SYM_HANDLE_STEP)

/* ctx->sym_binary's operations (on handles and concrete values alike; Python's // and %). */
typedef int32_t OpcSymOp;
enum {
  OPC_SYM_ADD = 1,
  OPC_SYM_SUB = 2,
  OPC_SYM_MUL = 3,
  OPC_SYM_FLOORDIV = 4,
  OPC_SYM_MOD = 5,
  OPC_SYM_MAX = 6, /* decided as a comparison: may record a guard */
  OPC_SYM_MIN = 7,
};
/* ctx->sym_compare's comparisons. */
typedef int32_t OpcSymCompare;
enum {
  OPC_SYM_EQ = 1,
  OPC_SYM_NE = 2,
  OPC_SYM_LT = 3,
  OPC_SYM_LE = 4,
  OPC_SYM_GT = 5,
  OPC_SYM_GE = 6,
};

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
  /* ---- 2.0 (check with OPC_HAS_FIELD(ctx, OpcCallContext, <member>)) ---- */
  /* The random source of the call (PyTorch's Philox seed and offset): set for ops tagged
   * nondeterministic_seeded, 0 and 0 otherwise. Draw only from these for the same seed to give
   * the same values. */
  uint64_t seed;
  uint64_t offset;
  /* Symbolic sizes (fake calls of version-2 plugins; in any other call every size is concrete and
   * these compute on concrete values). Each returns OPC_OK or OPC_INVALID_ARGUMENT (a value that is
   * neither a size nor a handle of this call, division by zero) with the message set. */
  OpcStatus (*sym_binary)(void* host, OpcSymOp op, int64_t a, int64_t b, int64_t* out);
  /* a <cmp> b as 0 or 1; decided for the symbols' current values, and recorded as a guard when the
   * answer depends on them (a graph replays only where it still holds). */
  OpcStatus (*sym_compare)(void* host, OpcSymCompare cmp, int64_t a, int64_t b, int32_t* out);
  /* The concrete value of a (its hint), pinning it there with a guard: for a kernel that cannot
   * compute symbolically. */
  OpcStatus (*sym_guard_int)(void* host, int64_t a, int64_t* out);
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
  /* Version 2: the op draws random numbers (from ctx->seed/offset): tagged nondeterministic_seeded,
   * so each call gets a seed and checks compare runs from one generator state. */
  OPC_OP_RANDOM = 8,
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
  /* ---- 2.0 ---- */
  /* Backward as an operator: op_name's gradients come from the operator backward_op_name, which
   * the host defines with the schema it derives from op_name's:
   *     backward_op_name(<op_name's arguments, no defaults>, <its returns, named result0...>,
   *                      <one gradient per return: Tensor? grad0 for a Tensor, Tensor?[] for a
   *                       Tensor[], a non-tensor return has none>)
   *       -> (<one per op_name argument: Tensor[]? for a Tensor[] (one gradient per element, or
   *            None), Tensor? for any other argument>)
   * ("mylib::scale_backward(Tensor x, float alpha, Tensor result0, Tensor? grad0) -> (Tensor?, Tensor?)";
   * a name that is taken gets a trailing "_": result0_). The host calls it with the arguments as
   * they are after the forward call, its returns, and the gradients (None where none flows).
   * The plugin then registers backward_op_name's kernels with impl like any op's: CPU/CUDA, a fake
   * kernel (so the backward is captured into graphs), and its own backward (an OPC_KERNEL_BACKWARD
   * formula or another declare_backward_op) so it is differentiated again. Defining
   * backward_op_name first is allowed when the schema is that one. An op has either a backward
   * operator or an OPC_KERNEL_BACKWARD formula. Backward operators are checked through their
   * forward op (gradcheck, gradgradcheck, graph capture), not as ops of their own: their arguments
   * only mean something together. */
  OpcStatus (*declare_backward_op)(void* host, const char* op_name, const char* backward_op_name);
} OpcRegistrar;

/* Plugin flags. */
enum {
  OPC_PLUGIN_FLAG_NOT_THREAD_SAFE = 1,
};

/* What opconform_plugin() returns: a static object, valid while the library is loaded. */
typedef struct OpcPlugin {
  uint32_t abi_version;   /* the version the plugin speaks, 1 or 2: read before anything else */
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
/* The version the macros write: define OPC_PLUGIN_TARGET_ABI before including this header to build a
 * plugin of another version the host loads (OPC_PLUGIN_ABI_VERSION_1 keeps version 1's meaning). */
#ifndef OPC_PLUGIN_TARGET_ABI
#define OPC_PLUGIN_TARGET_ABI OPC_PLUGIN_ABI_VERSION
#endif
#ifdef __cplusplus
#define OPC_EXTERN_C extern "C"
#else
#define OPC_EXTERN_C
#endif
#define OPCONFORM_PLUGIN(ident, plugin_name, plugin_version, register_fn)                                  \
  const OpcPlugin* ident(void) {                                                                           \
    static const OpcPlugin plugin = {OPC_PLUGIN_TARGET_ABI, sizeof(OpcPlugin), plugin_name, plugin_version, \
                                     register_fn, 0, NULL, 0};                                             \
    return &plugin;                                                                                        \
  }
/*   OPCONFORM_PLUGIN_WITH_OPTIONS(my_ops, "my-ops", "1.0", register_ops, specs, n)
 *     the same, taking the options `specs` (an array of n OpcOptionSpec). */
#define OPCONFORM_PLUGIN_WITH_OPTIONS(ident, plugin_name, plugin_version, register_fn, option_specs, count) \
  const OpcPlugin* ident(void) {                                                                          \
    static const OpcPlugin plugin = {OPC_PLUGIN_TARGET_ABI, sizeof(OpcPlugin), plugin_name, plugin_version, \
                                     register_fn, 0, option_specs, count};                               \
    return &plugin;                                                                                       \
  }
#define OPCONFORM_EXPORT_PLUGIN(ident) \
  OPC_EXTERN_C OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return ident(); }

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPCONFORM_PLUGIN_H_ */
