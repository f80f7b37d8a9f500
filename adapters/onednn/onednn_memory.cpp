// The shared helpers of the oneDNN adapter (onednn_memory.h).
#include "onednn_memory.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>

namespace opc_onednn {

void set_call_error(const OpcCallContext* ctx, const std::string& message) {
  const std::string text = std::string(ctx->op_name ? ctx->op_name : "onednn") + ": " + message;
  ctx->set_error(ctx->host, text.c_str());
}

OpcStatus status_of(const dnnl::error& e) {
  switch (e.status) {
    case dnnl_unimplemented: return OPC_NOT_IMPLEMENTED;
    case dnnl_invalid_arguments: return OPC_INVALID_ARGUMENT;
    case dnnl_out_of_memory: return OPC_OUT_OF_MEMORY;
    default: return OPC_ERROR;
  }
}

Settings& settings() {
  static Settings s;
  return s;
}

std::unordered_map<std::string, int64_t>& dense_copies() {
  static std::unordered_map<std::string, int64_t> counts;
  return counts;
}

namespace {
std::mutex& dense_copies_mutex() {
  static std::mutex m;
  return m;
}
void count_dense_copy(const char* op) {
  std::lock_guard<std::mutex> lock(dense_copies_mutex());
  ++dense_copies()[op];
}
}  // namespace

const dnnl::engine& engine() {
  // Created on first use, after register_ops has applied max_cpu_isa (which must come first).
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  p.execute(stream(), args);
  stream().wait();
}

// ---- dtypes ----------------------------------------------------------------------------------

std::optional<dt> dnnl_type(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  if (t.code == kDLFloat && t.bits == 32) return dt::f32;
  if (t.code == kDLBfloat && t.bits == 16) return dt::bf16;
  if (t.code == kDLFloat && t.bits == 16) return dt::f16;
  if (t.code == kDLInt && t.bits == 32) return dt::s32;
  if (t.code == kDLInt && t.bits == 8) return dt::s8;
  if (t.code == kDLUInt && t.bits == 8) return dt::u8;
  return std::nullopt;  // float64, int64, int16, bool, complex: no oneDNN type
}

DLDataType dl_type(dt t) {
  switch (t) {
    case dt::f32: return {kDLFloat, 32, 1};
    case dt::bf16: return {kDLBfloat, 16, 1};
    case dt::f16: return {kDLFloat, 16, 1};
    case dt::s32: return {kDLInt, 32, 1};
    case dt::s8: return {kDLInt, 8, 1};
    case dt::u8: return {kDLUInt, 8, 1};
    default: throw KernelError(OPC_ERROR, "internal: a oneDNN data type without a DLPack type");
  }
}

const char* dtype_name(dt t) {
  switch (t) {
    case dt::f32: return "float32";
    case dt::bf16: return "bfloat16";
    case dt::f16: return "float16";
    case dt::s32: return "int32";
    case dt::s8: return "int8";
    case dt::u8: return "uint8";
    default: return "undef";
  }
}

int64_t dtype_size(dt t) {
  switch (t) {
    case dt::f32:
    case dt::s32: return 4;
    case dt::bf16:
    case dt::f16: return 2;
    default: return 1;
  }
}

bool is_floating(dt t) { return t == dt::f32 || t == dt::bf16 || t == dt::f16; }

std::optional<dt> dnnl_type_of_scalar_type(int64_t scalar_type) {
  switch (scalar_type) {  // c10::ScalarType numbers
    case 0: return dt::u8;
    case 1: return dt::s8;
    case 3: return dt::s32;
    case 5: return dt::f16;
    case 6: return dt::f32;
    case 15: return dt::bf16;
    default: return std::nullopt;
  }
}

float load_float(const void* p, dt t) {
  switch (t) {
    case dt::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dt::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    case dt::s32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    case dt::s8: return static_cast<float>(*static_cast<const int8_t*>(p));
    case dt::u8: return static_cast<float>(*static_cast<const uint8_t*>(p));
    default: throw KernelError(OPC_NOT_IMPLEMENTED, std::string("no element access for ") + dtype_name(t));
  }
}

// ---- tensors ---------------------------------------------------------------------------------

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Dims channels_last_strides(const Dims& shape) {
  // Order, fastest first: C, then the spatial dims from the last, then N.
  Dims strides(shape.size());
  int64_t s = 1;
  strides[1] = s;
  s *= std::max<int64_t>(shape[1], 1);
  for (size_t d = shape.size() - 1; d >= 2; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(shape[d], 1);
  }
  strides[0] = s;
  return strides;
}

bool is_contiguous(const Tensor& t) {
  int64_t expected = 1;
  for (int d = t.ndim() - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (t.size(d) == 0) return true;
    if (t.strides[static_cast<size_t>(d)] != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

bool is_non_overlapping_and_dense(const Tensor& t) {
  std::vector<int> order(static_cast<size_t>(t.ndim()));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return t.strides[static_cast<size_t>(a)] < t.strides[static_cast<size_t>(b)];
  });
  int64_t expected = 1;
  for (int d : order) {
    if (t.size(d) == 0) return true;
    if (t.size(d) == 1) continue;
    if (t.strides[static_cast<size_t>(d)] != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

bool strides_like_channels_last(const Tensor& t) {
  const int n = t.ndim();
  if (n != 4 && n != 5) return false;
  if (t.strides[1] == 0) return false;
  std::vector<int> order{1};
  for (int d = n - 1; d >= 2; --d) order.push_back(d);
  order.push_back(0);
  int64_t min = 0;
  for (int d : order) {
    const int64_t stride = t.strides[static_cast<size_t>(d)];
    if (t.size(d) == 0 || stride < min) return false;
    if (d == 0 && min == t.strides[1]) return false;
    min = stride * std::max<int64_t>(t.size(d), 1);
  }
  return true;
}

Dims elementwise_strides(const Dims& shape, const std::vector<const Tensor*>& inputs) {
  const int n = static_cast<int>(shape.size());
  std::vector<Dims> over;  // each input's strides over the broadcast shape, 0 where broadcast
  for (const Tensor* t : inputs) {
    Dims s(shape.size(), 0);
    const int lead = n - t->ndim();
    for (int d = 0; d < t->ndim(); ++d) {
      const bool broadcast = t->size(d) == 1 && shape[static_cast<size_t>(lead + d)] != 1;
      s[static_cast<size_t>(lead + d)] = broadcast ? 0 : t->strides[static_cast<size_t>(d)];
    }
    over.push_back(std::move(s));
  }
  std::vector<int> perm(shape.size());  // perm[0]: the fastest-moving dim
  for (int i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = n - 1 - i;
  auto order = [&](int d0, int d1) {  // > 0: d0 moves slower than d1 in the inputs' memory
    for (const Dims& s : over) {
      const int64_t s0 = s[static_cast<size_t>(d0)], s1 = s[static_cast<size_t>(d1)];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 != s1) return s0 < s1 ? -1 : 1;
      if (shape[static_cast<size_t>(d0)] > shape[static_cast<size_t>(d1)]) return 1;
    }
    return 0;
  };
  for (int i = 1; i < n; ++i) {  // TensorIterator's insertion sort
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; --d0) {
      const int c = order(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
      if (c > 0) {
        std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Dims strides(shape.size());
  int64_t next = 1;
  for (int d : perm) {
    strides[static_cast<size_t>(d)] = next;
    next *= std::max<int64_t>(shape[static_cast<size_t>(d)], 1);
  }
  return strides;
}

Dims broadcast_shape(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  const int n = std::max(a.ndim(), b.ndim());
  Dims shape(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    const int da = d - (n - a.ndim()), db = d - (n - b.ndim());
    const int64_t sa = da >= 0 ? a.size(da) : 1, sb = db >= 0 ? b.size(db) : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      invalid_argument(std::string("the shapes of '") + a_name + "' " + shape_string(a.shape) + " and '" + b_name +
                       "' " + shape_string(b.shape) + " do not broadcast");
    }
    shape[static_cast<size_t>(d)] = sa == 1 ? sb : sa;
  }
  return shape;
}

Tensor permuted(const Tensor& t, const std::vector<int>& perm) {
  Tensor r = t;
  for (size_t d = 0; d < perm.size(); ++d) {
    r.shape[d] = t.shape[static_cast<size_t>(perm[d])];
    r.strides[d] = t.strides[static_cast<size_t>(perm[d])];
  }
  return r;
}

Tensor expanded(const Tensor& t, const Dims& shape) {
  Tensor r = t;
  r.shape = shape;
  r.strides.assign(shape.size(), 0);
  const size_t lead = shape.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d) {
    r.strides[lead + d] = t.shape[d] == shape[lead + d] ? t.strides[d] : 0;
  }
  return r;
}

// ---- one call --------------------------------------------------------------------------------

Call::Call(const OpcCallContext* ctx, const OpcValue* args, int64_t num_args, OpcValue* returns, int64_t num_returns)
    : opc::Args(args, num_args), ctx_(ctx), returns_(returns), num_returns_(num_returns) {
  for (int64_t i = 0; i < num_returns; ++i) {
    returns[i].tag = OPC_TAG_NONE;
    returns[i].alias = 0;
    returns[i].u.i = 0;
  }
}

Tensor Call::tensor(int64_t i, const char* name) const {
  const OpcValue& v = arg(i, name);
  if (v.tag != OPC_TAG_TENSOR || v.u.tensor == nullptr) invalid_argument(std::string("argument '") + name + "' must be a Tensor");
  const DLTensor& t = v.u.tensor->dl_tensor;
  const auto type = dnnl_type(t.dtype);
  if (!type || *type == dt::f16) {
    not_implemented(std::string("argument '") + name + "' has a dtype (code " + std::to_string(t.dtype.code) + ", " +
                    std::to_string(t.dtype.bits) + " bits) oneDNN 2.6 does not compute with on CPU");
  }
  if (t.device.device_type != kDLCPU) not_implemented(std::string("argument '") + name + "' is not on the CPU");
  Tensor r;
  r.type = *type;
  r.shape.assign(t.shape, t.shape + t.ndim);
  r.strides = t.strides ? Dims(t.strides, t.strides + t.ndim) : contiguous_strides(r.shape);
  r.data = t.data ? static_cast<char*>(t.data) + t.byte_offset : nullptr;
  if (t.ndim > DNNL_MAX_NDIMS) not_implemented(std::string("argument '") + name + "' has more dimensions than oneDNN's 12");
  return r;
}

std::optional<Tensor> Call::optional_tensor(int64_t i, const char* name) const {
  if (is_none(i)) return std::nullopt;
  return tensor(i, name);
}

std::vector<Tensor> Call::tensor_list(int64_t i, const char* name) const {
  const OpcValue& v = arg(i, name);
  if (v.tag != OPC_TAG_LIST) invalid_argument(std::string("argument '") + name + "' must be a list of tensors");
  std::vector<Tensor> r;
  for (int64_t k = 0; k < v.u.list.size; ++k) {
    const std::string item = std::string(name) + "[" + std::to_string(k) + "]";
    Call view(ctx_, v.u.list.items, v.u.list.size, nullptr, 0);
    r.push_back(view.tensor(k, item.c_str()));
  }
  return r;
}

Tensor Call::make(DLDataType type, const Dims& shape, const Dims& strides, OpcDLManagedTensorVersioned** managed) {
  int64_t none = 0;
  const int32_t n = static_cast<int32_t>(shape.size());
  OpcDLManagedTensorVersioned* m =
      ctx_->new_tensor(ctx_->host, type, n, n ? shape.data() : &none, n ? strides.data() : &none);
  if (m == nullptr) throw KernelError(OPC_OUT_OF_MEMORY, "the host could not allocate a tensor of shape " + shape_string(shape));
  *managed = m;
  Tensor r;
  r.type = dnnl_type(type).value_or(dt::undef);
  r.shape = shape;
  r.strides = m->dl_tensor.strides ? Dims(m->dl_tensor.strides, m->dl_tensor.strides + n) : strides;
  r.data = m->dl_tensor.data ? static_cast<char*>(m->dl_tensor.data) + m->dl_tensor.byte_offset : nullptr;
  return r;
}

Tensor Call::output(int64_t ret, dt type, const Dims& shape, const Dims& strides) {
  if (ret >= num_returns_) throw KernelError(OPC_ERROR, "internal: return " + std::to_string(ret) + " out of range");
  OpcDLManagedTensorVersioned* m = nullptr;
  Tensor r = make(dl_type(type), shape, strides, &m);
  returns_[ret].tag = OPC_TAG_TENSOR;
  returns_[ret].u.tensor = m;
  return r;
}

Tensor Call::output(int64_t ret, DLDataType type, const Dims& shape) {
  if (ret >= num_returns_) throw KernelError(OPC_ERROR, "internal: return " + std::to_string(ret) + " out of range");
  OpcDLManagedTensorVersioned* m = nullptr;
  Tensor r = make(type, shape, contiguous_strides(shape), &m);
  returns_[ret].tag = OPC_TAG_TENSOR;
  returns_[ret].u.tensor = m;
  return r;
}

Tensor Call::scratch(dt type, const Dims& shape, const Dims& strides) {
  OpcDLManagedTensorVersioned* m = nullptr;
  return make(dl_type(type), shape, strides, &m);  // not returned: the host frees it after the call
}

// ---- oneDNN memory ---------------------------------------------------------------------------

dnnl::memory::desc md_of(dt type, const Dims& dims, const Dims& strides) {
  if (dims.empty()) return dnnl::memory::desc({1}, type, dnnl::memory::dims{1});  // 0-d as {1}
  // A size-1 dim's stride is never used to address memory, but oneDNN reads it: binary's
  // descriptor creation segfaults on a [1] src1 of stride 2 (docs/onednn-conformance.md). It is
  // given the stride a dense tensor would have there.
  Dims normalized = strides;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] == 1) normalized[d] = d + 1 < dims.size() ? normalized[d + 1] * std::max<int64_t>(dims[d + 1], 1) : 1;
  }
  return dnnl::memory::desc(dims, type, normalized);
}

dnnl::memory::desc md_of(const Tensor& t) { return md_of(t.type, t.shape, t.strides); }

dnnl::memory memory_of(const dnnl::memory::desc& md, const Tensor& t) { return dnnl::memory(md, engine(), t.data); }
dnnl::memory memory_of(const Tensor& t) { return memory_of(md_of(t), t); }

namespace {
// The plugin's own strided copy into a row-major tensor of the same type: for layouts oneDNN's
// descriptors cannot express (overlapping strides).
void strided_copy(const Tensor& src, const Tensor& dst) {
  const int64_t n = src.numel(), item = dtype_size(src.type);
  Dims index(src.shape.size(), 0);
  const char* s = static_cast<const char*>(src.data);
  char* d = static_cast<char*>(dst.data);
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (size_t i = 0; i < index.size(); ++i) offset += index[i] * src.strides[i];
    std::memcpy(d + k * item, s + offset * item, static_cast<size_t>(item));
    for (size_t i = index.size(); i-- > 0;) {
      if (++index[i] < src.shape[i]) break;
      index[i] = 0;
    }
  }
}
}  // namespace

void reorder_into(const dnnl::memory::desc& src_md, const Tensor& src, const dnnl::memory::desc& dst_md, const Tensor& dst) {
  if (src.numel() == 0) return;
  dnnl::memory s = memory_of(src_md, src), d = memory_of(dst_md, dst);
  run(dnnl::reorder(s, d), {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, d}});
}

void reorder_into(const Tensor& src, const Tensor& dst) { reorder_into(md_of(src), src, md_of(dst), dst); }

Tensor dense_copy(Call& call, const Tensor& t, dt type) {
  if (type == dt::undef) type = t.type;
  Tensor out = call.scratch(type, t.shape);
  if (t.numel() == 0) return out;
  try {
    reorder_into(md_of(t), t, md_of(out), out);
  } catch (const dnnl::error&) {
    // oneDNN refuses t's layout (overlapping strides): copy by hand, then convert.
    Tensor same = type == t.type ? out : call.scratch(t.type, t.shape);
    strided_copy(t, same);
    if (type != t.type) reorder_into(same, out);
  }
  return out;
}

void densify(Call& call, const std::vector<Tensor*>& inputs, const char* why) {
  for (Tensor* t : inputs) {
    if (is_contiguous(*t)) continue;
    if (settings().strict_layouts) {
      not_implemented(std::string(why) + " (strides " + shape_string(t->strides) + ", shape " + shape_string(t->shape) +
                      "); layouts=strict makes no dense copy");
    }
    *t = dense_copy(call, *t);
    count_dense_copy(call.op());
  }
}

dnnl::memory::desc input_md(Call& call, Tensor& t, const char* name) {
  try {
    return md_of(t);
  } catch (const dnnl::error&) {
    if (settings().strict_layouts) {
      not_implemented(std::string("oneDNN refuses the layout of argument '") + name + "' (strides " +
                      shape_string(t.strides) + "); layouts=strict makes no dense copy");
    }
    t = dense_copy(call, t);
    count_dense_copy(call.op());
    return md_of(t);
  }
}

}  // namespace opc_onednn
