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
 * It uses the kit the example libraries share, examples/plugin_kit/opc_kit.h (errors, dtypes,
 * tensor views, the strided walk; the library passes its name and its two dtypes). Layout of this
 * file: the seeded bugs' view_end, the lazily filled table of exp, the three unary ops (one
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
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
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

#define MAX_OPERANDS 3 /* tensors one strided walk moves through together (the backward's three) */

/* The kit (examples/plugin_kit/opc_kit.h): errors, dtypes, tensor views, the strided walk. */
#define OPC_KIT_LIBRARY LIBRARY_NAME
#define OPC_KIT_DTYPES (DT_BIT(DT_F32) | DT_BIT(DT_F64))
#include "opc_kit.h"

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
  if (st == OPC_OK) st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  if (kind == OP_EXP) scale_ready();
  Walk w;
  walk_init(&w, self.ndim, self.shape);
  walk_add_view(&w, &self);
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
  if (!same_shape(&result, self.ndim, self.shape) || !same_shape(&grad, self.ndim, self.shape)) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "the result's or the gradient's shape does not match 'self'");
  }
  st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &gx);
  if (st != OPC_OK || gx.numel == 0) return st;
  Walk w;
  walk_init(&w, self.ndim, self.shape);
  walk_add_view(&w, &self);
  walk_add_view(&w, &result);
  walk_add_view(&w, &grad);
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
  if (r->version != OPC_PLUGIN_ABI_VERSION_1) return OPC_ABI_MISMATCH;
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
    .abi_version = OPC_PLUGIN_ABI_VERSION_1, .size = sizeof(OpcPlugin), .name = LIBRARY_NAME, .version = "0.0.1",
    .register_ops = register_ops, .flags = 0,
};

OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &PLUGIN; }
