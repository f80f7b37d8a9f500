/* The torchvision profile: what torchvision 0.14's operator schemas cannot say, for opconform.
 *
 * The TORCH_LIBRARY adapter finds torchvision's ops in its _C.so and defines them from their
 * schemas; the schemas say "Tensor rois" where the kernels want a [K, 5] tensor of boxes whose
 * first column is a batch index below the input's batch size (the kernels read
 * `input + roi_batch_ind * ...` unchecked). This library declares, per op, the dtypes the CPU
 * kernels take and a sample builder that builds VALID inputs from the host's draws. It is the
 * example of writing a profile (README.md): plain C, only opconform/plugin.h, one exported
 * function. The adapter loads it as libopconform_profile_torchvision.so from its own folder.
 *
 * Builders are pure functions of their draws (the host re-runs them to shrink and replay a
 * sample): every choice below is a draw, user_data is read-only. Sizes stay small: every sample
 * runs through every check. Semantics followed (torchvision/csrc/ops/cpu, 0.14):
 *   - rois [K, 5] rows (batch_index, x1, y1, x2, y2) in input-image coordinates; the kernels
 *     multiply them by spatial_scale to reach the feature map (so the image is W / scale wide);
 *   - sampling_ratio > 0 samples that many points per bin side, <= 0 is adaptive
 *     (ceil(roi_size / pooled_size)): -1..2 covers both;
 *   - ps_* ops: input channels = out_channels * pooled_height * pooled_width, and the backward's
 *     channel_mapping holds the forward's c_in = (c_out * ph + i) * pw + j (a wrong value there
 *     is an out-of-bounds write, not a bad input the kernel rejects);
 *   - deform_conv2d: offset [N, offset_groups*2*kh*kw, out_h, out_w], mask [N, offset_groups*kh*kw,
 *     out_h, out_w] or [N, 0] when use_mask is false (what torchvision/ops/deform_conv.py passes),
 *     in_channels divisible by groups and offset_groups, out_h/out_w >= 1. */
#include <stddef.h>
#include <stdint.h>

#include "opconform/plugin.h"

#define TRY(call)                         \
  do {                                    \
    OpcStatus try_status_ = (call);       \
    if (try_status_ != OPC_OK) return try_status_; \
  } while (0)

#define COUNT(array) ((int64_t)(sizeof(array) / sizeof((array)[0])))

static const DLDataType kFloatTypes[] = {{kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
static const DLDataType kInt32 = {kDLInt, 32, 1};

/* Finite feature values: the checks here compare the op with itself (no reference), and NaN
 * would only say that NaN propagates. */
static const OpcValueConstraint kFeatures = {OPC_VALUES_MIN | OPC_VALUES_MAX | OPC_VALUES_NO_NAN | OPC_VALUES_NO_INF,
                                             0, -4.0, 4.0};

static OpcValue int_value(int64_t i) {
  OpcValue v = {OPC_TAG_INT, 0, {0}};
  v.u.i = i;
  return v;
}
static OpcValue double_value(double d) {
  OpcValue v = {OPC_TAG_DOUBLE, 0, {0}};
  v.u.d = d;
  return v;
}
static OpcValue bool_value(int b) {
  OpcValue v = {OPC_TAG_BOOL, 0, {0}};
  v.u.b = b != 0;
  return v;
}

static OpcStatus expect_args(const OpcSampleDraw* d, int64_t got, int64_t want) {
  if (got == want) return OPC_OK;
  d->set_error(d->host, "the torchvision profile's builder got another argument count than its schema has");
  return OPC_INVALID_ARGUMENT;
}

/* ---------------------------------------------------------------- the RoI ops */

/* The sizes every RoI op shares: input [n, c, h, w], k boxes, the pooled output size. */
typedef struct RoiDims {
  DLDataType dtype;
  int64_t n, c, h, w, k, ph, pw;
  double scale;
} RoiDims;

/* c_lo..c_hi channels; pooled sizes up to max_pooled. */
static OpcStatus draw_roi_dims(const OpcSampleDraw* d, int64_t c_lo, int64_t c_hi, int64_t max_pooled, RoiDims* r) {
  int64_t scale_shift = 0;
  TRY(d->dtype(d->host, kFloatTypes, COUNT(kFloatTypes), &r->dtype));
  TRY(d->integer(d->host, 1, 2, &r->n));
  TRY(d->integer(d->host, c_lo, c_hi, &r->c));
  TRY(d->integer(d->host, 1, 6, &r->h));
  TRY(d->integer(d->host, 1, 6, &r->w));
  TRY(d->integer(d->host, 0, 3, &r->k));
  TRY(d->integer(d->host, 1, max_pooled, &r->ph));
  TRY(d->integer(d->host, 1, max_pooled, &r->pw));
  /* 1, 0.5 or 0.25: a feature map at stride 1, 2 or 4 of the image (exact in binary). */
  TRY(d->integer(d->host, 0, 2, &scale_shift));
  r->scale = 1.0 / (double)(1 << scale_shift);
  return OPC_OK;
}

/* One coordinate pair lo < hi inside [0, extent] (extent >= 1). */
static OpcStatus draw_span(const OpcSampleDraw* d, double extent, double* lo, double* hi) {
  double length = 0;
  TRY(d->real(d->host, 0.0, extent - 0.5, lo));
  TRY(d->real(d->host, 0.25, extent - *lo, &length));
  *hi = *lo + length;
  return OPC_OK;
}

/* rois [k, 5]: a batch index in [0, n) (a float holding an integer), then x1 < x2, y1 < y2 inside
 * the image (the feature map / scale). */
static OpcStatus make_rois(const OpcSampleDraw* d, const RoiDims* r, OpcValue* out) {
  const int64_t sizes[2] = {r->k, 5};
  double* values = (double*)d->alloc(d->host, sizeof(double) * (size_t)(r->k * 5 + 1));
  int64_t i = 0;
  if (values == NULL) return OPC_OUT_OF_MEMORY;
  for (i = 0; i < r->k; ++i) {
    int64_t batch = 0;
    double* row = values + i * 5;
    TRY(d->integer(d->host, 0, r->n - 1, &batch));
    row[0] = (double)batch;
    TRY(draw_span(d, (double)r->w / r->scale, &row[1], &row[3]));
    TRY(draw_span(d, (double)r->h / r->scale, &row[2], &row[4]));
  }
  return d->tensor_of(d->host, 2, sizes, r->dtype, values, out);
}

static OpcStatus make_features(const OpcSampleDraw* d, const RoiDims* r, int64_t channels, OpcValue* out) {
  const int64_t sizes[4] = {r->n, channels, r->h, r->w};
  return d->tensor(d->host, 4, sizes, r->dtype, &kFeatures, 0, out);
}

/* A gradient of a pooled output: [k, channels, ph, pw], in a drawn layout (the backward kernels
 * read it through its strides). */
static OpcStatus make_pooled_grad(const OpcSampleDraw* d, const RoiDims* r, int64_t channels, OpcValue* out) {
  const int64_t sizes[4] = {r->k, channels, r->ph, r->pw};
  return d->tensor(d->host, 4, sizes, r->dtype, &kFeatures, 0, out);
}

/* roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width,
 *           int sampling_ratio, bool aligned) -> Tensor */
static OpcStatus build_roi_align(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  int64_t sampling = 0;
  int32_t aligned = 0;
  TRY(expect_args(d, num_args, 7));
  TRY(draw_roi_dims(d, 1, 3, 3, &r));
  TRY(d->integer(d->host, -1, 2, &sampling));
  TRY(d->coin(d->host, 50, &aligned));
  TRY(make_features(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  args[2] = double_value(r.scale);
  args[3] = int_value(r.ph);
  args[4] = int_value(r.pw);
  args[5] = int_value(sampling);
  args[6] = bool_value(aligned);
  return OPC_OK;
}

/* _roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, int pooled_height,
 *   int pooled_width, int batch_size, int channels, int height, int width, int sampling_ratio,
 *   bool aligned) -> Tensor */
static OpcStatus build_roi_align_backward(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  int64_t sampling = 0;
  int32_t aligned = 0;
  TRY(expect_args(d, num_args, 11));
  TRY(draw_roi_dims(d, 1, 3, 3, &r));
  TRY(d->integer(d->host, -1, 2, &sampling));
  TRY(d->coin(d->host, 50, &aligned));
  TRY(make_pooled_grad(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  args[2] = double_value(r.scale);
  args[3] = int_value(r.ph);
  args[4] = int_value(r.pw);
  args[5] = int_value(r.n);
  args[6] = int_value(r.c);
  args[7] = int_value(r.h);
  args[8] = int_value(r.w);
  args[9] = int_value(sampling);
  args[10] = bool_value(aligned);
  return OPC_OK;
}

/* roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, int pooled_width)
 *   -> (Tensor, Tensor) */
static OpcStatus build_roi_pool(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  TRY(expect_args(d, num_args, 5));
  TRY(draw_roi_dims(d, 1, 3, 3, &r));
  TRY(make_features(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  args[2] = double_value(r.scale);
  args[3] = int_value(r.ph);
  args[4] = int_value(r.pw);
  return OPC_OK;
}

/* int32 [k, c, ph, pw] holding the given values. */
static OpcStatus make_int_map(const OpcSampleDraw* d, const RoiDims* r, int64_t channels, const double* values,
                              OpcValue* out) {
  const int64_t sizes[4] = {r->k, channels, r->ph, r->pw};
  return d->tensor_of(d->host, 4, sizes, kInt32, values, out);
}

static double* alloc_map(const OpcSampleDraw* d, const RoiDims* r, int64_t channels) {
  return (double*)d->alloc(d->host, sizeof(double) * (size_t)(r->k * channels * r->ph * r->pw + 1));
}

/* _roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale,
 *   int pooled_height, int pooled_width, int batch_size, int channels, int height, int width)
 *   -> Tensor. argmax: int32, an index into the h x w plane or -1 (an empty bin), as the forward
 *   writes it. */
static OpcStatus build_roi_pool_backward(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  double* argmax = NULL;
  int64_t i = 0, count = 0;
  TRY(expect_args(d, num_args, 10));
  TRY(draw_roi_dims(d, 1, 3, 3, &r));
  count = r.k * r.c * r.ph * r.pw;
  argmax = alloc_map(d, &r, r.c);
  if (argmax == NULL) return OPC_OUT_OF_MEMORY;
  for (i = 0; i < count; ++i) {
    int64_t index = 0;
    TRY(d->integer(d->host, -1, r.h * r.w - 1, &index));
    argmax[i] = (double)index;
  }
  TRY(make_pooled_grad(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  TRY(make_int_map(d, &r, r.c, argmax, &args[2]));
  args[3] = double_value(r.scale);
  args[4] = int_value(r.ph);
  args[5] = int_value(r.pw);
  args[6] = int_value(r.n);
  args[7] = int_value(r.c);
  args[8] = int_value(r.h);
  args[9] = int_value(r.w);
  return OPC_OK;
}

/* Position-sensitive ops: r->c is the OUTPUT channel count; the input has c * ph * pw. Pooled
 * sizes up to 2 keep the input small. */
static OpcStatus draw_ps_dims(const OpcSampleDraw* d, RoiDims* r) { return draw_roi_dims(d, 1, 2, 2, r); }

/* The forward's channel mapping: output channel c_out, bin (i, j) reads input channel
 * (c_out * ph + i) * pw + j. */
static OpcStatus make_channel_mapping(const OpcSampleDraw* d, const RoiDims* r, OpcValue* out) {
  double* values = alloc_map(d, r, r->c);
  int64_t k = 0, c = 0, i = 0, j = 0, at = 0;
  if (values == NULL) return OPC_OUT_OF_MEMORY;
  for (k = 0; k < r->k; ++k)
    for (c = 0; c < r->c; ++c)
      for (i = 0; i < r->ph; ++i)
        for (j = 0; j < r->pw; ++j) values[at++] = (double)((c * r->ph + i) * r->pw + j);
  return make_int_map(d, r, r->c, values, out);
}

/* ps_roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
 *   int pooled_width, int sampling_ratio) -> (Tensor, Tensor) */
static OpcStatus build_ps_roi_align(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  int64_t sampling = 0;
  TRY(expect_args(d, num_args, 6));
  TRY(draw_ps_dims(d, &r));
  TRY(d->integer(d->host, -1, 2, &sampling));
  TRY(make_features(d, &r, r.c * r.ph * r.pw, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  args[2] = double_value(r.scale);
  args[3] = int_value(r.ph);
  args[4] = int_value(r.pw);
  args[5] = int_value(sampling);
  return OPC_OK;
}

/* _ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,
 *   int pooled_height, int pooled_width, int sampling_ratio, int batch_size, int channels,
 *   int height, int width) -> Tensor */
static OpcStatus build_ps_roi_align_backward(const OpcSampleDraw* d, OpcValue* args, int64_t num_args,
                                             void* user_data) {
  RoiDims r;
  int64_t sampling = 0;
  TRY(expect_args(d, num_args, 11));
  TRY(draw_ps_dims(d, &r));
  TRY(d->integer(d->host, -1, 2, &sampling));
  TRY(make_pooled_grad(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  TRY(make_channel_mapping(d, &r, &args[2]));
  args[3] = double_value(r.scale);
  args[4] = int_value(r.ph);
  args[5] = int_value(r.pw);
  args[6] = int_value(sampling);
  args[7] = int_value(r.n);
  args[8] = int_value(r.c * r.ph * r.pw);
  args[9] = int_value(r.h);
  args[10] = int_value(r.w);
  return OPC_OK;
}

/* ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
 *   int pooled_width) -> (Tensor, Tensor) */
static OpcStatus build_ps_roi_pool(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  RoiDims r;
  TRY(expect_args(d, num_args, 5));
  TRY(draw_ps_dims(d, &r));
  TRY(make_features(d, &r, r.c * r.ph * r.pw, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  args[2] = double_value(r.scale);
  args[3] = int_value(r.ph);
  args[4] = int_value(r.pw);
  return OPC_OK;
}

/* _ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,
 *   int pooled_height, int pooled_width, int batch_size, int channels, int height, int width)
 *   -> Tensor */
static OpcStatus build_ps_roi_pool_backward(const OpcSampleDraw* d, OpcValue* args, int64_t num_args,
                                            void* user_data) {
  RoiDims r;
  TRY(expect_args(d, num_args, 10));
  TRY(draw_ps_dims(d, &r));
  TRY(make_pooled_grad(d, &r, r.c, &args[0]));
  TRY(make_rois(d, &r, &args[1]));
  TRY(make_channel_mapping(d, &r, &args[2]));
  args[3] = double_value(r.scale);
  args[4] = int_value(r.ph);
  args[5] = int_value(r.pw);
  args[6] = int_value(r.n);
  args[7] = int_value(r.c * r.ph * r.pw);
  args[8] = int_value(r.h);
  args[9] = int_value(r.w);
  return OPC_OK;
}

/* ---------------------------------------------------------------- nms */

/* nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor: dets [m, 4] boxes
 * (x1, y1, x2, y2) with x1 < x2, y1 < y2; scores [m]. */
static OpcStatus build_nms(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  DLDataType dtype;
  int64_t m = 0, i = 0;
  double* boxes = NULL;
  double threshold = 0;
  int64_t box_sizes[2] = {0, 4};
  int64_t score_sizes[1] = {0};
  TRY(expect_args(d, num_args, 3));
  TRY(d->dtype(d->host, kFloatTypes, COUNT(kFloatTypes), &dtype));
  TRY(d->integer(d->host, 0, 6, &m));
  boxes = (double*)d->alloc(d->host, sizeof(double) * (size_t)(m * 4 + 1));
  if (boxes == NULL) return OPC_OUT_OF_MEMORY;
  for (i = 0; i < m; ++i) {
    TRY(draw_span(d, 10.0, &boxes[i * 4 + 0], &boxes[i * 4 + 2]));
    TRY(draw_span(d, 10.0, &boxes[i * 4 + 1], &boxes[i * 4 + 3]));
  }
  TRY(d->real(d->host, 0.0, 1.0, &threshold));
  box_sizes[0] = m;
  score_sizes[0] = m;
  TRY(d->tensor_of(d->host, 2, box_sizes, dtype, boxes, &args[0]));
  TRY(d->tensor(d->host, 1, score_sizes, dtype, &kFeatures, 0, &args[1]));
  args[2] = double_value(threshold);
  return OPC_OK;
}

/* ---------------------------------------------------------------- deform_conv2d */

/* The hyperparameters of one deformable convolution. */
typedef struct DeformDims {
  DLDataType dtype;
  int64_t n, c_in, c_out, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups;
  int64_t out_h, out_w;
  int32_t use_mask;
} DeformDims;

/* One spatial dimension: kernel k, stride, padding, dilation, then the smallest input that gives
 * an output of at least 1, plus 0..3. */
static OpcStatus draw_spatial(const OpcSampleDraw* d, int64_t* k, int64_t* stride, int64_t* pad, int64_t* dil,
                              int64_t* in, int64_t* out) {
  int64_t extra = 0, span = 0;
  TRY(d->integer(d->host, 1, 3, k));
  TRY(d->integer(d->host, 1, 2, stride));
  TRY(d->integer(d->host, 0, 1, pad));
  TRY(d->integer(d->host, 1, 2, dil));
  TRY(d->integer(d->host, 0, 3, &extra));
  span = *dil * (*k - 1) + 1;
  *in = (span - 2 * *pad > 1 ? span - 2 * *pad : 1) + extra;
  *out = (*in + 2 * *pad - span) / *stride + 1;
  return OPC_OK;
}

static OpcStatus draw_deform_dims(const OpcSampleDraw* d, DeformDims* g) {
  int64_t per_group = 0, out_per_group = 0, unit = 0;
  TRY(d->dtype(d->host, kFloatTypes, COUNT(kFloatTypes), &g->dtype));
  TRY(d->integer(d->host, 0, 2, &g->n));
  TRY(d->integer(d->host, 1, 2, &g->groups));
  TRY(d->integer(d->host, 1, 2, &g->offset_groups));
  TRY(d->integer(d->host, 1, 2, &per_group));
  TRY(d->integer(d->host, 1, 2, &out_per_group));
  /* in_channels: a multiple of both group counts (each 1 or 2, so of the larger). */
  unit = g->groups > g->offset_groups ? g->groups : g->offset_groups;
  g->c_in = unit * per_group;
  g->c_out = g->groups * out_per_group;
  TRY(draw_spatial(d, &g->kh, &g->stride_h, &g->pad_h, &g->dil_h, &g->h, &g->out_h));
  TRY(draw_spatial(d, &g->kw, &g->stride_w, &g->pad_w, &g->dil_w, &g->w, &g->out_w));
  TRY(d->coin(d->host, 50, &g->use_mask));
  return OPC_OK;
}

/* input, weight, offset, mask, bias into args[0..4] (from `first`), then the ten ints/bool. */
static OpcStatus make_deform_args(const OpcSampleDraw* d, const DeformDims* g, OpcValue* args) {
  static const OpcValueConstraint kOffsets = {OPC_VALUES_MIN | OPC_VALUES_MAX | OPC_VALUES_NO_NAN | OPC_VALUES_NO_INF,
                                              0, -2.0, 2.0};
  static const OpcValueConstraint kMask = {OPC_VALUES_MIN | OPC_VALUES_MAX | OPC_VALUES_NO_NAN | OPC_VALUES_NO_INF, 0,
                                           0.0, 1.0};
  const int64_t input[4] = {g->n, g->c_in, g->h, g->w};
  const int64_t weight[4] = {g->c_out, g->c_in / g->groups, g->kh, g->kw};
  const int64_t offset[4] = {g->n, g->offset_groups * 2 * g->kh * g->kw, g->out_h, g->out_w};
  const int64_t mask[4] = {g->n, g->offset_groups * g->kh * g->kw, g->out_h, g->out_w};
  const int64_t no_mask[2] = {g->n, 0};
  const int64_t bias[1] = {g->c_out};
  TRY(d->tensor(d->host, 4, input, g->dtype, &kFeatures, 0, &args[0]));
  TRY(d->tensor(d->host, 4, weight, g->dtype, &kFeatures, 0, &args[1]));
  /* Fractional offsets: the bilinear sampling between pixels is what is being checked. */
  TRY(d->tensor(d->host, 4, offset, g->dtype, &kOffsets, 0, &args[2]));
  if (g->use_mask) {
    TRY(d->tensor(d->host, 4, mask, g->dtype, &kMask, 0, &args[3]));
  } else {
    TRY(d->tensor(d->host, 2, no_mask, g->dtype, &kMask, 0, &args[3]));
  }
  TRY(d->tensor(d->host, 1, bias, g->dtype, &kFeatures, 0, &args[4]));
  args[5] = int_value(g->stride_h);
  args[6] = int_value(g->stride_w);
  args[7] = int_value(g->pad_h);
  args[8] = int_value(g->pad_w);
  args[9] = int_value(g->dil_h);
  args[10] = int_value(g->dil_w);
  args[11] = int_value(g->groups);
  args[12] = int_value(g->offset_groups);
  args[13] = bool_value(g->use_mask);
  return OPC_OK;
}

/* deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, int stride_h,
 *   int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
 *   int offset_groups, bool use_mask) -> Tensor */
static OpcStatus build_deform_conv2d(const OpcSampleDraw* d, OpcValue* args, int64_t num_args, void* user_data) {
  DeformDims g;
  TRY(expect_args(d, num_args, 14));
  TRY(draw_deform_dims(d, &g));
  return make_deform_args(d, &g, args);
}

/* _deform_conv2d_backward(Tensor grad, <deform_conv2d's arguments>) -> (Tensor x5) */
static OpcStatus build_deform_conv2d_backward(const OpcSampleDraw* d, OpcValue* args, int64_t num_args,
                                              void* user_data) {
  DeformDims g;
  int64_t grad[4];
  TRY(expect_args(d, num_args, 15));
  TRY(draw_deform_dims(d, &g));
  grad[0] = g.n;
  grad[1] = g.c_out;
  grad[2] = g.out_h;
  grad[3] = g.out_w;
  TRY(d->tensor(d->host, 4, grad, g.dtype, &kFeatures, 0, &args[0]));
  return make_deform_args(d, &g, args + 1);
}

/* ---------------------------------------------------------------- the entry point */

typedef struct Op {
  const char* name;
  OpcSampleBuilderFn builder;
  const char* doc;
} Op;

static const Op kOps[] = {
    {"torchvision::nms", build_nms, "non-maximum suppression: indices of the boxes kept, by descending score"},
    {"torchvision::roi_align", build_roi_align, "RoIAlign (Mask R-CNN): bilinear pooling of boxes"},
    {"torchvision::_roi_align_backward", build_roi_align_backward, "roi_align's input gradient"},
    {"torchvision::roi_pool", build_roi_pool, "RoIPool (Fast R-CNN): max pooling of boxes, with argmax"},
    {"torchvision::_roi_pool_backward", build_roi_pool_backward, "roi_pool's input gradient through argmax"},
    {"torchvision::ps_roi_align", build_ps_roi_align, "position-sensitive RoIAlign (R-FCN)"},
    {"torchvision::_ps_roi_align_backward", build_ps_roi_align_backward, "ps_roi_align's input gradient"},
    {"torchvision::ps_roi_pool", build_ps_roi_pool, "position-sensitive RoIPool (R-FCN)"},
    {"torchvision::_ps_roi_pool_backward", build_ps_roi_pool_backward, "ps_roi_pool's input gradient"},
    {"torchvision::deform_conv2d", build_deform_conv2d, "deformable convolution v1/v2 (with mask)"},
    {"torchvision::_deform_conv2d_backward", build_deform_conv2d_backward, "deform_conv2d's five gradients"},
};

/* Declares every op; one the host refuses (not defined: another torchvision, a skipped op) is
 * recorded by the host as that op's load problem, and the others go on. */
OPC_EXPORT OpcStatus opconform_profile(const OpcRegistrar* r) {
  int64_t i = 0;
  /* The registrar's version is the adapter's ABI (1 or 2): the members used here are 1.1's. */
  if (r == NULL || r->version < OPC_PLUGIN_ABI_VERSION_1 || !OPC_HAS_FIELD(r, OpcRegistrar, declare_op)) {
    return OPC_ABI_MISMATCH;
  }
  for (i = 0; i < COUNT(kOps); ++i) {
    OpcOpSpec spec = {0};
    spec.version = r->version;
    spec.size = sizeof(OpcOpSpec);
    spec.op_name = kOps[i].name;
    spec.dtypes = kFloatTypes;
    spec.num_dtypes = COUNT(kFloatTypes);
    spec.sample_builder = kOps[i].builder;
    spec.family = "torchvision";
    spec.doc = kOps[i].doc;
    (void)r->declare_op(r->host, &spec);
  }
  return OPC_OK;
}
