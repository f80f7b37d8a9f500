// opcheck: torch.library.opcheck in C++ — run checks on an operator over samples.
//
//   auto results = opcheck(op, {Sample({IValue(x), IValue(3.14)})});
//   // results["test_schema"].outcome == Outcome::passed
//
// Options mirror PyTorch's, defaults included: test_utils (which checks), raise_exception (true:
// throw OpcheckError with every failure's message, as torch.library.opcheck does; false: return
// the results), atol/rtol (both or neither, as in PyTorch; 0 means 0). Each check runs on every sample (until one
// fails); both overloads make one result per check the same way (Note [One result per check] in opcheck.cpp):
// the first failure, else the worst sample the check could not run, else mistrusted when no sample passed,
// else passed; skipped when every sample was. Every result that is not a pass has a cause (cause.h).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "opconform/conformance/check.h"
#include "opconform/conformance/generate.h"
#include "opconform/conformance/outcome.h"
#include "opconform/conformance/sample.h"
#include "opconform/core/registry.h"

namespace opconform::conformance {

// opcheck's default tests, PyTorch's four: test_schema, test_autograd_registration,
// test_faketensor, test_aot_dispatch_dynamic.
std::vector<std::string> default_test_utils();

struct OpcheckOptions {
  std::vector<std::string> test_utils = default_test_utils();
  bool raise_exception = true;
  // Given together or not at all (Error kInvalidArgument otherwise, as PyTorch's ValueError).
  std::optional<double> atol;
  std::optional<double> rtol;
  // The registry reference_agreement compares with (opconform check --against reference).
  Registry* reference = nullptr;
  // Where the ops' definitions came from (CheckContext::definitions): the CLI sets the reference
  // for a library's ops, with or without --against.
  Registry* definitions = nullptr;
  // Called as each check starts on the op (the harness's workers report it, so a crash or a hang
  // is put on the check that was running).
  std::function<void(const std::string& check)> on_check_start;
  // Called with each check's result as soon as it is known (before the next check starts).
  std::function<void(const CheckResult& result)> on_check_done;
  // Over generated samples: called once with the samples, then with each sample's index as a
  // check starts on it (the harness's workers note it, so a crash or a hang names its sample),
  // and with kShrinking as the search for a smaller failing sample starts (after the last index).
  static constexpr size_t kShrinking = static_cast<size_t>(-1);
  std::function<void(const std::vector<Sample>& samples)> on_samples;
  std::function<void(size_t index)> on_sample;
};

using OpcheckResults = std::map<std::string, CheckResult>;

class OpcheckError : public Error {
 public:
  OpcheckError(std::string message, OpcheckResults results)
      : Error(ErrorCode::kSchemaMismatch, std::move(message)), results_(std::move(results)) {}
  const OpcheckResults& results() const { return results_; }

 private:
  OpcheckResults results_;
};

OpcheckResults opcheck(const OperatorHandle& op, const std::vector<Sample>& samples, const OpcheckOptions& options = {},
                       Registry& registry = Registry::global());

// opcheck over generated samples (generate.h: the op's sample builder, or its schema and
// declared input constraints): every check runs on each of spec.count samples, generated once;
// a check that fails is searched again with find_failure, so its failure is shrunk and reported
// with its minimal input and a line that replays it (OPCONFORM_SEED=...). A check that was
// skipped on every sample is skipped, with the last reason. See Note [Generate once, shrink per
// check] in opcheck.cpp.
OpcheckResults opcheck(const OperatorHandle& op, const GenerateSpec& generated, const OpcheckOptions& options = {},
                       Registry& registry = Registry::global());

// True when every result passed or was skipped.
bool all_ok(const OpcheckResults& results);
// "test_schema: failed — ...\n..." one line per check.
std::string summarize(const OpcheckResults& results);

}  // namespace opconform::conformance
