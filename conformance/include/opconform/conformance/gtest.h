// GoogleTest integration (header-only): opcheck as an assertion, and one test per (operator,
// check) over generated samples.
//
// 1. Hand-written samples:
//
//      TEST(MyOps, Sin) {
//        std::vector<Sample> samples = {Sample({IValue(randn_like_input)})};
//        EXPECT_OPCHECK(my_sin, samples);             // an OperatorHandle or a CustomOpDef
//        ASSERT_OPCHECK_WITH(my_sin, samples, opts);  // OpcheckOptions (test_utils, atol, rtol)
//      }
//
//    A failure prints summarize(results) — one line per check — and the minimal input of each
//    failed check that has one.
//
// 2. Generated samples, one test per (operator, check), named Prefix.<op>__<check> with every
//    character that is not a letter or digit replaced by '_' ("mylib::sin" -> "mylib__sin"):
//
//      Registry& my_registry() {            // populated when first called
//        static Registry r;
//        static Library lib = [] { ... define and implement the ops into r ... }();
//        return r;
//      }
//      OPCONFORM_INSTANTIATE_OPCHECK_SUITE(MyOps, my_registry, "mylib::*");   // every check
//      OPCONFORM_INSTANTIATE_OPCHECK_SUITE(MyOps4, my_registry, "mylib::*",
//                                          ::opconform::conformance::default_test_utils());
//
//    Each test runs its check over generated samples (generate.h: the schema plus the op's
//    declared constraints, GenerateSpec defaults: every declared dtype, the large tier, inputs
//    that require grad) and fails with the check's message, the shrunk minimal input and a
//    replay line:
//      OPCONFORM_SEED=<seed> <program> --gtest_filter=MyOps.mylib__sin__test_schema
//    A check that did not test anything (skipped, unsupported, or mistrusted: nothing meaningful
//    was compared) is GTEST_SKIP() with its reason, never [ OK ].
//    The macro registers at static initialization, so the operators must exist when registry_fn
//    is called (populate the registry inside it, as above, not in another file's static
//    initializer); the registry must outlive the tests. register_opcheck_tests() does the same
//    from main() or anywhere before RUN_ALL_TESTS, with a GenerateSpec and OpcheckOptions.
#pragma once

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "opconform/conformance/check.h"
#include "opconform/conformance/generate.h"
#include "opconform/conformance/opcheck.h"
#include "opconform/core/custom_op.h"
#include "opconform/core/registry.h"

namespace opconform::conformance::gtest {

// An OperatorHandle, or anything with handle() (CustomOpDef).
template <typename Op>
OperatorHandle as_handle(const Op& op) {
  if constexpr (requires { op.handle(); }) return op.handle();
  else return op;
}

// summarize(results), then the minimal input of every failed check that has one.
inline std::string opcheck_failure_text(const OpcheckResults& results) {
  std::string text = summarize(results);
  for (const auto& [name, r] : results) {
    if (!r.ok() && r.minimal_input) text += "\n" + name + ": minimal input: " + *r.minimal_input;
  }
  return text;
}

// The predicate-formatter behind the macros.
template <typename Op>
::testing::AssertionResult opcheck_passes(const char* op_expr, const char* samples_expr, const char* /*options_expr*/,
                                          const Op& op, const std::vector<Sample>& samples, const OpcheckOptions& options) {
  OperatorHandle handle = as_handle(op);
  // A custom op knows its registry; an operator handle is taken to be in the global one.
  Registry* registry = &Registry::global();
  if constexpr (std::is_base_of_v<CustomOpDef, Op>) registry = &op.registry();
  OpcheckOptions returning = options;
  returning.raise_exception = false;  // the assertion reports the failures
  OpcheckResults results = opcheck(handle, samples, returning, *registry);
  if (all_ok(results)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "opcheck(" << op_expr << ", " << samples_expr << ") failed for "
                                       << handle.name() << ":\n"
                                       << opcheck_failure_text(results);
}

// The gtest filter of the running test ("Suite.Name"), empty outside a test.
inline std::string current_test_filter() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string();
}

// find_failure's replay line for the running test: this program with --gtest_filter.
inline GenerateSpec spec_for_current_test(GenerateSpec spec) {
  if (spec.replay_command.empty()) {
    std::string filter = current_test_filter();
    spec.replay_command = program_path() + (filter.empty() ? "" : " --gtest_filter=" + filter);
  }
  return spec;
}

// A gtest name from an operator or check name: letters and digits kept, the rest '_'.
inline std::string test_name_part(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// One generated-sample test of one check on one operator.
class GeneratedOpcheckTest : public ::testing::Test {
 public:
  GeneratedOpcheckTest(OperatorHandle op, std::string check, GenerateSpec spec, OpcheckOptions options, Registry* registry)
      : op_(op), check_(std::move(check)), spec_(std::move(spec)), options_(std::move(options)), registry_(registry) {}

  void TestBody() override {
    options_.test_utils = {check_};
    options_.raise_exception = false;
    OpcheckResults results = opcheck(op_, spec_for_current_test(spec_), options_, *registry_);
    const CheckResult& r = results.at(check_);
    switch (r.outcome) {
      case Outcome::passed: return;
      case Outcome::skipped:
      case Outcome::unsupported:
      case Outcome::mistrusted:
        GTEST_SKIP() << op_.name() << " " << check_ << ": " << r.outcome << " — " << r.message;
      case Outcome::failed:
      case Outcome::crashed:
      case Outcome::timed_out:
        ADD_FAILURE() << op_.name() << " " << check_ << ": " << r.outcome << " — " << r.message
                      << (r.minimal_input ? "\n  minimal input: " + *r.minimal_input : std::string())
                      << "\n  replay: " << r.repro;
    }
  }

 private:
  OperatorHandle op_;
  std::string check_;
  GenerateSpec spec_;
  OpcheckOptions options_;
  Registry* registry_;
};

// Registers Suite.<op>__<check> for every operator of `registry` whose name matches `ops_glob`
// (fnmatch: "mylib::*", "*") and has a schema, and every check of `checks` (default: every
// check there is, check_names()). Returns how many were registered. Call before RUN_ALL_TESTS;
// `registry` must outlive the tests.
inline int register_opcheck_tests(const std::string& suite, Registry& registry, const std::string& ops_glob,
                                  const std::vector<std::string>& checks = check_names(), const GenerateSpec& spec = {},
                                  const OpcheckOptions& options = {}) {
  int registered = 0;
  for (const OperatorHandle& op : registry.operators()) {
    if (!op.has_schema() || fnmatch(ops_glob.c_str(), op.name().c_str(), 0) != 0) continue;
    for (const std::string& check : checks) {
      std::string name = test_name_part(op.name()) + "__" + test_name_part(check);
      Registry* r = &registry;
      ::testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [op, check, spec, options, r]() -> ::testing::Test* {
                                return new GeneratedOpcheckTest(op, check, spec, options, r);
                              });
      ++registered;
    }
  }
  return registered;
}

}  // namespace opconform::conformance::gtest

#define EXPECT_OPCHECK(op, samples)                                                                        \
  EXPECT_PRED_FORMAT3(::opconform::conformance::gtest::opcheck_passes, op, samples,                     \
                      ::opconform::conformance::OpcheckOptions())
#define ASSERT_OPCHECK(op, samples)                                                                        \
  ASSERT_PRED_FORMAT3(::opconform::conformance::gtest::opcheck_passes, op, samples,                     \
                      ::opconform::conformance::OpcheckOptions())
#define EXPECT_OPCHECK_WITH(op, samples, options) \
  EXPECT_PRED_FORMAT3(::opconform::conformance::gtest::opcheck_passes, op, samples, options)
#define ASSERT_OPCHECK_WITH(op, samples, options) \
  ASSERT_PRED_FORMAT3(::opconform::conformance::gtest::opcheck_passes, op, samples, options)

// Registers one generated-sample test per (operator matching ops_glob, check) of the Registry&
// that registry_fn() returns, under the suite `Prefix` (see the top of this file). The checks
// (a std::vector<std::string>) are optional: every check by default.
#define OPCONFORM_INSTANTIATE_OPCHECK_SUITE(Prefix, registry_fn, ...)                                      \
  [[maybe_unused]] static const int opconform_opcheck_suite_##Prefix =                                    \
      ::opconform::conformance::gtest::register_opcheck_tests(#Prefix, (registry_fn)(), __VA_ARGS__)
