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
 * It uses the kit the example libraries share, examples/plugin_kit/opc_kit.h (errors, dtypes,
 * tensor views, the strided walk; the library passes its name and its four dtypes). Layout of this
 * file: one section per op, then registration.
 *
 * Build: the CMake target opconform_coverage_plugin (a shared library). Check it with
 *     opconform check --library build/default/examples/coverage_plugin/libopconform_coverage_plugin.so */

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "opconform/plugin.h"

/* The kit (examples/plugin_kit/opc_kit.h): errors, dtypes (bool's DLPack code among them), tensor
 * views, the strided walk. */
#define OPC_KIT_LIBRARY "coverage-bugs"
#define OPC_KIT_DTYPES (DT_BIT(DT_F32) | DT_BIT(DT_F64) | DT_BIT(DT_I64) | DT_BIT(DT_BOOL))
#include "opc_kit.h"

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
  st = make_contiguous_output(ctx, DT_BOOL, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  /* ---- SEEDED BUG (g): aten::logical_not is always true ----------------------------------------
   * The loop reads every element of self through its strides (offsets, expanded and 0-d inputs
   * are right) but stores 1 where it should store !x: the result is true everywhere. An input
   * that is all False gives the right answer, so only samples holding False and True catch it.
   * Expected: `failed` in reference_agreement (bool). */
  Walk w;
  walk_init_view(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    const uint8_t x = (uint8_t)*w.ptr[0];
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
  if (st == OPC_OK) st = make_contiguous_output(ctx, p.dt, p.ndim, p.shape, &returns[0], &out);
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
  st = make_contiguous_output(ctx, self.dt, self.ndim, self.shape, &returns[0], &out);
  if (st != OPC_OK || !real || out.numel == 0) return st;
  Walk w;
  walk_init_view(&w, &self);
  for (int64_t n = 0; n < out.numel; ++n, walk_next(&w)) {
    if (self.dt == DT_F32) {
      float x;
      memcpy(&x, w.ptr[0], sizeof x);
      x = -x;
      memcpy(out.data + n * 4, &x, sizeof x);
    } else {
      double x;
      memcpy(&x, w.ptr[0], sizeof x);
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
  if (r->version != OPC_PLUGIN_ABI_VERSION_1) return OPC_ABI_MISMATCH;
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
    .abi_version = OPC_PLUGIN_ABI_VERSION_1, .size = sizeof(OpcPlugin), .name = "coverage-bugs", .version = "0.0.1",
    .register_ops = register_ops, .flags = 0,
};

OPC_EXPORT const OpcPlugin* opconform_plugin(void) { return &PLUGIN; }
