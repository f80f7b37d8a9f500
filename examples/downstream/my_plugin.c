/* my_plugin.c — a small operator library in plain C behind opconform's plugin ABI
 * (opconform/plugin.h): aten::relu and aten::sigmoid for float32 and float64 CPU tensors of any
 * layout, each with a fake kernel (output metadata only) and an autograd formula.
 *
 * The operators are Core ATen ones, so the library defines nothing: opconform takes their schemas
 * from its reference, and `opconform check` compares every result with the reference's
 * (reference_agreement) besides running every other check. CMakeLists.txt registers one ctest
 * test per operator with opconform_add_conformance_tests.
 *
 * To add an operator: write its value and derivative (two functions below), add a row to OPS.
 * Another kind of operator (two inputs, reductions) needs its own kernels; opconform's
 * examples/vendor_plugin has 20 of them. */
#include <math.h>
#include <stdio.h>

#define OPC_PLUGIN_TARGET_ABI OPC_PLUGIN_ABI_VERSION_1 /* a version-1 plugin (plugin.h) */
#include "opconform/plugin.h"

#define MAX_DIMS 16

/* An elementwise operator: its value, and its derivative given x and the result. */
typedef struct {
  double (*value)(double x);
  double (*derivative)(double x, double result);
} UnaryOp;

/* relu keeps NaN, as PyTorch's does; its derivative is 0 at 0 (PyTorch's choice). */
static double relu(double x) { return (isnan(x) || x > 0) ? x : 0.0; }
static double relu_derivative(double x, double result) { (void)x; return result > 0 ? 1.0 : 0.0; }
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double sigmoid_derivative(double x, double result) { (void)x; return result * (1.0 - result); }

static const UnaryOp RELU = {relu, relu_derivative};
static const UnaryOp SIGMOID = {sigmoid, sigmoid_derivative};

/* Sets "<op>: <message>" as the call's error and returns `status`. */
static OpcStatus fail(const OpcCallContext* ctx, OpcStatus status, const char* message, const char* argument) {
  char text[256];
  snprintf(text, sizeof text, "%s: argument '%s' %s", ctx->op_name, argument, message);
  ctx->set_error(ctx->host, text);
  return status;
}

/* What a kernel needs of a DLPack tensor. */
typedef struct {
  int ndim;
  int64_t shape[MAX_DIMS];
  int64_t strides[MAX_DIMS]; /* in elements */
  int bits;                  /* 32 or 64: float32 or float64 */
  char* data;                /* the first element; NULL in a fake call */
} View;

static int64_t numel(const View* v) {
  int64_t n = 1;
  for (int d = 0; d < v->ndim; ++d) n *= v->shape[d];
  return n;
}

/* Row-major strides (a dimension of size 0 or 1 counts as 1, as in PyTorch). */
static void contiguous_strides(const View* v, int64_t* strides) {
  int64_t next = 1;
  for (int d = v->ndim - 1; d >= 0; --d) {
    strides[d] = next;
    next *= v->shape[d] > 1 ? v->shape[d] : 1;
  }
}

static OpcStatus read_tensor(const OpcCallContext* ctx, const OpcValue* value, const char* name, View* out) {
  if (value->tag != OPC_TAG_TENSOR || value->u.tensor == NULL)
    return fail(ctx, OPC_INVALID_ARGUMENT, "must be a Tensor", name);
  const DLTensor* t = &value->u.tensor->dl_tensor;
  if (t->dtype.code != kDLFloat || t->dtype.lanes != 1 || (t->dtype.bits != 32 && t->dtype.bits != 64))
    return fail(ctx, OPC_NOT_IMPLEMENTED, "must be float32 or float64", name);
  if (t->ndim < 0 || t->ndim > MAX_DIMS) return fail(ctx, OPC_NOT_IMPLEMENTED, "has too many dimensions", name);
  if (!ctx->is_fake && t->device.device_type != kDLCPU) return fail(ctx, OPC_NOT_IMPLEMENTED, "must be on the CPU", name);
  out->ndim = t->ndim;
  out->bits = t->dtype.bits;
  for (int d = 0; d < out->ndim; ++d) out->shape[d] = t->shape[d];
  if (t->strides != NULL) {
    for (int d = 0; d < out->ndim; ++d) out->strides[d] = t->strides[d];
  } else {
    contiguous_strides(out, out->strides);
  }
  out->data = t->data != NULL ? (char*)t->data + t->byte_offset : NULL;
  if (!ctx->is_fake && out->data == NULL && numel(out) > 0) return fail(ctx, OPC_INVALID_ARGUMENT, "has no data", name);
  return OPC_OK;
}

/* Whether dimension a should move slower than dimension b in an elementwise result of `in`: 1
 * yes, -1 no, 0 no opinion (a broadcast dimension, or equal strides and sizes). */
static int moves_slower(const View* in, int a, int b) {
  const int64_t sa = in->strides[a], sb = in->strides[b];
  if (sa == 0 || sb == 0) return 0;
  if (sa != sb) return sa > sb ? 1 : -1;
  return in->shape[a] > in->shape[b] ? 1 : 0;
}

/* The layout PyTorch gives an elementwise result (TensorIterator's): the input's memory order, its
 * dimensions sorted by stride by an insertion sort that passes over dimensions without an
 * opinion. So a transposed input gives a transposed result; the fake kernel predicts it, and
 * opconform's reference makes the same. */
static void result_strides(const View* in, int64_t* strides) {
  int order[MAX_DIMS]; /* order[0]: the dimension that moves fastest */
  for (int i = 0; i < in->ndim; ++i) order[i] = in->ndim - 1 - i;
  for (int i = 1; i < in->ndim; ++i) {
    int moving = i;
    for (int k = i - 1; k >= 0; --k) {
      const int c = moves_slower(in, order[k], order[moving]);
      if (c < 0) break;
      if (c > 0) {
        const int t = order[k];
        order[k] = order[moving];
        order[moving] = t;
        moving = k;
      }
    }
  }
  int64_t next = 1;
  for (int i = 0; i < in->ndim; ++i) {
    strides[order[i]] = next;
    next *= in->shape[order[i]] > 1 ? in->shape[order[i]] : 1;
  }
}

/* A new tensor of `like`'s shape with the given strides, returned through `ret`. */
static OpcStatus new_output(const OpcCallContext* ctx, const View* like, int bits, const int64_t* strides,
                            OpcValue* ret, View* out) {
  const DLDataType dtype = {kDLFloat, (uint8_t)bits, 1};
  const int64_t none = 0;
  OpcDLManagedTensorVersioned* t =
      ctx->new_tensor(ctx->host, dtype, like->ndim, like->ndim ? like->shape : &none, like->ndim ? strides : &none);
  if (t == NULL) return OPC_OUT_OF_MEMORY; /* the host has said why */
  ret->tag = OPC_TAG_TENSOR;
  ret->u.tensor = t;
  *out = *like;
  out->bits = bits;
  for (int d = 0; d < out->ndim; ++d) out->strides[d] = strides[d];
  out->data = t->dl_tensor.data != NULL ? (char*)t->dl_tensor.data + t->dl_tensor.byte_offset : NULL;
  return OPC_OK;
}

static double load(const View* v, int64_t offset) {
  return v->bits == 32 ? (double)((const float*)(const void*)v->data)[offset] : ((const double*)(const void*)v->data)[offset];
}

static void store(const View* v, int64_t offset, double value) {
  if (v->bits == 32) ((float*)(void*)v->data)[offset] = (float)value;
  else ((double*)(void*)v->data)[offset] = value;
}

/* Calls visit(offsets) for every index of views[0]'s shape, in row-major order, with each view's
 * element offset at that index (the views share a shape). */
typedef void (*Visit)(const View* views, const int64_t* offsets, const UnaryOp* op);
static void for_each_element(const View* views, int count, const UnaryOp* op, Visit visit) {
  const int64_t n = numel(&views[0]);
  int64_t index[MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; ++i) {
    int64_t offsets[4] = {0, 0, 0, 0};
    for (int k = 0; k < count; ++k)
      for (int d = 0; d < views[0].ndim; ++d) offsets[k] += index[d] * views[k].strides[d];
    visit(views, offsets, op);
    for (int d = views[0].ndim - 1; d >= 0 && ++index[d] == views[0].shape[d]; --d) index[d] = 0;
  }
}

/* views: [result, self] */
static void forward_element(const View* v, const int64_t* at, const UnaryOp* op) {
  store(&v[0], at[0], op->value(load(&v[1], at[1])));
}

/* The CPU kernel (real = 1) and the fake kernel (real = 0) share everything but the loop, so the
 * fake one predicts the real one's metadata. */
static OpcStatus forward(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                         int64_t num_returns, const UnaryOp* op, int real) {
  if (num_args < 1 || num_returns < 1) return fail(ctx, OPC_INVALID_ARGUMENT, "is missing", "self");
  View views[2]; /* result, self */
  int64_t strides[MAX_DIMS];
  OpcStatus status = read_tensor(ctx, &args[0], "self", &views[1]);
  if (status != OPC_OK) return status;
  result_strides(&views[1], strides);
  status = new_output(ctx, &views[1], views[1].bits, strides, &returns[0], &views[0]);
  if (status == OPC_OK && real) for_each_element(views, 2, op, forward_element);
  return status;
}

static OpcStatus cpu_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                            int64_t num_returns, void* user_data) {
  return forward(ctx, args, num_args, returns, num_returns, user_data, 1);
}

static OpcStatus fake_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                             int64_t num_returns, void* user_data) {
  return forward(ctx, args, num_args, returns, num_returns, user_data, 0);
}

/* views: [grad_self, self, result, grad] */
static void backward_element(const View* v, const int64_t* at, const UnaryOp* op) {
  store(&v[0], at[0], load(&v[3], at[3]) * op->derivative(load(&v[1], at[1]), load(&v[2], at[2])));
}

/* The autograd formula: args are [self, result, grad], the return is grad_self (None when no
 * gradient flows back). */
static OpcStatus backward_kernel(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns,
                                 int64_t num_returns, void* user_data) {
  if (num_args < 3 || num_returns < 1) return fail(ctx, OPC_INVALID_ARGUMENT, "is missing", "self");
  returns[0].tag = OPC_TAG_NONE;
  if (args[2].tag == OPC_TAG_NONE) return OPC_OK;
  View views[4]; /* grad_self, self, result, grad */
  int64_t strides[MAX_DIMS];
  OpcStatus status = read_tensor(ctx, &args[0], "self", &views[1]);
  if (status == OPC_OK) status = read_tensor(ctx, &args[1], "result", &views[2]);
  if (status == OPC_OK) status = read_tensor(ctx, &args[2], "grad", &views[3]);
  if (status != OPC_OK) return status;
  contiguous_strides(&views[1], strides);
  status = new_output(ctx, &views[1], views[1].bits, strides, &returns[0], &views[0]);
  if (status == OPC_OK) for_each_element(views, 4, user_data, backward_element);
  return status;
}

static OpcStatus register_ops(const OpcRegistrar* r) {
  static const struct {
    const char* name;
    const UnaryOp* op;
  } OPS[] = {{"aten::relu", &RELU}, {"aten::sigmoid", &SIGMOID}};
  const DLDataType dtypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
  for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; ++i) {
    void* op = (void*)OPS[i].op; /* read only */
    OpcStatus status = r->impl(r->host, OPS[i].name, OPC_KERNEL_CPU, cpu_kernel, op);
    if (status == OPC_OK) status = r->impl(r->host, OPS[i].name, OPC_KERNEL_FAKE, fake_kernel, op);
    if (status == OPC_OK) status = r->impl(r->host, OPS[i].name, OPC_KERNEL_BACKWARD, backward_kernel, op);
    if (status == OPC_OK) status = r->declare_dtypes(r->host, OPS[i].name, dtypes, 2);
    if (status != OPC_OK) return status;
  }
  return OPC_OK;
}

OPCONFORM_PLUGIN(my_plugin, "my-plugin", "1.0", register_ops)
OPCONFORM_EXPORT_PLUGIN(my_plugin)
