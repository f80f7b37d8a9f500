#include "opconform/core/storage.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "opconform/core/error.h"
#include "opconform/core/memory_guard.h"

namespace opconform {

namespace detail {
// Defined in cuda/cuda_allocator.cpp in the CUDA build, and below otherwise.
Allocator* cuda_allocator();
}  // namespace detail

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    // 64-byte alignment: what vector units and DLPack consumers like; size rounded up to it.
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    OPCONFORM_CHECK(p != nullptr, ErrorCode::kDevice, "out of CPU memory allocating ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* data, Device) override { std::free(data); }
  void copy_from_host(void* dst, const void* src, size_t n, Device) override { std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n, Device) override { std::memcpy(dst, src, n); }
};

class MetaAllocator final : public Allocator {
 public:
  void* allocate(size_t, Device) override { return nullptr; }
  void deallocate(void*, Device) override {}
  void copy_from_host(void*, const void*, size_t, Device) override { no_data(); }
  void copy_to_host(void*, const void*, size_t, Device) override { no_data(); }

 private:
  [[noreturn]] static void no_data() {
    throw Error(ErrorCode::kInvalidArgument, "meta tensors have no data to copy");
  }
};

struct AllocatorTable {
  std::mutex mutex;
  std::array<Allocator*, kNumDeviceTypes> allocators{};
};

AllocatorTable& allocator_table() {
  static AllocatorTable table;
  return table;
}

}  // namespace

void Allocator::copy_on_device(void* dst, const void* src, size_t nbytes, Device device) {
  std::vector<unsigned char> host(nbytes);
  copy_to_host(host.data(), src, nbytes, device);
  copy_from_host(dst, host.data(), nbytes, device);
}

Allocator& allocator_for(DeviceType type) {
  static CpuAllocator cpu;
  static MetaAllocator meta;
  switch (type) {
    case DeviceType::CPU: return cpu;
    case DeviceType::Meta: return meta;
    case DeviceType::CUDA:
      if (Allocator* a = detail::cuda_allocator()) return *a;
      throw Error(ErrorCode::kDevice, "CUDA memory requested, but opconform was built without CUDA");
    default: break;
  }
  auto& table = allocator_table();
  std::lock_guard lock(table.mutex);
  Allocator* a = table.allocators[static_cast<size_t>(type)];
  OPCONFORM_CHECK(a != nullptr, ErrorCode::kDevice, "no allocator registered for device type '",
                  device_type_name(type), "' (a vendor plugin sets one with set_allocator)");
  return *a;
}

void set_allocator(DeviceType type, Allocator* allocator) {
  OPCONFORM_CHECK(type != DeviceType::CPU && type != DeviceType::Meta, ErrorCode::kInvalidArgument,
                  "the allocator of device type '", device_type_name(type), "' cannot be replaced");
  auto& table = allocator_table();
  std::lock_guard lock(table.mutex);
  table.allocators[static_cast<size_t>(type)] = allocator;
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  // Inside a memory_guard::GuardScope, the guarded placement (Note [Memory guards]).
  Allocator* guarded = memory_guard::detail::active_guarded_allocator(device.type);
  Allocator& allocator = guarded != nullptr ? *guarded : allocator_for(device.type);
  void* data = allocator.allocate(nbytes, device);
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->allocator_ = &allocator;
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release, bool read_only) {
  std::shared_ptr<Storage> s(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->release_ = std::move(release);
  s->read_only_ = read_only;
  return s;
}

Storage::~Storage() {
  if (allocator_) allocator_->deallocate(data_, device_);
  if (release_) release_();
}

}  // namespace opconform
