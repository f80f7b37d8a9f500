// device_consistency: a library's kernel on another device (CUDA) and its CPU kernel agree on the
// same sample (PyTorch's OpInfo test_compare_cpu): outputs and written arguments, within the dtype's
// tolerance. It compares the library with itself, so it needs no reference, and it is what a
// vendor shipping a CPU and a GPU backend of one op set must hold.
//
// Note [Device consistency and device semantics]: some ops are specified differently per device
// (core/device_semantics.h: CUDA batch/layer norm statistics are float32 for float16 input). Where
// the reference says an output differs between CPU and the sample's device semantics, that output
// is not compared across devices — reference_agreement checks it against the device's own rule —
// and the result says which outputs were left out.
#include "opconform/conformance/detail/builtin_checks.h"
#include "opconform/conformance/detail/check_kit.h"
#include "opconform/core/device_semantics.h"

namespace opconform::conformance::detail {
namespace {

using opconform::detail::concat;

std::optional<Device> sample_device(const Stack& args) {
  std::optional<Device> device;
  for (const IValue& v : args) {
    map_tensors(v, [&](const Tensor& t) {
      if (t.defined() && !device && !t.device().is_cpu() && !t.device().is_meta()) device = t.device();
      return t;
    });
  }
  return device;
}

// Note [A copy on another device keeps the layout] (sample.h).
Stack on_cpu(const Stack& args) { return clone_args(args, Device::cpu()); }

// The observables (by label) whose value the reference gives differently under CPU semantics and
// under `device`'s: empty when the op has no reference or none differ.
std::vector<std::string> device_dependent(const CheckContext& ctx, const Stack& cpu_args, Device device) {
  Registry* reference = ctx.definitions != nullptr ? ctx.definitions : ctx.reference;
  if (reference == nullptr) return {};
  auto op = reference->find(ctx.op.name());
  if (!op || !op->has_schema()) return {};
  Run cpu = run_op(*op, clone_args(cpu_args));
  Run dev;
  {
    SemanticDeviceGuard semantics(device);
    dev = run_op(*op, clone_args(cpu_args));
  }
  std::vector<std::string> labels;
  if (cpu.error || dev.error || cpu.seen.size() != dev.seen.size()) return labels;
  for (size_t i = 0; i < cpu.seen.size(); ++i) {
    const Verdict v = compare_observables(*op, {dev.seen[i]}, {cpu.seen[i]}, ctx.tolerance, Exactness::tolerance);
    if (!v.equal) labels.push_back(cpu.seen[i].first);
  }
  return labels;
}

class DeviceConsistency final : public Check {
 public:
  std::string_view name() const override { return "device_consistency"; }
  CheckResult run(const CheckContext& ctx) const override {
    const CheckRun k(name(), ctx);
    if (ctx.op.has_tag(Tag::nondeterministic_seeded)) {  // found on an H200: aten::native_dropout
      return k.skipped(concat("'", ctx.op.name(), "' draws random numbers (nondeterministic_seeded): each device has "
                              "its own generator, so their results cannot be compared"),
                       "nondeterministic_seeded", "the op draws random numbers");
    }
    const Stack& args = ctx.sample.args;
    const std::optional<Device> device = sample_device(args);
    if (!device) {
      return k.skipped("the sample is on the CPU: device_consistency compares another device's kernel with the "
                       "CPU kernel, on that device's cases (--device cuda)",
                       "cpu", "the sample is on the CPU");
    }
    if (!ctx.op.has_kernel_for(DispatchKey::CPU)) {
      return k.unsupported(concat("'", ctx.op.name(), "' has a kernel for ", device->to_string(),
                                  " but none for the CPU: there is nothing to compare it with"),
                           Cause{FindingKind::not_implemented, "CPU kernel", "no CPU kernel to compare with"});
    }
    const Stack cpu_args = on_cpu(args);
    Run there = k.run();
    Run here = run_op(ctx.op, clone_args(cpu_args));
    const std::string where = concat("device_consistency of '", ctx.op.name(), "' (", device->to_string(), " vs cpu): ");
    for (const Run* r : {&there, &here}) {
      if (r->error && r->error->code() == ErrorCode::kNotImplemented && !(there.error && here.error)) {
        return k.unsupported(concat("'", ctx.op.name(), "' is not implemented on ", r == &there ? device->to_string() : "cpu",
                                    " for this sample: ", r->error->what()),
                             not_implemented_cause(*r->error));
      }
    }
    if (there.error && here.error) return k.passed();  // both reject it
    if (there.error || here.error) {
      const std::string thrower = there.error ? device->to_string() : std::string("cpu");
      return k.failed(Cause{FindingKind::threw, concat(there.error ? "device" : "cpu", " kernel"),
                            concat("the ", there.error ? "device" : "cpu", " kernel throws where the other returns")},
                      concat(where, "the ", thrower, " kernel threw where the other returned: ",
                             (there.error ? there.error : here.error)->what(), " Sample: ", k.sample(), "."));
    }
    // Note [Device consistency and device semantics]
    const std::vector<std::string> left_out = device_dependent(ctx, cpu_args, *device);
    auto keep = [&](Observables seen) {
      std::erase_if(seen, [&](const auto& o) { return std::find(left_out.begin(), left_out.end(), o.first) != left_out.end(); });
      return seen;
    };
    const Verdict v = compare_observables(ctx.op, keep(there.seen), keep(here.seen), ctx.tolerance, Exactness::tolerance);
    if (!v.equal) {
      return k.failed(mismatch_cause(v, "the device and cpu kernels differ"),
                      concat(where, "the two kernels differ: ", v.what, ". Sample: ", k.sample(), "."));
    }
    if (v.mistrusted) {
      return k.mistrusted(concat("every compared value is zero or NaN on this sample, so agreement proves nothing. Sample: ",
                                 k.sample(), "."));
    }
    std::string note;
    for (const auto& label : left_out) note += (note.empty() ? "" : ", ") + label;
    return k.passed(note.empty() ? "" : concat("not compared (device-dependent semantics): ", note));
  }
};

}  // namespace

std::unique_ptr<Check> make_device_consistency() { return std::make_unique<DeviceConsistency>(); }

}  // namespace opconform::conformance::detail
