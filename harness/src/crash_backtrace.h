// The backtrace a worker leaves when a kernel crashes it (Note [A crash says where]).
#pragma once

namespace opconform::harness {

// Note [A crash says where]: a worker killed by SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT or
// SIGTRAP cannot send a result; what the harness reports is the sample it was on (the running
// note, with the values of its small tensors: Note [A crash says its input] in case_runner.cpp)
// and the tail of its stderr. This handler writes the signal, the faulting address and the
// crashing thread's frames (glibc's backtrace and backtrace_symbols_fd, which allocate nothing
// once warmed up) to stderr, then dies of the same signal with the default action, so the
// harness still sees the death by signal and the result is `crashed` as before, now with the
// frames in its message. It runs on an alternate stack of the worker's main thread, so a stack
// overflow there is reported too (one on a thread a kernel started still dies by SIGSEGV, without
// frames). backtrace_symbols_fd asks the dynamic loader (dladdr, under its lock): a crash while
// another thread holds that lock (a dlopen in progress) would hang the handler, and the result
// would read timed_out instead of crashed; workers load the library before any check runs, so
// this needs a kernel that dlopens on its own thread. A fault on a memory guard page is taken first
// by the memory guard's own handler (core/memory_guard.cpp), which hands other faults back to this one.
void install_crash_backtrace();

}  // namespace opconform::harness
