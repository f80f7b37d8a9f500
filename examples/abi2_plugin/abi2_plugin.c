/* abi2_plugin.c — an operator library in plain C11 that speaks plugin ABI version 2
 * (adapters/include/opconform/plugin.h, "Version 2"): each op shows one thing version 1 could not
 * carry.
 *
 *   abi2::every_other(Tensor self) -> Tensor
 *       rows 0, 2, 4, ... of self: (n + 1) // 2 rows. Its fake kernel computes that size
 *       SYMBOLICALLY (ctx->sym_binary), so a captured graph holds "(s0 + 1)//2" and is replayed at
 *       other sizes. Its backward is an OPERATOR (declare_backward_op), abi2::every_other_backward,
 *       with a CPU kernel, a fake kernel (so the backward is captured) and a backward of its own
 *       (so gradgradcheck differentiates it twice).
 *   abi2::swap01(Tensor(a) self) -> Tensor(a)
 *       a view: dims 0 and 1 swapped, no copy. Its return says which argument it aliases
 *       (OPC_ALIAS_OF(0)) in real and fake calls alike.
 *   abi2::jitter(Tensor self, float scale=0.5) -> Tensor
 *       self plus uniform noise drawn ONLY from the call's seed and offset (ctx->seed, ctx->offset):
 *       the same generator state gives the same values (OPC_OP_RANDOM tags it as random).
 *   abi2::scaled_pair(Tensor self, bool[2] output_mask) -> (Tensor, Tensor)
 *       (2 * self, 3 * self), each only where output_mask asks: the other is ABSENT (OPC_TAG_NONE
 *       for a Tensor return, PyTorch's undefined tensor), as ATen's *_backward ops do.
 *
 * One source, two libraries (CMakeLists.txt):
 *   ABI2_WRONG_FAKE=0  opconform_abi2_plugin ("abi2"): correct; passes every check.
 *   ABI2_WRONG_FAKE=1  opconform_abi2_wrong_fake_plugin ("abi2-wrong-fake"): identical but for one
 *                      SEEDED BUG: every_other's fake kernel computes n // 2 rows. Its sample
 *                      builder draws even n only, where n // 2 == (n + 1) // 2, so every sample's
 *                      fake and real runs agree (test_faketensor passes); only a graph replayed at
 *                      other sizes (n + 1, odd) shows it: test_aot_dispatch_dynamic fails.
 *
 * Real kernels: float32 and float64 on CPU, inputs read through their strides and byte_offset,
 * outputs contiguous. It uses the kit the example libraries share (examples/plugin_kit/opc_kit.h)
 * for real tensors; fake tensors are read raw, as their sizes may be symbolic handles.
 *
 * Check them with
 *     opconform check --library build/default/examples/abi2_plugin/libopconform_abi2_plugin.so
 *     opconform check --library build/default/examples/abi2_plugin/libopconform_abi2_wrong_fake_plugin.so */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "opconform/plugin.h"

#ifndef ABI2_WRONG_FAKE
#define ABI2_WRONG_FAKE 0
#endif
#if ABI2_WRONG_FAKE
#define LIBRARY_NAME "abi2-wrong-fake"
#else
#define LIBRARY_NAME "abi2"
#endif

#define OPC_KIT_LIBRARY LIBRARY_NAME
#define OPC_KIT_DTYPES (DT_BIT(DT_F32) | DT_BIT(DT_F64))
#include "opc_kit.h"

/* ================================================================================================
 * Fake tensors: metadata only, sizes possibly symbolic handles (copied as they are, or combined
 * through ctx->sym_binary; never with C arithmetic)
 * ============================================================================================= */

typedef struct {
  DLDataType dtype;
  int ndim;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
  uint64_t byte_offset;
  void* data; /* NULL in a fake call */
} Meta;

static OpcStatus read_meta(const OpcCallContext* ctx, const OpcValue* v, const char* name, int min_rank, Meta* out) {
  if (v->tag != OPC_TAG_TENSOR || v->u.tensor == NULL) return fail(ctx, OPC_INVALID_ARGUMENT, "'%s' must be a Tensor", name);
  const DLTensor* t = &v->u.tensor->dl_tensor;
  if (t->ndim < min_rank || t->ndim > MAX_DIMS) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "'%s' has %d dimensions, this op takes %d to %d", name, (int)t->ndim,
                min_rank, MAX_DIMS);
  }
  if (dt_of(t->dtype) == DT_NONE) return fail(ctx, OPC_NOT_IMPLEMENTED, "'%s' has a dtype this library does not support", name);
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  for (int d = 0; d < t->ndim; ++d) out->shape[d] = t->shape[d];
  if (t->strides != NULL) {
    for (int d = 0; d < t->ndim; ++d) out->strides[d] = t->strides[d];
  } else {
    contiguous_strides(t->ndim, t->shape, out->strides); /* concrete: a NULL stride array has no handles */
  }
  out->byte_offset = t->byte_offset;
  out->data = t->data;
  return OPC_OK;
}

/* A new output of `shape` (handles allowed), contiguous: the host computes the strides, symbolic
 * where the sizes are. */
static OpcStatus new_output(const OpcCallContext* ctx, DLDataType dtype, int ndim, const int64_t* shape, OpcValue* ret) {
  int64_t none[1] = {0};
  OpcDLManagedTensorVersioned* m = ctx->new_tensor(ctx->host, dtype, ndim, ndim ? shape : none, NULL);
  if (m == NULL) return OPC_OUT_OF_MEMORY;
  ret->tag = OPC_TAG_TENSOR, ret->alias = 0, ret->u.tensor = m;
  return OPC_OK;
}

/* (n + 1) // 2: every_other's row count, on a size that may be symbolic. */
static OpcStatus half_rows(const OpcCallContext* ctx, int64_t n, int64_t* out) {
#if ABI2_WRONG_FAKE
  /* ---- SEEDED BUG: n // 2 rows, right only for even n ------------------------------------------
   * Expected: test_aot_dispatch_dynamic fails ("capture recorded ... the op's fake kernel computes
   * its output size wrongly here") when the graph is replayed at odd sizes; test_faketensor passes
   * (every sample is even). */
  return ctx->sym_binary(ctx->host, OPC_SYM_FLOORDIV, n, 2, out);
#else
  int64_t n1 = 0;
  OpcStatus st = ctx->sym_binary(ctx->host, OPC_SYM_ADD, n, 1, &n1);
  return st == OPC_OK ? ctx->sym_binary(ctx->host, OPC_SYM_FLOORDIV, n1, 2, out) : st;
#endif
}

/* ================================================================================================
 * every_other and its backward operators
 * ============================================================================================= */

/* out = rows 0, 2, 4, ... of `in` (arguments[index]); a real call. */
static OpcStatus every_other_real(const OpcCallContext* ctx, const OpcValue* in_value, const char* name, OpcValue* ret) {
  View in, out;
  OpcStatus st = read_tensor(ctx, in_value, name, true, &in);
  if (st != OPC_OK) return st;
  if (in.ndim < 1) return fail(ctx, OPC_INVALID_ARGUMENT, "'%s' must have at least one dimension", name);
  int64_t shape[MAX_DIMS];
  memcpy(shape, in.shape, sizeof shape);
  shape[0] = (in.shape[0] + 1) / 2;
  st = make_contiguous_output(ctx, in.dt, in.ndim, shape, ret, &out);
  if (st != OPC_OK || out.numel == 0) return st;
  View every = in; /* the rows taken: twice the stride of dim 0 */
  every.strides[0] *= 2;
  Walk w;
  walk_init(&w, out.ndim, out.shape);
  walk_add_view(&w, &every);
  walk_add_view(&w, &out);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) store_f(w.ptr[1], out.dt, load_f(w.ptr[0], in.dt));
  return OPC_OK;
}

/* The fake of every_other on arguments[index]: the row count symbolic, other sizes copied. */
static OpcStatus every_other_fake(const OpcCallContext* ctx, const OpcValue* in_value, const char* name, OpcValue* ret) {
  Meta in;
  OpcStatus st = read_meta(ctx, in_value, name, 1, &in);
  if (st == OPC_OK) st = half_rows(ctx, in.shape[0], &in.shape[0]);
  return st == OPC_OK ? new_output(ctx, in.dtype, in.ndim, in.shape, ret) : st;
}

static OpcStatus every_other(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  if (st != OPC_OK) return st;
  return ctx->is_fake ? every_other_fake(ctx, &args[0], "self", &returns[0])
                      : every_other_real(ctx, &args[0], "self", &returns[0]);
}

/* abi2::every_other_backward(Tensor self, Tensor result0, Tensor? grad0) -> (Tensor?) (the schema the
 * host derives): the gradient of self is grad0 in rows 0, 2, 4, ... and zero elsewhere. */
static OpcStatus every_other_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                      OpcValue* returns, int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 3, num_returns, 1);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  if (args[2].tag == OPC_TAG_NONE) return OPC_OK; /* nothing flows back */
  if (ctx->is_fake) {
    Meta self;
    st = read_meta(ctx, &args[0], "self", 1, &self);
    return st == OPC_OK ? new_output(ctx, self.dtype, self.ndim, self.shape, &returns[0]) : st;
  }
  View self, grad, gx;
  st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st == OPC_OK) st = read_tensor(ctx, &args[2], "grad0", true, &grad);
  if (st != OPC_OK) return st;
  st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &gx); /* zeroed by the host */
  if (st != OPC_OK || grad.numel == 0) return st;
  View rows = gx;
  rows.strides[0] *= 2;
  rows.shape[0] = grad.shape[0];
  Walk w;
  walk_init(&w, grad.ndim, grad.shape);
  walk_add_view(&w, &grad);
  walk_add_view(&w, &rows);
  for (int64_t n = 0; n < grad.numel; ++n, walk_next(&w)) store_f(w.ptr[1], gx.dt, load_f(w.ptr[0], grad.dt));
  return OPC_OK;
}

/* The backward of every_other_backward (second order), on [self, result0, grad0, result0_,
 * grad0_]: the backward is linear in grad0 and constant in self, so grad0's gradient is
 * every_other(grad0_) and the others have none. Third order is not offered (no backward here). */
static OpcStatus every_other_double_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                             OpcValue* returns, int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 5, num_returns, 3);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  if (args[4].tag == OPC_TAG_NONE) return OPC_OK;
  return ctx->is_fake ? every_other_fake(ctx, &args[4], "grad0_", &returns[2])
                      : every_other_real(ctx, &args[4], "grad0_", &returns[2]);
}

/* ================================================================================================
 * swap01: a view that says what it aliases
 * ============================================================================================= */

typedef struct {
  OpcDLManagedTensorVersioned managed;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
} OwnView;

static void delete_own_view(OpcDLManagedTensorVersioned* self) { free(self->manager_ctx); }

/* The same code for real and fake calls: the view points into self's memory (NULL in a fake call)
 * with dims 0 and 1 swapped; sizes and strides are moved, never computed, so handles stay valid. */
static OpcStatus swap01(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  Meta self;
  if (st == OPC_OK) st = read_meta(ctx, &args[0], "self", 2, &self);
  if (st != OPC_OK) return st;
  OwnView* v = (OwnView*)calloc(1, sizeof(OwnView));
  if (v == NULL) return fail(ctx, OPC_OUT_OF_MEMORY, "out of memory");
  for (int d = 0; d < self.ndim; ++d) v->shape[d] = self.shape[d], v->strides[d] = self.strides[d];
  v->shape[0] = self.shape[1], v->shape[1] = self.shape[0];
  v->strides[0] = self.strides[1], v->strides[1] = self.strides[0];
  v->managed.version.major = OPC_DLPACK_MAJOR_VERSION, v->managed.version.minor = OPC_DLPACK_MINOR_VERSION;
  v->managed.manager_ctx = v;
  v->managed.deleter = delete_own_view;
  DLTensor* t = &v->managed.dl_tensor;
  t->data = self.data, t->byte_offset = self.byte_offset, t->device = args[0].u.tensor->dl_tensor.device;
  t->ndim = self.ndim, t->dtype = self.dtype, t->shape = v->shape, t->strides = v->strides;
  returns[0].tag = OPC_TAG_TENSOR, returns[0].alias = OPC_ALIAS_OF(0), returns[0].u.tensor = &v->managed;
  return OPC_OK;
}

/* ================================================================================================
 * jitter: random values from the call's seed and offset only
 * ============================================================================================= */

/* splitmix64: element i's draw is a function of (seed, offset + i) alone. */
static uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static OpcStatus jitter(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 2, num_returns, 1);
  if (st != OPC_OK) return st;
  if (!is_real_scalar(&args[1])) return fail(ctx, OPC_INVALID_ARGUMENT, "'scale' must be a number");
  if (ctx->is_fake) {
    Meta self;
    st = read_meta(ctx, &args[0], "self", 0, &self);
    return st == OPC_OK ? new_output(ctx, self.dtype, self.ndim, self.shape, &returns[0]) : st;
  }
  if (!OPC_HAS_FIELD(ctx, OpcCallContext, seed)) return fail(ctx, OPC_NOT_IMPLEMENTED, "the host gives no seed");
  View self, out;
  st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st == OPC_OK) st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || out.numel == 0) return st;
  const double scale = scalar_d(&args[1]);
  Walk w;
  walk_init_view(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    const double u = (double)(mix(ctx->seed ^ mix(ctx->offset + (uint64_t)n)) >> 11) * 0x1.0p-53; /* [0, 1) */
    store_f(out.data + n * dt_size(out.dt), out.dt, load_f(w.ptr[0], self.dt) + scale * (u - 0.5));
  }
  return OPC_OK;
}

/* jitter's formula (a plain OPC_KERNEL_BACKWARD, still allowed in version 2) on [self, scale,
 * result, grad]: the noise does not depend on self, so self's gradient is grad itself. */
static OpcStatus jitter_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 4, num_returns, 2);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  if (args[3].tag == OPC_TAG_TENSOR) returns[0] = args[3]; /* an argument handed back as it is */
  return OPC_OK;
}

/* ================================================================================================
 * scaled_pair: absent returns
 * ============================================================================================= */

static OpcStatus scaled_pair(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 2, num_returns, 2);
  if (st != OPC_OK) return st;
  if (args[1].tag != OPC_TAG_LIST || args[1].u.list.size != 2) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "'output_mask' must be a list of two bools");
  }
  set_none(returns, num_returns); /* an output the mask does not ask for stays absent */
  for (int k = 0; k < 2; ++k) {
    if (!args[1].u.list.items[k].u.b) continue;
    if (ctx->is_fake) {
      Meta self;
      st = read_meta(ctx, &args[0], "self", 0, &self);
      if (st == OPC_OK) st = new_output(ctx, self.dtype, self.ndim, self.shape, &returns[k]);
    } else {
      View self, out;
      st = read_tensor(ctx, &args[0], "self", true, &self);
      if (st == OPC_OK) st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[k], &out);
      if (st == OPC_OK && out.numel > 0) {
        Walk w;
        walk_init_view(&w, &self);
        for (int64_t n = 0; n < out.numel; ++n, walk_next(&w))
          store_f(out.data + n * dt_size(out.dt), out.dt, (k + 2) * load_f(w.ptr[0], self.dt));
      }
    }
    if (st != OPC_OK) return st;
  }
  return OPC_OK;
}

/* ================================================================================================
 * Samples and registration
 * ============================================================================================= */

static const DLDataType DTYPES[2] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};

/* every_other's samples: an even number of rows (see ABI2_WRONG_FAKE), 1 to 3 dimensions. */
static OpcStatus every_other_samples(const OpcSampleDraw* draw, OpcValue* args, int64_t num_args, void* user_data) {
  (void)num_args, (void)user_data;
  DLDataType dtype;
  int64_t half = 0, sizes[OPC_SAMPLE_MAX_RANK];
  int32_t rank = 0;
  OpcStatus st = draw->dtype(draw->host, DTYPES, 2, &dtype);
  if (st == OPC_OK) st = draw->integer(draw->host, 1, 3, &half);
  if (st == OPC_OK) st = draw->shape(draw->host, 1, 3, 1, 1, sizes, &rank);
  if (st != OPC_OK) return st;
  sizes[0] = 2 * half;
  return draw->tensor(draw->host, rank, sizes, dtype, NULL, 0, &args[0]);
}

static OpcStatus declare(const OpcRegistrar* r, const char* op, uint64_t flags, OpcSampleBuilderFn builder,
                         int32_t min_rank) {
  OpcArgConstraint self;
  memset(&self, 0, sizeof self);
  self.name = "self", self.min_rank = min_rank, self.max_rank = -1;
  OpcOpSpec spec;
  memset(&spec, 0, sizeof spec);
  spec.version = OPC_PLUGIN_ABI_VERSION, spec.size = sizeof spec, spec.op_name = op;
  spec.dtypes = DTYPES, spec.num_dtypes = 2, spec.flags = flags, spec.sample_builder = builder;
  if (builder == NULL) spec.args = &self, spec.num_args = 1;
  return r->declare_op(r->host, &spec);
}

static OpcStatus register_ops(const OpcRegistrar* r) {
  if (r->version < 2 || !OPC_HAS_FIELD(r, OpcRegistrar, declare_backward_op)) return OPC_ABI_MISMATCH;
  OpcStatus st = r->define(r->host, "abi2::every_other(Tensor self) -> Tensor");
  if (st == OPC_OK) st = r->impl(r->host, "abi2::every_other", OPC_KERNEL_CPU, every_other, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::every_other", OPC_KERNEL_FAKE, every_other, NULL);
  if (st == OPC_OK) st = declare(r, "abi2::every_other", 0, every_other_samples, 1);
  /* The backward as an operator, and its backward. */
  if (st == OPC_OK) st = r->declare_backward_op(r->host, "abi2::every_other", "abi2::every_other_backward");
  if (st == OPC_OK) st = r->impl(r->host, "abi2::every_other_backward", OPC_KERNEL_CPU, every_other_backward, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::every_other_backward", OPC_KERNEL_FAKE, every_other_backward, NULL);
  if (st == OPC_OK)
    st = r->declare_backward_op(r->host, "abi2::every_other_backward", "abi2::every_other_double_backward");
  if (st == OPC_OK)
    st = r->impl(r->host, "abi2::every_other_double_backward", OPC_KERNEL_CPU, every_other_double_backward, NULL);
  if (st == OPC_OK)
    st = r->impl(r->host, "abi2::every_other_double_backward", OPC_KERNEL_FAKE, every_other_double_backward, NULL);

  if (st == OPC_OK) st = r->define(r->host, "abi2::swap01(Tensor(a) self) -> Tensor(a)");
  if (st == OPC_OK) st = r->impl(r->host, "abi2::swap01", OPC_KERNEL_CPU, swap01, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::swap01", OPC_KERNEL_FAKE, swap01, NULL);
  if (st == OPC_OK) st = declare(r, "abi2::swap01", 0, NULL, 2);

  if (st == OPC_OK) st = r->define(r->host, "abi2::jitter(Tensor self, float scale=0.5) -> Tensor");
  if (st == OPC_OK) st = r->impl(r->host, "abi2::jitter", OPC_KERNEL_CPU, jitter, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::jitter", OPC_KERNEL_FAKE, jitter, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::jitter", OPC_KERNEL_BACKWARD, jitter_backward, NULL);
  if (st == OPC_OK) st = declare(r, "abi2::jitter", OPC_OP_RANDOM, NULL, 0);

  if (st == OPC_OK) st = r->define(r->host, "abi2::scaled_pair(Tensor self, bool[2] output_mask) -> (Tensor, Tensor)");
  if (st == OPC_OK) st = r->impl(r->host, "abi2::scaled_pair", OPC_KERNEL_CPU, scaled_pair, NULL);
  if (st == OPC_OK) st = r->impl(r->host, "abi2::scaled_pair", OPC_KERNEL_FAKE, scaled_pair, NULL);
  if (st == OPC_OK) st = declare(r, "abi2::scaled_pair", 0, NULL, 0);
  return st;
}

OPCONFORM_PLUGIN(abi2_plugin, LIBRARY_NAME, "0.0.1", register_ops)
OPCONFORM_EXPORT_PLUGIN(abi2_plugin)
