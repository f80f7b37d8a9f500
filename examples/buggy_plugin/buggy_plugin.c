/* buggy_plugin.c — an operator library in plain C11 with SEEDED BUGS, to show what opconform
 * finds. It is the vendor plugin (examples/vendor_plugin) cut down to 11 Core ATen operators,
 * six of which carry one deliberate bug each. NEVER use it for anything but that demonstration.
 *
 * The bugs (each is documented again at its op, marked "SEEDED BUG"; README.md lists the check
 * and the outcome expected to flag it):
 *   (a) aten::mul.Tensor       wrong values for float64 only (its float64 path adds 1e-3);
 *                              float32 and int64 are right            -> failed (dtype_consistency,
 *                                                                        reference agreement)
 *   (b) aten::neg              crashes (SIGSEGV) on an empty input    -> crashed
 *   (c) aten::exp              spins forever on a 3-D input           -> timed_out
 *   (d) aten::abs              writes |x| into its input, which the schema does not mark written
 *                              (the host passes it READ_ONLY)         -> failed (test_schema)
 *   (e) aten::sum.dim_IntList  fake kernel ignores keepdim            -> failed (test_faketensor)
 *   (f) aten::sin              reads a dense input as if row-major, ignoring its strides (a
 *                              transposed input gives permuted values) -> failed (stride_invariance,
 *                                                                        reference agreement)
 * The other ops (add.Tensor, sub.Tensor, maximum, relu, mm) are correct, as is everything the bugs
 * do not touch (the fake kernels of (a)-(d) and (f), every autograd formula).
 *
 * Semantics are PyTorch's, as opconform's reference states them (see vendor_plugin.c). It uses the
 * kit the example libraries share, examples/plugin_kit/opc_kit.h (errors, dtypes, tensor views, the
 * strided walk, broadcasting, promotion, element access), as the vendor plugin does. Layout of this
 * file: the elementwise machinery, then one section per family of ops, then registration. The
 * machinery is kept as in the vendor plugin, so that the two files diff down to the bugs and the
 * ops left out (the reduction code still knows mean, which is not registered).
 *
 * Build: the CMake target opconform_buggy_plugin (a shared library). Check it with
 *     opconform check --library build/default/examples/buggy_plugin/libopconform_buggy_plugin.so --timeout 5 */

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "opconform/plugin.h"

/* The kit (examples/plugin_kit/opc_kit.h): errors, dtypes, tensor views, the strided walk,
 * broadcasting, promotion, element access. */
#define OPC_KIT_LIBRARY "buggy-ops"
#define OPC_KIT_DTYPES (DT_BIT(DT_F32) | DT_BIT(DT_F64) | DT_BIT(DT_I64))
#include "opc_kit.h"

/* ================================================================================================
 * Elementwise machinery shared by the unary and binary kernels
 * ============================================================================================= */

/* What one elementwise call computes: a value function per wide type (fi NULL: no int64 path),
 * the op's descriptor and the call's scalar arguments. */
typedef struct Elementwise Elementwise;
struct Elementwise {
  double (*fd)(const Elementwise* e, const double* x);
  int64_t (*fi)(const Elementwise* e, const int64_t* x);
  /* d(result)/d(x[k]) * g for each input k (the autograd formula), r the forward result. */
  void (*partials)(const Elementwise* e, const double* x, double r, double g, double* gx);
  const void* op;
  double alpha_d; /* add, sub */
  int64_t alpha_i;
  Dt out_dt; /* the result dtype (the binary ops' per-dtype paths) */
};

/* out[i] = f(in_0[i], ...) over out's shape, inputs broadcast, read in the wide type of
 * `compute` and stored once in out's dtype. */
static void map_elements(const Elementwise* e, View* out, int nin, const View* const* in, Dt compute) {
  if (out->numel == 0) return;
  Walk w;
  walk_init(&w, out->ndim, out->shape);
  walk_add(&w, out->data, out->strides, dt_size(out->dt));
  for (int k = 0; k < nin; ++k) {
    int64_t s[MAX_DIMS];
    strides_over(in[k], out->ndim, out->shape, s);
    walk_add(&w, in[k]->data, s, dt_size(in[k]->dt));
  }
  for (int64_t n = 0; n < out->numel; ++n, walk_next(&w)) {
    if (compute == DT_I64) {
      int64_t x[MAX_OPERANDS];
      for (int k = 0; k < nin; ++k) x[k] = load_i(w.ptr[k + 1]);
      store_i(w.ptr[0], e->fi(e, x));
    } else {
      double x[MAX_OPERANDS];
      for (int k = 0; k < nin; ++k) x[k] = load_as(w.ptr[k + 1], in[k]->dt, compute);
      store_f(w.ptr[0], out->dt, e->fd(e, x));
    }
  }
}

/* The autograd formula of an elementwise op: grad_k = sum over the broadcast dims of
 * partials(x, r, g)[k], one gradient per floating input, shaped and typed as that input.
 * `rets[k]` receives input k's gradient (left None for non-floating inputs). */
static OpcStatus elementwise_backward(const OpcCallContext* ctx, const Elementwise* e, int nin, const View* const* in,
                                      const View* result, const View* grad, OpcValue* const* rets) {
  if (!same_shape(grad, result->ndim, result->shape)) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "the gradient's shape does not match the result's");
  }
  double* acc[MAX_OPERANDS];
  for (int k = 0; k < nin; ++k) {
    acc[k] = NULL;
    if (!dt_floating(in[k]->dt)) continue;
    const int64_t n = in[k]->numel > 0 ? in[k]->numel : 1;
    acc[k] = (double*)ctx->alloc(ctx->host, (size_t)n * sizeof(double));
    if (acc[k] == NULL) return fail(ctx, OPC_OUT_OF_MEMORY, "out of memory for a gradient of %lld elements", (long long)n);
    for (int64_t i = 0; i < n; ++i) acc[k][i] = 0.0;
  }
  if (result->numel > 0) {
    Walk w;
    walk_init(&w, result->ndim, result->shape);
    walk_add(&w, grad->data, grad->strides, dt_size(grad->dt));
    walk_add(&w, result->data, result->strides, dt_size(result->dt));
    for (int k = 0; k < nin; ++k) {
      int64_t s[MAX_DIMS];
      strides_over(in[k], result->ndim, result->shape, s);
      walk_add(&w, in[k]->data, s, dt_size(in[k]->dt));
    }
    for (int k = 0; k < nin; ++k) {
      /* the accumulator is a contiguous copy of input k's shape, broadcast like the input */
      View a = *in[k];
      contiguous_strides(a.ndim, a.shape, a.strides);
      int64_t s[MAX_DIMS];
      strides_over(&a, result->ndim, result->shape, s);
      walk_add(&w, (char*)acc[k], s, (int64_t)sizeof(double));
    }
    for (int64_t n = 0; n < result->numel; ++n, walk_next(&w)) {
      const double g = load_f(w.ptr[0], grad->dt), r = load_f(w.ptr[1], result->dt);
      double x[MAX_OPERANDS], gx[MAX_OPERANDS];
      for (int k = 0; k < nin; ++k) x[k] = load_f(w.ptr[2 + k], in[k]->dt);
      e->partials(e, x, r, g, gx);
      for (int k = 0; k < nin; ++k) {
        if (acc[k] != NULL) *(double*)(void*)w.ptr[2 + nin + k] += gx[k];
      }
    }
  }
  for (int k = 0; k < nin; ++k) {
    if (acc[k] == NULL || rets[k] == NULL) continue;
    int64_t strides[MAX_DIMS];
    contiguous_strides(in[k]->ndim, in[k]->shape, strides);
    View out;
    OpcStatus st = make_output(ctx, in[k]->dt, in[k]->ndim, in[k]->shape, strides, rets[k], &out);
    if (st != OPC_OK) {
      for (int j = 0; j < k; ++j)
        if (rets[j] != NULL) release_output(rets[j]);
      return st;
    }
    for (int64_t i = 0; i < out.numel; ++i) store_f(out.data + i * dt_size(out.dt), out.dt, acc[k][i]);
  }
  return OPC_OK;
}

/* ================================================================================================
 * Unary elementwise ops: neg, abs, exp, sin, relu
 * ============================================================================================= */

typedef struct {
  bool float_result;                            /* int64 inputs compute in float32 (exp, sin, ...) */
  double (*fd)(double x);                       /* the value in double */
  int64_t (*fi)(int64_t x);                     /* the value in int64 (NULL: no integer path) */
  double (*grad)(double x, double r, double g); /* d(result)/dx * g */
} UnaryOp;

static double unary_fd(const Elementwise* e, const double* x) { return ((const UnaryOp*)e->op)->fd(x[0]); }
static int64_t unary_fi(const Elementwise* e, const int64_t* x) { return ((const UnaryOp*)e->op)->fi(x[0]); }
static void unary_partials(const Elementwise* e, const double* x, double r, double g, double* gx) {
  gx[0] = ((const UnaryOp*)e->op)->grad(x[0], r, g);
}

static double neg_f(double x) { return -x; }
static int64_t neg_i(int64_t x) { return wrap_sub(0, x); } /* -INT64_MIN wraps to INT64_MIN */
static double neg_grad(double x, double r, double g) { (void)x, (void)r; return -g; }

static double abs_f(double x) { return fabs(x); }
static int64_t abs_i(int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }
static double abs_grad(double x, double r, double g) { (void)r; return g * (double)((x > 0) - (x < 0)); } /* sign(x) */

static double exp_grad(double x, double r, double g) { (void)x; return g * r; }
static double sin_grad(double x, double r, double g) { (void)r; return g * cos(x); }

/* max(x, 0) with NaN kept (PyTorch's relu is clamp_min(x, 0)); -0.0 gives +0.0. */
static double relu_f(double x) { return (isnan(x) || x > 0) ? x : 0.0; }
static int64_t relu_i(int64_t x) { return x > 0 ? x : 0; }
static double relu_grad(double x, double r, double g) { (void)x; return r > 0 ? g : 0.0; }

static const UnaryOp NEG = {false, neg_f, neg_i, neg_grad};
static const UnaryOp ABS = {false, abs_f, abs_i, abs_grad};
static const UnaryOp EXP = {true, exp, NULL, exp_grad};
static const UnaryOp SIN = {true, sin, NULL, sin_grad};
static const UnaryOp RELU = {false, relu_f, relu_i, relu_grad};

/* The plan of a unary call, shared by the CPU and fake kernels: the input, the result dtype and
 * the output's strides. */
static OpcStatus unary_plan(const OpcCallContext* ctx, const UnaryOp* op, const OpcValue* args, bool with_data,
                            View* self, Dt* out_dt, int64_t* out_strides) {
  OpcStatus st = read_tensor(ctx, &args[0], "self", with_data, self);
  if (st != OPC_OK) return st;
  *out_dt = (op->float_result && self->dt == DT_I64) ? DT_F32 : self->dt;
  if (*out_dt == DT_I64 && op->fi == NULL) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'self' has dtype int64, which this op does not support");
  }
  const View* in[1] = {self};
  elementwise_strides(self->ndim, self->shape, 1, in, out_strides);
  return OPC_OK;
}

static OpcStatus unary_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                           int64_t num_returns, const UnaryOp* op, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  if (st != OPC_OK) return st;
  View self, out;
  Dt out_dt;
  int64_t strides[MAX_DIMS];
  st = unary_plan(ctx, op, args, real, &self, &out_dt, strides);
  if (st == OPC_OK) st = make_output(ctx, out_dt, self.ndim, self.shape, strides, &returns[0], &out);
  if (st != OPC_OK || !real) return st;
  const Elementwise e = {.fd = unary_fd, .fi = unary_fi, .op = op};
  const View* in[1] = {&self};
  map_elements(&e, &out, 1, in, out_dt);
  return OPC_OK;
}

static OpcStatus unary_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                           int64_t num_returns, void* user_data) {
  return unary_run(ctx, args, num_args, returns, num_returns, (const UnaryOp*)user_data, true);
}

static OpcStatus unary_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data) {
  return unary_run(ctx, args, num_args, returns, num_returns, (const UnaryOp*)user_data, false);
}

/* ---- SEEDED BUG (b): aten::neg crashes on an empty input -------------------------------------
 * The kernel takes a scratch buffer, allocated only when there are values to negate, and then
 * clears its first entry unconditionally: for an empty input (numel == 0) that write goes through
 * a NULL pointer and the process dies with SIGSEGV. (The pointer is volatile so that the compiler
 * neither drops the write nor turns it into a trap instruction: the crash is a real one.)
 * Expected: `crashed`, on any sample with an empty tensor (edge_shapes' zero-size run always has
 * one; generated samples often do). */
static OpcStatus neg_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st != OPC_OK) return st;
  double* volatile scratch = NULL;
  if (self.numel > 0) scratch = (double*)ctx->alloc(ctx->host, (size_t)self.numel * sizeof(double));
  scratch[0] = 0.0; /* SEEDED BUG: NULL when self is empty (the check `if (scratch)` is missing) */
  return unary_run(ctx, args, num_args, returns, num_returns, (const UnaryOp*)user_data, true);
}

/* ---- SEEDED BUG (c): aten::exp never returns for a 3-D input -----------------------------------
 * A tiling loop for 3-D inputs walks the tiles along dim 0 but never advances its counter, so it
 * spins forever. (The counter is volatile: C11 lets a compiler assume that a loop without side
 * effects terminates; a volatile access is a side effect, so the loop stays.) Generated samples
 * have ranks 0 to 4, so 3-D ones come early.
 * Expected: `timed_out` (the worker running the kernel is killed after --timeout seconds). */
static OpcStatus exp_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st != OPC_OK) return st;
  if (self.ndim == 3) {
    volatile int64_t tile = 0;
    while (tile < self.shape[0]) {
      /* SEEDED BUG: `++tile;` is missing */
    }
  }
  return unary_run(ctx, args, num_args, returns, num_returns, (const UnaryOp*)user_data, true);
}

/* ---- SEEDED BUG (d): aten::abs writes its input ------------------------------------------------
 * "aten::abs(Tensor self) -> Tensor" does not mark `self` written, and the host passes it with
 * OPC_DLPACK_FLAG_BITMASK_READ_ONLY set. To save a buffer this kernel ignores the flag: it takes
 * |x| in place, in the caller's tensor, then computes the output from there. The output is right
 * (||x|| = |x|) but the caller's tensor has changed behind its back.
 * Expected: `failed` in test_schema ("argument 'self' was mutated ... but the schema does not
 * declare it mutable"). Side effect: gradcheck fails too, since the autograd formula (sign(x))
 * then reads the overwritten input. */
static OpcStatus abs_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self;
  if (st == OPC_OK) st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st != OPC_OK) return st;
  /* SEEDED BUG: should first check (args[0].u.tensor->flags & OPC_DLPACK_FLAG_BITMASK_READ_ONLY) */
  if (self.numel > 0) {
    Walk w;
    walk_init(&w, self.ndim, self.shape);
    walk_add(&w, self.data, self.strides, dt_size(self.dt));
    for (int64_t n = 0; n < self.numel; ++n, walk_next(&w)) {
      if (self.dt == DT_I64) store_i(w.ptr[0], abs_i(load_i(w.ptr[0])));
      else store_f(w.ptr[0], self.dt, fabs(load_f(w.ptr[0], self.dt)));
    }
  }
  return unary_run(ctx, args, num_args, returns, num_returns, (const UnaryOp*)user_data, true);
}

/* ---- SEEDED BUG (f): aten::sin ignores the strides of a dense input ----------------------------
 * A "fast path" for inputs whose elements fill their memory without holes (the span of the
 * strides equals numel) reads element n of the row-major order at memory position n, as if the
 * input were contiguous. That is right for contiguous inputs (with or without a byte_offset) but
 * not for a transposed (permuted) one, whose values come out permuted. Sliced and expanded inputs
 * are not dense and take the correct path. (Memory-safe: it only reads inside the input's span.)
 * Expected: `failed` in stride_invariance (its transposed view) and in reference agreement on
 * generated transposed samples. */
static OpcStatus sin_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  const UnaryOp* op = (const UnaryOp*)user_data;
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  View self, out;
  Dt out_dt;
  int64_t strides[MAX_DIMS];
  if (st == OPC_OK) st = unary_plan(ctx, op, args, true, &self, &out_dt, strides);
  if (st == OPC_OK) st = make_output(ctx, out_dt, self.ndim, self.shape, strides, &returns[0], &out);
  if (st != OPC_OK) return st;
  int64_t span = 1;
  for (int d = 0; d < self.ndim; ++d) span += (self.shape[d] - 1) * self.strides[d];
  if (self.numel == 0 || span != self.numel) { /* not dense: the correct strided path */
    const Elementwise e = {.fd = unary_fd, .fi = unary_fi, .op = op};
    const View* in[1] = {&self};
    map_elements(&e, &out, 1, in, out_dt);
    return OPC_OK;
  }
  Walk w;
  walk_init(&w, out.ndim, out.shape);
  walk_add(&w, out.data, out.strides, dt_size(out.dt));
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    /* SEEDED BUG: reads position n; element n (row-major) of a transposed input lives elsewhere */
    const double x = load_as(self.data + n * dt_size(self.dt), self.dt, out_dt);
    store_f(w.ptr[0], out.dt, op->fd(x));
  }
  return OPC_OK;
}

/* Autograd formula: args are [self, result, grad]; returns [grad_self]. */
static OpcStatus unary_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                int64_t num_returns, void* user_data) {
  OpcStatus st = check_arity(ctx, num_args, 1, num_returns, 1);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  View self, result, grad;
  bool has_grad;
  st = read_result_and_grad(ctx, args, num_args, 1, &result, &grad, &has_grad);
  if (st != OPC_OK || !has_grad) return st;
  st = read_tensor(ctx, &args[0], "self", true, &self);
  if (st != OPC_OK) return st;
  const Elementwise e = {.partials = unary_partials, .op = user_data};
  const View* in[1] = {&self};
  OpcValue* rets[1] = {&returns[0]};
  return elementwise_backward(ctx, &e, 1, in, &result, &grad, rets);
}

/* ================================================================================================
 * Binary elementwise ops: add.Tensor, sub.Tensor (with alpha), mul.Tensor, maximum
 * ============================================================================================= */

typedef struct {
  bool has_alpha;    /* (self, other, *, Scalar alpha) */
  bool float_result; /* div: integers divide in float32 */
  double (*fd)(double a, double b, double alpha);
  double (*fd64)(double a, double b, double alpha);   /* a float64 path (NULL: fd serves it too) */
  int64_t (*fi)(int64_t a, int64_t b, int64_t alpha); /* NULL: no integer path */
  void (*grad)(double a, double b, double alpha, double g, double* ga, double* gb);
} BinaryOp;

static double binary_fd(const Elementwise* e, const double* x) {
  const BinaryOp* op = (const BinaryOp*)e->op;
  if (e->out_dt == DT_F64 && op->fd64 != NULL) return op->fd64(x[0], x[1], e->alpha_d);
  return op->fd(x[0], x[1], e->alpha_d);
}
static int64_t binary_fi(const Elementwise* e, const int64_t* x) {
  return ((const BinaryOp*)e->op)->fi(x[0], x[1], e->alpha_i);
}
static void binary_partials(const Elementwise* e, const double* x, double r, double g, double* gx) {
  (void)r;
  ((const BinaryOp*)e->op)->grad(x[0], x[1], e->alpha_d, g, &gx[0], &gx[1]);
}

static double add_f(double a, double b, double alpha) { return a + alpha * b; }
static int64_t add_i(int64_t a, int64_t b, int64_t alpha) { return wrap_add(a, wrap_mul(alpha, b)); }
static void add_grad(double a, double b, double alpha, double g, double* ga, double* gb) {
  (void)a, (void)b;
  *ga = g;
  *gb = alpha * g;
}

static double sub_f(double a, double b, double alpha) { return a - alpha * b; }
static int64_t sub_i(int64_t a, int64_t b, int64_t alpha) { return wrap_sub(a, wrap_mul(alpha, b)); }
static void sub_grad(double a, double b, double alpha, double g, double* ga, double* gb) {
  (void)a, (void)b;
  *ga = g;
  *gb = -alpha * g;
}

static double mul_f(double a, double b, double alpha) { (void)alpha; return a * b; }
/* ---- SEEDED BUG (a): aten::mul.Tensor is wrong for float64 only --------------------------------
 * The float64 path (a separate kernel in many libraries) adds a stray 1e-3 to every product;
 * float32 (mul_f) and int64 (mul_i) are right.
 * Expected: `failed` in dtype_consistency (a float32 sample run again in float64 differs by 1e-3,
 * far beyond float32's tolerance) and in reference agreement on float64 samples. */
static double mul_f64(double a, double b, double alpha) {
  (void)alpha;
  return a * b + 1e-3; /* SEEDED BUG: the stray term */
}
static int64_t mul_i(int64_t a, int64_t b, int64_t alpha) { (void)alpha; return wrap_mul(a, b); }
static void mul_grad(double a, double b, double alpha, double g, double* ga, double* gb) {
  (void)alpha;
  *ga = g * b;
  *gb = g * a;
}

/* maximum / minimum: NaN propagates; the gradient goes to the larger (smaller) argument, split
 * in halves on ties (PyTorch's formula). */
static double maximum_f(double a, double b, double alpha) {
  (void)alpha;
  if (isnan(a) || isnan(b)) return NAN;
  return a < b ? b : a;
}
static int64_t maximum_i(int64_t a, int64_t b, int64_t alpha) { (void)alpha; return a < b ? b : a; }
static void maximum_grad(double a, double b, double alpha, double g, double* ga, double* gb) {
  (void)alpha;
  *ga = a < b ? 0.0 : a == b ? g / 2 : g;
  *gb = b < a ? 0.0 : a == b ? g / 2 : g;
}

static const BinaryOp ADD = {true, false, add_f, NULL, add_i, add_grad};
static const BinaryOp SUB = {true, false, sub_f, NULL, sub_i, sub_grad};
static const BinaryOp MUL = {false, false, mul_f, mul_f64, mul_i, mul_grad}; /* SEEDED BUG (a) */
static const BinaryOp MAXIMUM = {false, false, maximum_f, NULL, maximum_i, maximum_grad};

typedef struct {
  View self, other;
  Dt out_dt; /* also the compute dtype */
  int ndim;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
  double alpha_d;
  int64_t alpha_i;
} BinaryPlan;

static OpcStatus binary_plan(const OpcCallContext* ctx, const BinaryOp* op, const OpcValue* args, int64_t num_args,
                             bool with_data, BinaryPlan* p) {
  OpcStatus st = read_tensor(ctx, &args[0], "self", with_data, &p->self);
  if (st == OPC_OK) st = read_tensor(ctx, &args[1], "other", with_data, &p->other);
  if (st != OPC_OK) return st;
  /* result_type: dimensioned tensors first, then 0-d ones */
  Dt dimensioned = DT_NONE, zero_dim = DT_NONE;
  const View* both[2] = {&p->self, &p->other};
  for (int k = 0; k < 2; ++k) {
    if (both[k]->ndim > 0) dimensioned = promote(dimensioned, both[k]->dt);
    else zero_dim = promote(zero_dim, both[k]->dt);
  }
  p->out_dt = combine(dimensioned, zero_dim);
  if (op->float_result && p->out_dt == DT_I64) p->out_dt = DT_F32;
  if (p->out_dt == DT_I64 && op->fi == NULL) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "int64 arguments 'self' and 'other' are not supported by this op");
  }
  p->alpha_d = 1.0;
  p->alpha_i = 1;
  if (op->has_alpha) {
    if (num_args < 3) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'alpha' is missing");
    const OpcValue* alpha = &args[2];
    if (alpha->tag == OPC_TAG_BOOL) {
      return fail(ctx, OPC_INVALID_ARGUMENT, "a bool 'alpha' is only supported for bool results (the result is %s)",
                  dt_name(p->out_dt));
    }
    if (alpha->tag == OPC_TAG_DOUBLE && p->out_dt == DT_I64) {
      return fail(ctx, OPC_INVALID_ARGUMENT,
                  "for integral input tensors, argument 'alpha' must not be a floating point number (got %g)",
                  alpha->u.d);
    }
    if (alpha->tag != OPC_TAG_NONE && alpha->tag != OPC_TAG_INT && alpha->tag != OPC_TAG_DOUBLE) {
      return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'alpha' must be a real number");
    }
    if (alpha->tag != OPC_TAG_NONE) {
      p->alpha_d = scalar_d(alpha);
      p->alpha_i = alpha->tag == OPC_TAG_INT ? alpha->u.i : 1;
    }
  }
  st = broadcast_shape(ctx, &p->self, "self", &p->other, "other", &p->ndim, p->shape);
  if (st != OPC_OK) return st;
  elementwise_strides(p->ndim, p->shape, 2, both, p->strides);
  return OPC_OK;
}

static OpcStatus binary_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, const BinaryOp* op, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 2, num_returns, 1);
  if (st != OPC_OK) return st;
  BinaryPlan p;
  View out;
  st = binary_plan(ctx, op, args, num_args, real, &p);
  if (st == OPC_OK) st = make_output(ctx, p.out_dt, p.ndim, p.shape, p.strides, &returns[0], &out);
  if (st != OPC_OK || !real) return st;
  const Elementwise e = {
      .fd = binary_fd, .fi = binary_fi, .op = op, .alpha_d = p.alpha_d, .alpha_i = p.alpha_i, .out_dt = p.out_dt};
  const View* in[2] = {&p.self, &p.other};
  map_elements(&e, &out, 2, in, p.out_dt);
  return OPC_OK;
}

static OpcStatus binary_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data) {
  return binary_run(ctx, args, num_args, returns, num_returns, (const BinaryOp*)user_data, true);
}

static OpcStatus binary_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  return binary_run(ctx, args, num_args, returns, num_returns, (const BinaryOp*)user_data, false);
}

/* Autograd formula: args are [self, other, (alpha,) result, grad]; returns one value per schema
 * argument: [grad_self, grad_other, (None for alpha)]. Gradients are summed over the dims an
 * input was broadcast along, so each has its input's shape. */
static OpcStatus binary_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                 OpcValue* returns, int64_t num_returns, void* user_data) {
  const BinaryOp* op = (const BinaryOp*)user_data;
  const int64_t n = op->has_alpha ? 3 : 2; /* schema arguments */
  OpcStatus st = check_arity(ctx, num_args, n, num_returns, n);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  View result, grad;
  bool has_grad;
  st = read_result_and_grad(ctx, args, num_args, n, &result, &grad, &has_grad);
  if (st != OPC_OK || !has_grad) return st;
  BinaryPlan p;
  st = binary_plan(ctx, op, args, num_args, true, &p);
  if (st != OPC_OK) return st;
  const Elementwise e = {.partials = binary_partials, .op = op, .alpha_d = p.alpha_d, .alpha_i = p.alpha_i};
  const View* in[2] = {&p.self, &p.other};
  OpcValue* rets[2] = {&returns[0], &returns[1]};
  return elementwise_backward(ctx, &e, 2, in, &result, &grad, rets);
}

/* ================================================================================================
 * Reductions: sum.dim_IntList (Tensor self, int[1]? dim, bool keepdim=False, *,
 * ScalarType? dtype=None). Outputs are contiguous, as PyTorch's.
 * ============================================================================================= */

typedef struct {
  bool mean;
} ReduceOp;

static const ReduceOp SUM = {false};

typedef struct {
  View self;
  bool reduced[MAX_DIMS]; /* which dims of self are reduced */
  bool keepdim;
  Dt out_dt;
  int out_ndim;
  int64_t out_shape[MAX_DIMS];
  int64_t group; /* input elements per output element */
} ReducePlan;

static OpcStatus reduce_plan(const OpcCallContext* ctx, const ReduceOp* op, const OpcValue* args, bool with_data,
                             ReducePlan* p) {
  OpcStatus st = read_tensor(ctx, &args[0], "self", with_data, &p->self);
  if (st != OPC_OK) return st;
  const int ndim = p->self.ndim;
  const int64_t rank = ndim > 0 ? ndim : 1; /* a 0-d tensor takes dim 0 or -1 */
  /* dims: None or [] reduce every dim; each named dim may be negative, and appear once */
  bool named[MAX_DIMS] = {false};
  const OpcValue* dim = &args[1];
  const OpcValue* items = dim->tag == OPC_TAG_LIST ? dim->u.list.items : dim;
  const int64_t count = dim->tag == OPC_TAG_LIST ? dim->u.list.size : dim->tag == OPC_TAG_INT ? 1 : 0;
  if (dim->tag != OPC_TAG_NONE && dim->tag != OPC_TAG_LIST && dim->tag != OPC_TAG_INT) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'dim' must be a list of ints or None");
  }
  for (int64_t i = 0; i < count; ++i) {
    if (items[i].tag != OPC_TAG_INT) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'dim' must hold ints");
    const int64_t d = items[i].u.i;
    if (d < -rank || d >= rank) {
      return fail(ctx, OPC_INVALID_ARGUMENT,
                  "dim %lld is out of range for a tensor of rank %d (expected [%lld, %lld]) (argument 'dim')",
                  (long long)d, ndim, (long long)-rank, (long long)(rank - 1));
    }
    const int64_t w = d < 0 ? d + rank : d;
    if (named[w]) {
      return fail(ctx, OPC_INVALID_ARGUMENT, "dim %lld appears multiple times in the list of dims (argument 'dim')",
                  (long long)w);
    }
    named[w] = true;
  }
  const bool all = count == 0;
  const OpcValue* keepdim = &args[2];
  if (keepdim->tag != OPC_TAG_BOOL) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'keepdim' must be a bool");
  p->keepdim = keepdim->u.b != 0;
  p->out_ndim = 0;
  p->group = 1;
  for (int d = 0; d < ndim; ++d) {
    p->reduced[d] = all || named[d];
    if (p->reduced[d]) p->group *= p->self.shape[d];
    if (!p->reduced[d]) p->out_shape[p->out_ndim++] = p->self.shape[d];
    else if (p->keepdim) p->out_shape[p->out_ndim++] = 1;
  }
  /* the result dtype: the dtype argument, else sum: int64 for integers, the input's otherwise;
   * mean: the input's, which must be floating */
  Dt requested = DT_NONE;
  const OpcValue* dtype = &args[3];
  if (dtype->tag == OPC_TAG_INT) {
    requested = dt_of_scalar_type(dtype->u.i);
    if (requested == DT_NONE) {
      return fail(ctx, OPC_NOT_IMPLEMENTED, "argument 'dtype' (ScalarType %lld) is not supported (float32, float64, int64)",
                  (long long)dtype->u.i);
    }
  } else if (dtype->tag != OPC_TAG_NONE) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'dtype' must be a ScalarType or None");
  }
  p->out_dt = requested != DT_NONE ? requested : p->self.dt;
  if (op->mean && !dt_floating(p->out_dt)) {
    return fail(ctx, OPC_INVALID_ARGUMENT,
                "could not infer the output dtype: the input dtype %s is not floating; pass a floating dtype "
                "(argument 'dtype')",
                dt_name(p->self.dt));
  }
  if (!op->mean && p->out_dt == DT_I64 && dt_floating(p->self.dt)) {
    return fail(ctx, OPC_NOT_IMPLEMENTED, "summing a %s argument 'self' into int64 (argument 'dtype') is not supported",
                dt_name(p->self.dt));
  }
  return OPC_OK;
}

/* Sums (or averages) every group: groups in row-major order of the kept dims (the contiguous
 * output's order), values in row-major order of the reduced dims, each cast to the result dtype
 * first (PyTorch's sum(dtype=...)) and accumulated in the wide type. */
static void reduce_values(const ReducePlan* p, bool mean, View* out) {
  if (out->numel == 0) return;
  if (p->group == 0) { /* a reduced dim of size 0: the input has no data to walk */
    for (int64_t g = 0; g < out->numel; ++g) {
      if (out->dt == DT_I64) store_i(out->data + g * 8, 0);
      else store_f(out->data + g * dt_size(out->dt), out->dt, mean ? NAN : 0.0); /* an empty mean is 0/0 */
    }
    return;
  }
  const View* in = &p->self;
  int nk = 0, nr = 0;
  int64_t kept_shape[MAX_DIMS], kept_strides[MAX_DIMS], red_shape[MAX_DIMS], red_strides[MAX_DIMS];
  for (int d = 0; d < in->ndim; ++d) {
    if (p->reduced[d]) {
      red_shape[nr] = in->shape[d];
      red_strides[nr++] = in->strides[d];
    } else {
      kept_shape[nk] = in->shape[d];
      kept_strides[nk++] = in->strides[d];
    }
  }
  int64_t out_strides[MAX_DIMS];
  contiguous_strides(nk, kept_shape, out_strides);
  Walk groups;
  walk_init(&groups, nk, kept_shape);
  walk_add(&groups, out->data, out_strides, dt_size(out->dt));
  walk_add(&groups, in->data, kept_strides, dt_size(in->dt));
  for (int64_t g = 0; g < out->numel; ++g, walk_next(&groups)) {
    Walk values;
    walk_init(&values, nr, red_shape);
    walk_add(&values, groups.ptr[1], red_strides, dt_size(in->dt));
    if (out->dt == DT_I64) {
      int64_t acc = 0;
      for (int64_t i = 0; i < p->group; ++i, walk_next(&values)) acc = wrap_add(acc, load_i(values.ptr[0]));
      store_i(groups.ptr[0], acc);
    } else {
      double acc = 0.0;
      for (int64_t i = 0; i < p->group; ++i, walk_next(&values)) acc += load_as(values.ptr[0], in->dt, out->dt);
      store_f(groups.ptr[0], out->dt, mean ? acc / (double)p->group : acc);
    }
  }
}

static OpcStatus reduce_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, const ReduceOp* op, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 4, num_returns, 1);
  if (st != OPC_OK) return st;
  ReducePlan p;
  View out;
  st = reduce_plan(ctx, op, args, real, &p);
  if (st != OPC_OK) return st;
  int64_t strides[MAX_DIMS];
  contiguous_strides(p.out_ndim, p.out_shape, strides);
  st = make_output(ctx, p.out_dt, p.out_ndim, p.out_shape, strides, &returns[0], &out);
  if (st != OPC_OK || !real) return st;
  reduce_values(&p, op->mean, &out);
  return OPC_OK;
}

static OpcStatus reduce_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data) {
  return reduce_run(ctx, args, num_args, returns, num_returns, (const ReduceOp*)user_data, true);
}

/* ---- SEEDED BUG (e): aten::sum.dim_IntList's fake kernel ignores keepdim ---------------------
 * The fake kernel computes the output shape on its own and forgets keepdim: it always drops the
 * reduced dims, so for keepdim=True it predicts [3] where the real kernel returns [3, 1]. A
 * program traced or compiled through fake tensors would see the wrong shape. The CPU kernel is
 * right. Expected: `failed` in test_faketensor ("output 0 sizes: the fake kernel gives [3], the
 * real kernel [3, 1]"). */
static OpcStatus reduce_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  OpcStatus st = check_arity(ctx, num_args, 4, num_returns, 1);
  if (st != OPC_OK) return st;
  ReducePlan p;
  View out;
  st = reduce_plan(ctx, (const ReduceOp*)user_data, args, false, &p);
  if (st != OPC_OK) return st;
  int ndim = 0;
  int64_t shape[MAX_DIMS], strides[MAX_DIMS];
  for (int d = 0; d < p.self.ndim; ++d) {
    if (!p.reduced[d]) shape[ndim++] = p.self.shape[d]; /* SEEDED BUG: no `else if (p.keepdim) shape[ndim++] = 1;` */
  }
  contiguous_strides(ndim, shape, strides);
  return make_output(ctx, p.out_dt, ndim, shape, strides, &returns[0], &out);
}

/* Autograd formula: args are [self, dim, keepdim, dtype, result, grad]; returns [grad_self, None,
 * None, None]. Every input element gets its group's gradient (divided by the group size for
 * mean), in self's dtype. */
static OpcStatus reduce_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  const ReduceOp* op = (const ReduceOp*)user_data;
  OpcStatus st = check_arity(ctx, num_args, 4, num_returns, 4);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  View result, grad, out;
  bool has_grad;
  st = read_result_and_grad(ctx, args, num_args, 4, &result, &grad, &has_grad);
  if (st != OPC_OK || !has_grad) return st;
  ReducePlan p;
  st = reduce_plan(ctx, op, args, true, &p);
  if (st != OPC_OK) return st;
  if (!dt_floating(p.self.dt)) return OPC_OK;
  if (!same_shape(&grad, p.out_ndim, p.out_shape)) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "the gradient's shape does not match the result's");
  }
  /* grad's strides seen from self's dims: 0 along reduced dims (the gradient is broadcast back) */
  int64_t g_strides[MAX_DIMS];
  for (int d = 0, o = 0; d < p.self.ndim; ++d) {
    if (p.reduced[d]) {
      g_strides[d] = 0;
      if (p.keepdim) ++o;
    } else {
      g_strides[d] = grad.strides[o++];
    }
  }
  int64_t strides[MAX_DIMS];
  contiguous_strides(p.self.ndim, p.self.shape, strides);
  st = make_output(ctx, p.self.dt, p.self.ndim, p.self.shape, strides, &returns[0], &out);
  if (st != OPC_OK || out.numel == 0) return st;
  Walk w;
  walk_init(&w, p.self.ndim, p.self.shape);
  walk_add(&w, out.data, out.strides, dt_size(out.dt));
  walk_add(&w, grad.data, g_strides, dt_size(grad.dt));
  const double scale = op->mean ? 1.0 / (double)p.group : 1.0;
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    const double g = load_f(w.ptr[1], grad.dt);
    store_f(w.ptr[0], out.dt, op->mean ? g * scale : g);
  }
  return OPC_OK;
}

/* ================================================================================================
 * mm(Tensor self, Tensor mat2): [n, k] @ [k, m] -> a contiguous [n, m]; one dtype, no promotion
 * ============================================================================================= */

static OpcStatus mm_plan(const OpcCallContext* ctx, const OpcValue* args, bool with_data, View* a, View* b) {
  OpcStatus st = read_tensor(ctx, &args[0], "self", with_data, a);
  if (st == OPC_OK) st = read_tensor(ctx, &args[1], "mat2", with_data, b);
  if (st != OPC_OK) return st;
  if (a->ndim != 2) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'self' must be a 2-D tensor, got %d-D", a->ndim);
  if (b->ndim != 2) return fail(ctx, OPC_INVALID_ARGUMENT, "argument 'mat2' must be a 2-D tensor, got %d-D", b->ndim);
  if (a->dt != b->dt) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "expected arguments 'self' and 'mat2' to have the same dtype, got %s and %s",
                dt_name(a->dt), dt_name(b->dt));
  }
  if (a->shape[1] != b->shape[0]) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "arguments 'self' and 'mat2' cannot be multiplied ([%lld, %lld] @ [%lld, %lld])",
                (long long)a->shape[0], (long long)a->shape[1], (long long)b->shape[0], (long long)b->shape[1]);
  }
  return OPC_OK;
}

static const char* at2(const View* v, int64_t i, int64_t j) {
  return v->data + (i * v->strides[0] + j * v->strides[1]) * dt_size(v->dt);
}

/* out = a @ b, each dot product accumulated in the wide type (int64 wraps) and rounded once. */
static void matmul(const View* a, const View* b, View* out) {
  const int64_t n = a->shape[0], inner = a->shape[1], m = b->shape[1];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      char* o = out->data + (i * out->strides[0] + j * out->strides[1]) * dt_size(out->dt);
      if (out->dt == DT_I64) {
        int64_t acc = 0;
        for (int64_t k = 0; k < inner; ++k) acc = wrap_add(acc, wrap_mul(load_i(at2(a, i, k)), load_i(at2(b, k, j))));
        store_i(o, acc);
      } else {
        double acc = 0.0;
        for (int64_t k = 0; k < inner; ++k) acc += load_f(at2(a, i, k), a->dt) * load_f(at2(b, k, j), b->dt);
        store_f(o, out->dt, acc);
      }
    }
  }
}

static OpcStatus mm_run(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, bool real) {
  OpcStatus st = check_arity(ctx, num_args, 2, num_returns, 1);
  if (st != OPC_OK) return st;
  View a, b, out;
  st = mm_plan(ctx, args, real, &a, &b);
  if (st != OPC_OK) return st;
  const int64_t shape[2] = {a.shape[0], b.shape[1]};
  int64_t strides[2];
  contiguous_strides(2, shape, strides);
  st = make_output(ctx, a.dt, 2, shape, strides, &returns[0], &out);
  if (st != OPC_OK || !real) return st;
  matmul(&a, &b, &out);
  return OPC_OK;
}

static OpcStatus mm_cpu(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                        int64_t num_returns, void* user_data) {
  (void)user_data;
  return mm_run(ctx, args, num_args, returns, num_returns, true);
}

static OpcStatus mm_fake(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, void* user_data) {
  (void)user_data;
  return mm_run(ctx, args, num_args, returns, num_returns, false);
}

/* A transposed view of a 2-D view (no copy): swaps the shape and the strides. */
static View transposed(const View* v) {
  View t = *v;
  t.shape[0] = v->shape[1];
  t.shape[1] = v->shape[0];
  t.strides[0] = v->strides[1];
  t.strides[1] = v->strides[0];
  return t;
}

/* Autograd formula: args are [self, mat2, result, grad]; returns [grad @ mat2^T, self^T @ grad],
 * computed in double and stored in the operands' dtype. */
static OpcStatus mm_backward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  (void)user_data;
  OpcStatus st = check_arity(ctx, num_args, 2, num_returns, 2);
  if (st != OPC_OK) return st;
  set_none(returns, num_returns);
  View a, b, result, grad, ga, gb;
  bool has_grad;
  st = read_result_and_grad(ctx, args, num_args, 2, &result, &grad, &has_grad);
  if (st != OPC_OK || !has_grad) return st;
  st = mm_plan(ctx, args, true, &a, &b);
  if (st != OPC_OK || !dt_floating(a.dt)) return st;
  if (grad.ndim != 2 || grad.shape[0] != a.shape[0] || grad.shape[1] != b.shape[1]) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "the gradient's shape does not match the result's");
  }
  int64_t sa[2], sb[2];
  contiguous_strides(2, a.shape, sa);
  contiguous_strides(2, b.shape, sb);
  st = make_output(ctx, a.dt, 2, a.shape, sa, &returns[0], &ga);
  if (st != OPC_OK) return st;
  st = make_output(ctx, b.dt, 2, b.shape, sb, &returns[1], &gb);
  if (st != OPC_OK) {
    release_output(&returns[0]);
    return st;
  }
  /* matmul rounds into the output's dtype: the operands' one. grad may be float64 while the
   * operands are float32 (or the other way); matmul reads each operand in its own dtype. */
  const View bt = transposed(&b), at = transposed(&a);
  if (ga.numel > 0) matmul(&grad, &bt, &ga);
  if (gb.numel > 0) matmul(&at, &grad, &gb);
  return OPC_OK;
}

/* ================================================================================================
 * Registration
 * ============================================================================================= */

typedef struct {
  const char* name;
  OpcKernelFn cpu, fake, backward; /* backward NULL: not differentiable */
  const void* user_data;
  bool with_int64; /* int64 among the declared dtypes (float32 and float64 always) */
} OpEntry;

static const OpEntry OPS[] = {
    /* correct */
    {"aten::add.Tensor", binary_cpu, binary_fake, binary_backward, &ADD, true},
    {"aten::sub.Tensor", binary_cpu, binary_fake, binary_backward, &SUB, true},
    {"aten::maximum", binary_cpu, binary_fake, binary_backward, &MAXIMUM, true},
    {"aten::relu", unary_cpu, unary_fake, unary_backward, &RELU, true},
    {"aten::mm", mm_cpu, mm_fake, mm_backward, NULL, true},
    /* seeded bugs */
    {"aten::mul.Tensor", binary_cpu, binary_fake, binary_backward, &MUL, true},      /* (a) float64 values */
    {"aten::neg", neg_cpu, unary_fake, unary_backward, &NEG, true},                  /* (b) crash when empty */
    {"aten::exp", exp_cpu, unary_fake, unary_backward, &EXP, false},                 /* (c) hang on 3-D */
    {"aten::abs", abs_cpu, unary_fake, unary_backward, &ABS, true},                  /* (d) writes its input */
    {"aten::sum.dim_IntList", reduce_cpu, reduce_fake, reduce_backward, &SUM, true}, /* (e) fake ignores keepdim */
    {"aten::sin", sin_cpu, unary_fake, unary_backward, &SIN, false},                 /* (f) ignores strides */
};

static OpcStatus register_ops(const OpcRegistrar* r) {
  if (r->version != OPC_PLUGIN_ABI_VERSION_1) return OPC_ABI_MISMATCH;
  const DLDataType dtypes[3] = {dl_dtype(DT_F32), dl_dtype(DT_F64), dl_dtype(DT_I64)};
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; ++i) {
    const OpEntry* op = &OPS[i];
    void* user_data = (void*)op->user_data; /* read-only descriptors: the kernels never write them */
    OpcStatus st = r->impl(r->host, op->name, OPC_KERNEL_CPU, op->cpu, user_data);
    if (st == OPC_OK) st = r->impl(r->host, op->name, OPC_KERNEL_FAKE, op->fake, user_data);
    if (st == OPC_OK && op->backward) st = r->impl(r->host, op->name, OPC_KERNEL_BACKWARD, op->backward, user_data);
    if (st == OPC_OK) st = r->declare_dtypes(r->host, op->name, dtypes, op->with_int64 ? 3 : 2);
    if (st != OPC_OK) return st;
  }
  return OPC_OK;
}

static const OpcPlugin PLUGIN = {
    .abi_version = OPC_PLUGIN_ABI_VERSION_1, .size = sizeof(OpcPlugin), .name = "buggy-ops", .version = "0.0.1",
    .register_ops = register_ops, .flags = 0,
};

OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &PLUGIN; }
