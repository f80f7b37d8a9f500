// Note [The CUDA runtime at run time]: a CUDA-enabled opconform must start, and check CPU
// libraries, on a machine without the CUDA runtime (an installed package copied to a CPU-only CI
// runner; a container without the toolkit). So core does not link libcudart: it loads it on first
// use, and a machine without it is a machine without CUDA, with the reason ("CUDA unavailable:
// libcudart.so.13: cannot open shared object file") wherever CUDA is asked for. Plugins with CUDA
// kernels link the runtime themselves; the process then has one copy (the loader shares it).
#include "cuda_runtime.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "opconform/core/cuda.h"

namespace opconform::detail {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F& out, std::string& why) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  if (out == nullptr && why.empty()) why = std::string("the CUDA runtime has no ") + name;
  return out != nullptr;
}

CudaRuntime load() {
  CudaRuntime r;
  std::vector<std::string> candidates;
  const char* named = std::getenv("OPCONFORM_CUDA_RUNTIME");
  if (named != nullptr && std::string(named) == "none") {
    r.why = "OPCONFORM_CUDA_RUNTIME=none";
    return r;
  }
  const std::string soname = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  if (named != nullptr && *named != '\0') {
    candidates = {named};
  } else {
    candidates = {soname, "/usr/local/cuda/lib64/" + soname};
  }
  void* handle = nullptr;
  std::string errors;
  for (const auto& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      r.library = c;
      break;
    }
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e != nullptr ? e : c + ": cannot be loaded");
  }
  if (handle == nullptr) {
    r.why = "cannot load the CUDA runtime (" + errors + ")";
    return r;
  }
  std::string why;
  bind(handle, "cudaGetDeviceCount", r.get_device_count, why);
  bind(handle, "cudaGetErrorString", r.get_error_string, why);
  bind(handle, "cudaGetDevice", r.get_device, why);
  bind(handle, "cudaSetDevice", r.set_device, why);
  bind(handle, "cudaMalloc", r.malloc, why);
  bind(handle, "cudaFree", r.free, why);
  bind(handle, "cudaMemcpy", r.memcpy, why);
  bind(handle, "cudaDeviceSynchronize", r.device_synchronize, why);
  r.why = why.empty() ? "" : why + " (" + r.library + ")";
  std::string optional;  // a runtime without them allocates with cudaMalloc / cudaFree
  bind(handle, "cudaMallocAsync", r.malloc_async, optional);
  bind(handle, "cudaFreeAsync", r.free_async, optional);
  bind(handle, "cudaDeviceGetDefaultMemPool", r.device_get_default_mem_pool, optional);
  bind(handle, "cudaMemPoolSetAttribute", r.mem_pool_set_attribute, optional);
  return r;  // never closed: allocations made through it live until exit
}

// Note [Tracing the CUDA runtime calls]: OPCONFORM_CUDA_TRACE=1 counts and times every runtime
// call core makes (allocations, frees, copies by direction and size) and prints the totals to
// stderr at exit: where a CUDA check spends the harness's time, on machines without perf.
// OPCONFORM_CUDA_TRACE=sites also prints the call stacks that made the most allocations and
// copies, as module+offset (symbolise them with addr2line against the unstripped build).
struct TraceSlot {
  const char* name;
  std::atomic<uint64_t> calls{0}, nanos{0}, bytes{0};
};
enum TraceKind { kMalloc, kFree, kToDevice, kToHost, kOnDevice, kSmallCopy, kSync, kKernel, kTraceKinds };
TraceSlot g_trace[kTraceKinds] = {{"cudaMalloc(Async)"},
                                  {"cudaFree(Async)"},
                                  {"cudaMemcpy host to device"},
                                  {"cudaMemcpy device to host"},
                                  {"cudaMemcpy device to device"},
                                  {"  of which copies of <= 16 bytes"},
                                  {"cudaDeviceSynchronize"},
                                  {"library kernels, call to idle"}};
CudaRuntime g_real;

constexpr int kSiteDepth = 8;  // frames kept per call site (the first, the recorder's own, is dropped)
using Site = std::array<void*, kSiteDepth>;
struct Sites {
  std::mutex mutex;
  std::map<std::pair<int, Site>, uint64_t> counts;
};
Sites* g_sites = nullptr;  // set when OPCONFORM_CUDA_TRACE=sites

void record_site(TraceKind kind) {
  if (g_sites == nullptr) return;
  void* frames[kSiteDepth + 1] = {};
  const int n = backtrace(frames, kSiteDepth + 1);
  Site site{};
  for (int i = 1; i < n; ++i) site[static_cast<size_t>(i - 1)] = frames[i];
  const std::lock_guard<std::mutex> lock(g_sites->mutex);
  ++g_sites->counts[{kind, site}];
}

struct TraceScope {
  TraceKind kind;
  size_t bytes;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~TraceScope() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    for (TraceKind k : {kind, bytes > 0 && bytes <= 16 && kind >= kToDevice && kind <= kOnDevice ? kSmallCopy : kTraceKinds}) {
      if (k == kTraceKinds) continue;
      g_trace[k].calls.fetch_add(1, std::memory_order_relaxed);
      g_trace[k].nanos.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
      g_trace[k].bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
    if (kind != kSync && kind != kKernel) record_site(kind);
  }
};

void print_frame(void* pc) {
  Dl_info info{};
  if (dladdr(pc, &info) == 0 || info.dli_fname == nullptr) {
    std::fprintf(stderr, "      %p\n", pc);
    return;
  }
  // The offset addr2line takes: the return address less one, so that it names the call's line.
  const auto offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  std::fprintf(stderr, "      %s+0x%llx %s\n", info.dli_fname, static_cast<unsigned long long>(offset),
               info.dli_sname != nullptr ? info.dli_sname : "");
}

void print_sites() {
  std::vector<std::pair<uint64_t, const std::pair<int, Site>*>> top;
  for (const auto& [key, count] : g_sites->counts) top.emplace_back(count, &key);
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (top.size() > 20) top.resize(20);
  std::fprintf(stderr, "  the call stacks with the most calls:\n");
  for (const auto& [count, key] : top) {
    std::fprintf(stderr, "    %llu x %s\n", static_cast<unsigned long long>(count), g_trace[key->first].name);
    for (void* pc : key->second)
      if (pc != nullptr) print_frame(pc);
  }
}

void print_trace() {
  std::fprintf(stderr, "opconform CUDA trace (pid %d):\n", static_cast<int>(getpid()));
  for (const TraceSlot& t : g_trace) {
    std::fprintf(stderr, "  %-34s %10llu calls %10.3f s %14llu bytes\n", t.name,
                 static_cast<unsigned long long>(t.calls.load()), static_cast<double>(t.nanos.load()) * 1e-9,
                 static_cast<unsigned long long>(t.bytes.load()));
  }
  if (g_sites != nullptr) print_sites();
}

void trace(CudaRuntime& r, bool sites) {
  r.traced = true;
  g_real = r;
  if (sites) g_sites = new Sites();  // never freed: read by the exit handler
  r.malloc = [](void** p, size_t n) { TraceScope s{kMalloc, n}; return g_real.malloc(p, n); };
  r.free = [](void* p) { TraceScope s{kFree, 0}; return g_real.free(p); };
  if (r.malloc_async != nullptr && r.free_async != nullptr) {
    r.malloc_async = [](void** p, size_t n, cudaStream_t st) { TraceScope s{kMalloc, n}; return g_real.malloc_async(p, n, st); };
    r.free_async = [](void* p, cudaStream_t st) { TraceScope s{kFree, 0}; return g_real.free_async(p, st); };
  }
  r.memcpy = [](void* d, const void* src, size_t n, cudaMemcpyKind k) {
    TraceScope s{k == cudaMemcpyHostToDevice ? kToDevice : k == cudaMemcpyDeviceToHost ? kToHost : kOnDevice, n};
    return g_real.memcpy(d, src, n, k);
  };
  r.device_synchronize = [] { TraceScope s{kSync, 0}; return g_real.device_synchronize(); };
  std::atexit(print_trace);
}

}  // namespace

const CudaRuntime& cuda_runtime() {
  static const CudaRuntime runtime = [] {
    CudaRuntime r = load();
    const char* traced = std::getenv("OPCONFORM_CUDA_TRACE");
    if (r.loaded() && traced != nullptr && *traced != '\0' && std::string(traced) != "0")
      trace(r, std::string(traced) == "sites");
    return r;
  }();
  return runtime;
}

}  // namespace opconform::detail

namespace opconform::cuda {

KernelTimer::KernelTimer(bool on_cuda) {
  if (!on_cuda || !detail::cuda_runtime().traced) return;
  timing_ = true;
  detail::g_real.device_synchronize();  // the harness's own device work is not the kernel's
  start_ = std::chrono::steady_clock::now();
}

KernelTimer::~KernelTimer() {
  if (!timing_) return;
  detail::g_real.device_synchronize();
  detail::TraceScope{detail::kKernel, 0, start_};
}

}  // namespace opconform::cuda
