// DLPack importer (core/include/opconform/core/dlpack.h): a managed tensor, 0.6 or 1.x, made
// from the fuzz bytes — any ndim, shape, strides, dtype, device, byte_offset, flags and version —
// over a real heap buffer of a fuzzed size. from_dlpack must either throw opconform::Error
// without running the deleter, or return a tensor that describes exactly the memory the
// descriptor names (sizes, strides, first element, a storage covering the last element) and
// runs the deleter once when it dies. When that memory lies inside the buffer, every element is
// read through the tensor (ASan watches the buffer's bounds) and compared with the buffer.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_support.h"
#include "opconform/core/dlpack.h"

namespace {

using namespace opconform;
using opconform::fuzz::plausible;

int deleter_calls = 0;
void count_deleter(DLManagedTensor*) { ++deleter_calls; }
void count_deleter_versioned(OpcDLManagedTensorVersioned*) { ++deleter_calls; }

struct FreeBuffer {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Element offsets (in elements, from the first element) of every element, row-major.
std::vector<__int128> element_offsets(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<__int128> offsets{0};
  for (size_t d = 0; d < sizes.size(); ++d) {
    std::vector<__int128> next;
    next.reserve(offsets.size() * static_cast<size_t>(sizes[d]));
    for (__int128 base : offsets)
      for (int64_t i = 0; i < sizes[d]; ++i) next.push_back(base + static_cast<__int128>(i) * strides[d]);
    offsets = std::move(next);
  }
  return offsets;
}

// What the descriptor says, read by this harness independently of the importer.
struct Described {
  std::vector<int64_t> sizes, strides;
  bool has_elements = true;
  __int128 numel = 1;
  __int128 last = 0;  // offset in elements of the farthest element
};

Described describe(const DLTensor& t) {
  Described d;
  d.sizes.assign(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    d.strides.assign(t.strides, t.strides + t.ndim);
  } else {
    d.strides = contiguous_strides(d.sizes);
  }
  for (int i = 0; i < t.ndim; ++i) {
    d.numel *= d.sizes[i];
    if (d.sizes[i] == 0) d.has_elements = false;
    if (d.sizes[i] > 0) d.last += static_cast<__int128>(d.sizes[i] - 1) * d.strides[i];
  }
  return d;
}

// The checks on a tensor the importer accepted.
void check_import(const Tensor& t, const DLTensor& dl, bool read_only, const uint8_t* buffer, size_t buffer_size) {
  const Described d = describe(dl);
  FUZZ_CHECK(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()) == d.sizes, "sizes ", shape_string(t.sizes()),
             " differ from the descriptor's ", shape_string(d.sizes));
  FUZZ_CHECK(std::vector<int64_t>(t.strides().begin(), t.strides().end()) == d.strides, "strides ",
             shape_string(t.strides()), " differ from the descriptor's ", shape_string(d.strides));
  FUZZ_CHECK(t.dtype() == from_dlpack_dtype(dl.dtype), "dtype differs from the descriptor's");
  FUZZ_CHECK(t.storage()->read_only() == read_only, "read-only flag not honoured");
  if (!d.has_elements) return;

  // The first element is where the descriptor puts it, and the storage reaches the last one.
  const __int128 item = static_cast<__int128>(t.itemsize());
  const auto* base = static_cast<const uint8_t*>(t.storage()->data());
  const auto* first = static_cast<const uint8_t*>(dl.data) + dl.byte_offset;
  FUZZ_CHECK(base + t.storage_offset() * t.itemsize() == first, "the first element is not at data + byte_offset");
  FUZZ_CHECK((t.storage_offset() + d.last + 1) * item <= static_cast<__int128>(t.storage()->nbytes()),
             "the storage (", t.storage()->nbytes(), " bytes) does not reach the last element");

  // Read every element when the described memory is inside the buffer (and on the CPU).
  const bool on_cpu = t.device().is_cpu();
  const __int128 start = first - buffer;
  const bool inside = dl.data != nullptr && static_cast<const uint8_t*>(dl.data) >= buffer && start >= 0 &&
                      start + (d.last + 1) * item <= static_cast<__int128>(buffer_size);
  if (!on_cpu || !inside || d.numel > (1 << 14)) return;
  Tensor copy = empty(t.sizes(), TensorOptions(t.dtype()));
  copy.copy_(t);
  const auto* copied = static_cast<const uint8_t*>(copy.const_data_ptr());
  const std::vector<__int128> offsets = element_offsets(d.sizes, d.strides);
  const size_t n = t.itemsize();
  for (size_t k = 0; k < offsets.size(); ++k) {
    FUZZ_CHECK(std::memcmp(copied + k * n, first + static_cast<ptrdiff_t>(offsets[k] * item), n) == 0, "element ", k,
               " read through the tensor differs from the buffer");
  }
}

// Export the imported tensor and import it again: the same view of the same memory.
void check_round_trip(const Tensor& t) {
  OpcDLManagedTensorVersioned* exported = to_dlpack_versioned(t);
  Tensor again;
  try {
    again = from_dlpack(exported);
  } catch (const Error& e) {
    exported->deleter(exported);
    fuzz::fail(std::string("an exported tensor does not import again: ") + e.what());
  }
  FUZZ_CHECK(std::ranges::equal(again.sizes(), t.sizes()) && std::ranges::equal(again.strides(), t.strides()) &&
                 again.dtype() == t.dtype(),
             "export -> import changed the metadata");
  FUZZ_CHECK(t.numel() == 0 || again.storage()->data() == t.storage()->data() ||
                 static_cast<const char*>(again.storage()->data()) + again.storage_offset() * again.itemsize() ==
                     static_cast<const char*>(t.storage()->data()) + t.storage_offset() * t.itemsize(),
             "export -> import moved the first element");
}

DLDataType fuzz_dtype(FuzzedDataProvider& in) {
  static constexpr uint8_t kCodes[] = {kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kOpcDLBool, kDLOpaqueHandle};
  static constexpr uint8_t kBits[] = {8, 16, 32, 64, 128};
  DLDataType dtype;
  dtype.code = in.ConsumeBool() ? in.PickValueInArray(kCodes) : in.ConsumeIntegral<uint8_t>();
  dtype.bits = in.ConsumeBool() ? in.PickValueInArray(kBits) : in.ConsumeIntegral<uint8_t>();
  dtype.lanes = in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0 ? 1 : in.ConsumeIntegral<uint16_t>();
  return dtype;
}

DLDevice fuzz_device(FuzzedDataProvider& in) {
  static constexpr int32_t kTypes[] = {kDLCPU, kDLCPU, kDLCPU, kDLCUDAHost, kDLCUDA, kDLOpenCL};
  const int32_t type = in.ConsumeBool() ? in.PickValueInArray(kTypes) : in.ConsumeIntegral<int32_t>();
  DLDevice device;
  // The 0.6 enum has no fixed underlying type: store the raw integer, as a foreign producer could.
  std::memcpy(&device.device_type, &type, sizeof type);
  device.device_id = plausible<int32_t>(in, 0, 2);
  return device;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool versioned = in.ConsumeBool();

  DLTensor dl{};
  dl.dtype = fuzz_dtype(in);
  dl.device = fuzz_device(in);

  // ndim: small, at the limit, or anything; the arrays hold what ndim promises (up to a bound
  // past the limit, which the importer must reject before reading them).
  const uint8_t ndim_kind = in.ConsumeIntegralInRange<uint8_t>(0, 7);
  dl.ndim = ndim_kind < 6 ? in.ConsumeIntegralInRange<int32_t>(0, 4)
            : ndim_kind == 6 ? in.ConsumeIntegralInRange<int32_t>(kMaxDLPackDims - 1, kMaxDLPackDims + 1)
                             : in.ConsumeIntegral<int32_t>();
  const size_t stored_dims = static_cast<size_t>(std::clamp(dl.ndim, 0, kMaxDLPackDims + 2));
  std::vector<int64_t> shape(stored_dims), strides(stored_dims);
  for (auto& s : shape) s = plausible<int64_t>(in, 0, 4);
  const bool null_strides = in.ConsumeBool();
  for (auto& s : strides) s = plausible<int64_t>(in, 0, 6);
  dl.shape = stored_dims > 0 && in.ConsumeIntegralInRange<uint8_t>(0, 15) != 0 ? shape.data() : nullptr;
  dl.strides = null_strides ? nullptr : strides.data();
  dl.byte_offset = plausible<uint64_t>(in, 0, 48);

  // The buffer: exactly its size on the heap, filled with a pattern that tells elements apart
  // (bool elements hold 0 or 1: any other byte is not a bool, whoever reads it).
  const size_t buffer_size = in.ConsumeIntegralInRange<size_t>(0, 512);
  std::unique_ptr<uint8_t, FreeBuffer> buffer(static_cast<uint8_t*>(std::malloc(buffer_size)));
  const bool is_bool = dl.dtype.code == kOpcDLBool;
  for (size_t i = 0; i < buffer_size; ++i) buffer.get()[i] = is_bool ? (i * 7 / 3) % 2 : static_cast<uint8_t>(i * 131 + 7);
  const uint8_t where = in.ConsumeIntegralInRange<uint8_t>(0, 7);
  dl.data = where == 0 ? nullptr : buffer.get() + (where == 1 ? in.ConsumeIntegralInRange<size_t>(0, 15) : 0);

  OpcDLManagedTensorVersioned managed_v{};
  DLManagedTensor managed{};
  bool read_only = false;
  deleter_calls = 0;
  Tensor t;
  try {
    if (versioned) {
      managed_v.version.major = in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0 ? 1 : in.ConsumeIntegral<uint32_t>();
      managed_v.version.minor = in.ConsumeIntegral<uint32_t>();
      managed_v.flags = in.ConsumeIntegral<uint64_t>();
      managed_v.deleter = count_deleter_versioned;
      managed_v.dl_tensor = dl;
      read_only = (managed_v.flags & OPC_DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
      t = from_dlpack(&managed_v);
    } else {
      managed.deleter = count_deleter;
      managed.dl_tensor = dl;
      t = from_dlpack(&managed);
    }
  } catch (const Error& e) {
    FUZZ_CHECK(deleter_calls == 0, "a rejected descriptor's deleter ran (", e.what(), ")");
    return 0;
  }
  FUZZ_CHECK(deleter_calls == 0, "the deleter ran while the tensor is alive");
  check_import(t, dl, read_only, buffer.get(), buffer_size);
  if (read_only && t.numel() > 0) {
    bool refused = false;
    try {
      t.fill_(0);
    } catch (const Error& e) {
      refused = e.code() == ErrorCode::kReadOnly;
    }
    FUZZ_CHECK(refused, "a write to a read-only import was not refused");
  }
  check_round_trip(t);
  t = Tensor();
  FUZZ_CHECK(deleter_calls == 1, "the deleter ran ", deleter_calls, " times after the tensor died (expected once)");
  return 0;
}
