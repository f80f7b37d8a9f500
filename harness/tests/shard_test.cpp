// Shards: read from each engine's variables (GoogleTest, GitLab, Buildkite, CircleCI, Slurm,
// Kubernetes), their bases, conflicts, --shard winning, the report's shard_source, and shards
// balanced by expected cost (Note [Shards balanced by cost] in plan.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "opconform/core/error.h"
#include "opconform/harness/cli.h"
#include "opconform/harness/plan.h"
#include "opconform/reference/reference.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

namespace fs = std::filesystem;
using Vars = std::map<std::string, std::string>;

std::optional<Shard> from(const Vars& vars, std::optional<int> shard_count = std::nullopt) {
  return shard_from_variables(
      [&](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      shard_count);
}

// The error code of from(vars), or nullopt when it did not throw.
std::optional<ErrorCode> error_of(const Vars& vars, std::optional<int> shard_count = std::nullopt) {
  try {
    from(vars, shard_count);
  } catch (const Error& e) {
    return e.code();
  }
  return std::nullopt;
}

std::string message_of(const Vars& vars) {
  try {
    from(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct EngineCase {
  Vars vars;
  std::optional<int> shard_count;
  int index, count;
  std::string source;
};

TEST(ShardEngines, EachEngineGivesItsShardFromItsOwnBase) {
  const std::vector<EngineCase> cases = {
      {{{"GTEST_SHARD_INDEX", "2"}, {"GTEST_TOTAL_SHARDS", "3"}}, {}, 2, 3, "gtest GTEST_SHARD_INDEX=2"},
      // GitLab counts from 1: the first node is shard 0, the last shard N-1.
      {{{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "4"}}, {}, 0, 4, "gitlab CI_NODE_INDEX=1"},
      {{{"CI_NODE_INDEX", "4"}, {"CI_NODE_TOTAL", "4"}}, {}, 3, 4, "gitlab CI_NODE_INDEX=4"},
      {{{"BUILDKITE_PARALLEL_JOB", "0"}, {"BUILDKITE_PARALLEL_JOB_COUNT", "5"}}, {}, 0, 5,
       "buildkite BUILDKITE_PARALLEL_JOB=0"},
      {{{"CIRCLE_NODE_INDEX", "3"}, {"CIRCLE_NODE_TOTAL", "4"}}, {}, 3, 4, "circleci CIRCLE_NODE_INDEX=3"},
      // Slurm: the index is ID - MIN (--array=4-7), divided by the step (--array=0-6:2).
      {{{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "4"}}, {}, 3, 4,
       "slurm SLURM_ARRAY_TASK_ID=7"},
      {{{"SLURM_ARRAY_TASK_ID", "4"},
        {"SLURM_ARRAY_TASK_COUNT", "4"},
        {"SLURM_ARRAY_TASK_MIN", "0"},
        {"SLURM_ARRAY_TASK_STEP", "2"}},
       {}, 2, 4, "slurm SLURM_ARRAY_TASK_ID=4"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}, {}, 1, 2, "slurm SLURM_ARRAY_TASK_ID=1"},
      // Kubernetes gives only the index: the count from --shard-count or OPCONFORM_SHARD_COUNT.
      {{{"JOB_COMPLETION_INDEX", "2"}}, 3, 2, 3, "kubernetes JOB_COMPLETION_INDEX=2"},
      {{{"JOB_COMPLETION_INDEX", "0"}, {"OPCONFORM_SHARD_COUNT", "6"}}, {}, 0, 6, "kubernetes JOB_COMPLETION_INDEX=0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const auto s = from(c.vars, c.shard_count);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->index, c.index);
    EXPECT_EQ(s->count, c.count);
    EXPECT_EQ(s->source, c.source);
  }
  // Every engine of the table is covered above.
  std::set<std::string> covered;
  for (const auto& c : cases) covered.insert(c.source.substr(0, c.source.find(' ')));
  for (const auto& e : shard_engines()) EXPECT_EQ(covered.count(e.name), 1u) << e.name;
}

TEST(ShardEngines, NoEngineOrACountOfOneIsNoShard) {
  EXPECT_FALSE(from({}).has_value());
  EXPECT_FALSE(from({{"CI_NODE_TOTAL", "4"}}).has_value()) << "a count without an index is no shard";
  EXPECT_FALSE(from({{"CIRCLE_NODE_INDEX", "0"}, {"CIRCLE_NODE_TOTAL", "1"}}).has_value());
  EXPECT_FALSE(from({{"GTEST_SHARD_INDEX", ""}, {"GTEST_TOTAL_SHARDS", ""}}).has_value()) << "empty is unset";
  // CircleCI's 0/1 (set on every CircleCI job) neither shards nor conflicts with a real shard.
  const auto s = from({{"CIRCLE_NODE_INDEX", "0"}, {"CIRCLE_NODE_TOTAL", "1"}, {"CI_NODE_INDEX", "2"}, {"CI_NODE_TOTAL", "2"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 1);
}

TEST(ShardEngines, OffByOneAndMalformedValuesAreUsageErrors) {
  const std::vector<Vars> bad = {
      {{"CI_NODE_INDEX", "0"}, {"CI_NODE_TOTAL", "4"}},  // GitLab counts from 1
      {{"CI_NODE_INDEX", "5"}, {"CI_NODE_TOTAL", "4"}},
      {{"BUILDKITE_PARALLEL_JOB", "4"}, {"BUILDKITE_PARALLEL_JOB_COUNT", "4"}},  // Buildkite from 0
      {{"CIRCLE_NODE_INDEX", "-1"}, {"CIRCLE_NODE_TOTAL", "4"}},
      {{"GTEST_SHARD_INDEX", "3"}, {"GTEST_TOTAL_SHARDS", "3"}},
      {{"GTEST_SHARD_INDEX", "one"}, {"GTEST_TOTAL_SHARDS", "3"}},
      {{"GTEST_SHARD_INDEX", "1"}, {"GTEST_TOTAL_SHARDS", "0"}},
      {{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "4"}},  // below MIN
      {{"SLURM_ARRAY_TASK_ID", "8"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "4"}},  // MIN + COUNT
      {{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_STEP", "2"}},  // off step
      {{"SLURM_ARRAY_TASK_ID", "9"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"}},  // --array=1,5,9
      {{"SLURM_ARRAY_TASK_ID", "2147483647"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"SLURM_ARRAY_TASK_MIN", "-2147483648"}},
      {{"CI_NODE_INDEX", "1"}},                 // an index without its count
      {{"JOB_COMPLETION_INDEX", "1"}},          // Kubernetes without a count
      {{"JOB_COMPLETION_INDEX", "3"}, {"OPCONFORM_SHARD_COUNT", "3"}},
  };
  for (const auto& vars : bad) {
    std::string text;
    for (const auto& [k, v] : vars) text += k + "=" + v + " ";
    EXPECT_EQ(error_of(vars), ErrorCode::kInvalidArgument) << text;
  }
  // The message names the variable, so that a CI log says what to fix.
  EXPECT_NE(message_of({{"CI_NODE_INDEX", "0"}, {"CI_NODE_TOTAL", "4"}}).find("CI_NODE_INDEX=0"), std::string::npos);
  EXPECT_NE(message_of({{"JOB_COMPLETION_INDEX", "1"}}).find("--shard-count"), std::string::npos);
}

TEST(ShardEngines, EnginesThatDisagreeAreAUsageErrorNamingBoth) {
  const Vars conflict = {{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "2"}, {"GTEST_SHARD_INDEX", "1"},
                         {"GTEST_TOTAL_SHARDS", "2"}};
  EXPECT_EQ(error_of(conflict), ErrorCode::kInvalidArgument);
  const std::string message = message_of(conflict);
  EXPECT_NE(message.find("GTEST_SHARD_INDEX=1"), std::string::npos) << message;
  EXPECT_NE(message.find("CI_NODE_INDEX=1"), std::string::npos) << message;
  // Another count is a conflict too; so is --shard-count against an engine's own count.
  EXPECT_EQ(error_of({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "4"}, {"BUILDKITE_PARALLEL_JOB", "0"},
                      {"BUILDKITE_PARALLEL_JOB_COUNT", "2"}}),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of({{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "2"}}, 3), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of({}, 3), ErrorCode::kInvalidArgument) << "--shard-count without any index";
  // Two that agree are one shard, and the source names both.
  const auto s = from({{"CI_NODE_INDEX", "2"}, {"CI_NODE_TOTAL", "2"}, {"GTEST_SHARD_INDEX", "1"}, {"GTEST_TOTAL_SHARDS", "2"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->index, 1);
  EXPECT_EQ(s->source, "gtest GTEST_SHARD_INDEX=1, gitlab CI_NODE_INDEX=2");
}

// Sets variables for one test and restores what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const Vars& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) v ? ::setenv(k.c_str(), v->c_str(), 1) : ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(ShardEngines, ShardFlagWinsOverTheEnvironment) {
  // Even over engines that disagree: --shard is what a person asked for.
  ScopedEnv env({{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "2"}, {"GTEST_SHARD_INDEX", "1"}, {"GTEST_TOTAL_SHARDS", "2"}});
  const Shard s = resolve_shard("2/3", std::nullopt);
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.source, "--shard");
  EXPECT_THROW(resolve_shard("", std::nullopt), Error);
  EXPECT_THROW(resolve_shard("2/3", 4), Error) << "--shard-count contradicts --shard";
  EXPECT_EQ(resolve_shard("0/1", std::nullopt).source, "") << "one shard is no shard";
}

class ShardRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("opconform_shard_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  int run(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"run", "--ops", "aten::abs", "--samples", "2", "--jobs", "0", "--checks",
                                     "test_schema", "--report-dir", (dir_ / name).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return opconform_main(args);
  }
  std::string file(const std::string& name, const char* f) {
    std::ifstream in(dir_ / name / f);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  fs::path dir_;
};

TEST_F(ShardRun, TheReportSaysWhichEngineAndShard) {
  {
    ScopedEnv env({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "2"}, {"SLURM_ARRAY_TASK_MIN", "4"}});
    ASSERT_EQ(run("slurm"), 0);
    ASSERT_EQ(run("flag", {"--shard", "0/2"}), 0);
  }
  const reports::Report r = reports::report_from_json(file("slurm", "report.json"));
  EXPECT_EQ(r.info.shard, "1/2");
  EXPECT_EQ(r.info.shard_source, "slurm SLURM_ARRAY_TASK_ID=5");
  EXPECT_NE(file("slurm", "report.md").find("slurm SLURM_ARRAY_TASK_ID=5"), std::string::npos);
  EXPECT_EQ(reports::report_from_json(file("flag", "report.json")).info.shard_source, "--shard");
  // Unsharded: no shard_source in the file (older readers see what they always saw).
  ASSERT_EQ(run("whole"), 0);
  EXPECT_EQ(file("whole", "report.json").find("shard_source"), std::string::npos);
  // The two shards are the whole run.
  EXPECT_EQ(r.results.size() + reports::report_from_json(file("flag", "report.json")).results.size(),
            reports::report_from_json(file("whole", "report.json")).results.size());
}

TEST_F(ShardRun, ConflictingVariablesAreExitStatusTwo) {
  ScopedEnv env({{"BUILDKITE_PARALLEL_JOB", "0"}, {"BUILDKITE_PARALLEL_JOB_COUNT", "2"}, {"CIRCLE_NODE_INDEX", "1"},
                 {"CIRCLE_NODE_TOTAL", "2"}});
  testing::internal::CaptureStderr();
  const int status = run("conflict");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 2);
  EXPECT_NE(err.find("BUILDKITE_PARALLEL_JOB=0"), std::string::npos) << err;
  EXPECT_NE(err.find("CIRCLE_NODE_INDEX=1"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "conflict" / "report.json"));
  EXPECT_EQ(run("flag", {"--shard", "1/2"}), 0) << "--shard settles it";
}

// The plan's cases per shard, and each shard's expected cost.
std::vector<std::vector<PlannedCase>> plan_shards(const Registry& reference, PlanOptions options, int count) {
  std::vector<std::vector<PlannedCase>> shards;
  for (int i = 0; i < count; ++i) {
    options.shard = {i, count, ""};
    shards.push_back(plan_cases(nullptr, reference, options));
  }
  return shards;
}

double max_over_mean(const std::vector<int64_t>& loads) {
  int64_t total = 0;
  for (int64_t l : loads) total += l;
  return static_cast<double>(*std::max_element(loads.begin(), loads.end())) * loads.size() / static_cast<double>(total);
}

TEST(ShardBalance, TheMainJobsShardsAreEqualInExpectedCostAndCoverThePlan) {
  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  const std::vector<PlannedCase> whole = plan_cases(nullptr, reference, PlanOptions{});
  ASSERT_GT(whole.size(), 1000u);
  std::set<int64_t> distinct;
  for (const auto& c : whole) distinct.insert(c.cost_us);
  EXPECT_GE(distinct.size(), 4u) << "the costs tell kinds of case apart (differentiable, float, complex, integral)";
  for (int count : {2, 4, 16, 64}) {
    SCOPED_TRACE(count);
    const auto shards = plan_shards(reference, PlanOptions{}, count);
    std::vector<int64_t> loads;
    std::multiset<std::string> seen;
    for (const auto& shard : shards) {
      int64_t load = 0;
      for (const auto& c : shard) load += c.cost_us, seen.insert(c.op + " " + c.device + " " + c.dtype);
      loads.push_back(load);
    }
    // Greedy LPT is within max(case) of the mean; with 1,800 small cases that is within 1-2%.
    EXPECT_LT(max_over_mean(loads), count <= 16 ? 1.01 : 1.05);
    std::multiset<std::string> all;
    for (const auto& c : whole) all.insert(c.op + " " + c.device + " " + c.dtype);
    EXPECT_EQ(seen, all) << "every case in exactly one shard";
    // A shard keeps the plan's order (the run order of an unsharded run).
    for (const auto& shard : shards) {
      std::vector<size_t> positions;
      for (const auto& c : shard)
        positions.push_back(std::find_if(whole.begin(), whole.end(), [&](const PlannedCase& w) {
                              return w.op == c.op && w.device == c.device && w.dtype == c.dtype;
                            }) - whole.begin());
      EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
    }
  }
}

TEST(ShardBalance, CostsBalanceWhereRoundRobinWouldNot) {
  // Cases of two very different costs alternating in the plan (float32: gradgradcheck 66 ms;
  // int64: 0.2 ms): round-robin over 2 shards puts every float32 case in one shard.
  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  PlanOptions options;
  options.checks = {"gradgradcheck"};
  std::vector<PlannedCase> floats, ints, alternating;
  options.dtypes = {"float32", "int64"};
  for (auto& c : plan_cases(nullptr, reference, options)) (c.dtype == "float32" ? floats : ints).push_back(c);
  for (size_t i = 0; i < std::min(floats.size(), ints.size()); ++i) alternating.push_back(floats[i]), alternating.push_back(ints[i]);
  ASSERT_GT(alternating.size(), 100u);
  std::vector<int64_t> round_robin(2, 0), loads(2, 0);
  for (size_t i = 0; i < alternating.size(); ++i) round_robin[i % 2] += alternating[i].cost_us;
  ASSERT_GT(max_over_mean(round_robin), 1.2) << "the plan is no test of balance";
  const std::vector<int> shard_of = assign_shards(alternating, 2);
  for (size_t i = 0; i < alternating.size(); ++i) loads[shard_of[i]] += alternating[i].cost_us;
  EXPECT_LT(max_over_mean(loads), 1.01);
}

TEST(ShardBalance, EveryShardComputesTheSameAssignment) {
  std::vector<PlannedCase> cases;
  for (int i = 0; i < 50; ++i) cases.push_back({"op" + std::to_string(i), "cpu", "float32", {}, (i * 7919) % 101 + 1});
  const auto a = assign_shards(cases, 7);
  EXPECT_EQ(a, assign_shards(cases, 7));
  std::vector<int64_t> loads(7, 0);
  for (size_t i = 0; i < cases.size(); ++i) loads[a[i]] += cases[i].cost_us;
  EXPECT_LT(max_over_mean(loads), 1.1);
  EXPECT_THROW(assign_shards(cases, 0), Error);
}

}  // namespace
}  // namespace opconform::harness
