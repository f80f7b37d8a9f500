// cuda::is_available_in_a_child (cuda.h), for both builds: the question asked in a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "opconform/core/cuda.h"

namespace opconform::cuda {

bool is_available_in_a_child() {
  if (!compiled_with_cuda()) return false;
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(is_available() ? 0 : 1);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace opconform::cuda
