#include "opconform/conformance/opcheck.h"

#include <sstream>

#include "opconform/core/cuda.h"

namespace opconform::conformance {

using opconform::detail::concat;

std::vector<std::string> default_test_utils() {
  return {"test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"};
}

namespace {

// PyTorch's rule: a tolerance is a pair; one without the other is an error, not a half default.
ToleranceSpec tolerance_of(const OperatorHandle& op, const OpcheckOptions& options) {
  OPCONFORM_CHECK(options.atol.has_value() == options.rtol.has_value(), ErrorCode::kInvalidArgument, "opcheck('",
                  op.name(), "'): ", options.atol ? "atol" : "rtol", " was given without ",
                  options.atol ? "rtol" : "atol", ": give both or neither (as torch.library.opcheck)");
  return ToleranceSpec{options.atol, options.rtol};
}

// Note [A CUDA fault ends the search]: a kernel that faults on the device (a device-side assert
// on an out-of-range index, an illegal address) does so asynchronously: the check may return, or
// fail on its next CUDA call ("cudaMemcpy failed: device-side assert triggered"), and every later
// CUDA call in the process fails alike. So after each sample a check ran on, the device is asked
// (cuda::device_fault synchronises it, and costs nothing in a process that never used CUDA): a
// fault makes that sample's result `crashed`, naming the fault. Nothing smaller is searched for
// (the lost context can run nothing: a search would only report its own allocations failing),
// and find_failure's search stops at the sample after which the device faulted. The harness then
// ends the worker (Note [A CUDA fault ends the worker], core/cuda.h).
CheckResult device_fault_on(CheckResult r, const std::string& fault) {
  const std::string said = r.outcome == Outcome::passed ? "" : r.message;
  r.outcome = Outcome::crashed;
  // The fault is the cause, whatever the check had found (a skip's or a gap's cause would file it
  // where an --expect entry for that gap covers it).
  r.cause = Cause{FindingKind::crash, "cuda fault", "a CUDA kernel faulted"};
  r.message = concat("a CUDA kernel faulted on this sample: the device reported '", fault, "'",
                     said.empty() ? "" : concat("; the check said: ", said));
  return r;
}

// One check on one sample: the check's result, a failed one when the check threw (a check must
// not throw for a finding; if one escapes, it is still reported, not lost), crashed when the
// device faulted (Note [A CUDA fault ends the search]).
CheckResult run_on(const Check& check, const std::string& name, const CheckContext& ctx) {
  CheckResult r;
  try {
    r = check.run(ctx);
  } catch (const std::exception& e) {
    r = CheckResult{name, Outcome::failed, "check '" + name + "' on '" + ctx.op.name() + "' threw: " + e.what(), "", {}};
  }
  if (r.check.empty()) r.check = name;
  if (const auto fault = cuda::device_fault()) r = device_fault_on(r, *fault);
  return r;
}

// Note [One result per check]: both opcheck overloads turn a check's per-sample results into its
// result here, and only here. The first failure (failed, or crashed: a device fault) ends the
// samples and is the result. Otherwise a sample the check could not run (unsupported,
// timed_out) must not read "passed" (the worst of them wins); a check whose comparisons proved
// nothing on every sample it ran is mistrusted, but one passing sample outweighs mistrusted ones;
// a check skipped on every sample is skipped, with the last reason. Every result that is not a
// pass leaves with a cause (cause_for_outcome where the check set none).
class SampleOutcomes {
 public:
  explicit SampleOutcomes(std::string check) : check_(std::move(check)) {}

  // Adds sample `index`'s result; false when it ends the samples (a failure).
  bool add(CheckResult r, size_t index) {
    ++added_;
    if (r.outcome == Outcome::skipped) {
      last_skip_ = std::move(r);
      return true;
    }
    ran_ = true;
    if (r.outcome == Outcome::failed || r.outcome == Outcome::crashed) {
      failure_ = std::move(r);
      failure_index_ = index;
      return false;
    }
    if (r.outcome == Outcome::passed) {
      if (!passed_) passed_ = std::move(r);  // its note is the first pass's
    } else if (r.outcome == Outcome::mistrusted) {
      mistrusted_ = std::move(r);
    } else {
      other_ = other_ ? combine(*other_, r) : std::move(r);
    }
    return true;
  }

  const std::optional<CheckResult>& failure() const { return failure_; }
  size_t failure_index() const { return failure_index_; }

  // The check's result. A pass over generated samples says how many; over given samples it
  // keeps the first pass's note.
  CheckResult result(bool generated) const {
    if (failure_) return with_cause(*failure_);
    if (other_) return with_cause(*other_);
    if (mistrusted_ && !passed_) return with_cause(*mistrusted_);
    if (!ran_ && last_skip_) return with_cause(*last_skip_);
    if (!generated && passed_) return *passed_;
    const std::string note = passed_ ? passed_->message : "";
    return CheckResult{check_, Outcome::passed,
                       "passed on " + std::to_string(added_) + " generated samples" +
                           (note.empty() ? "" : " (first note: " + note + ")"),
                       "", {}};
  }

  // Note [One finding per cause] (cause.h): no result that is not a pass goes without a cause.
  static CheckResult with_cause(CheckResult r) {
    if (!r.cause && r.outcome != Outcome::passed) r.cause = cause_for_outcome(r.outcome, r.check);
    return r;
  }

 private:
  std::string check_;
  size_t added_ = 0;
  bool ran_ = false;
  std::optional<CheckResult> last_skip_, failure_, passed_, mistrusted_, other_;
  size_t failure_index_ = 0;
};

}  // namespace

OpcheckResults opcheck(const OperatorHandle& op, const std::vector<Sample>& samples, const OpcheckOptions& options,
                       Registry& registry) {
  const ToleranceSpec tolerance = tolerance_of(op, options);
  OPCONFORM_CHECK(!samples.empty(), ErrorCode::kInvalidArgument, "opcheck('", op.name(),
                  "'): no samples (pass at least one, or generate them)");
  OpcheckResults results;
  for (const auto& name : in_run_order(options.test_utils)) {  // Note [Concurrent first calls]
    const Check& check = check_named(name);  // throws for unknown names, listing the known ones
    if (options.on_check_start) options.on_check_start(name);
    SampleOutcomes outcomes(name);  // Note [One result per check]
    for (size_t i = 0; i < samples.size(); ++i) {
      const CheckContext ctx{op, samples[i], tolerance, registry, options.reference, options.definitions};
      if (!outcomes.add(run_on(check, name, ctx), i)) break;
    }
    results[name] = outcomes.result(/*generated=*/false);
    if (options.on_check_done) options.on_check_done(results[name]);
  }
  if (options.raise_exception && !all_ok(results)) {
    throw OpcheckError("opcheck('" + op.name() + "') failed:\n" + summarize(results), results);
  }
  return results;
}

// Note [Generate once, shrink per check]: the samples are generated once and every check runs on
// each of them (generation is most of the cost of a passing run, and it is the same for every
// check). Only a check that fails somewhere searches again with find_failure, which shrinks its
// failure to a minimal sample and gives the replay line; should that search not meet the
// failure again, the sample found first is reported as it is.
OpcheckResults opcheck(const OperatorHandle& op, const GenerateSpec& generated, const OpcheckOptions& options,
                       Registry& registry) {
  const ToleranceSpec tolerance = tolerance_of(op, options);
  const std::vector<std::string> names = in_run_order(options.test_utils);  // Note [Concurrent first calls]
  std::vector<const Check*> checks;
  for (const auto& name : names) checks.push_back(&check_named(name));  // throws for unknown names
  GenerateSpec spec = generated;
  spec.seed = resolve_seed(generated);  // one seed for the first pass and the searches
  const std::vector<Sample> samples = generate_samples(op, spec);
  if (options.on_samples) options.on_samples(samples);

  OpcheckResults results;
  for (size_t c = 0; c < checks.size(); ++c) {
    const std::string& name = names[c];
    if (options.on_check_start) options.on_check_start(name);
    auto run = [&](const Sample& sample) {
      return run_on(*checks[c], name, CheckContext{op, sample, tolerance, registry, options.reference, options.definitions});
    };
    SampleOutcomes outcomes(name);  // Note [One result per check]
    for (size_t i = 0; i < samples.size(); ++i) {
      if (options.on_sample) options.on_sample(i);
      if (!outcomes.add(run(samples[i]), i)) break;
    }
    CheckResult r = outcomes.result(/*generated=*/true);
    if (outcomes.failure()) {
      const std::string failing = description_of(samples[outcomes.failure_index()], op.schema());
      if (cuda::device_fault()) {
        r.minimal_input = failing + " (the sample during which the device faulted; a lost CUDA context runs no smaller one)";
      } else {
        r.minimal_input = failing + " (the first failing sample, not shrunk)";
        if (options.on_sample) options.on_sample(OpcheckOptions::kShrinking);
        if (auto shrunk = find_failure(op, run, spec)) r = SampleOutcomes::with_cause(shrunk->result);
        r.check = name;
        if (r.repro.empty()) {
          r.repro = concat("OPCONFORM_SEED=", spec.seed, " ",
                           spec.replay_command.empty() ? program_path() : spec.replay_command);
        }
      }
    }
    results[name] = r;
    if (options.on_check_done) options.on_check_done(results[name]);
  }
  if (options.raise_exception && !all_ok(results)) {
    throw OpcheckError("opcheck('" + op.name() + "') failed:\n" + summarize(results), results);
  }
  return results;
}

bool all_ok(const OpcheckResults& results) {
  for (const auto& [name, r] : results) {
    if (!r.ok()) return false;
  }
  return true;
}

std::string summarize(const OpcheckResults& results) {
  std::ostringstream out;
  for (const auto& [name, r] : results) {
    out << name << ": " << to_string(r.outcome);
    if (!r.message.empty()) out << " — " << r.message;
    if (r.minimal_input) out << "\n    minimal input: " << *r.minimal_input;
    if (!r.repro.empty()) out << "\n    repro: " << r.repro;
    out << "\n";
  }
  return out.str();
}

}  // namespace opconform::conformance
