// DLPack import/export: round trips (0.6 and 1.x forms), ownership (deleters run exactly once),
// malformed descriptors (rejected with Error(kDLPack), deleter not called), read-only tensors,
// CUDA, and RapidCheck properties for random strided views and randomly corrupted descriptors.

// Another dlpack.h first (ATen's, same include guard as Debian's): ours must still compile.
#if __has_include(<ATen/dlpack.h>)
#include <ATen/dlpack.h>
#else
#include <dlpack/dlpack.h>
#endif

#include "opconform/core/dlpack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "opconform/core/cuda.h"
#include "opconform/core/tensor.h"

namespace opconform {
namespace {

using ::testing::HasSubstr;

constexpr DType kAllDTypes[] = {DType::Bool,    DType::UInt8,   DType::Int8,      DType::Int16,
                                DType::Int32,   DType::Int64,   DType::Float16,   DType::BFloat16,
                                DType::Float32, DType::Float64, DType::Complex64, DType::Complex128};
static_assert(std::size(kAllDTypes) == kNumDTypes);

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------- helpers

// The two wire forms, so tests run once per form.
enum class Form { V06, V1 };
const char* form_name(Form f) { return f == Form::V06 ? "v0_6" : "v1"; }

// Wraps an exported managed tensor's deleter so that calls are counted (and forwarded).
template <typename Managed>
struct CountingShim {
  void (*original)(Managed*);
  void* original_ctx;
  int* count;

  static void deleter(Managed* self) {
    auto* shim = static_cast<CountingShim*>(self->manager_ctx);
    self->manager_ctx = shim->original_ctx;
    ++*shim->count;
    auto original = shim->original;
    delete shim;
    original(self);
  }
  static void install(Managed* m, int* count) {
    m->manager_ctx = new CountingShim{m->deleter, m->manager_ctx, count};
    m->deleter = &CountingShim::deleter;
  }
};

// Export through `form` with a counting deleter, then import. `deleted` counts deleter calls.
Tensor export_import(const Tensor& t, Form form, int* deleted) {
  if (form == Form::V06) {
    DLManagedTensor* m = to_dlpack(t);
    CountingShim<DLManagedTensor>::install(m, deleted);
    return from_dlpack(m);
  }
  OpcDLManagedTensorVersioned* m = to_dlpack_versioned(t);
  CountingShim<OpcDLManagedTensorVersioned>::install(m, deleted);
  return from_dlpack(m);
}

// Every index of `sizes` in row-major order.
void for_each_index(IntArrayRef sizes, const std::function<void(const std::vector<int64_t>&)>& f) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return;
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    f(index);
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

// Address of one element of a CPU tensor.
const char* element_address(const Tensor& t, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.stride(static_cast<int64_t>(d));
  return static_cast<const char*>(t.const_data_ptr()) + offset * static_cast<int64_t>(t.itemsize());
}

// Fills the whole storage of a CPU tensor with random bytes; bool storages get 0/1 only (any
// other byte is not a valid bool). The seed makes the bytes reproducible.
void fill_random_bytes(const Tensor& t, unsigned seed) {
  auto* p = static_cast<unsigned char*>(t.storage()->data());
  uint32_t state = seed * 2654435761u + 1;
  for (size_t i = 0; i < t.storage()->nbytes(); ++i) {
    state = state * 1664525u + 1013904223u;
    unsigned char byte = static_cast<unsigned char>(state >> 24);
    p[i] = t.dtype() == DType::Bool ? (byte & 1) : byte;
  }
}

// Asserts `imported` is a zero-copy alias of `t` with the same metadata and the same elements.
void expect_same_view(const Tensor& t, const Tensor& imported) {
  EXPECT_EQ(imported.dtype(), t.dtype());
  EXPECT_EQ(imported.device(), t.device());
  EXPECT_EQ(std::vector<int64_t>(imported.sizes().begin(), imported.sizes().end()),
            std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
  EXPECT_EQ(std::vector<int64_t>(imported.strides().begin(), imported.strides().end()),
            std::vector<int64_t>(t.strides().begin(), t.strides().end()));
  EXPECT_EQ(imported.storage_offset(), t.storage_offset());
  EXPECT_EQ(imported.storage()->data(), t.storage()->data());
  EXPECT_EQ(imported.const_data_ptr(), t.const_data_ptr());
  if (t.device().is_cpu()) {
    EXPECT_TRUE(equal(imported, t));
    for_each_index(t.sizes(), [&](const std::vector<int64_t>& index) {
      EXPECT_EQ(element_address(imported, index), element_address(t, index));
      (void)imported.get(index);  // readable
    });
  }
}

// A tensor of each dtype with distinct values: 0, 1, 2, ... (bool: alternating).
Tensor iota(DType dtype, std::initializer_list<int64_t> sizes) {
  Tensor t = arange(std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()),
                    TensorOptions(DType::Int64));
  if (dtype == DType::Bool) {
    Tensor b = empty({t.numel()}, TensorOptions(DType::Bool));
    for (int64_t i = 0; i < t.numel(); ++i) b.set({i}, Scalar(i % 2 == 1));
    return b.view(IntArrayRef(sizes.begin(), sizes.size()));
  }
  return t.to(dtype).view(IntArrayRef(sizes.begin(), sizes.size()));
}

// ---------------------------------------------------------------- export descriptor fields

TEST(DLPackExport, DescribesTheTensorWithoutCopying) {
  Tensor t = iota(DType::Float32, {2, 3, 4}).transpose(0, 2).narrow(0, 1, 2);
  DLManagedTensor* m = to_dlpack(t);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.data, t.storage()->data());
  EXPECT_EQ(dl.byte_offset, static_cast<uint64_t>(t.storage_offset()) * 4);
  EXPECT_EQ(static_cast<int>(dl.device.device_type), static_cast<int>(kDLCPU));
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.ndim, 3);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  EXPECT_EQ(std::vector<int64_t>(dl.shape, dl.shape + 3), (std::vector<int64_t>{2, 3, 2}));
  ASSERT_NE(dl.strides, nullptr);
  EXPECT_EQ(std::vector<int64_t>(dl.strides, dl.strides + 3), (std::vector<int64_t>{1, 4, 12}));
  m->deleter(m);

  OpcDLManagedTensorVersioned* v = to_dlpack_versioned(t);
  EXPECT_EQ(v->version.major, 1u);
  EXPECT_EQ(v->version.minor, 0u);
  EXPECT_EQ(v->flags, 0u);
  EXPECT_EQ(v->dl_tensor.data, t.storage()->data());
  v->deleter(v);
}

TEST(DLPackExport, DTypeMappingMatchesTheSpec) {
  struct Row { DType dtype; uint8_t code; uint8_t bits; };
  const Row rows[] = {
      {DType::Bool, 6, 8},            {DType::UInt8, kDLUInt, 8},        {DType::Int8, kDLInt, 8},
      {DType::Int16, kDLInt, 16},     {DType::Int32, kDLInt, 32},        {DType::Int64, kDLInt, 64},
      {DType::Float16, kDLFloat, 16}, {DType::BFloat16, kDLBfloat, 16},  {DType::Float32, kDLFloat, 32},
      {DType::Float64, kDLFloat, 64}, {DType::Complex64, kDLComplex, 64}, {DType::Complex128, kDLComplex, 128}};
  for (const Row& row : rows) {
    DLDataType dl = to_dlpack_dtype(row.dtype);
    EXPECT_EQ(dl.code, row.code) << name(row.dtype);
    EXPECT_EQ(dl.bits, row.bits) << name(row.dtype);
    EXPECT_EQ(dl.lanes, 1) << name(row.dtype);
    EXPECT_EQ(from_dlpack_dtype(dl), row.dtype);
  }
}

TEST(DLPackExport, MetaAndFakeTensorsCannotBeExported) {
  Tensor meta = empty({2, 3}, TensorOptions(DType::Float32, Device::meta()));
  Tensor fake = make_metadata_tensor(std::vector<int64_t>{2}, std::vector<int64_t>{1}, DType::Float32,
                                     Device::cpu(), DispatchKeySet{DispatchKey::Fake});
  for (const Tensor& t : {meta, fake}) {
    try {
      to_dlpack(t);
      ADD_FAILURE() << "to_dlpack accepted a tensor without memory";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDLPack);
      EXPECT_THAT(e.message(), HasSubstr("without memory"));
    }
    try {
      to_dlpack_versioned(t);
      ADD_FAILURE() << "to_dlpack_versioned accepted a tensor without memory";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDLPack);
    }
  }
  try {
    to_dlpack(Tensor());
    ADD_FAILURE() << "to_dlpack accepted an undefined tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDLPack);
    EXPECT_THAT(e.message(), HasSubstr("undefined"));
  }
}

TEST(DLPackExport, VendorDevicesHaveNoDLPackDeviceType) {
  DeviceType vendor = register_device_type("dlpacktestdev");
  alignas(8) static float memory[4] = {};
  auto storage = Storage::wrap(memory, sizeof(memory), Device(vendor, 0), {});
  Tensor t = make_tensor(storage, std::vector<int64_t>{4}, std::vector<int64_t>{1}, 0, DType::Float32);
  try {
    to_dlpack(t);
    ADD_FAILURE() << "to_dlpack accepted a vendor device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDLPack);
    EXPECT_THAT(e.message(), HasSubstr("has no DLPack device type"));
  }
}

// ---------------------------------------------------------------- round trips

class DLPackRoundTrip : public ::testing::TestWithParam<Form> {};

TEST_P(DLPackRoundTrip, EveryDType) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(name(dtype));
    int deleted = 0;
    {
      Tensor t = iota(dtype, {2, 3, 4});
      Tensor imported = export_import(t, GetParam(), &deleted);
      expect_same_view(t, imported);
      EXPECT_EQ(deleted, 0);
    }
    EXPECT_EQ(deleted, 1);
  }
}

TEST_P(DLPackRoundTrip, ZeroDimAndEmptyTensors) {
  std::vector<Tensor> cases = {
      scalar_tensor(Scalar(2.5), TensorOptions(DType::Float64)),
      empty({0}, TensorOptions(DType::Float32)),
      empty({2, 0, 3}, TensorOptions(DType::Int16)),
      iota(DType::Int32, {4, 3}).narrow(0, 4, 0),  // empty, with a storage offset
      iota(DType::Complex128, {3}).narrow(0, 1, 0),
  };
  for (const Tensor& t : cases) {
    SCOPED_TRACE(t.to_string());
    int deleted = 0;
    {
      Tensor imported = export_import(t, GetParam(), &deleted);
      expect_same_view(t, imported);
    }
    EXPECT_EQ(deleted, 1);
  }
}

TEST_P(DLPackRoundTrip, NonContiguousViews) {
  Tensor base = iota(DType::Float32, {4, 6});
  std::vector<std::pair<std::string, Tensor>> views = {
      {"transpose", base.transpose(0, 1)},
      {"slice with step", base.slice(1, 1, 6, 2)},
      {"expand (stride 0)", iota(DType::Int64, {3, 1}).expand({3, 5})},
      {"expand of a 0-d tensor", scalar_tensor(Scalar(int64_t{7})).expand({2, 3})},
      {"narrow with storage offset", base.narrow(0, 1, 2).narrow(1, 3, 3)},
      {"select then step", base.select(0, 2).slice(0, 0, 6, 3)},
      {"permute of 3-d", iota(DType::BFloat16, {2, 3, 4}).permute({2, 0, 1})},
  };
  for (const auto& [label, t] : views) {
    SCOPED_TRACE(label);
    int deleted = 0;
    {
      Tensor imported = export_import(t, GetParam(), &deleted);
      expect_same_view(t, imported);
    }
    EXPECT_EQ(deleted, 1);
  }
}

TEST_P(DLPackRoundTrip, WritesAreSharedBothWays) {
  Tensor t = zeros({2, 3}, TensorOptions(DType::Float64));
  int deleted = 0;
  Tensor imported = export_import(t, GetParam(), &deleted);
  t.set({1, 2}, Scalar(4.5));
  EXPECT_EQ(imported.get({1, 2}).to_double(), 4.5);
  imported.set({0, 1}, Scalar(-1.0));
  EXPECT_EQ(t.get({0, 1}).to_double(), -1.0);
  imported.fill_(Scalar(3.0));
  EXPECT_TRUE(equal(t, full(std::vector<int64_t>{2, 3}, Scalar(3.0), TensorOptions(DType::Float64))));
}

TEST_P(DLPackRoundTrip, ExportKeepsTheSourceStorageAlive) {
  int released = 0;
  auto* memory = static_cast<float*>(std::aligned_alloc(64, 64));
  for (int i = 0; i < 16; ++i) memory[i] = static_cast<float>(i);
  int deleted = 0;
  Tensor imported;
  {
    auto storage = Storage::wrap(memory, 64, Device::cpu(), [&released, memory] {
      ++released;
      std::free(memory);
    });
    Tensor t = make_tensor(storage, std::vector<int64_t>{4, 4}, std::vector<int64_t>{4, 1}, 0, DType::Float32);
    imported = export_import(t.slice(0, 1, 4), GetParam(), &deleted);
  }
  // The source tensor is gone; the DLPack context still holds its storage.
  EXPECT_EQ(released, 0);
  EXPECT_EQ(imported.get({2, 3}).to_double(), 15.0);
  imported = Tensor();
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(released, 1);
}

TEST_P(DLPackRoundTrip, DeleterRunsOnceAfterTheLastView) {
  int deleted = 0;
  Tensor view;
  {
    Tensor imported = export_import(iota(DType::Int32, {4, 5}), GetParam(), &deleted);
    view = imported.transpose(0, 1).select(0, 2);
    Tensor another = imported.narrow(1, 1, 2);
  }
  EXPECT_EQ(deleted, 0);  // `view` still uses the memory
  EXPECT_EQ(view.get({3}).to_int(), 17);
  view = Tensor();
  EXPECT_EQ(deleted, 1);
}

INSTANTIATE_TEST_SUITE_P(Forms, DLPackRoundTrip, ::testing::Values(Form::V06, Form::V1),
                         [](const auto& info) { return std::string(form_name(info.param)); });

// ---------------------------------------------------------------- foreign descriptors

// A hand-made descriptor over memory the test owns, in both forms, with a counting deleter.
// The shape and strides arrays hold kMaxDLPackDims entries, so a corrupted ndim up to the maximum
// never reads outside them.
struct Foreign {
  static constexpr size_t kBufferBytes = 8192;

  std::unique_ptr<unsigned char, decltype(&std::free)> buffer{
      static_cast<unsigned char*>(std::aligned_alloc(256, kBufferBytes)), &std::free};
  std::vector<int64_t> shape = std::vector<int64_t>(kMaxDLPackDims, 1);
  std::vector<int64_t> strides = std::vector<int64_t>(kMaxDLPackDims, 1);
  int deleted = 0;
  DLManagedTensor v06{};
  OpcDLManagedTensorVersioned v1{};

  // A valid float32 tensor of shape {2, 3}, compact, at the start of the buffer.
  Foreign() {
    for (size_t i = 0; i < kBufferBytes; ++i) buffer.get()[i] = static_cast<unsigned char>(i % 2);
    shape[0] = 2;
    shape[1] = 3;
    strides[0] = 3;
    strides[1] = 1;
    DLTensor dl{};
    dl.data = buffer.get();
    set_device_type(dl.device, kDLCPU);
    dl.device.device_id = 0;
    dl.ndim = 2;
    dl.dtype = DLDataType{kDLFloat, 32, 1};
    dl.shape = shape.data();
    dl.strides = strides.data();
    dl.byte_offset = 0;
    v06.dl_tensor = dl;
    v06.manager_ctx = &deleted;
    v06.deleter = [](DLManagedTensor* self) { ++*static_cast<int*>(self->manager_ctx); };
    v1.version = {OPC_DLPACK_MAJOR_VERSION, OPC_DLPACK_MINOR_VERSION};
    v1.dl_tensor = dl;
    v1.manager_ctx = &deleted;
    v1.deleter = [](OpcDLManagedTensorVersioned* self) { ++*static_cast<int*>(self->manager_ctx); };
  }
  Foreign(const Foreign&) = delete;

  // The DLTensor of the form under test.
  DLTensor& dl(Form form) { return form == Form::V06 ? v06.dl_tensor : v1.dl_tensor; }
  Tensor import(Form form) { return form == Form::V06 ? from_dlpack(&v06) : from_dlpack(&v1); }
  // The caller's duty after a failed import: it still owns the managed tensor.
  void release(Form form) { form == Form::V06 ? v06.deleter(&v06) : v1.deleter(&v1); }

  // Device types are written as integers: a corrupt value must not go through the enum type.
  static void set_device_type(DLDevice& device, int32_t type) {
    static_assert(sizeof(device.device_type) == sizeof(type));
    std::memcpy(&device.device_type, &type, sizeof(type));
  }
};

TEST(DLPackImport, ForeignTensorIsViewedInPlace) {
  for (Form form : {Form::V06, Form::V1}) {
    SCOPED_TRACE(form_name(form));
    Foreign f;
    auto* values = reinterpret_cast<float*>(f.buffer.get());
    for (int i = 0; i < 6; ++i) values[i] = static_cast<float>(i) * 1.5f;
    {
      Tensor t = f.import(form);
      EXPECT_EQ(t.storage()->data(), f.buffer.get());
      EXPECT_EQ(t.storage()->nbytes(), 24u);
      EXPECT_FALSE(t.storage()->read_only());
      EXPECT_TRUE(equal(t, from_vector<float>({0, 1.5, 3, 4.5, 6, 7.5}, std::vector<int64_t>{2, 3})));
      t.set({1, 1}, Scalar(100.0));
      EXPECT_EQ(values[4], 100.0f);
    }
    EXPECT_EQ(f.deleted, 1);
  }
}

TEST(DLPackImport, NullStridesMeanCompactRowMajor) {
  Foreign f;
  f.shape[0] = 2, f.shape[1] = 3, f.shape[2] = 4;
  f.dl(Form::V1).ndim = 3;
  f.dl(Form::V1).strides = nullptr;
  Tensor t = f.import(Form::V1);
  EXPECT_EQ(std::vector<int64_t>(t.strides().begin(), t.strides().end()), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(t.storage()->nbytes(), 96u);
}

TEST(DLPackImport, StorageSizeComesFromTheFarthestElement) {
  Foreign f;
  // float64 {3, 2} with strides {1, 5}: the farthest element is at 2 + 5 = 7.
  f.dl(Form::V06).dtype = DLDataType{kDLFloat, 64, 1};
  f.shape[0] = 3, f.shape[1] = 2;
  f.strides[0] = 1, f.strides[1] = 5;
  Tensor t = f.import(Form::V06);
  EXPECT_EQ(t.storage()->nbytes(), 8u * 8u);
  EXPECT_FALSE(t.is_contiguous());
}

TEST(DLPackImport, ByteOffsetOfWholeElementsBecomesTheStorageOffset) {
  Foreign f;
  f.dl(Form::V06).byte_offset = 16;  // four float32 elements
  Tensor t = f.import(Form::V06);
  EXPECT_EQ(t.storage()->data(), f.buffer.get());
  EXPECT_EQ(t.storage_offset(), 4);
  EXPECT_EQ(t.const_data_ptr(), f.buffer.get() + 16);
  EXPECT_EQ(t.storage()->nbytes(), 16u + 24u);
}

TEST(DLPackImport, ByteOffsetOfPartialElementsMovesTheBasePointer) {
  // `data` itself need not be aligned: only the first element, data + byte_offset.
  Foreign g;
  g.dl(Form::V06).dtype = DLDataType{kDLInt, 32, 1};
  g.dl(Form::V06).data = g.buffer.get() + 2;
  g.dl(Form::V06).byte_offset = 6;  // not a multiple of 4; first element at +8 is aligned
  Tensor u = g.import(Form::V06);
  EXPECT_EQ(u.storage()->data(), g.buffer.get() + 8);
  EXPECT_EQ(u.storage_offset(), 0);
  EXPECT_EQ(u.const_data_ptr(), g.buffer.get() + 8);
  EXPECT_EQ(u.storage()->nbytes(), 24u);
}

TEST(DLPackImport, NullDeleterIsAllowed) {
  Foreign f;
  f.v1.deleter = nullptr;
  { Tensor t = f.import(Form::V1); }
  EXPECT_EQ(f.deleted, 0);
}

TEST(DLPackImport, EmptyTensorMayHaveNullData) {
  Foreign f;
  f.shape[0] = 0;
  f.dl(Form::V06).data = nullptr;
  Tensor t = f.import(Form::V06);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.storage()->nbytes(), 0u);
  EXPECT_TRUE(equal(t, empty({0, 3})));
}

TEST(DLPackImport, CudaHostMemoryIsCpuMemory) {
  Foreign f;
  Foreign::set_device_type(f.dl(Form::V06).device, kDLCUDAHost);
  Tensor t = f.import(Form::V06);
  EXPECT_EQ(t.device(), Device::cpu());
}

TEST(DLPackImport, UnknownFlagsAndMinorVersionsAreAccepted) {
  Foreign f;
  f.v1.version.minor = 7;
  f.v1.flags = OPC_DLPACK_FLAG_BITMASK_IS_COPIED | (uint64_t{1} << 40);
  Tensor t = f.import(Form::V1);
  EXPECT_FALSE(t.storage()->read_only());
}

// ---------------------------------------------------------------- read-only

TEST(DLPackReadOnly, ReadOnlyFlagGivesAReadOnlyTensor) {
  Foreign f;
  auto* values = reinterpret_cast<float*>(f.buffer.get());
  for (int i = 0; i < 6; ++i) values[i] = static_cast<float>(i);
  f.v1.flags = OPC_DLPACK_FLAG_BITMASK_READ_ONLY;
  {
    Tensor t = f.import(Form::V1);
    EXPECT_TRUE(t.storage()->read_only());
    EXPECT_EQ(t.get({1, 2}).to_double(), 5.0);  // reading works
    try {
      t.fill_(Scalar(9.0));
      ADD_FAILURE() << "fill_ wrote to a read-only tensor";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kReadOnly);
    }
    try {
      t.transpose(0, 1).set({0, 0}, Scalar(1.0));
      ADD_FAILURE() << "set wrote through a view of a read-only tensor";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kReadOnly);
    }
    for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], static_cast<float>(i));  // memory unchanged

    // Re-export: the versioned form carries the flag, the 0.6 form still works.
    OpcDLManagedTensorVersioned* v = to_dlpack_versioned(t);
    EXPECT_EQ(v->flags & OPC_DLPACK_FLAG_BITMASK_READ_ONLY, OPC_DLPACK_FLAG_BITMASK_READ_ONLY);
    Tensor again = from_dlpack(v);
    EXPECT_TRUE(again.storage()->read_only());
    DLManagedTensor* m = to_dlpack(t);
    EXPECT_EQ(m->dl_tensor.data, f.buffer.get());
    m->deleter(m);
  }
  EXPECT_EQ(f.deleted, 1);
}

// ---------------------------------------------------------------- malformed descriptors

TEST(DLPackMalformed, NullManagedPointer) {
  for (bool versioned : {false, true}) {
    try {
      if (versioned) {
        from_dlpack(static_cast<OpcDLManagedTensorVersioned*>(nullptr));
      } else {
        from_dlpack(static_cast<DLManagedTensor*>(nullptr));
      }
      ADD_FAILURE() << "a null managed tensor was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDLPack);
      EXPECT_THAT(e.message(), HasSubstr("managed tensor pointer is null"));
    }
  }
}

struct MalformedCase {
  const char* name;
  std::function<void(Foreign&, DLTensor&)> corrupt;
  const char* expected;  // a substring of the message
  bool versioned_only = false;
};

const MalformedCase kMalformedCases[] = {
    {"NullDataWithElements", [](Foreign&, DLTensor& dl) { dl.data = nullptr; },
     "data is null but the tensor has 6 elements"},
    {"NegativeNdim", [](Foreign&, DLTensor& dl) { dl.ndim = -1; }, "ndim is negative (-1)"},
    {"AbsurdNdim", [](Foreign&, DLTensor& dl) { dl.ndim = 65; }, "ndim 65 exceeds the maximum of 64"},
    {"HugeNdim", [](Foreign&, DLTensor& dl) { dl.ndim = std::numeric_limits<int>::max(); }, "exceeds the maximum"},
    {"NullShape", [](Foreign&, DLTensor& dl) { dl.shape = nullptr; }, "shape is null for a tensor of ndim 2"},
    {"NegativeSize", [](Foreign& f, DLTensor&) { f.shape[1] = -3; }, "dimension 1 has negative size -3"},
    {"NegativeStride", [](Foreign& f, DLTensor&) { f.strides[0] = -3; },
     "dimension 0 has negative stride -3 (negative strides are not supported)"},
    {"ElementCountOverflow",
     [](Foreign& f, DLTensor&) { f.shape[0] = kInt64Max / 2, f.shape[1] = 3; },
     "has more elements than fit in int64"},
    {"ElementCountOverflowHiddenByZero",
     [](Foreign& f, DLTensor& dl) { dl.ndim = 3, f.shape[0] = kInt64Max / 2, f.shape[1] = 3, f.shape[2] = 0; },
     "has more elements than fit in int64"},
    {"StrideExtentOverflow", [](Foreign& f, DLTensor&) { f.shape[0] = 3, f.strides[0] = kInt64Max / 2 + 1; },
     "reaches beyond int64 elements"},
    {"StrideSumOverflow",
     [](Foreign& f, DLTensor&) { f.shape[1] = 2, f.strides[0] = kInt64Max, f.strides[1] = 1; },
     "reaches beyond int64 elements"},
    {"ByteSizeOverflow",
     [](Foreign& f, DLTensor& dl) {
       dl.dtype = DLDataType{kDLFloat, 64, 1};
       dl.ndim = 1, f.shape[0] = int64_t{1} << 61, f.strides[0] = 1;
     },
     "spans more than int64 bytes of float64"},
    {"ByteOffsetBeyondInt64", [](Foreign&, DLTensor& dl) { dl.byte_offset = ~uint64_t{0}; },
     "byte_offset 18446744073709551615 does not fit in int64"},
    {"ByteOffsetPlusExtentOverflow", [](Foreign&, DLTensor& dl) { dl.byte_offset = kInt64Max - 8; },
     "plus the tensor's extent of 24 bytes overflows int64"},
    {"AddressSpaceWrap",
     [](Foreign&, DLTensor& dl) { dl.data = reinterpret_cast<void*>(~uintptr_t{0} - 15); },
     "wraps around the address space"},
    {"VectorLanes", [](Foreign&, DLTensor& dl) { dl.dtype.lanes = 4; }, "dtype has 4 lanes"},
    {"ZeroLanes", [](Foreign&, DLTensor& dl) { dl.dtype.lanes = 0; }, "dtype has 0 lanes"},
    {"ZeroBits", [](Foreign&, DLTensor& dl) { dl.dtype.bits = 0; }, "unsupported dtype: code 2 (float) with 0 bits"},
    {"BitsNotMatchingCode", [](Foreign&, DLTensor& dl) { dl.dtype = DLDataType{kDLUInt, 16, 1}; },
     "unsupported dtype: code 1 (uint) with 16 bits"},
    {"BoolOfOneBit", [](Foreign&, DLTensor& dl) { dl.dtype = DLDataType{6, 1, 1}; },
     "unsupported dtype: code 6 (bool) with 1 bits"},
    {"UnknownDTypeCode", [](Foreign&, DLTensor& dl) { dl.dtype.code = 42; }, "unsupported dtype code 42"},
    {"OpaqueHandleDType", [](Foreign&, DLTensor& dl) { dl.dtype = DLDataType{kDLOpaqueHandle, 64, 1}; },
     "unsupported dtype code 3"},
    {"ExtDevDevice", [](Foreign&, DLTensor& dl) { Foreign::set_device_type(dl.device, kDLExtDev); },
     "unsupported DLPack device type 12"},
    {"UnknownDeviceType", [](Foreign&, DLTensor& dl) { Foreign::set_device_type(dl.device, 999); },
     "unsupported DLPack device type 999"},
    {"NegativeCpuDeviceId", [](Foreign&, DLTensor& dl) { dl.device.device_id = -1; }, "negative device id -1"},
    {"NegativeCudaDeviceId",
     [](Foreign&, DLTensor& dl) { Foreign::set_device_type(dl.device, kDLCUDA), dl.device.device_id = -2; },
     "negative device id -2"},
    {"CudaDeviceIdOutOfRange",
     [](Foreign&, DLTensor& dl) { Foreign::set_device_type(dl.device, kDLCUDA), dl.device.device_id = 40000; },
     "CUDA device id 40000 is out of range"},
    {"MisalignedData", [](Foreign& f, DLTensor& dl) { dl.data = f.buffer.get() + 1; },
     "is not aligned to 4 bytes as float32 requires"},
    {"MisalignedByteOffset", [](Foreign&, DLTensor& dl) { dl.byte_offset = 6; }, "+ byte_offset 6) is not aligned"},
    {"MajorVersionZero", [](Foreign& f, DLTensor&) { f.v1.version.major = 0; },
     "unsupported DLPack major version 0 (expected 1)", true},
    {"MajorVersionTwo", [](Foreign& f, DLTensor&) { f.v1.version.major = 2; },
     "unsupported DLPack major version 2 (expected 1)", true},
};

class DLPackMalformed : public ::testing::TestWithParam<std::tuple<size_t, Form>> {};

TEST_P(DLPackMalformed, IsRejectedAndTheCallerKeepsOwnership) {
  const MalformedCase& c = kMalformedCases[std::get<0>(GetParam())];
  const Form form = std::get<1>(GetParam());
  Foreign f;
  c.corrupt(f, f.dl(form));
  try {
    Tensor t = f.import(form);
    ADD_FAILURE() << "accepted: " << t.to_string();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDLPack) << e.what();
    EXPECT_THAT(e.message(), HasSubstr(c.expected));
    EXPECT_THAT(e.message(), ::testing::StartsWith("DLPack tensor: "));
  }
  EXPECT_EQ(f.deleted, 0) << "the deleter ran although the import failed";
  f.release(form);  // still ours to release
  EXPECT_EQ(f.deleted, 1);
}

// Every case in both forms, except the version cases (the 0.6 form has no version).
std::vector<std::tuple<size_t, Form>> malformed_params() {
  std::vector<std::tuple<size_t, Form>> params;
  for (size_t i = 0; i < std::size(kMalformedCases); ++i) {
    if (!kMalformedCases[i].versioned_only) params.emplace_back(i, Form::V06);
    params.emplace_back(i, Form::V1);
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(Cases, DLPackMalformed, ::testing::ValuesIn(malformed_params()),
                         [](const auto& info) {
                           return std::string(kMalformedCases[std::get<0>(info.param)].name) + "_" +
                                  form_name(std::get<1>(info.param));
                         });

// ---------------------------------------------------------------- CUDA

TEST(DLPackCuda, RoundTripOfACudaTensor) {
  if (!cuda::is_available()) GTEST_SKIP() << cuda::unavailable_reason();
  Tensor host = iota(DType::Float32, {3, 4});
  Tensor t = host.to(Device::cuda(0)).transpose(0, 1);
  for (Form form : {Form::V06, Form::V1}) {
    SCOPED_TRACE(form_name(form));
    t.copy_(host.transpose(0, 1));  // undo the previous iteration's fill_
    if (form == Form::V06) {
      DLManagedTensor* m = to_dlpack(t);
      EXPECT_EQ(static_cast<int>(m->dl_tensor.device.device_type), static_cast<int>(kDLCUDA));
      EXPECT_EQ(m->dl_tensor.device.device_id, 0);
      m->deleter(m);
    }
    int deleted = 0;
    {
      Tensor imported = export_import(t, form, &deleted);
      expect_same_view(t, imported);
      EXPECT_EQ(imported.device(), Device::cuda(0));
      EXPECT_TRUE(equal(imported.to(Device::cpu()), host.transpose(0, 1)));
      imported.fill_(Scalar(2.0));
      EXPECT_TRUE(equal(t.to(Device::cpu()), full(std::vector<int64_t>{4, 3}, Scalar(2.0))));
    }
    EXPECT_EQ(deleted, 1);
  }
}

// ---------------------------------------------------------------- properties

// A value in [lo, hi), uniformly: rc::gen::inRange scales with the test's size parameter,
// which would make most early cases tiny.
template <typename T>
T pick(T lo, T hi) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(lo, hi));
}

// A random strided view of a random tensor: permute, slice with step, expand, narrow.
// Sizes are 0..5 over 0..4 dims; zero sizes and empty slices are kept rare so that most views
// have elements to compare.
Tensor random_view() {
  const auto dtype = *rc::gen::elementOf(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)));
  const auto size = rc::gen::weightedOneOf<int64_t>(
      {{1, rc::gen::just<int64_t>(0)}, {9, rc::gen::resize(100, rc::gen::inRange<int64_t>(1, 6))}});
  const auto sizes = *rc::gen::container<std::vector<int64_t>>(pick<size_t>(0, 5), size);
  Tensor t = empty(sizes, TensorOptions(dtype));
  fill_random_bytes(t, *rc::gen::arbitrary<unsigned>());
  const int steps = pick<int>(0, 4);
  for (int step = 0; step < steps; ++step) {
    const int op = pick<int>(0, 4);
    if (op == 0 && t.dim() > 1) {  // permute
      std::vector<int64_t> dims(t.dim());
      std::iota(dims.begin(), dims.end(), 0);
      for (size_t i = dims.size(); i > 1; --i) std::swap(dims[i - 1], dims[pick<size_t>(0, i)]);
      t = t.permute(dims);
    } else if (op == 1 && t.dim() > 0) {  // slice with step
      const int64_t d = pick<int64_t>(0, t.dim());
      const int64_t start = pick<int64_t>(0, std::max<int64_t>(t.size(d), 1));
      const int64_t end = pick<int64_t>(std::min(start + 1, t.size(d)), t.size(d) + 1);
      t = t.slice(d, start, end, pick<int64_t>(1, 4));
    } else if (op == 2 && t.dim() < 5) {  // expand: a new leading dimension, size-1 dims grow
      std::vector<int64_t> target = {*size};
      for (int64_t s : t.sizes()) target.push_back(s == 1 ? pick<int64_t>(1, 4) : s);
      t = t.expand(target);
    } else if (op == 3 && t.dim() > 0) {  // narrow (moves the storage offset)
      const int64_t d = pick<int64_t>(0, t.dim());
      const int64_t start = pick<int64_t>(0, std::max<int64_t>(t.size(d), 1));
      t = t.narrow(d, start, pick<int64_t>(std::min<int64_t>(1, t.size(d) - start), t.size(d) - start + 1));
    }
  }
  return t;
}

RC_GTEST_PROP(DLPackProperty, RoundTripOfRandomViewsIsZeroCopy, ()) {
  const Tensor t = random_view();
  RC_TAG(t.numel() == 0 ? "empty" : t.is_contiguous() ? "contiguous" : "strided");
  for (Form form : {Form::V06, Form::V1}) {
    int deleted = 0;
    {
      const Tensor imported = export_import(t, form, &deleted);
      RC_ASSERT(imported.dtype() == t.dtype());
      RC_ASSERT(imported.device() == t.device());
      RC_ASSERT(std::equal(imported.sizes().begin(), imported.sizes().end(), t.sizes().begin(), t.sizes().end()));
      RC_ASSERT(std::equal(imported.strides().begin(), imported.strides().end(), t.strides().begin(),
                           t.strides().end()));
      RC_ASSERT(imported.storage_offset() == t.storage_offset());
      RC_ASSERT((imported.const_data_ptr() == t.const_data_ptr()));
      RC_ASSERT(equal(imported, t));
      for_each_index(t.sizes(), [&](const std::vector<int64_t>& index) {
        const char* a = element_address(imported, index);
        const char* b = element_address(t, index);
        RC_ASSERT((a == b));
        (void)imported.get(index);
        const auto byte = static_cast<size_t>(a - static_cast<const char*>(imported.storage()->data()));
        RC_ASSERT(byte + imported.itemsize() <= imported.storage()->nbytes());
      });
      RC_ASSERT(deleted == 0);
    }
    RC_ASSERT(deleted == 1);
  }
}

// The bytes a descriptor claims, computed independently in 128-bit arithmetic:
// [data + byte_offset, data + byte_offset + extent). Only meaningful for accepted descriptors.
struct Claimed {
  __int128 first;  // address of the first element
  __int128 end;    // one past the last byte of the farthest element
};
Claimed claimed_bytes(const DLTensor& dl, const Tensor& t) {
  __int128 last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += static_cast<__int128>(t.size(d) - 1) * t.stride(d);
  const __int128 first = static_cast<__int128>(reinterpret_cast<uintptr_t>(dl.data)) + dl.byte_offset;
  const __int128 item = static_cast<__int128>(t.itemsize());
  return {first, t.numel() == 0 ? first : first + (last + 1) * item};
}

RC_GTEST_PROP(DLPackProperty, CorruptedDescriptorsAreRejectedOrStayInBounds, ()) {
  const Form form = *rc::gen::elementOf(std::vector<Form>{Form::V06, Form::V1});
  Foreign f;
  DLTensor& dl = f.dl(form);
  // A valid starting point: a random dtype and a compact shape of up to 3 dims at the buffer start.
  dl.dtype = to_dlpack_dtype(*rc::gen::elementOf(std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes))));
  dl.ndim = pick<int>(0, 4);
  for (int d = 0; d < dl.ndim; ++d) f.shape[d] = pick<int64_t>(0, 5);
  std::vector<int64_t> compact = contiguous_strides(IntArrayRef(f.shape.data(), dl.ndim));
  std::copy(compact.begin(), compact.end(), f.strides.begin());

  const auto extreme = rc::gen::elementOf(std::vector<int64_t>{
      kInt64Max, std::numeric_limits<int64_t>::min(), -1, int64_t{1} << 62, int64_t{1} << 40, kInt64Max / 3});
  const int corruptions = pick<int>(0, 4);
  for (int i = 0; i < corruptions; ++i) {
    switch (pick<int>(0, 10)) {
      case 0: f.shape[pick<int>(0, 4)] = pick<int64_t>(-2, 7); break;
      case 1: f.shape[pick<int>(0, 4)] = *extreme; break;
      case 2: f.strides[pick<int>(0, 4)] = pick<int64_t>(-2, 9); break;
      case 3: f.strides[pick<int>(0, 4)] = *extreme; break;
      case 4:
        dl.ndim = *rc::gen::oneOf(
            rc::gen::resize(100, rc::gen::inRange(-2, 6)),
            rc::gen::elementOf(std::vector<int>{65, kMaxDLPackDims, std::numeric_limits<int>::max(),
                                                std::numeric_limits<int>::min()}));
        break;
      case 5:
        dl.dtype.code =
            *rc::gen::oneOf(rc::gen::resize(100, rc::gen::inRange<uint8_t>(0, 8)), rc::gen::just<uint8_t>(255));
        dl.dtype.bits = *rc::gen::elementOf(std::vector<uint8_t>{0, 1, 8, 16, 32, 64, 128, 255});
        if (pick<int>(0, 4) == 0) dl.dtype.lanes = *rc::gen::elementOf(std::vector<uint16_t>{0, 2, 65535});
        break;
      case 6:
        Foreign::set_device_type(dl.device,
                                 *rc::gen::elementOf(std::vector<int32_t>{0, 1, 2, 3, 4, 7, 12, 13, -1, 999}));
        dl.device.device_id = *rc::gen::elementOf(std::vector<int>{0, 1, -1, std::numeric_limits<int>::min(), 40000});
        break;
      case 7:
        dl.byte_offset = *rc::gen::oneOf(rc::gen::resize(100, rc::gen::inRange<uint64_t>(0, 300)),
                                         rc::gen::elementOf(std::vector<uint64_t>{~uint64_t{0}, uint64_t{1} << 63,
                                                                                  uint64_t{1} << 62}));
        break;
      case 8: {  // null, or moved into the buffer (possibly misaligned)
        const int shift = *rc::gen::elementOf(std::vector<int>{-1, 1, 2, 64});
        dl.data = shift < 0 ? nullptr : f.buffer.get() + shift;
        break;
      }
      case 9:
        f.v1.version.major = *rc::gen::elementOf(std::vector<uint32_t>{0, 1, 2, ~uint32_t{0}});
        break;
    }
  }
  RC_TAG(corruptions == 0 ? "uncorrupted" : "corrupted");

  Tensor t;
  try {
    t = f.import(form);
  } catch (const Error& e) {
    RC_ASSERT(e.code() == ErrorCode::kDLPack);
    RC_ASSERT(f.deleted == 0);
    RC_ASSERT(corruptions > 0);  // an uncorrupted descriptor must import
    RC_TAG("rejected");
    return;
  }
  RC_TAG("accepted");
  // The storage covers exactly the bytes the descriptor claims, and every element lies inside it.
  const Claimed claimed = claimed_bytes(dl, t);
  const auto storage_begin = static_cast<__int128>(reinterpret_cast<uintptr_t>(t.storage()->data()));
  const auto storage_end = storage_begin + static_cast<__int128>(t.storage()->nbytes());
  const auto first = static_cast<__int128>(reinterpret_cast<uintptr_t>(t.const_data_ptr()));
  RC_ASSERT(t.numel() == 0 || first == claimed.first);
  RC_ASSERT(t.numel() == 0 || storage_begin <= claimed.first);
  RC_ASSERT(t.numel() == 0 || storage_end == claimed.end);
  RC_ASSERT(storage_begin >= reinterpret_cast<uintptr_t>(dl.data));

  // Read every element when the claimed bytes lie in our buffer (ASan checks the reads).
  const auto buffer_begin = static_cast<__int128>(reinterpret_cast<uintptr_t>(f.buffer.get()));
  const bool in_buffer = t.numel() > 0 && claimed.first >= buffer_begin &&
                         claimed.end <= buffer_begin + static_cast<__int128>(Foreign::kBufferBytes);
  if (in_buffer && t.device().is_cpu() && t.numel() <= 4096) {
    RC_TAG("read back");
    for_each_index(t.sizes(), [&](const std::vector<int64_t>& index) {
      const auto address = static_cast<__int128>(reinterpret_cast<uintptr_t>(element_address(t, index)));
      RC_ASSERT(address >= claimed.first);
      RC_ASSERT(address + static_cast<__int128>(t.itemsize()) <= claimed.end);
      (void)t.get(index);
    });
  }
  t = Tensor();
  RC_ASSERT(f.deleted == 1);
}

}  // namespace
}  // namespace opconform
