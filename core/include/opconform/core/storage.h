// Storage: one shared block of memory on one device, and the allocators that make it.
//
// Tensors are strided views of a Storage; views of the same tensor share it (shared_ptr).
// A Storage may own its memory (allocated through the device's Allocator) or wrap memory owned
// elsewhere (an imported DLPack tensor) with a release callback that runs exactly once.
// The version counter lives here, so every view of the same memory sees the same counter; it is
// bumped on every write through the Tensor API (see Note [Version counter] in tensor.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "opconform/core/device.h"

namespace opconform {

// Memory for one device type, and byte copies between that device and the host.
// CPU: aligned malloc. Meta: no memory at all (nullptr). CUDA: cudaMalloc, in the CUDA build.
// A vendor plugin sets its own with set_allocator().
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* data, Device device) = 0;
  // dst is device memory, src host memory.
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes, Device device) = 0;
  // dst is host memory, src device memory.
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes, Device device) = 0;
  // dst and src are memory of the same device, not overlapping. By default through the host; a
  // device that copies on itself overrides it (CUDA: one device-to-device copy instead of two).
  virtual void copy_on_device(void* dst, const void* src, size_t nbytes, Device device);
};

// The allocator for a device type; throws Error(kDevice) when there is none (CUDA in a build
// without CUDA, an unregistered vendor type).
Allocator& allocator_for(DeviceType type);
// Installs the allocator for a (vendor) device type. The allocator must outlive its storages.
void set_allocator(DeviceType type, Allocator* allocator);

class Storage {
 public:
  // Allocates nbytes on `device` with its allocator (meta: no memory).
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere; `release` runs exactly once, when the last view dies.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device,
                                       std::function<void()> release, bool read_only = false);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool read_only() const { return read_only_; }
  // True when the storage has no memory behind it (meta and fake tensors).
  bool has_data() const { return data_ != nullptr || nbytes_ == 0; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool read_only_ = false;
  Allocator* allocator_ = nullptr;  // owned memory: given back to its allocator
  std::function<void()> release_;   // wrapped memory: the owner's release callback
  std::atomic<uint64_t> version_{0};
};

}  // namespace opconform
