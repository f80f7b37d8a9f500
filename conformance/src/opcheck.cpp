#include "opconform/conformance/opcheck.h"

#include <sstream>

namespace opconform::conformance {

std::vector<std::string> default_test_utils() {
  return {"test_schema", "test_autograd_registration", "test_faketensor"};
}

OpcheckResults opcheck(const OperatorHandle& op, const std::vector<Sample>& samples, const OpcheckOptions& options,
                       Registry& registry) {
  OPCONFORM_CHECK(!samples.empty(), ErrorCode::kInvalidArgument, "opcheck('", op.name(),
                  "'): no samples (pass at least one, or generate them)");
  ToleranceSpec tolerance{options.atol, options.rtol};
  OpcheckResults results;
  for (const auto& name : options.test_utils) {
    const Check& check = check_named(name);  // throws for unknown names, listing the known ones
    std::optional<CheckResult> combined;
    for (const Sample& sample : samples) {
      CheckContext ctx{op, sample, tolerance, registry};
      CheckResult r;
      try {
        r = check.run(ctx);
      } catch (const std::exception& e) {
        // A check must not throw for a finding; if one escapes, it is still reported, not lost.
        r = CheckResult{name, Outcome::failed, "check '" + name + "' on '" + op.name() + "' threw: " + e.what(), "", {}};
      }
      if (r.check.empty()) r.check = name;
      combined = combined ? combine(*combined, r) : r;
    }
    results[name] = *combined;
  }
  if (options.raise_exception && !all_ok(results)) {
    throw OpcheckError("opcheck('" + op.name() + "') failed:\n" + summarize(results), results);
  }
  return results;
}

OpcheckResults opcheck(const OperatorHandle& op, const GenerateSpec& generated, const OpcheckOptions& options,
                       Registry& registry) {
  ToleranceSpec tolerance{options.atol, options.rtol};
  OpcheckResults results;
  for (const auto& name : options.test_utils) {
    const Check& check = check_named(name);
    std::optional<CheckResult> last_skip;
    bool ran = false;
    auto property = [&](const Sample& sample) {
      CheckContext ctx{op, sample, tolerance, registry};
      CheckResult r = check.run(ctx);
      if (r.check.empty()) r.check = name;
      if (r.outcome == Outcome::skipped) last_skip = r;
      else ran = true;
      return r;
    };
    auto failure = find_failure(op.schema(), op.name(), property, generated);
    if (failure) {
      CheckResult r = failure->result;
      r.check = name;
      if (r.repro.empty()) r.repro = failure->replay;
      results[name] = r;
    } else if (!ran && last_skip) {
      results[name] = *last_skip;
    } else {
      results[name] = CheckResult{name, Outcome::passed,
                                  "passed on " + std::to_string(generated.count) + " generated samples", "", {}};
    }
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
