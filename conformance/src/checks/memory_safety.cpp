// memory_safety: the op writes and reads only inside its buffers (Note [Memory guards] in
// core/memory_guard.h). It runs twice on fresh clones of the sample: once with guard bytes
// around every buffer (arguments, outputs, the kernel's temporaries, a plugin's ctx->alloc and
// ctx->new_tensor memory), once with every CPU buffer against inaccessible pages. Each finding
// names the buffer (argument, output, or a temporary of the kernel), the side and the bytes.
// Element-wise comparisons cannot see these bugs: the allocator rounds sizes up to 64 bytes, so
// a small overrun corrupts nothing any check reads.
#include <algorithm>

#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/memory_guard.h"

namespace opconform::conformance::detail {
namespace {

using memory_guard::Access;
using memory_guard::Finding;
using memory_guard::GuardScope;
using memory_guard::Placement;
using opconform::detail::concat;

using BufferNames = std::vector<std::pair<const void*, std::string>>;

void name_tensors(const IValue& v, const std::string& name, BufferNames& out) {
  auto add = [&](const Tensor& t, const std::string& n) {
    if (t.defined() && t.storage() && t.storage()->data() != nullptr) out.emplace_back(t.storage()->data(), n);
  };
  if (v.is_tensor()) {
    add(v.to_tensor(), name);
  } else if (v.is_tensor_list()) {
    const auto& list = v.to_tensor_list();
    for (size_t k = 0; k < list.size(); ++k) add(list[k], concat(name, "[", k, "]"));
  } else if (const auto* ol = v.get_if<std::vector<std::optional<Tensor>>>()) {
    for (size_t k = 0; k < ol->size(); ++k)
      if ((*ol)[k]) add(*(*ol)[k], concat(name, "[", k, "]"));
  }
}

// The buffers a caller of the op sees, by their first byte: arguments first (an output that
// aliases one is named as the argument).
BufferNames buffer_names(const OperatorHandle& op, const Stack& args, const Stack& returns) {
  BufferNames out;
  for (size_t i = 0; i < args.size(); ++i) name_tensors(args[i], concat("argument '", arg_name(op, i), "'"), out);
  for (size_t j = 0; j < returns.size(); ++j) name_tensors(returns[j], concat("output ", j), out);
  return out;
}

std::string verb(Access a) {
  switch (a) {
    case Access::read: return "read";
    case Access::write: return "wrote";
    default: return "read or wrote";
  }
}

std::string buffer_name(const Finding& f, const BufferNames& names) {
  for (const auto& [data, name] : names)
    if (data == f.data) return name;
  return concat("a ", f.nbytes, "-byte buffer the kernel allocated", f.freed ? " and freed" : "");
}

// The buffer as a cause names it: the argument ("self"), the output ("output 0"), or "a temporary"
// (its size depends on the sample).
std::string buffer_subject(const Finding& f, const BufferNames& names) {
  for (const auto& [data, name] : names)
    if (data == f.data) return observable_subject(name);
  return "a temporary";
}

// What the kernel did, without the bytes: "wrote past the end of self".
Cause cause_of(const Finding& f, const BufferNames& names) {
  const std::string buffer = buffer_subject(f, names);
  std::string title;
  switch (f.kind) {
    case Finding::Kind::wrote_before: title = concat("wrote before the start of ", buffer); break;
    case Finding::Kind::wrote_after: title = concat("wrote past the end of ", buffer); break;
    case Finding::Kind::touched_after: title = concat(verb(f.access), " past the end of ", buffer); break;
    case Finding::Kind::touched_before: title = concat(verb(f.access), " before the start of ", buffer); break;
  }
  return Cause{FindingKind::out_of_bounds, buffer, title};
}

std::string explain(const Finding& f, const BufferNames& names) {
  const std::string buffer = buffer_name(f, names);
  switch (f.kind) {
    case Finding::Kind::wrote_before:
      return concat("wrote before the start of ", buffer, " (", f.bytes_changed, " guard bytes changed, up to ", f.reach,
                    " bytes before it)");
    case Finding::Kind::wrote_after:
      return concat("wrote past the end of ", buffer, " (", f.nbytes, " bytes; ", f.bytes_changed,
                    " guard bytes changed, up to byte ", f.reach, " after its end)");
    case Finding::Kind::touched_after:
      return concat(verb(f.access), " past the end of ", buffer, " (", f.nbytes, " bytes; the first fault at byte ", f.reach,
                    " after its end)");
    case Finding::Kind::touched_before:
      return concat(verb(f.access), " before the start of ", buffer, " (the first fault ", f.reach, " bytes before it)");
  }
  return {};
}

class MemorySafety final : public Check {
 public:
  std::string_view name() const override { return "memory_safety"; }

  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    bool on_cuda = false;
    for (const IValue& v : ctx.sample.args)
      if (v.is_tensor() && v.to_tensor().defined() && v.to_tensor().device().is_cuda()) on_cuda = true;

    std::vector<std::string> problems;
    std::optional<Cause> first;
    std::optional<Error> error;
    size_t guarded = 0;
    // Guard pages are host memory: a CUDA sample gets the guard bytes only.
    for (Placement placement : {Placement::guard_bytes, Placement::guard_pages}) {
      if (placement == Placement::guard_pages && on_cuda) continue;
      GuardScope scope(placement);
      Stack args = k.clone();  // the clones' memory is guarded too
      Stack returns;
      try {
        returns = call(ctx.op, args);
      } catch (const Error& e) {
        error = e;
      }
      guarded += scope.buffers();
      const BufferNames names = buffer_names(ctx.op, args, returns);
      for (const Finding& f : scope.findings()) {
        std::string what = explain(f, names);
        if (!first) first = cause_of(f, names);
        if (std::find(problems.begin(), problems.end(), what) == problems.end()) problems.push_back(std::move(what));
      }
    }
    if (!problems.empty()) {
      std::string joined;
      for (const auto& p : problems) joined += (joined.empty() ? "" : "; ") + p;
      return k.failed(*first, concat("memory_safety of '", ctx.op.name(), "': the kernel ", joined,
                                     ". Such a kernel corrupts memory no comparison reads. Sample: ", k.sample(), "."));
    }
    if (error) return k.threw(*error, "the guarded run");
    if (guarded == 0) {
      return k.skipped("the sample and the results hold no memory to guard (empty or data-less tensors)", "no_memory",
                       "no memory to guard");
    }
    return k.passed();
  }
};

}  // namespace

std::unique_ptr<Check> make_memory_safety() { return std::make_unique<MemorySafety>(); }

}  // namespace opconform::conformance::detail
