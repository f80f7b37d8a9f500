// Running one planned case in this process: opcheck over the case's generated samples, every
// result turned into a reports::CaseResult with a repro line for the opconform CLI.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "opconform/conformance/generate.h"
#include "opconform/core/registry.h"
#include "opconform/harness/plan.h"
#include "opconform/reports/report.h"

namespace opconform::harness {

struct CaseContext {
  Registry& registry;             // where the ops under test live
  Registry* reference = nullptr;  // what reference_agreement compares with
  Registry* definitions = nullptr;  // where a library's op definitions came from (the reference)
  int samples = 50;
  std::optional<uint64_t> seed;
  std::optional<int> large_percent;        // PlanOptions'
  std::optional<int64_t> large_max_numel;
  std::string repro_prefix;       // "opconform check --library x.so" (the rest is added per result)
};

// What the case's samples are generated from: the reference's case spec with the context's
// overrides (OPCONFORM_SEED wins); its seed is the one a repro line gives.
conformance::GenerateSpec case_generate_spec(const CaseContext& ctx, const PlannedCase& c);

// Runs `checks` (a subset of c.checks, in order) on the case. on_check_start hears of each check
// as it starts, on_result of each result as soon as it is known (a worker sends it at once, so a
// later crash loses nothing). Never throws: a case that cannot even start is a failed result per
// check.
std::vector<reports::CaseResult> run_case(const CaseContext& ctx, const PlannedCase& c,
                                          const std::vector<std::string>& checks,
                                          const std::function<void(const std::string&)>& on_check_start = {},
                                          const std::function<void(const reports::CaseResult&)>& on_result = {});

// `text` quoted for a shell when it holds anything but letters, digits and _-.,:/=+@%^ ('...', or $'...'
// for control bytes: Note [Library text in a repro line]).
std::string quoted(const std::string& text);

// The line that replays one result: the prefix, then --ops, --checks, --device, --dtype, --seed.
std::string repro_line(const std::string& prefix, const reports::CaseResult& r, uint64_t seed);

}  // namespace opconform::harness
