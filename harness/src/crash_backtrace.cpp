// Note [A crash says where] (crash_backtrace.h).
#include "crash_backtrace.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>

namespace opconform::harness {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
constexpr int kMaxFrames = 48;

void write_text(const char* text) {
  const size_t n = ::strlen(text);
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, n);
}

// Async-signal-safe: no snprintf.
void write_hex(uintptr_t value) {
  char buffer[2 + 2 * sizeof value + 1];
  char* p = buffer + sizeof buffer - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[value & 0xF];
    value >>= 4;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  write_text(p);
}

void on_fatal_signal(int sig, siginfo_t* info, void*) {
  const char* abbrev = sigabbrev_np(sig);
  write_text("\nopconform worker: fatal signal SIG");
  write_text(abbrev != nullptr ? abbrev : "?");
  if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) {
    write_text(" at address ");
    write_hex(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  write_text("; backtrace of the crashing thread (innermost first; addr2line -f -C -e FILE +OFFSET names a frame):\n");
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  // Frame 0 is this handler, frame 1 the signal trampoline: the kernel's frames follow.
  if (n > 2) ::backtrace_symbols_fd(frames + 2, n - 2, STDERR_FILENO);
  // SA_RESETHAND made the action the default again: die of the signal, as without the handler.
  ::raise(sig);
}

}  // namespace

void install_crash_backtrace() {
  // backtrace() loads libgcc's unwinder on its first call (a malloc): done now, not in the handler.
  void* warm[2];
  ::backtrace(warm, 2);
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
}

}  // namespace opconform::harness
