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
  r.message = concat("a CUDA kernel faulted on this sample: the device reported '", fault, "'",
                     said.empty() ? "" : concat("; the check said: ", said));
  return r;
}

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
    std::optional<CheckResult> combined;
    for (const Sample& sample : samples) {
      CheckContext ctx{op, sample, tolerance, registry, options.reference, options.definitions};
      CheckResult r;
      try {
        r = check.run(ctx);
      } catch (const std::exception& e) {
        // A check must not throw for a finding; if one escapes, it is still reported, not lost.
        r = CheckResult{name, Outcome::failed, "check '" + name + "' on '" + op.name() + "' threw: " + e.what(), "", {}};
      }
      if (r.check.empty()) r.check = name;
      const auto fault = cuda::device_fault();  // Note [A CUDA fault ends the search]
      if (fault) r = device_fault_on(r, *fault);
      combined = combined ? combine(*combined, r) : r;
      if (fault) break;  // the later samples would meet the lost context, not their own kernels
    }
    results[name] = *combined;
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
      CheckContext ctx{op, sample, tolerance, registry, options.reference, options.definitions};
      CheckResult r;
      try {
        r = checks[c]->run(ctx);
      } catch (const std::exception& e) {
        r = CheckResult{name, Outcome::failed, "check '" + name + "' on '" + op.name() + "' threw: " + e.what(), "", {}};
      }
      if (r.check.empty()) r.check = name;
      if (const auto fault = cuda::device_fault()) r = device_fault_on(r, *fault);  // Note [A CUDA fault ends the search]
      return r;
    };
    // A check that could not run on some sample (unsupported, timed_out) must not read "passed";
    // one whose comparisons proved nothing on every sample it ran is mistrusted.
    std::optional<CheckResult> last_skip, first_failure, other, mistrusted;
    size_t failing_index = 0;
    bool ran = false, any_passed = false;
    std::string pass_note;  // what a passing check said it could not try (the first one)
    for (size_t i = 0; i < samples.size(); ++i) {
      const Sample& sample = samples[i];
      if (options.on_sample) options.on_sample(i);
      CheckResult r = run(sample);
      if (r.outcome == Outcome::skipped) {
        last_skip = r;
        continue;
      }
      ran = true;
      if (r.outcome == Outcome::failed || r.outcome == Outcome::crashed) {
        r.minimal_input = description_of(sample, op.schema()) + " (the first failing sample, not shrunk)";
        first_failure = r;
        failing_index = i;
        break;
      }
      if (r.outcome == Outcome::passed) {
        any_passed = true;
        if (pass_note.empty()) pass_note = r.message;
      }
      else if (r.outcome == Outcome::mistrusted) mistrusted = r;
      else other = other ? combine(*other, r) : r;
    }
    if (!other && mistrusted && !any_passed) other = mistrusted;
    if (first_failure && cuda::device_fault()) {
      first_failure->minimal_input = description_of(samples[failing_index], op.schema()) +
                                     " (the sample during which the device faulted; a lost CUDA context runs no smaller one)";
      results[name] = *first_failure;
    } else if (first_failure) {
      if (options.on_sample) options.on_sample(OpcheckOptions::kShrinking);
      auto shrunk = find_failure(op, run, spec);
      CheckResult r = shrunk ? shrunk->result : *first_failure;
      r.check = name;
      if (r.repro.empty()) {
        r.repro = concat("OPCONFORM_SEED=", spec.seed, " ",
                         spec.replay_command.empty() ? program_path() : spec.replay_command);
      }
      results[name] = r;
    } else if (other) {
      results[name] = *other;
    } else if (!ran && last_skip) {
      results[name] = *last_skip;
    } else {
      results[name] = CheckResult{name, Outcome::passed,
                                  "passed on " + std::to_string(samples.size()) + " generated samples" +
                                      (pass_note.empty() ? "" : " (first note: " + pass_note + ")"),
                                  "", {}};
    }
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
