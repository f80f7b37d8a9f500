// The plan of a conformance run: which cases (op x device x dtype, each with its checks) run, in
// which order, in this shard. The harness's commands build one from their options.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "opconform/adapters/library_manifest.h"
#include "opconform/core/registry.h"

namespace opconform::harness {

// --shard i/N: this run takes the cases whose index % N == i (0-based i).
struct Shard {
  int index = 0;
  int count = 1;
};
// "2/4" -> {2, 4}; throws opconform::Error for anything else (i must be < N).
Shard parse_shard(std::string_view text);
// The shard from GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS when both are set (nullopt otherwise);
// throws naming the variable when one is malformed.
std::optional<Shard> shard_from_environment();

struct PlanOptions {
  std::string ops = "*";             // a glob over qualified op names
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
};

// Throws opconform::Error naming the first unknown check, device or dtype (or an unusable device).
void validate(const PlanOptions& options);

// The cases for the ops of `library` (or, when null, every op of `reference`), with the dtypes
// the plugin declared or the reference lists (its ops' data), filtered by the options, sharded.
// Validates the options first (validate()).
std::vector<PlannedCase> plan_cases(const adapters::LibraryManifest* library, const Registry& reference,
                                    const PlanOptions& options);

// Every check a run may use, in the order they run.
std::vector<std::string> all_checks(bool against_reference);

}  // namespace opconform::harness
