// The reference registry checked by opconform itself: every operator, on every dtype it accepts,
// passes every check (opcheck's tests, gradcheck, gradgradcheck and the properties) on generated
// samples. No per-op silencing: only the tolerance overrides declared beside the ops apply.
//
// Samples per (op, dtype): OPCONFORM_REFERENCE_SAMPLES (default 50, the CI count; 6 under ASan). The seed is
// fixed per (op, dtype) (case_spec) so CI is reproducible; OPCONFORM_SEED picks another. ctest
// runs the cases in 6 shards of one process each (reference/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "opconform/conformance/check.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/reference.h"
#include "opconform/conformance/case_spec.h"
#include "support/reference_test_support.h"

namespace opconform::reference {
namespace {

using namespace opconform::conformance;

struct Case {
  std::string op;
  DType dtype;
};
// gtest prints parameters in failure messages and ctest names: the op and the dtype.
void PrintTo(const Case& c, std::ostream* out) { *out << c.op << " on " << name(c.dtype); }

// Under sanitizers (a memory-error pass, ten times slower per sample) each op runs on two of its
// dtypes, float64 when it takes it and its first other one; the default build runs all of them.
std::vector<DType> dtypes_to_run(const std::vector<DType>& dtypes) {
#if defined(__SANITIZE_ADDRESS__)
  std::vector<DType> out;
  if (std::find(dtypes.begin(), dtypes.end(), DType::Float64) != dtypes.end()) out.push_back(DType::Float64);
  for (DType d : dtypes) {
    if (out.size() == 2) break;
    if (d != DType::Float64) out.push_back(d);
  }
  return out;
#else
  return dtypes;
#endif
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& info : reference_op_infos(testing::registry())) {
    for (DType d : dtypes_to_run(info.dtypes)) out.push_back({info.name, d});
  }
  return out;
}

int sample_count() {
  const char* env = std::getenv("OPCONFORM_REFERENCE_SAMPLES");
  if (env && *env) return std::atoi(env);
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer pass looks for memory errors, ten times slower per sample; the 50-sample run
  // is the default build's. 6 keeps it to about 100 s on 2 cores (10 took 163 s).
  return 6;
#else
  return 50;
#endif
}

class ReferenceConformance : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceConformance, PassesEveryCheck) {
  const Case& c = GetParam();
  Registry& registry = testing::registry();
  OperatorHandle op = registry.get(c.op);
  GenerateSpec spec = case_spec(c.op, c.dtype, sample_count());
  OpcheckOptions options;
  options.test_utils = check_names();
  options.raise_exception = false;
  OpcheckResults results = opcheck(op, spec, options, registry);
  // Every check passes or is skipped with its reason; `mistrusted` (every comparison trivially
  // equal on every sample, as isinf on integers, which is always false) is not a finding either.
  bool tested = false;
  for (const auto& [check, r] : results) {
    EXPECT_TRUE(r.ok() || r.outcome == Outcome::mistrusted)
        << c.op << " on " << name(c.dtype) << ":\n" << summarize(results);
    tested = tested || r.outcome == Outcome::passed;
  }
  // Never untested (reports/report.h): some check ran on some sample of every case.
  EXPECT_TRUE(tested) << c.op << " on " << name(c.dtype) << " is untested: every check was skipped\n"
                      << summarize(results);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.op + "_" + std::string(name(info.param.dtype));
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Reference, ReferenceConformance, ::testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace opconform::reference
