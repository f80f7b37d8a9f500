/* silent_bugs_plugin.c — an operator library in plain C11 whose SEEDED BUGS give the right values:
 * no element-wise comparison sees them. Only the memory_safety check (guard bytes and guard pages
 * around every buffer of a call, Note [Memory guards] in core/memory_guard.h) and the
 * thread_safety check (concurrent first calls, Note [Concurrent first calls] in
 * conformance/src/thread_safety.cpp) do. NEVER use it for anything but that demonstration.
 *
 * One source, two libraries (examples/silent_bugs_plugin/CMakeLists.txt):
 *   SILENT_BUGS=1  the target opconform_silent_bugs_plugin ("silent-bugs"): the seeded bugs;
 *   SILENT_BUGS=0  the target opconform_silent_bugs_plugin_fixed ("silent-bugs-fixed"): the
 *                  correct twin, identical but for the bugs (every `#if SILENT_BUGS` below). It
 *                  passes every check `opconform check` runs.
 *
 * The entries (each is documented again at its op, marked "SEEDED BUG"; README.md lists the check
 * and the message expected to flag it):
 *   (a) aten::neg  correct values, but clears 64 bytes past the end of its output (a "padding
 *                  block" it believes every output has)   -> failed (memory_safety: "wrote past
 *                                                             the end of output 0")
 *   (b) aten::abs  correct values, but reads 8 bytes past the end of 'self' (mixed into the result
 *                  as 0 * value)                           -> failed (memory_safety: "read past the
 *                                                             end of argument 'self'")
 *   (c) aten::exp  correct values, but through a lazily filled global scale table whose "ready"
 *                  flag is set before the table is filled: a concurrent first caller reads zeros
 *                                                          -> failed (thread_safety)
 * Outside the guards, (a) corrupts the heap (the allocator's next block): other checks of neg may
 * crash in the buggy library. The fake kernels and the autograd formulas are correct in both.
 *
 * Every kernel reads its input through its strides and byte_offset (non-contiguous, offset,
 * expanded, 0-d and empty inputs); every output is contiguous. Declared dtypes: float32, float64.
 *
 * Layout of this file: the shared helpers (errors, dtypes, tensor views, the strided walk) in the
 * style of examples/vendor_plugin, the lazily filled table of exp, the three unary ops (one
 * kernel, one fake kernel, one autograd formula), then registration.
 *
 * Check them with
 *     opconform check --library build/default/examples/silent_bugs_plugin/libopconform_silent_bugs_plugin.so
 *     opconform check --library build/default/examples/silent_bugs_plugin/libopconform_silent_bugs_plugin_fixed.so */

/* nanosleep (POSIX) under -std=c11 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "opconform/plugin.h"

#ifndef SILENT_BUGS
#define SILENT_BUGS 0
#endif

#if SILENT_BUGS
#define LIBRARY_NAME "silent-bugs"
#else
#define LIBRARY_NAME "silent-bugs-fixed"
#endif

#define MAX_DIMS 16    /* deeper tensors are refused with an error naming the argument */
#define MAX_OPERANDS 3 /* tensors one strided walk moves through together (the backward's three) */

/* ================================================================================================
 * Errors
 * ============================================================================================= */

/* Sets the call's error message ("<op>: <what>") and returns `status`. Messages name the argument
 * ('self', 'grad', ...) so that a user sees which one was wrong. */
__attribute__((format(printf, 3, 4))) static OpcStatus fail(const OpcCallContext* ctx, OpcStatus status,
                                                            const char* fmt, ...) {
  char message[512];
  int n = snprintf(message, sizeof message, "%s: ", ctx->op_name ? ctx->op_name : LIBRARY_NAME);
  if (n < 0 || (size_t)n >= sizeof message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message + n, sizeof message - (size_t)n, fmt, ap);
  va_end(ap);
  ctx->set_error(ctx->host, message);
  return status;
}

/* ================================================================================================
 * Dtypes: the two this library knows
 * ============================================================================================= */

typedef enum { DT_F32, DT_F64, DT_NONE } Dt;

static Dt dt_of(DLDataType t) {
  if (t.lanes != 1 || t.code != kDLFloat) return DT_NONE;
  if (t.bits == 32) return DT_F32;
  if (t.bits == 64) return DT_F64;
  return DT_NONE;
}

static DLDataType dl_dtype(Dt d) {
  DLDataType t;
  t.code = (uint8_t)kDLFloat;
  t.bits = (uint8_t)(d == DT_F32 ? 32 : 64);
  t.lanes = 1;
  return t;
}

static int64_t dt_size(Dt d) { return d == DT_F32 ? 4 : 8; }

static double load_f(const char* p, Dt dt) {
  if (dt == DT_F32) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  double v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Rounds the double result once to the output dtype. */
static void store_f(char* p, Dt dt, double v) {
  if (dt == DT_F32) {
    const float f = (float)v;
    memcpy(p, &f, sizeof f);
  } else {
    memcpy(p, &v, sizeof v);
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

static bool same_shape(const View* a, const View* b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; ++d)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
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
                "(float32, float64)",
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

static void set_none(OpcValue* returns, int64_t num_returns) {
  for (int64_t i = 0; i < num_returns; ++i) {
    returns[i].tag = OPC_TAG_NONE;
    returns[i].reserved = 0;
    returns[i].u.i = 0;
  }
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
 * The strided walk: visits every index of a shape in row-major order, moving one pointer per
 * operand by that operand's strides (0 along expanded dims). Outputs here are contiguous:
 * element n is at n.
 * ============================================================================================= */

typedef struct {
  int ndim, nops;
  int64_t shape[MAX_DIMS];
  int64_t index[MAX_DIMS];
  int64_t step[MAX_OPERANDS][MAX_DIMS]; /* bytes */
  const char* ptr[MAX_OPERANDS];
} Walk;

static void walk_init(Walk* w, int ndim, const int64_t* shape) {
  w->ndim = ndim;
  w->nops = 0;
  for (int d = 0; d < ndim; ++d) {
    w->shape[d] = shape[d];
    w->index[d] = 0;
  }
}

/* Adds a view as an operand (its shape is the walk's). */
static void walk_add(Walk* w, const View* v) {
  const int k = w->nops++;
  w->ptr[k] = v->data;
  for (int d = 0; d < w->ndim; ++d) w->step[k][d] = v->strides[d] * dt_size(v->dt);
}

/* Moves to the next index (after the last one, every pointer is back at its start). */
static void walk_next(Walk* w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    if (++w->index[d] < w->shape[d]) {
      for (int k = 0; k < w->nops; ++k) w->ptr[k] += w->step[k][d];
      return;
    }
    for (int k = 0; k < w->nops; ++k) w->ptr[k] -= w->step[k][d] * (w->shape[d] - 1);
    w->index[d] = 0;
  }
}

#if SILENT_BUGS
/* The byte just past the farthest element a (non-empty) view reaches: where its storage ends when
 * the view reaches its storage's last element (a compact tensor, a transposed one, an expanded
 * one). */
static const char* view_end(const View* v) {
  int64_t farthest = 0;
  for (int d = 0; d < v->ndim; ++d)
    if (v->strides[d] > 0) farthest += (v->shape[d] - 1) * v->strides[d];
  return v->data + (farthest + 1) * dt_size(v->dt);
}
#endif

/* ================================================================================================
 * The scale table of exp: lazily initialised global state
 *
 * exp's kernel multiplies every result by an entry of a global per-lane scale table (all 1.0 here,
 * so the values are exp's own; it stands for what real libraries fill lazily: a lookup table, a
 * plan, a cache). The table is filled on the first call that has elements to compute, after a
 * pause (the slow part of a real initialisation: a plan, a table read from disk; it is also the
 * window concurrent first callers fall into, even on a loaded machine where threads do not run
 * side by side). Until it is filled every entry is 0.0, and element n reads entry
 * SCALE_ENTRIES - 1 - n % SCALE_ENTRIES: the entries filled last.
 * ============================================================================================= */

#define SCALE_ENTRIES 65536

static double g_scale[SCALE_ENTRIES]; /* 0.0 until filled */

static void scale_fill(void) {
  struct timespec pause = {0, 20 * 1000 * 1000}; /* 20 ms */
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
  for (int64_t j = 0; j < SCALE_ENTRIES; ++j) g_scale[j] = 1.0;
}

#if SILENT_BUGS
/* ---- SEEDED BUG (c): aten::exp's table is filled without synchronisation -----------------------
 * The first caller claims the initialisation (an atomic flag: exactly one caller fills the table)
 * but the flag also serves as "ready": a second caller sees it set and reads the table while the
 * first is still in scale_fill's pause, so its results are 0 * exp(x) = 0. Sequential calls (every
 * other check, every call after the first) never see it. Expected: `failed` in thread_safety.
 * The fixed twin: pthread_once (below), which makes every caller wait until the table is filled. */
static atomic_int g_scale_claimed;
static void scale_ready(void) {
  if (atomic_exchange(&g_scale_claimed, 1) == 0) scale_fill(); /* SEEDED BUG: others do not wait */
}
#else
static pthread_once_t g_scale_once = PTHREAD_ONCE_INIT;
static void scale_ready(void) { pthread_once(&g_scale_once, scale_fill); }
#endif

/* ================================================================================================
 * neg, abs, exp (Tensor self) -> Tensor: float32 and float64, computed in double and rounded once,
 * a contiguous result. Autograd formulas: -g, g * sign(x), g * result.
 * ============================================================================================= */

typedef enum { OP_NEG, OP_ABS, OP_EXP } UnaryKind;

static OpcStatus unary_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                           int64_t num_returns, UnaryKind kind, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self, out;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", real, &self);
  if (st == OPC_OK) st = make_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  if (kind == OP_EXP) scale_ready();
  Walk w;
  walk_init(&w, self.ndim, self.shape);
  walk_add(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    const double x = load_f(w.ptr[0], self.dt);
    double y;
    switch (kind) {
      case OP_NEG: y = -x; break;
      case OP_ABS: y = fabs(x); break;
      default: y = exp(x) * g_scale[SCALE_ENTRIES - 1 - n % SCALE_ENTRIES]; break;
    }
    store_f(out.data + n * dt_size(out.dt), out.dt, y);
  }
#if SILENT_BUGS
  const size_t nbytes = (size_t)(out.numel * dt_size(out.dt));
  if (kind == OP_NEG) {
    /* ---- SEEDED BUG (a): aten::neg clears 64 bytes past the end of its output -------------------
     * The kernel believes every output ends in a 64-byte padding block (its own allocator gave it
     * one) and clears it; ctx->new_tensor's memory has none, so the block is the next one's. The
     * values are right; the allocator rounds sizes up to 64 bytes, so no check's comparison reads
     * what it overwrites, but outside the guards it corrupts the heap. Expected: `failed` in
     * memory_safety, "wrote past the end of output 0" (guard bytes and guard pages alike). */
    memset(out.data + nbytes, 0, 64); /* SEEDED BUG: 64 bytes past the end */
  } else if (kind == OP_ABS) {
    /* ---- SEEDED BUG (b): aten::abs reads 8 bytes past the end of 'self' -------------------------
     * An unrolled loop's tail reads one 8-byte block too many. What it reads is mixed into the
     * result as 0 * value (volatile: the reads happen), so the values are right. Expected: `failed`
     * in memory_safety, "read past the end of argument 'self'" (the guard pages: a read touches no
     * guard byte). */
    const volatile unsigned char* past = (const volatile unsigned char*)view_end(&self);
    unsigned tail = 0;
    for (int k = 0; k < 8; ++k) tail += past[k]; /* SEEDED BUG: 8 bytes past the end */
    store_f(out.data, out.dt, load_f(out.data, out.dt) + 0.0 * (double)tail);
  }
#endif
  return OPC_OK;
}

/* Autograd formula: args are [self, result, grad]; returns [grad_self] (None when grad is None). */
static OpcStatus unary_backward_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                    OpcValue* returns, int64_t num_returns, UnaryKind kind) {
  OpcStatus st = check_arity(ctx, num_args, 3, num_returns, 1);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  if (args[2].tag == OPC_TAG_NONE) return OPC_OK; /* nothing flows back */
  View self, result, grad, gx;
  st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st == OPC_OK) st = read_tensor(ctx, &args[1], "result", true, &result);
  if (st == OPC_OK) st = read_tensor(ctx, &args[2], "grad", true, &grad);
  if (st != OPC_OK) return st;
  if (!same_shape(&result, &self) || !same_shape(&grad, &self)) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "the result's or the gradient's shape does not match 'self'");
  }
  st = make_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &gx);
  if (st != OPC_OK || gx.numel == 0) return st;
  Walk w;
  walk_init(&w, self.ndim, self.shape);
  walk_add(&w, &self);
  walk_add(&w, &result);
  walk_add(&w, &grad);
  for (int64_t n = 0; n < gx.numel; ++n, walk_next(&w)) {
    const double x = load_f(w.ptr[0], self.dt), r = load_f(w.ptr[1], result.dt), g = load_f(w.ptr[2], grad.dt);
    double d;
    switch (kind) {
      case OP_NEG: d = -g; break;
      case OP_ABS: d = g * (double)((x > 0) - (x < 0)); break; /* sign(x) */
      default: d = g * r; break;
    }
    store_f(gx.data + n * dt_size(gx.dt), gx.dt, d);
  }
  return OPC_OK;
}

static OpcStatus unary_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                           int64_t num_returns, void* user_data) {
  return unary_run(ctx, args, num_args, returns, num_returns, *(const UnaryKind*)user_data, true);
}

static OpcStatus unary_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data) {
  return unary_run(ctx, args, num_args, returns, num_returns, *(const UnaryKind*)user_data, false);
}

static OpcStatus unary_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                OpcValue* returns, int64_t num_returns, void* user_data) {
  return unary_backward_run(ctx, args, num_args, returns, num_returns, *(const UnaryKind*)user_data);
}

/* ================================================================================================
 * Registration
 * ============================================================================================= */

static const UnaryKind NEG = OP_NEG, ABS = OP_ABS, EXP = OP_EXP;

typedef struct {
  const char* name;
  const UnaryKind* kind;
} OpEntry;

static const OpEntry OPS[] = {
    {"aten::neg", &NEG}, /* (a) writes 64 bytes past its output */
    {"aten::abs", &ABS}, /* (b) reads 8 bytes past 'self' */
    {"aten::exp", &EXP}, /* (c) an unsynchronised lazily filled table */
};

static OpcStatus register_ops(const OpcRegistrar* r) {
  if (r->version != OPC_PLUGIN_ABI_VERSION) return OPC_ABI_MISMATCH;
  const DLDataType dtypes[2] = {dl_dtype(DT_F32), dl_dtype(DT_F64)};
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; ++i) {
    const OpEntry* op = &OPS[i];
    void* user_data = (void*)op->kind;
    OpcStatus st = r->impl(r->host, op->name, OPC_KERNEL_CPU, unary_cpu, user_data);
    if (st == OPC_OK) st = r->impl(r->host, op->name, OPC_KERNEL_FAKE, unary_fake, user_data);
    if (st == OPC_OK) st = r->impl(r->host, op->name, OPC_KERNEL_BACKWARD, unary_backward, user_data);
    if (st == OPC_OK) st = r->declare_dtypes(r->host, op->name, dtypes, 2);
    if (st != OPC_OK) return st;
  }
  return OPC_OK;
}

/* Flags 0: the library claims to be thread-safe (so thread_safety calls it from several threads). */
static const OpcPlugin PLUGIN = {
    OPC_PLUGIN_ABI_VERSION, sizeof(OpcPlugin), LIBRARY_NAME, "0.0.1", register_ops, 0,
};

OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &PLUGIN; }
