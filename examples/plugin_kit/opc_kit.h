/* opc_kit.h — the helpers every example library shares: errors that name the op and argument,
 * dtypes, tensor views, the strided walk (plus the broadcasting, promotion and element access the
 * vendor plugin's elementwise kernels build on). Plain C11, static inline, header only: each
 * plugin (examples/vendor_plugin, buggy_plugin, coverage_plugin, silent_bugs_plugin) includes it
 * once, after "opconform/plugin.h", and stays a single self-contained shared library.
 *
 * Configuration, #defined by the plugin before the #include:
 *   OPC_KIT_LIBRARY   (required) the library's name, the prefix of a message when the call has no
 *                     op name ("vendor-ops: ...").
 *   OPC_KIT_DTYPES    (required) the dtypes the library computes with, a mask of DT_BIT(DT_...)
 *                     (expanded inside the kit, so the names need not exist yet). dt_of and
 *                     dt_of_scalar_type refuse the others (DT_NONE), and read_tensor's message
 *                     lists this set ("... does not support (float32, float64)").
 *   MAX_DIMS          (default 16) deeper tensors are refused with an error naming the argument.
 *   MAX_OPERANDS      (default 6) tensors one strided walk moves through together.
 *
 * The helpers (one line each; the comment at each says why):
 *   fail                   sets "<op>: <what>" as the call's error and returns the status
 *   Dt, DT_BIT, DL_BOOL_CODE  the dtypes (float32, float64, int64, bool), a mask bit, bool's code
 *   dt_supported / dt_list   a Dt if in OPC_KIT_DTYPES (else DT_NONE); the set as text
 *   dt_of / dl_dtype       DLPack dtype <-> Dt (dt_of: DT_NONE outside OPC_KIT_DTYPES)
 *   dt_size / dt_name / dt_floating   element size, name, floating or not
 *   dt_of_scalar_type      a `ScalarType?` argument's number -> Dt (DT_NONE outside the set)
 *   promote / combine      PyTorch's promote_types and c10's category rule (float32/64, int64)
 *   View                   what a kernel needs of a DLPack tensor (dtype, shape, strides, data)
 *   numel_of / contiguous_strides / same_shape   shape arithmetic
 *   read_tensor            a tensor argument -> View, every refusal naming the argument
 *   read_result_and_grad   the [result, grad] pair after the schema arguments of a backward call
 *   make_output / make_contiguous_output   a new output from ctx->new_tensor, as a View
 *   release_output / set_none / check_arity   returns and arity
 *   Walk: walk_init, walk_add, walk_add_view, walk_init_view, walk_next   the strided walk
 *   broadcast_shape / strides_over / elementwise_strides   broadcasting, TensorIterator's layout
 *   load_f / load_as / load_i / store_f / store_i   element access in the wide types
 *   wrap_add / wrap_sub / wrap_mul   int64 arithmetic that wraps, as PyTorch's
 *   scalar_d / scalar_i / is_real_scalar   Scalar arguments */

#ifndef OPCONFORM_EXAMPLES_OPC_KIT_H
#define OPCONFORM_EXAMPLES_OPC_KIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "opconform/plugin.h"

#ifndef OPC_KIT_LIBRARY
#error "#define OPC_KIT_LIBRARY (the library's name in messages) before including opc_kit.h"
#endif
#ifndef OPC_KIT_DTYPES
#error "#define OPC_KIT_DTYPES (a mask of DT_BIT(DT_...): the library's dtypes) before including opc_kit.h"
#endif

#ifndef MAX_DIMS
#define MAX_DIMS 16 /* deeper tensors are refused with an error naming the argument */
#endif
#ifndef MAX_OPERANDS
#define MAX_OPERANDS 6 /* tensors one strided walk moves through together */
#endif

/* ================================================================================================
 * Errors
 * ============================================================================================= */

/* Sets the call's error message ("<op>: <what>") and returns `status`. Messages name the argument
 * ('self', 'other', ...) so that a user sees which one was wrong. */
__attribute__((format(printf, 3, 4))) static inline OpcStatus fail(const OpcCallContext* ctx, OpcStatus status,
                                                                   const char* fmt, ...) {
  char message[512];
  int n = snprintf(message, sizeof message, "%s: ", ctx->op_name ? ctx->op_name : OPC_KIT_LIBRARY);
  if (n < 0 || (size_t)n >= sizeof message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message + n, sizeof message - (size_t)n, fmt, ap);
  va_end(ap);
  ctx->set_error(ctx->host, message);
  return status;
}

/* ================================================================================================
 * Dtypes: the four the examples know; each library computes with its OPC_KIT_DTYPES
 * ============================================================================================= */

typedef enum { DT_F32, DT_F64, DT_I64, DT_BOOL, DT_NONE } Dt;

#define DT_BIT(d) (1u << (unsigned)(d))

/* DLPack's type code for bool: 1.x's kDLBool (OPC_DL_BOOL of opconform/plugin.h); bool is 8 bits. */
#define DL_BOOL_CODE OPC_DL_BOOL

/* `d` if the library computes with it, DT_NONE otherwise. */
static inline Dt dt_supported(Dt d) { return d != DT_NONE && ((OPC_KIT_DTYPES)&DT_BIT(d)) ? d : DT_NONE; }

static inline Dt dt_of(DLDataType t) {
  if (t.lanes != 1) return DT_NONE;
  if (t.code == kDLFloat && t.bits == 32) return dt_supported(DT_F32);
  if (t.code == kDLFloat && t.bits == 64) return dt_supported(DT_F64);
  if (t.code == kDLInt && t.bits == 64) return dt_supported(DT_I64);
  if (t.code == DL_BOOL_CODE && t.bits == 8) return dt_supported(DT_BOOL);
  return DT_NONE;
}

static inline DLDataType dl_dtype(Dt d) {
  DLDataType t;
  t.code = (uint8_t)(d == DT_I64 ? kDLInt : d == DT_BOOL ? DL_BOOL_CODE : kDLFloat);
  t.bits = (uint8_t)(d == DT_F32 ? 32 : d == DT_BOOL ? 8 : 64);
  t.lanes = 1;
  return t;
}

static inline int64_t dt_size(Dt d) { return d == DT_F32 ? 4 : d == DT_BOOL ? 1 : 8; }
static inline bool dt_floating(Dt d) { return d == DT_F32 || d == DT_F64; }
static inline const char* dt_name(Dt d) {
  return d == DT_F32 ? "float32" : d == DT_F64 ? "float64" : d == DT_I64 ? "int64" : "bool";
}

/* The library's dtypes as read_tensor's message lists them: "float32, float64, int64". */
static inline void dt_list(char* buf, size_t size) {
  size_t n = 0;
  buf[0] = '\0';
  for (int d = DT_F32; d < DT_NONE; ++d) {
    if (dt_supported((Dt)d) == DT_NONE) continue;
    const int k = snprintf(buf + n, size - n, "%s%s", n ? ", " : "", dt_name((Dt)d));
    if (k < 0 || (size_t)k >= size - n) return;
    n += (size_t)k;
  }
}

/* A `ScalarType?` argument carries PyTorch's ScalarType number (c10/core/ScalarType.h; opconform's
 * table is core/src/default_value.cpp): 0 uint8, 1 int8, 2 int16, 3 int32, 4 int64, 5 float16,
 * 6 float32, 7 float64, 9 complex64, 10 complex128, 11 bool, 15 bfloat16. */
static inline Dt dt_of_scalar_type(int64_t scalar_type) {
  switch (scalar_type) {
    case 4: return dt_supported(DT_I64);   /* torch.long */
    case 6: return dt_supported(DT_F32);   /* torch.float */
    case 7: return dt_supported(DT_F64);   /* torch.double */
    case 11: return dt_supported(DT_BOOL); /* torch.bool */
    default: return DT_NONE;
  }
}

/* PyTorch's promote_types, restricted to float32, float64 and int64; DT_NONE means "no tensor of
 * this kind". */
static inline Dt promote(Dt a, Dt b) {
  if (a == DT_NONE) return b;
  if (b == DT_NONE || a == b) return a;
  if (a == DT_F64 || b == DT_F64) return DT_F64;
  return DT_F32; /* float32 with int64 */
}

/* c10's category rule: a lower-priority group (0-d tensors, scalars) changes the result only
 * when it brings a higher category (a float 0-d tensor with an int64 dimensioned one). */
static inline Dt combine(Dt higher, Dt lower) {
  if (higher == DT_NONE) return lower;
  if (lower == DT_NONE || dt_floating(higher)) return higher;
  return dt_floating(lower) ? promote(higher, lower) : higher;
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

static inline int64_t numel_of(int ndim, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

/* Row-major strides, PyTorch's way (a size-0 or size-1 dim counts as 1). */
static inline void contiguous_strides(int ndim, const int64_t* shape, int64_t* strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d] > 1 ? shape[d] : 1;
  }
}

static inline bool same_shape(const View* a, int ndim, const int64_t* shape) {
  if (a->ndim != ndim) return false;
  for (int d = 0; d < ndim; ++d)
    if (a->shape[d] != shape[d]) return false;
  return true;
}

/* Reads tensor argument `v` (named `name` in messages) into `out`. `with_data` is false in fake
 * kernels: their tensors have no data and must not be read. */
static inline OpcStatus read_tensor(const OpcCallContext* ctx, const OpcValue* v, const char* name, bool with_data,
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
    char supported[64];
    dt_list(supported, sizeof supported);
    return fail(ctx, OPC_NOT_IMPLEMENTED,
                "argument '%s' has a dtype (code %u, %u bits, %u lanes) this library does not support (%s)", name,
                (unsigned)t->dtype.code, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes, supported);
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

/* Reads the [result, grad] pair that follows the n schema arguments of a backward call. Returns
 * OPC_OK with *has_grad false when the gradient is None (nothing flows back). */
static inline OpcStatus read_result_and_grad(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args,
                                             int64_t n, View* result, View* grad, bool* has_grad) {
  *has_grad = false;
  if (num_args < n + 2) return fail(ctx, OPC_INVALID_ARGUMENT, "the autograd formula expects the result and its gradient");
  if (args[n + 1].tag == OPC_TAG_NONE) return OPC_OK;
  OpcStatus st = read_tensor(ctx, &args[n], "result", true, result);
  if (st == OPC_OK) st = read_tensor(ctx, &args[n + 1], "grad", true, grad);
  *has_grad = st == OPC_OK;
  return st;
}

/* A new output tensor in host memory (data-less in a fake call), returned through `ret`. The
 * layout is given explicitly: the fake kernel passes the very strides the CPU kernel uses. */
static inline OpcStatus make_output(const OpcCallContext* ctx, Dt dt, int ndim, const int64_t* shape,
                                    const int64_t* strides, OpcValue* ret, View* out) {
  int64_t none[1] = {0};
  OpcDLManagedTensorVersioned* m =
      ctx->new_tensor(ctx->host, dl_dtype(dt), ndim, ndim ? shape : none, ndim ? strides : none);
  if (m == NULL) return OPC_OUT_OF_MEMORY; /* the host has set the message */
  ret->tag = OPC_TAG_TENSOR;
  ret->alias = 0;
  ret->u.tensor = m;
  out->dt = dt;
  out->ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    out->shape[d] = shape[d];
    out->strides[d] = m->dl_tensor.strides ? m->dl_tensor.strides[d] : strides[d];
  }
  out->numel = numel_of(ndim, shape);
  out->data = m->dl_tensor.data ? (char*)m->dl_tensor.data + m->dl_tensor.byte_offset : NULL;
  return OPC_OK;
}

/* make_output with row-major strides: element n of the output is at n. */
static inline OpcStatus make_contiguous_output(const OpcCallContext* ctx, Dt dt, int ndim, const int64_t* shape,
                                               OpcValue* ret, View* out) {
  int64_t strides[MAX_DIMS];
  contiguous_strides(ndim, shape, strides);
  return make_output(ctx, dt, ndim, shape, strides, ret, out);
}

/* Gives back an output made by make_output (when a later step fails). */
static inline void release_output(OpcValue* ret) {
  if (ret->tag == OPC_TAG_TENSOR && ret->u.tensor != NULL && ret->u.tensor->deleter != NULL) {
    ret->u.tensor->deleter(ret->u.tensor);
  }
  ret->tag = OPC_TAG_NONE;
  ret->u.tensor = NULL;
}

static inline void set_none(OpcValue* returns, int64_t num_returns) {
  for (int64_t i = 0; i < num_returns; ++i) {
    returns[i].tag = OPC_TAG_NONE;
    returns[i].alias = 0;
    returns[i].u.i = 0;
  }
}

static inline OpcStatus check_arity(const OpcCallContext* ctx, int64_t num_args, int64_t want_args,
                                    int64_t num_returns, int64_t want_returns) {
  if (num_args < want_args || num_returns < want_returns) {
    return fail(ctx, OPC_INVALID_ARGUMENT, "expected %lld arguments and %lld returns, got %lld and %lld",
                (long long)want_args, (long long)want_returns, (long long)num_args, (long long)num_returns);
  }
  return OPC_OK;
}

/* ================================================================================================
 * The strided walk: visits every index of a shape in row-major order, moving one pointer per
 * operand by that operand's strides (0 along broadcast and expanded dims).
 * ============================================================================================= */

typedef struct {
  int ndim, nops;
  int64_t shape[MAX_DIMS];
  int64_t index[MAX_DIMS];
  int64_t step[MAX_OPERANDS][MAX_DIMS]; /* bytes */
  char* ptr[MAX_OPERANDS];
} Walk;

static inline void walk_init(Walk* w, int ndim, const int64_t* shape) {
  w->ndim = ndim;
  w->nops = 0;
  for (int d = 0; d < ndim; ++d) {
    w->shape[d] = shape[d];
    w->index[d] = 0;
  }
}

/* Adds an operand starting at `base` with `strides` (elements, over the walk's shape). */
static inline void walk_add(Walk* w, char* base, const int64_t* strides, int64_t itemsize) {
  const int k = w->nops++;
  w->ptr[k] = base;
  for (int d = 0; d < w->ndim; ++d) w->step[k][d] = strides[d] * itemsize;
}

/* Adds a view as an operand (its shape is the walk's). */
static inline void walk_add_view(Walk* w, const View* v) { walk_add(w, v->data, v->strides, dt_size(v->dt)); }

/* A walk over v's shape with v as its one operand (w->ptr[0]). */
static inline void walk_init_view(Walk* w, const View* v) {
  walk_init(w, v->ndim, v->shape);
  walk_add_view(w, v);
}

/* Moves to the next index (after the last one, every pointer is back at its base). */
static inline void walk_next(Walk* w) {
  for (int d = w->ndim - 1; d >= 0; --d) {
    if (++w->index[d] < w->shape[d]) {
      for (int k = 0; k < w->nops; ++k) w->ptr[k] += w->step[k][d];
      return;
    }
    for (int k = 0; k < w->nops; ++k) w->ptr[k] -= w->step[k][d] * (w->shape[d] - 1);
    w->index[d] = 0;
  }
}

/* ================================================================================================
 * Broadcasting and the layout of elementwise outputs
 * ============================================================================================= */

/* The broadcast shape of a and b (numpy's rule, aligned from the right). */
static inline OpcStatus broadcast_shape(const OpcCallContext* ctx, const View* a, const char* a_name,
                                        const View* b, const char* b_name, int* ndim, int64_t* shape) {
  const int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int d = 0; d < n; ++d) {
    const int da = d - (n - a->ndim), db = d - (n - b->ndim);
    const int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      return fail(ctx, OPC_INVALID_ARGUMENT,
                  "the shapes of arguments '%s' and '%s' do not broadcast (size %lld vs %lld at dimension %d of the "
                  "result)",
                  a_name, b_name, (long long)sa, (long long)sb, d);
    }
    shape[d] = sa == 1 ? sb : sa;
  }
  *ndim = n;
  return OPC_OK;
}

/* v's strides over a broadcast shape: 0 for the leading dims v lacks and for its size-1 dims
 * that are stretched (as TensorIterator sees an input). */
static inline void strides_over(const View* v, int ndim, const int64_t* shape, int64_t* out) {
  const int lead = ndim - v->ndim;
  for (int d = 0; d < ndim; ++d) {
    if (d < lead) out[d] = 0;
    else out[d] = (v->shape[d - lead] == 1 && shape[d] != 1) ? 0 : v->strides[d - lead];
  }
}

/* The strides PyTorch's TensorIterator gives an elementwise output over `shape`: the inputs'
 * memory order (dims sorted by the inputs' strides, broadcast dims ignored), row-major when the
 * inputs do not say. So a transposed input gives a transposed output, as in ATen; opconform's
 * reference does the same (reference/src/elementwise.cpp). */
static inline void elementwise_strides(int ndim, const int64_t* shape, int nin, const View* const* in,
                                       int64_t* out) {
  int64_t s[MAX_OPERANDS][MAX_DIMS];
  for (int k = 0; k < nin; ++k) strides_over(in[k], ndim, shape, s[k]);
  int perm[MAX_DIMS]; /* perm[0] is the fastest-moving dim */
  for (int i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int i = 1; i < ndim; ++i) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      /* should dims perm[d0] and perm[d1] swap? the first input that has an opinion decides */
      int c = 0;
      for (int k = 0; k < nin && c == 0; ++k) {
        const int64_t s0 = s[k][perm[d0]], s1 = s[k][perm[d1]];
        if (s0 == 0 || s1 == 0) continue;
        if (s0 < s1) c = -1;
        else if (s0 > s1) c = 1;
        else if (shape[perm[d0]] > shape[perm[d1]]) c = 1;
      }
      if (c > 0) {
        const int t = perm[d0];
        perm[d0] = perm[d1];
        perm[d1] = t;
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  int64_t next = 1;
  for (int i = 0; i < ndim; ++i) {
    out[perm[i]] = next;
    next *= shape[perm[i]] > 1 ? shape[perm[i]] : 1;
  }
}

/* ================================================================================================
 * Element access and arithmetic in the wide types
 * ============================================================================================= */

static inline double load_f(const char* p, Dt dt) {
  if (dt == DT_F32) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  if (dt == DT_F64) {
    double v;
    memcpy(&v, p, sizeof v);
    return v;
  }
  int64_t v;
  memcpy(&v, p, sizeof v);
  return (double)v;
}

/* An element cast to the compute dtype first (as TensorIterator casts inputs to the common
 * dtype), then widened to double: an int64 in a float32 computation is rounded to float32. */
static inline double load_as(const char* p, Dt dt, Dt compute) {
  if (compute == DT_F32) {
    if (dt == DT_I64) {
      int64_t v;
      memcpy(&v, p, sizeof v);
      return (double)(float)v;
    }
    return (double)(float)load_f(p, dt);
  }
  return load_f(p, dt);
}

static inline int64_t load_i(const char* p) {
  int64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Rounds the wide result once to the output dtype. */
static inline void store_f(char* p, Dt dt, double v) {
  if (dt == DT_F32) {
    const float f = (float)v;
    memcpy(p, &f, sizeof f);
  } else {
    memcpy(p, &v, sizeof v);
  }
}

static inline void store_i(char* p, int64_t v) { memcpy(p, &v, sizeof v); }

/* int64 arithmetic wraps (two's complement) as PyTorch's integer kernels do; C leaves signed
 * overflow undefined, so it is done in uint64. */
static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* A Scalar argument as a double (int, float or bool); complex is refused by the callers. */
static inline double scalar_d(const OpcValue* v) {
  return v->tag == OPC_TAG_DOUBLE ? v->u.d : v->tag == OPC_TAG_BOOL ? (double)v->u.b : (double)v->u.i;
}
static inline int64_t scalar_i(const OpcValue* v) { return v->tag == OPC_TAG_BOOL ? (int64_t)v->u.b : v->u.i; }
static inline bool is_real_scalar(const OpcValue* v) {
  return v->tag == OPC_TAG_INT || v->tag == OPC_TAG_DOUBLE || v->tag == OPC_TAG_BOOL;
}

#endif /* OPCONFORM_EXAMPLES_OPC_KIT_H */
