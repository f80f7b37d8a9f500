/* coverage_plugin.c — an operator library in plain C11 with SEEDED BUGS that only samples covering
 * the whole input space reach: bool tensors holding both values, factory ops dispatched through
 * their Device argument, and differentiable ops run with requires_grad. It shows what
 * `opconform check` finds there; NEVER use it for anything but that demonstration.
 *
 * The entries (each is documented again at its op, marked "SEEDED BUG"; README.md lists the check
 * and the outcome expected to flag it):
 *   (g) aten::logical_not  always writes true: it forgets to negate (bool inputs that are all
 *                          false would hide it)                  -> failed (reference_agreement)
 *   (h) aten::full         fills with the dtype's zero, ignoring fill_value -> failed
 *                          (reference_agreement; the factory reaches the plugin's CPU kernel
 *                          through its Device argument)
 *   (i) aten::neg          correct values, but no autograd formula (no OPC_KERNEL_BACKWARD): not a
 *                          bug but a gap                         -> unsupported (gradcheck,
 *                                                                   gradgradcheck,
 *                                                                   test_autograd_registration)
 * The fake kernels are correct, as is everything the bugs do not touch.
 *
 * Layout of this file: the shared helpers (errors, dtypes, tensor views, the strided walk) in the
 * style of examples/buggy_plugin, then one section per op, then registration.
 *
 * Build: the CMake target opconform_coverage_plugin (a shared library). Check it with
 *     opconform check --library build/default/examples/coverage_plugin/libopconform_coverage_plugin.so */

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opconform/plugin.h"

#define MAX_DIMS 16 /* deeper tensors are refused with an error naming the argument */

/* DLPack's type code for bool: 1.x's kDLBool. Debian's dlpack.h (DLPack 0.6) has no name for it,
 * so the number is written out (opconform/core/dlpack.h calls it kOpcDLBool); bool is 8 bits. */
#define DL_BOOL_CODE 6

/* ================================================================================================
 * Errors
 * ============================================================================================= */

/* Sets the call's error message ("<op>: <what>") and returns `status`. Messages name the argument
 * ('self', 'size', 'dtype', ...) so that a user sees which one was wrong. */
__attribute__((format(printf, 3, 4))) static OpcStatus fail(const OpcCallContext* ctx, OpcStatus status,
                                                            const char* fmt, ...) {
  char message[512];
  int n = snprintf(message, sizeof message, "%s: ", ctx->op_name ? ctx->op_name : "coverage-bugs");
  if (n < 0 || (size_t)n >= sizeof message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message + n, sizeof message - (size_t)n, fmt, ap);
  va_end(ap);
  ctx->set_error(ctx->host, message);
  return status;
}

/* ================================================================================================
 * Dtypes: the four this library knows
 * ============================================================================================= */

typedef enum { DT_F32, DT_F64, DT_I64, DT_BOOL, DT_NONE } Dt;

static Dt dt_of(DLDataType t) {
  if (t.lanes != 1) return DT_NONE;
  if (t.code == kDLFloat && t.bits == 32) return DT_F32;
  if (t.code == kDLFloat && t.bits == 64) return DT_F64;
  if (t.code == kDLInt && t.bits == 64) return DT_I64;
  if (t.code == DL_BOOL_CODE && t.bits == 8) return DT_BOOL;
  return DT_NONE;
}

static DLDataType dl_dtype(Dt d) {
  DLDataType t;
  t.code = (uint8_t)(d == DT_I64 ? kDLInt : d == DT_BOOL ? DL_BOOL_CODE : kDLFloat);
  t.bits = (uint8_t)(d == DT_F32 ? 32 : d == DT_BOOL ? 8 : 64);
  t.lanes = 1;
  return t;
}

static int64_t dt_size(Dt d) { return d == DT_F32 ? 4 : d == DT_BOOL ? 1 : 8; }
static const char* dt_name(Dt d) {
  return d == DT_F32 ? "float32" : d == DT_F64 ? "float64" : d == DT_I64 ? "int64" : "bool";
}

/* A `ScalarType?` argument carries PyTorch's ScalarType number (c10/core/ScalarType.h; opconform's
 * table is core/src/default_value.cpp): 0 uint8, 1 int8, 2 int16, 3 int32, 4 int64, 5 float16,
 * 6 float32, 7 float64, 9 complex64, 10 complex128, 11 bool, 15 bfloat16. */
static Dt dt_of_scalar_type(int64_t scalar_type) {
  switch (scalar_type) {
    case 4: return DT_I64;   /* torch.long */
    case 6: return DT_F32;   /* torch.float */
    case 7: return DT_F64;   /* torch.double */
    case 11: return DT_BOOL; /* torch.bool */
    default: return DT_NONE;
  }
}

/* ================================================================================================
 * Tensor views: what a kernel needs of a DLPack tensor
 * ============================================================================================= */

typedef struct {
  Dt dt;
  int ndim;
  int64_t shape[MAX_DIMS];
  int64_t strides[MAX_DIMS]; /* in elements, as DLPack gives them */
  char* data;                /* the first element (data + byte_offset); NULL without data */
  int64_t numel;
} View;

static int64_t numel_of(int ndim, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

/* Row-major strides, PyTorch's way (a size-0 or size-1 dim counts as 1). */
static void contiguous_strides(int ndim, const int64_t* shape, int64_t* strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d] > 1 ? shape[d] : 1;
  }
}

/* Reads tensor argument `v` (named `name` in messages) into `out`. `with_data` is false in fake
 * kernels: their tensors have no data and must not be read. */
static OpcStatus read_tensor(const OpcCallContext* ctx, const OpcValue* v, const char* name, bool with_data,
                             View* out) {
  if (v->tag != OPC_TAG_TENSOR || v->u.tensor == NULL) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument '%s' must be a Tensor", name);
  }
  const OpcDLManagedTensorVersioned* m = v->u.tensor;
  if (m->version.major != OPC_DLPACK_MAJOR_VERSION) {
    return fail(ctx, OPC_ABI_MISMATCH, "argument '%s' is a DLPack %u.x tensor; this library reads DLPack %d.x", name,
                (unsigned)m->version.major, OPC_DLPACK_MAJOR_VERSION);
  }
  const DLTensor* t = &m->dl_tensor;
  out->dt = dt_of(t->dtype);
  if (out->dt == DT_NONE) {
    return fail(ctx, OPC_NOT_IMPLEMENTED,
                "argument '%s' has a dtype (code %u, %u bits, %u lanes) this library does not support "
                "(float32, float64, int64, bool)",
                name, (unsigned)t->dtype.code, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
  }
  if (t->ndim < 0 || t->ndim > MAX_DIMS) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument '%s' has %d dimensions; this library supports at most %d", name,
                (int)t->ndim, MAX_DIMS);
  }
  out->ndim = t->ndim;
  for (int d = 0; d < out->ndim; ++d) {
    out->shape[d] = t->shape[d];
    if (out->shape[d] < 0) return fail(ctx, OPC_INVALID_ARGUMENT, "argument '%s' has a negative size", name);
  }
  /* The host always gives strides; DLPack allows NULL for compact row-major, so accept it. */
  if (t->strides != NULL) {
    for (int d = 0; d < out->ndim; ++d) out->strides[d] = t->strides[d];
  } else {
    contiguous_strides(out->ndim, out->shape, out->strides);
  }
  out->numel = numel_of(out->ndim, out->shape);
  out->data = NULL;
  if (with_data) {
    if (t->device.device_type != kDLCPU) {
      return fail(ctx, OPC_NOT_IMPLEMENTED, "argument '%s' is on device type %d; this library has CPU kernels only",
                  name, (int)t->device.device_type);
    }
    if (out->numel > 0 && t->data == NULL) {
      return fail(ctx, OPC_INVALID_ARGUMENT, "argument '%s' has no data (a meta or fake tensor in a CPU kernel)", name);
    }
    if (t->data != NULL) out->data = (char*)t->data + t->byte_offset;
  }
  return OPC_OK;
}

/* A new contiguous output tensor in host memory (data-less in a fake call), returned through
 * `ret`. The fake kernels call it with the very shape the CPU kernels use. */
static OpcStatus make_output(const OpcCallContext* ctx, Dt dt, int ndim, const int64_t* shape, OpcValue* ret,
                             View* out) {
  int64_t strides[MAX_DIMS], none[1] = {0};
  contiguous_strides(ndim, shape, strides);
  OpcDLManagedTensorVersioned* m =
      ctx->new_tensor(ctx->host, dl_dtype(dt), ndim, ndim ? shape : none, ndim ? strides : none);
  if (m == NULL) return OPC_OUT_OF_MEMORY; /* the host has set the message */
  ret->tag = OPC_TAG_TENSOR;
  ret->reserved = 0;
  ret->u.tensor = m;
  out->dt = dt;
  out->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    out->shape[d] = shape[d];
    out->strides[d] = strides[d];
  }
  out->numel = numel_of(ndim, shape);
  out->data = m->dl_tensor.data ? (char*)m->dl_tensor.data + m->dl_tensor.byte_offset : NULL;
  return OPC_OK;
}

static OpcStatus check_arity(const OpcCallContext* ctx, int64_t num_args, int64_t want_args, int64_t num_returns,
                             int64_t want_returns) {
  if (num_args < want_args || num_returns < want_returns) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "expected %lld arguments and %lld returns, got %lld and %lld",
                (long long)want_args, (long long)want_returns, (long long)num_args, (long long)num_returns);
  }
  return OPC_OK;
}

/* ================================================================================================
 * The strided walk: visits every element of a view in row-major order, moving one pointer by the
 * view's strides (0 along expanded dims). The outputs here are contiguous: element n is at n.
 * ============================================================================================= */

typedef struct {
  int ndim;
  int64_t shape[MAX_DIMS];
  int64_t index[MAX_DIMS];
  int64_t step[MAX_DIMS]; /* bytes */
  const char* ptr;
} Walk;

static void walk_init(Walk* w, const View* v) {
  w->ndim = v->ndim;
  w->ptr = v->data;
  for (int d = 0; d < v->ndim; ++d) {
    w->shape[d] = v->shape[d];
    w->index[d] = 0;
    w->step[d] = v->strides[d] * dt_size(v->dt);
  }
}

/* Moves to the next element (after the last one, the pointer is back at the first). */
static void walk_next(Walk* w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    if (++w->index[d] < w->shape[d]) {
      w->ptr += w->step[d];
      return;
    }
    w->ptr -= w->step[d] * (w->shape[d] - 1);
    w->index[d] = 0;
  }
}

/* ================================================================================================
 * logical_not(Tensor self) -> Tensor: bool in, bool out (the declared dtypes are bool only)
 * ============================================================================================= */

static OpcStatus logical_not_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self, out;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", real, &self);
  if (st != OPC_OK) return st;
  if (self.dt != DT_BOOL) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'self' has dtype %s; this library supports bool only",
                dt_name(self.dt));
  }
  st = make_output(ctx, DT_BOOL, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  /* ---- SEEDED BUG (g): aten::logical_not is always true ----------------------------------------
   * The loop reads every element of self through its strides (offsets, expanded and 0-d inputs
   * are right) but stores 1 where it should store !x: the result is true everywhere. An input
   * that is all False gives the right answer, so only samples holding False and True catch it.
   * Expected: `failed` in reference_agreement (bool). */
  Walk w;
  walk_init(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    const uint8_t x = (uint8_t)*w.ptr;
    (void)x;
    out.data[n] = 1; /* SEEDED BUG: should be `(char)(x == 0)` */
  }
  return OPC_OK;
}

static OpcStatus logical_not_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  (void)user_data;
  return logical_not_run(ctx, args, num_args, returns, num_returns, true);
}

static OpcStatus logical_not_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                  OpcValue* returns, int64_t num_returns, void* user_data) {
  (void)user_data;
  return logical_not_run(ctx, args, num_args, returns, num_returns, false);
}

/* ================================================================================================
 * full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, Layout? layout=None,
 *      Device? device=None, bool? pin_memory=None) -> Tensor: a factory (no tensor argument)
 * ============================================================================================= */

typedef struct {
  Dt dt;
  int ndim;
  int64_t shape[MAX_DIMS];
} FullPlan;

/* "cpu" or "cpu:N" (a Device crosses as its string); a fake call may also be on "meta". */
static bool device_ok(const OpcValue* v, bool real) {
  if (v->tag == OPC_TAG_NONE) return true;
  if (v->tag != OPC_TAG_STRING || (v->u.s.size > 0 && v->u.s.data == NULL)) return false;
  const char* s = v->u.s.data;
  const int64_t n = v->u.s.size;
  if (!real && n == 4 && memcmp(s, "meta", 4) == 0) return true;
  if (n < 3 || memcmp(s, "cpu", 3) != 0) return false;
  if (n == 3) return true;
  if (n == 4 || s[3] != ':') return false;
  for (int64_t i = 4; i < n; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

/* The plan of a full call, shared by the CPU and fake kernels; arguments are checked in the
 * reference's order (layout and pin_memory, then size, then the value and its dtype). */
static OpcStatus full_plan(const OpcCallContext* ctx, const OpcValue* args, bool real, FullPlan* p) {
  const OpcValue *size = &args[0], *fill = &args[1], *dtype = &args[2], *layout = &args[3], *device = &args[4],
                 *pin = &args[5];
  if (layout->tag != OPC_TAG_NONE && !(layout->tag == OPC_TAG_INT && layout->u.i == 0)) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'layout' must be None or torch.strided; this library makes strided "
                                          "tensors only");
  }
  if (pin->tag != OPC_TAG_NONE && !(pin->tag == OPC_TAG_BOOL && pin->u.b == 0)) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'pin_memory' must be None or False; this library has no pinned "
                                          "memory");
  }
  if (size->tag != OPC_TAG_LIST || (size->u.list.size > 0 && size->u.list.items == NULL)) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'size' must be a list of ints");
  }
  if (size->u.list.size > MAX_DIMS) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'size' has %lld dimensions; this library supports at most %d",
                (long long)size->u.list.size, MAX_DIMS);
  }
  p->ndim = (int)size->u.list.size;
  for (int d = 0; d < p->ndim; ++d) {
    const OpcValue* item = &size->u.list.items[d];
    if (item->tag != OPC_TAG_INT) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'size' must be a list of ints");
    if (item->u.i < 0) {
      return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'size' has a negative size (%lld at dimension %d)",
                  (long long)item->u.i, d);
    }
    p->shape[d] = item->u.i;
  }
  if (fill->tag == OPC_TAG_COMPLEX) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'fill_value' is complex; this library has no complex dtypes");
  }
  if (fill->tag != OPC_TAG_INT && fill->tag != OPC_TAG_DOUBLE && fill->tag != OPC_TAG_BOOL) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'fill_value' must be a number");
  }
  if (dtype->tag == OPC_TAG_NONE) {
    /* PyTorch's rule: the value's kind (a float takes the default dtype, float32) */
    p->dt = fill->tag == OPC_TAG_INT ? DT_I64 : fill->tag == OPC_TAG_BOOL ? DT_BOOL : DT_F32;
  } else if (dtype->tag == OPC_TAG_INT) {
    p->dt = dt_of_scalar_type(dtype->u.i);
    if (p->dt == DT_NONE) {
      return fail(ctx, OPC_NOT_IMPLEMENTED,
                  "argument 'dtype' is ScalarType %lld; this library makes float32, float64, int64 and bool only",
                  (long long)dtype->u.i);
    }
  } else {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'dtype' must be None or a ScalarType");
  }
  if (!device_ok(device, real)) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'device' is %.*s; this library has CPU kernels only",
                device->tag == OPC_TAG_STRING ? (int)device->u.s.size : 9,
                device->tag == OPC_TAG_STRING && device->u.s.data ? device->u.s.data : "not a str");
  }
  return OPC_OK;
}

static OpcStatus full_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                          int64_t num_returns, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 6, num_returns, 1);
  FullPlan p;
  View out;
  if (st == OPC_OK) st = full_plan(ctx, args, real, &p);
  if (st == OPC_OK) st = make_output(ctx, p.dt, p.ndim, p.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  /* ---- SEEDED BUG (h): aten::full ignores fill_value -------------------------------------------
   * The kernel clears the new buffer and stops there: every element is the dtype's zero (0, 0.0,
   * False), whatever fill_value says. Right only when the fill is zero. Before factory ops were
   * dispatched through their Device argument, the harness could not reach this kernel at all.
   * Expected: `failed` in reference_agreement (every declared dtype). */
  memset(out.data, 0, (size_t)(out.numel * dt_size(out.dt))); /* SEEDED BUG: fill_value is never stored */
  return OPC_OK;
}

static OpcStatus full_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                          int64_t num_returns, void* user_data) {
  (void)user_data;
  return full_run(ctx, args, num_args, returns, num_returns, true);
}

static OpcStatus full_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                           int64_t num_returns, void* user_data) {
  (void)user_data;
  return full_run(ctx, args, num_args, returns, num_returns, false);
}

/* ================================================================================================
 * neg(Tensor self) -> Tensor: float32 and float64, -x, a contiguous result
 * ============================================================================================= */

static OpcStatus neg_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self, out;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", real, &self);
  if (st != OPC_OK) return st;
  if (self.dt != DT_F32 && self.dt != DT_F64) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'self' has dtype %s; this library supports float32 and float64",
                dt_name(self.dt));
  }
  st = make_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  Walk w;
  walk_init(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    if (self.dt == DT_F32) {
      float x;
      memcpy(&x, w.ptr, sizeof x);
      x = -x;
      memcpy(out.data + n * 4, &x, sizeof x);
    } else {
      double x;
      memcpy(&x, w.ptr, sizeof x);
      x = -x;
      memcpy(out.data + n * 8, &x, sizeof x);
    }
  }
  return OPC_OK;
}

static OpcStatus neg_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  (void)user_data;
  return neg_run(ctx, args, num_args, returns, num_returns, true);
}

static OpcStatus neg_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                          int64_t num_returns, void* user_data) {
  (void)user_data;
  return neg_run(ctx, args, num_args, returns, num_returns, false);
}

/* ================================================================================================
 * Registration
 * ============================================================================================= */

typedef struct {
  const char* name;
  OpcKernelFn cpu, fake; /* no autograd formulas in this library */
  Dt dtypes[4];          /* the declared dtypes, DT_NONE-terminated */
} OpEntry;

static const OpEntry OPS[] = {
    /* (g) always true */
    {"aten::logical_not", logical_not_cpu, logical_not_fake, {DT_BOOL, DT_NONE}},
    /* (h) ignores fill_value */
    {"aten::full", full_cpu, full_fake, {DT_F32, DT_F64, DT_I64, DT_BOOL}},
    /* (i) correct, but NO OPC_KERNEL_BACKWARD: a gap, reported unsupported (inference only) */
    {"aten::neg", neg_cpu, neg_fake, {DT_F32, DT_F64, DT_NONE}},
};

static OpcStatus register_ops(const OpcRegistrar* r) {
  if (r->version != OPC_PLUGIN_ABI_VERSION) return OPC_ABI_MISMATCH;
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; ++i) {
    const OpEntry* op = &OPS[i];
    DLDataType dtypes[4];
    int64_t count = 0;
    while (count < 4 && op->dtypes[count] != DT_NONE) {
      dtypes[count] = dl_dtype(op->dtypes[count]);
      ++count;
    }
    OpcStatus st = r->impl(r->host, op->name, OPC_KERNEL_CPU, op->cpu, NULL);
    if (st == OPC_OK) st = r->impl(r->host, op->name, OPC_KERNEL_FAKE, op->fake, NULL);
    if (st == OPC_OK) st = r->declare_dtypes(r->host, op->name, dtypes, count);
    if (st != OPC_OK) return st;
  }
  return OPC_OK;
}

static const OpcPlugin PLUGIN = {
    OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), "coverage-bugs", "0.0.1", register_ops, 0,
};

OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &PLUGIN; }
