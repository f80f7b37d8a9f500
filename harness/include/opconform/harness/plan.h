// The plan of a conformance run: which cases (op x device x dtype, each with its checks) run, in
// which order, in this shard. The harness's commands build one from their options.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opconform/adapters/library_manifest.h"
#include "opconform/core/registry.h"

namespace opconform::harness {

// --shard i/N: this run takes shard i (0-based) of N, cases balanced by expected cost
// (Note [Shards balanced by cost] in plan.cpp).
struct Shard {
  int index = 0;
  int count = 1;
  // Where it came from, for the report: "--shard", "slurm SLURM_ARRAY_TASK_ID=3"; "" when unsharded.
  std::string source;
};
// "2/4" -> {2, 4}; throws opconform::Error for anything else (i must be < N).
Shard parse_shard(std::string_view text);

// A batch scheduler or CI system that runs N copies of a job and tells each its index through
// environment variables. One row per engine (shard_engines()).
struct ShardEngine {
  const char* name;       // "gitlab"
  const char* index_var;  // "CI_NODE_INDEX"
  const char* count_var;  // "CI_NODE_TOTAL"; nullptr: the count is --shard-count / OPCONFORM_SHARD_COUNT
  int base;               // the first index: 1 for GitLab, 0 for the others
  const char* base_var;   // a variable holding the first index instead (SLURM_ARRAY_TASK_MIN), or nullptr
  const char* step_var;   // a variable holding the step between indices (SLURM_ARRAY_TASK_STEP), or nullptr
};
// GoogleTest, GitLab parallel:, Buildkite, CircleCI, Slurm job arrays, Kubernetes Indexed Jobs.
const std::vector<ShardEngine>& shard_engines();

// The variable that gives the count to engines without one (a Kubernetes Indexed Job).
inline constexpr const char* kShardCountVariable = "OPCONFORM_SHARD_COUNT";

// The shard the engines' variables give, looking them up with `get` (nullptr: unset); nullopt when
// no engine is sharding (its index unset, or a count of 1). `shard_count`: --shard-count, the count
// for engines without one. Throws opconform::Error (kInvalidArgument), naming the variables, for
// a malformed or out-of-range value, a missing count, or two engines that disagree.
std::optional<Shard> shard_from_variables(const std::function<const char*(const char*)>& get,
                                          std::optional<int> shard_count = std::nullopt);
// The same from this process's environment.
std::optional<Shard> shard_from_environment(std::optional<int> shard_count = std::nullopt);
// The run's shard: `flag` (--shard i/N, "" when not given) wins; otherwise the environment's.
// Throws as above, and when --shard-count contradicts --shard.
Shard resolve_shard(const std::string& flag, std::optional<int> shard_count);

struct PlanOptions {
  std::string ops = "*";             // a filter over qualified op names (NameFilter, name_filter.h)
  std::vector<std::string> checks;   // empty: every check (reference_agreement only against a reference)
  std::vector<std::string> devices = {"cpu"};
  std::vector<std::string> dtypes;   // empty: every dtype the op supports
  int samples = 50;
  // The large tier of the samples (GenerateSpec::large_percent, large_max_numel); nullopt: the
  // case spec's sparse default (conformance/case_spec.h).
  std::optional<int> large_percent;
  std::optional<int64_t> large_max_numel;
  std::optional<uint64_t> seed;      // replaces each case's fixed seed
  Shard shard;
  bool against_reference = false;
};

struct PlannedCase {
  std::string op;
  std::string device;
  std::string dtype;
  std::vector<std::string> checks;
  // Expected microseconds of its checks (a weight table measured on the main job): what shards
  // balance. Integers, so that every shard sums them to the same totals.
  int64_t cost_us = 0;
};

// Throws opconform::Error naming the first unknown check, device or dtype (or an unusable device).
void validate(const PlanOptions& options);

// The cases for the ops of `library` (or, when null, every op of `reference`), with the dtypes
// the plugin declared or the reference lists (its ops' data), filtered by the options, sharded
// (the shard's cases in the order of the whole plan).
// Validates the options first (validate()).
std::vector<PlannedCase> plan_cases(const adapters::LibraryManifest* library, const Registry& reference,
                                    const PlanOptions& options);

// Which shard (0-based) each case goes to among `count`: greedy longest-processing-time on
// PlannedCase::cost, the same on every shard that plans the same cases.
std::vector<int> assign_shards(const std::vector<PlannedCase>& cases, int count);

// Every check a run may use, in the order they run.
std::vector<std::string> all_checks(bool against_reference);

}  // namespace opconform::harness
