#include "opconform/reference/self_check.h"

#include <fnmatch.h>

#include <chrono>
#include <iomanip>
#include <map>
#include <sstream>

#include "opconform/conformance/check.h"
#include "opconform/reference/op_info.h"

namespace opconform::reference {

conformance::GenerateSpec self_check_spec(const std::string& op, DType dtype, int samples) {
  conformance::GenerateSpec spec;
  spec.count = samples;
  spec.dtypes = {dtype};
  // FNV-1a of "op/dtype": the same seed with every standard library (std::hash is not).
  uint64_t h = 14695981039346656037ull;
  for (char c : op + "/" + std::string(name(dtype))) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  spec.seed = h | 1;
  spec.requires_grad = true;
  return spec;
}

std::vector<SelfCheckCase> self_check(Registry& registry, const SelfCheckOptions& options,
                                      const SelfCheckProgress& progress) {
  std::vector<SelfCheckCase> cases;
  for (const auto& info : reference_op_infos()) {
    if (fnmatch(options.ops.c_str(), info.name.c_str(), 0) != 0) continue;
    for (DType d : info.dtypes) cases.push_back({info.name, d, {}, 0});
  }
  conformance::OpcheckOptions opcheck_options;
  opcheck_options.test_utils = options.checks.empty() ? conformance::check_names() : options.checks;
  for (size_t i = 0; i < cases.size(); ++i) {
    SelfCheckCase& c = cases[i];
    const auto start = std::chrono::steady_clock::now();
    try {
      c.results = conformance::opcheck(registry.get(c.op), self_check_spec(c.op, c.dtype, options.samples),
                                       opcheck_options, registry);
    } catch (const std::exception& e) {
      // A run that could not even start (no samples can be generated, ...) is a failure too.
      c.results["opcheck"] = conformance::CheckResult{"opcheck", conformance::Outcome::failed, e.what(), "", {}};
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress) progress(c, i + 1, cases.size());
  }
  return cases;
}

std::string format_self_check_markdown(const std::vector<SelfCheckCase>& cases, const SelfCheckOptions& options) {
  struct Row {
    std::vector<std::string> passed, failed;
    double seconds = 0;
  };
  std::map<std::string, Row> rows;
  size_t failed_cases = 0;
  double total = 0;
  for (const auto& c : cases) {
    Row& r = rows[c.op];
    (c.ok() ? r.passed : r.failed).push_back(std::string(name(c.dtype)));
    r.seconds += c.seconds;
    total += c.seconds;
    failed_cases += !c.ok();
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("—") : s;
  };
  std::ostringstream out;
  out << std::fixed << std::setprecision(2);
  out << "# Reference self-check\n\n"
      << "Every reference operator on every dtype it accepts, through every check, on " << options.samples
      << " generated samples per op, dtype and check.\n\n"
      << "- operators: " << rows.size() << "; cases (op x dtype): " << cases.size() << "; failing cases: " << failed_cases
      << "\n- time: " << total << " s\n\n"
      << "| op | passed | failed | seconds |\n| --- | --- | --- | --- |\n";
  for (const auto& [op, r] : rows)
    out << "| `" << op << "` | " << join(r.passed) << " | " << join(r.failed) << " | " << r.seconds << " |\n";
  if (failed_cases > 0) {
    out << "\n## Failures\n";
    for (const auto& c : cases) {
      if (c.ok()) continue;
      out << "\n### `" << c.op << "` on " << name(c.dtype) << "\n\n";
      for (const auto& [check, r] : c.results) {
        if (r.ok()) continue;
        out << "- **" << check << "**: " << conformance::to_string(r.outcome) << " — " << r.message << "\n";
        if (r.minimal_input) out << "  - minimal input: `" << *r.minimal_input << "`\n";
        if (!r.repro.empty()) out << "  - replay: `" << r.repro << "`\n";
      }
    }
  }
  return out.str();
}

}  // namespace opconform::reference
