// The operators this thread is calling, innermost first, for the "while calling 'op'" lines of an
// Error (Note [Call context without a rethrow]).
//
//   detail::CallScope scope(entry->name);   // in OperatorHandle::call_boxed / call_unboxed
//   Error e(code, "...");                   // its context() names every operator being called
//
// Note [Call context without a rethrow]: an error that leaves an operator call names the operator
// ("while calling 'aten::add.Tensor'"), so that an error thrown deep inside core (a copy, a
// broadcast) still says which call it came from; error_inputs accepts such an error because of
// it. The dispatcher used to add the line in a catch clause and rethrow, once per call level. So
// each call pushes its operator's name on a thread-local list for its duration (a cleanup, not a
// handler: no second throw), and an Error records the list when it is made. Measured on the ATen
// check's error_inputs alone (2 cores, -j 1, user CPU): 8.57 s with the catch, 8.2 s with this
// scope, 7.2 s with no context at all (the scope's cleanup still stops the unwinder once per
// call level). An error made inside a call and thrown out of it gets the same lines as before, but
// a line a handler adds on its way out (autograd's "while running the backward node") now comes
// after the calls' lines rather than between them; an Error made inside a call and handled there
// carries them unseen.
#pragma once

#include <string>

namespace opconform::detail {

struct CallFrame {
  const std::string* op;
  const CallFrame* outer;
};

// The innermost call on this thread (nullptr outside every call).
inline thread_local const CallFrame* innermost_call = nullptr;

class CallScope {
 public:
  explicit CallScope(const std::string& op) noexcept : frame_{&op, innermost_call} { innermost_call = &frame_; }
  ~CallScope() { innermost_call = frame_.outer; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  CallFrame frame_;
};

}  // namespace opconform::detail
