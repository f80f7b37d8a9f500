// Memory guards: while a GuardScope lives, every CPU and CUDA storage made by Storage::allocate
// is placed so that a kernel touching memory outside it is seen (the memory_safety check).
//
// Note [Memory guards]: two placements, because no single one sees both reads and writes cheaply.
//   - guard_bytes: kGuardBytes of a pattern before and after the buffer (any device: the pattern
//     is written and read back through the device's Allocator, so CUDA buffers are checked on
//     the device's own copy). A write there is seen when the scope checks (findings()) or when
//     the buffer is freed during the scope (a kernel's temporary); reads are not seen.
//   - guard_pages (CPU): the buffer ends at a page boundary followed by an inaccessible page, and
//     an inaccessible page precedes its first page. A read or write past the end faults; the
//     scope's SIGSEGV handler records which buffer it hit, opens that page (so the kernel goes on
//     and the process survives) and returns. A fault anywhere else goes to the handler that was
//     installed before (a crash stays a crash). The buffer's start is its end minus its size,
//     so it is aligned only to the largest power of two dividing the size (one element's
//     alignment at least); a request that promises more (ctx->alloc's 16 bytes) rounds its size.
// Blocks keep their placement until freed, even after the scope ends; one scope at a time per
// process (Error otherwise): the harness runs one check at a time per worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "opconform/core/device.h"

namespace opconform {

class Allocator;

namespace memory_guard {

inline constexpr size_t kGuardBytes = 128;

enum class Placement : uint8_t { guard_bytes, guard_pages };

enum class Access : uint8_t { read, write, unknown };

struct Finding {
  enum class Kind : uint8_t {
    wrote_before,     // guard bytes before the buffer changed
    wrote_after,      // guard bytes after the buffer changed
    touched_after,    // a fault in the page after the buffer (guard_pages)
    touched_before,   // a fault in the page before the buffer (guard_pages)
  };
  Kind kind = Kind::wrote_after;
  const void* data = nullptr;  // the buffer, as Storage::data() gives it
  size_t nbytes = 0;           // the buffer's size
  Device device;
  // wrote_*: how many guard bytes changed, and the farthest one's distance from the buffer
  // (1 = the byte just before the start or just after the end).
  size_t bytes_changed = 0;
  size_t reach = 0;
  Access access = Access::unknown;  // touched_*: what the faulting instruction did (x86-64 tells)
  bool freed = false;               // the buffer was freed during the scope (a temporary)
};

class GuardScope {
 public:
  explicit GuardScope(Placement placement);
  ~GuardScope();
  GuardScope(const GuardScope&) = delete;
  GuardScope& operator=(const GuardScope&) = delete;

  Placement placement() const { return placement_; }
  // Every finding so far: guard bytes of the live buffers made in the scope (checked now), of
  // those freed in the scope (checked then), and the faults recorded by the page guards.
  std::vector<Finding> findings() const;
  // How many buffers the scope has placed (a check that placed none tested nothing).
  size_t buffers() const;

 private:
  Placement placement_;
};

namespace detail {
// The allocator Storage::allocate uses on `type` instead of allocator_for(type): the guarded one
// while a scope is active and the type can be guarded (CPU, CUDA), else nullptr.
Allocator* active_guarded_allocator(DeviceType type);
}  // namespace detail

}  // namespace memory_guard
}  // namespace opconform
