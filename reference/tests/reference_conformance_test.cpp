// The reference registry checked by opconform itself: every operator, on every dtype it accepts,
// passes every check (opcheck's tests, gradcheck, gradgradcheck and the properties) on generated
// samples. No per-op silencing: only the tolerance overrides declared beside the ops apply.
//
// Samples per (op, dtype): OPCONFORM_REFERENCE_SAMPLES (default 50, the CI count). The seed is
// fixed per (op, dtype) (self_check_spec) so CI is reproducible; OPCONFORM_SEED picks another.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "opconform/conformance/check.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/reference.h"
#include "opconform/reference/self_check.h"

namespace opconform::reference {
namespace {

using namespace opconform::conformance;

Registry& reference_registry() {
  // The global registry: autograd sums gradients under create_graph with its aten::add.Tensor.
  static ReferenceRegistration registration = register_reference_ops(Registry::global());
  return Registry::global();
}

struct Case {
  std::string op;
  DType dtype;
};

std::vector<Case> cases() {
  reference_registry();
  std::vector<Case> out;
  for (const auto& info : reference_op_infos()) {
    for (DType d : info.dtypes) out.push_back({info.name, d});
    if (info.dtypes.empty()) out.push_back({info.name, DType::Float32});
  }
  return out;
}

int sample_count() {
  const char* env = std::getenv("OPCONFORM_REFERENCE_SAMPLES");
  return env && *env ? std::atoi(env) : 50;
}

class ReferenceConformance : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceConformance, PassesEveryCheck) {
  const Case& c = GetParam();
  Registry& registry = reference_registry();
  OperatorHandle op = registry.get(c.op);
  GenerateSpec spec = self_check_spec(c.op, c.dtype, sample_count());
  OpcheckOptions options;
  options.test_utils = check_names();
  OpcheckResults results = opcheck(op, spec, options, registry);
  EXPECT_TRUE(all_ok(results)) << c.op << " on " << name(c.dtype) << ":\n" << summarize(results);
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
