// The reference checked by opconform itself — the main job until the opconform CLI lands: every
// reference operator, on every dtype it accepts, through every check on generated samples (the
// CI count is 50 per op and dtype), with a Markdown report.
//
//   Registry registry;
//   auto reg = register_reference_ops(registry);
//   auto cases = self_check(registry, {.samples = 50});
//   write(format_self_check_markdown(cases));
//
// The seed of each (op, dtype) is fixed (a hash of both), so runs repeat; OPCONFORM_SEED picks
// another for every case (nightly runs).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "opconform/conformance/generate.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core/registry.h"

namespace opconform::reference {

struct SelfCheckOptions {
  int samples = 50;                 // generated samples per op and dtype (and per check)
  std::vector<std::string> checks;  // empty: every registered check
  std::string ops = "*";            // a glob over op names ("aten::add*")
};

struct SelfCheckCase {
  std::string op;
  DType dtype;
  conformance::OpcheckResults results;
  double seconds = 0;
  bool ok() const { return conformance::all_ok(results); }
};

// The generation spec of one case: `samples` samples of `dtype` whose floating inputs require
// grad (so gradcheck runs), with the case's fixed seed.
conformance::GenerateSpec self_check_spec(const std::string& op, DType dtype, int samples);

// Runs every case; `progress` (optional) hears of each one as it finishes.
using SelfCheckProgress = std::function<void(const SelfCheckCase& done, size_t finished, size_t total)>;
std::vector<SelfCheckCase> self_check(Registry& registry, const SelfCheckOptions& options,
                                      const SelfCheckProgress& progress = {});

// The report: totals, one row per op (dtypes passed / failed, time), then every failure with
// its message, minimal input and replay line.
std::string format_self_check_markdown(const std::vector<SelfCheckCase>& cases, const SelfCheckOptions& options);

}  // namespace opconform::reference
