// Host memory behind a device type of a test's own (register_device_type): a second device
// without a GPU. Counts its copies by direction, and copies on the device itself only when asked
// to (else Allocator's default, through the host).
#pragma once

#include <cstdlib>
#include <cstring>

#include "opconform/core/storage.h"

namespace opconform::testing {

class HostMemory final : public Allocator {
 public:
  explicit HostMemory(bool copies_on_device = false) : copies_on_device_(copies_on_device) {}
  void* allocate(size_t n, Device) override { return std::malloc(n == 0 ? 1 : n); }
  void deallocate(void* p, Device) override { std::free(p); }
  void copy_from_host(void* d, const void* s, size_t n, Device) override { ++to_device, std::memcpy(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n, Device) override { ++to_host, std::memcpy(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n, Device device) override {
    if (!copies_on_device_) return Allocator::copy_on_device(d, s, n, device);
    ++on_device, std::memcpy(d, s, n);
  }
  void reset_counts() { to_device = to_host = on_device = 0; }

  int to_device = 0, to_host = 0, on_device = 0;

 private:
  bool copies_on_device_;
};

}  // namespace opconform::testing
