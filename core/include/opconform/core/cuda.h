// CUDA availability. Always safe to call: in a build without CUDA, or on a machine without a
// GPU (cudaGetDeviceCount then returns an error and leaves the count unset), the answer is
// "not available" with the reason, so tests can skip with it.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace opconform::cuda {

// True when opconform was built with CUDA support.
bool compiled_with_cuda();
// Number of usable GPUs; 0 when none or when CUDA support is not compiled in.
int device_count();
inline bool is_available() { return device_count() > 0; }
// The same answer, asked in a forked child: a process that will fork workers must not initialise
// CUDA itself (CUDA state is not fork-safe; a child's first call then fails with "initialization
// error"). The harness and tests that start workers ask this way.
bool is_available_in_a_child();
// Why CUDA is not available ("built without CUDA", "cudaGetDeviceCount: ..."), empty when it is.
std::string unavailable_reason();

// Note [A CUDA fault ends the worker]: a kernel that faults (an illegal address, a device-side
// assert on an out-of-range index) leaves its CUDA context unusable: every later call in the
// process fails with the same error. So after each check a worker that used CUDA synchronises the
// device, and a fault found there is that check's (crashed) and the worker's end: the next check
// runs in a fresh process. Null when this process has allocated no CUDA memory (nothing to ask,
// and no context is created by asking) or the device is healthy; else the runtime's error.
std::optional<std::string> device_fault();

// Note [The kernels' own time]: under OPCONFORM_CUDA_TRACE (Note [Tracing the CUDA runtime calls])
// a library kernel that the harness calls on CUDA tensors is timed from its call until the device
// is idle again (the device is synchronised before and after), and the trace prints the total
// beside the runtime calls: a CUDA check's time splits into the library's and the harness's own.
// Device-wide synchronisation rather than CUDA events, because a library may use streams of its
// own. Without the trace, or in a build without CUDA, the timer does nothing.
class KernelTimer {
 public:
  explicit KernelTimer(bool on_cuda);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  bool timing_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace opconform::cuda
