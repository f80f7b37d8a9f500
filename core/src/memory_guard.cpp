#include "opconform/core/memory_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "opconform/core/error.h"
#include "opconform/core/storage.h"

namespace opconform::memory_guard {
namespace {

// The guard pattern: a byte that depends on its distance from the buffer, so that a kernel
// writing one repeated value (zeros, a fill) cannot leave it intact by chance.
uint8_t pattern_byte(size_t distance, bool after) {
  return static_cast<uint8_t>(0xA5u ^ (distance * 0x3Du) ^ (after ? 0x5Au : 0u));
}

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

struct Block {
  Placement placement = Placement::guard_bytes;
  unsigned char* base = nullptr;  // what the device allocator or mmap gave
  size_t nbytes = 0;
  size_t after = 0;   // guard_bytes: guard bytes after the buffer (its rounding included)
  size_t mapped = 0;  // guard_pages: the mapping's length
  Device device;
  bool in_scope = false;  // made by the scope now active
  int slots[2] = {-1, -1};
};

// The page guards, read by the signal handler without a lock: a slot is published by storing
// `lo` last (release) and withdrawn by storing 0 before its pages are unmapped.
struct PageGuard {
  std::atomic<uintptr_t> lo{0};
  std::atomic<bool> opened{false};  // a fault opened the page: its mapping is not reused
  uintptr_t hi = 0;
  uintptr_t data = 0;
  size_t nbytes = 0;
  bool after = true;
};
constexpr size_t kMaxPageGuards = 4096;
PageGuard g_page_guards[kMaxPageGuards];

struct Fault {
  uintptr_t data;
  size_t nbytes;
  uintptr_t addr;
  bool after;
  Access access;
};
constexpr size_t kMaxFaults = 64;
Fault g_faults[kMaxFaults];
std::atomic<size_t> g_fault_count{0};

struct sigaction g_previous_segv, g_previous_bus;

Access access_of(void* uctx) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(uctx);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? Access::write : Access::read;
#else
  (void)uctx;
  return Access::unknown;
#endif
}

void on_fault(int sig, siginfo_t* info, void* uctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (auto& g : g_page_guards) {
    const uintptr_t lo = g.lo.load(std::memory_order_acquire);
    if (lo == 0 || addr < lo || addr >= g.hi) continue;
    const size_t n = g_fault_count.fetch_add(1, std::memory_order_relaxed);
    if (n < kMaxFaults) g_faults[n] = {g.data, g.nbytes, addr, g.after, access_of(uctx)};
    g.opened.store(true, std::memory_order_relaxed);
    ::mprotect(reinterpret_cast<void*>(lo), g.hi - lo, PROT_READ | PROT_WRITE);
    return;  // the instruction runs again, on the opened page
  }
  // Not a guard page: the handler from before the scope takes the retried fault.
  ::sigaction(sig, sig == SIGBUS ? &g_previous_bus : &g_previous_segv, nullptr);
}

struct State {
  std::mutex mutex;
  std::atomic<bool> active{false};
  Placement placement = Placement::guard_bytes;
  std::unordered_map<const void*, Block> blocks;  // every live guarded buffer, by its data pointer
  std::vector<Finding> freed_findings;
  size_t placed = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: guarded storages may die during exit
  return *s;
}

// Changed guard bytes of one side of a guard_bytes block, as a finding (none: nullopt).
std::optional<Finding> check_side(const Block& b, bool after) {
  const size_t n = after ? b.after : kGuardBytes;
  std::vector<unsigned char> host(n);
  const unsigned char* at = after ? b.base + kGuardBytes + b.nbytes : b.base;
  allocator_for(b.device.type).copy_to_host(host.data(), at, n, b.device);
  Finding f;
  f.kind = after ? Finding::Kind::wrote_after : Finding::Kind::wrote_before;
  f.data = b.base + kGuardBytes;
  f.nbytes = b.nbytes;
  f.device = b.device;
  for (size_t i = 0; i < n; ++i) {
    const size_t distance = after ? i + 1 : n - i;
    if (host[i] == pattern_byte(distance, after)) continue;
    ++f.bytes_changed;
    f.reach = std::max(f.reach, distance);
  }
  if (f.bytes_changed == 0) return std::nullopt;
  return f;
}

void check_block(const Block& b, bool freed, std::vector<Finding>& out) {
  if (b.placement != Placement::guard_bytes) return;
  for (bool after : {false, true}) {
    if (auto f = check_side(b, after)) {
      f->freed = freed;
      out.push_back(*f);
    }
  }
}

void fill_guards(const Block& b) {
  std::vector<unsigned char> host(std::max(kGuardBytes, b.after));
  Allocator& device = allocator_for(b.device.type);
  for (size_t i = 0; i < kGuardBytes; ++i) host[i] = pattern_byte(kGuardBytes - i, false);
  device.copy_from_host(b.base, host.data(), kGuardBytes, b.device);
  for (size_t i = 0; i < b.after; ++i) host[i] = pattern_byte(i + 1, true);
  device.copy_from_host(b.base + kGuardBytes + b.nbytes, host.data(), b.after, b.device);
}

int claim_slot(uintptr_t lo, uintptr_t hi, const Block& b, uintptr_t data, bool after) {
  for (size_t i = 0; i < kMaxPageGuards; ++i) {
    PageGuard& g = g_page_guards[i];
    if (g.lo.load(std::memory_order_relaxed) != 0) continue;
    g.hi = hi, g.data = data, g.nbytes = b.nbytes, g.after = after;
    g.opened.store(false, std::memory_order_relaxed);
    g.lo.store(lo, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

// Withdraws a block's page guards; true when a fault opened one of them.
bool release_slots(const Block& b) {
  bool opened = false;
  for (int s : b.slots) {
    if (s < 0) continue;
    opened = opened || g_page_guards[s].opened.load(std::memory_order_relaxed);
    g_page_guards[s].lo.store(0, std::memory_order_release);
  }
  return opened;
}

// Note [Reused guard mappings]: a guard_pages buffer costs an mmap, two mprotects and an munmap,
// and each munmap a TLB shootdown on the CPUs the process runs on (about 4% of the ATen adapter's
// check on 2 cores, perf). Freed mappings whose guard pages no fault opened are kept by length
// (up to kKeptBytes) and given to the next buffer of that length with their data pages zeroed, as
// a fresh mapping's are: no outcome depends on the reuse. Guarded by State::mutex.
constexpr size_t kKeptBytes = size_t{64} << 20;
struct KeptMappings {
  std::unordered_map<size_t, std::vector<unsigned char*>> by_length;
  size_t bytes = 0;
};
KeptMappings& kept_mappings() {
  static auto* k = new KeptMappings();  // never destroyed, as State
  return *k;
}

unsigned char* take_kept_mapping(size_t length) {
  KeptMappings& k = kept_mappings();
  auto it = k.by_length.find(length);
  if (it == k.by_length.end() || it->second.empty()) return nullptr;
  unsigned char* base = it->second.back();
  it->second.pop_back();
  k.bytes -= length;
  return base;
}

// Keeps the mapping for reuse, or unmaps it when it is not reusable or the store is full.
void give_back_mapping(unsigned char* base, size_t length, bool guard_opened) {
  KeptMappings& k = kept_mappings();
  if (guard_opened || k.bytes + length > kKeptBytes) {
    ::munmap(base, length);
    return;
  }
  k.by_length[length].push_back(base);
  k.bytes += length;
}

// guard_pages: [inaccessible page][data pages, the buffer at their end][inaccessible page].
// False when no page guard slot is left (the caller falls back to guard bytes).
bool place_in_pages(Block& b) {
  const size_t page = page_size();
  const size_t data_len = round_up(b.nbytes, page);
  b.mapped = data_len + 2 * page;
  unsigned char* kept = take_kept_mapping(b.mapped);
  void* base = kept;
  if (kept == nullptr) base = ::mmap(nullptr, b.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  OPCONFORM_CHECK(base != MAP_FAILED, ErrorCode::kDevice, "out of memory mapping a guarded buffer of ", b.nbytes,
                  " bytes");
  b.base = static_cast<unsigned char*>(base);
  unsigned char* end = b.base + page + data_len;
  const auto data = reinterpret_cast<uintptr_t>(end - b.nbytes);
  b.slots[0] = claim_slot(reinterpret_cast<uintptr_t>(b.base), reinterpret_cast<uintptr_t>(b.base + page), b, data, false);
  b.slots[1] = claim_slot(reinterpret_cast<uintptr_t>(end), reinterpret_cast<uintptr_t>(end + page), b, data, true);
  if (b.slots[0] < 0 || b.slots[1] < 0) {
    release_slots(b);
    if (kept != nullptr) give_back_mapping(kept, b.mapped, false);
    else ::munmap(base, b.mapped);
    return false;
  }
  if (kept != nullptr) {
    std::memset(b.base + page, 0, data_len);  // as a fresh mapping; its guard pages are still closed
  } else {
    ::mprotect(b.base, page, PROT_NONE);
    ::mprotect(end, page, PROT_NONE);
  }
  b.placement = Placement::guard_pages;
  return true;
}

void* data_of(const Block& b) {
  if (b.placement == Placement::guard_pages) return b.base + b.mapped - page_size() - b.nbytes;
  return b.base + kGuardBytes;
}

class GuardedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    Allocator& under = allocator_for(device.type);
    if (nbytes == 0) return under.allocate(0, device);
    State& s = state();
    std::lock_guard lock(s.mutex);
    Block b;
    b.nbytes = nbytes;
    b.device = device;
    b.in_scope = s.active.load();
    if (!(s.placement == Placement::guard_pages && device.is_cpu() && place_in_pages(b))) {
      b.placement = Placement::guard_bytes;
      b.after = round_up(nbytes, 64) - nbytes + kGuardBytes;
      b.base = static_cast<unsigned char*>(under.allocate(kGuardBytes + nbytes + b.after, device));
      fill_guards(b);
    }
    void* data = data_of(b);
    s.blocks.emplace(data, b);
    ++s.placed;
    return data;
  }

  void deallocate(void* data, Device device) noexcept override {
    State& s = state();
    Block b;
    {
      std::lock_guard lock(s.mutex);
      auto it = s.blocks.find(data);
      if (it == s.blocks.end()) {
        allocator_for(device.type).deallocate(data, device);
        return;
      }
      b = it->second;
      s.blocks.erase(it);
      const bool guard_opened = release_slots(b);
      if (b.in_scope && s.active.load()) {
        try {
          check_block(b, true, s.freed_findings);
        } catch (...) {  // a device that cannot copy now: nothing to report, the memory still goes
        }
      }
      if (b.placement == Placement::guard_pages) {
        give_back_mapping(b.base, b.mapped, guard_opened);
        return;
      }
    }
    allocator_for(device.type).deallocate(b.base, device);
  }

  void copy_from_host(void* dst, const void* src, size_t n, Device device) override {
    allocator_for(device.type).copy_from_host(dst, src, n, device);
  }
  void copy_to_host(void* dst, const void* src, size_t n, Device device) override {
    allocator_for(device.type).copy_to_host(dst, src, n, device);
  }
  void copy_on_device(void* dst, const void* src, size_t n, Device device) override {
    allocator_for(device.type).copy_on_device(dst, src, n, device);
  }
};

GuardedAllocator& guarded_allocator() {
  static GuardedAllocator* a = new GuardedAllocator();  // never destroyed, as State
  return *a;
}

}  // namespace

GuardScope::GuardScope(Placement placement) : placement_(placement) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  OPCONFORM_CHECK(!s.active.load(), ErrorCode::kInternal, "a memory GuardScope is already active (one at a time)");
  s.placement = placement;
  s.freed_findings.clear();
  s.placed = 0;
  g_fault_count.store(0);
  if (placement == Placement::guard_pages) {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGSEGV, &action, &g_previous_segv);
    ::sigaction(SIGBUS, &action, &g_previous_bus);
  }
  s.active.store(true);
}

GuardScope::~GuardScope() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.active.store(false);
  if (placement_ == Placement::guard_pages) {
    ::sigaction(SIGSEGV, &g_previous_segv, nullptr);
    ::sigaction(SIGBUS, &g_previous_bus, nullptr);
  }
  for (auto& [data, b] : s.blocks) b.in_scope = false;
  s.freed_findings.clear();
}

std::vector<Finding> GuardScope::findings() const {
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::vector<Finding> out;
  for (const auto& [data, b] : s.blocks)
    if (b.in_scope) check_block(b, false, out);
  out.insert(out.end(), s.freed_findings.begin(), s.freed_findings.end());
  const size_t faults = std::min(g_fault_count.load(), kMaxFaults);
  for (size_t i = 0; i < faults; ++i) {
    const Fault& f = g_faults[i];
    Finding finding;
    finding.kind = f.after ? Finding::Kind::touched_after : Finding::Kind::touched_before;
    finding.data = reinterpret_cast<const void*>(f.data);
    finding.nbytes = f.nbytes;
    finding.device = Device::cpu();
    finding.reach = f.after ? f.addr - (f.data + f.nbytes) + 1 : f.data - f.addr;
    finding.access = f.access;
    finding.freed = s.blocks.count(finding.data) == 0;
    out.push_back(finding);
  }
  return out;
}

size_t GuardScope::buffers() const {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.placed;
}

namespace detail {
Allocator* active_guarded_allocator(DeviceType type) {
  if (!state().active.load(std::memory_order_relaxed)) return nullptr;
  if (type != DeviceType::CPU && type != DeviceType::CUDA) return nullptr;
  return &guarded_allocator();
}
}  // namespace detail

}  // namespace opconform::memory_guard
