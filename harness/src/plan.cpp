#include "opconform/harness/plan.h"

#include <algorithm>
#include <charconv>
#include <queue>
#include <utility>
#include <cstdlib>

#include "opconform/conformance/check.h"
#include "opconform/core/cuda.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
#include "opconform/harness/name_filter.h"
#include "opconform/reference/op_info.h"

namespace opconform::harness {
namespace {

int parse_int(std::string_view text, const std::string& what) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  OPCONFORM_CHECK(ec == std::errc() && end == text.data() + text.size(), ErrorCode::kInvalidArgument, what, ": '",
                  text, "' is not a number");
  return v;
}

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Note [Shards balanced by cost]: a case's checks cost from 0.1 ms (autocast_consistency on an
// integer op, skipped) to 66 ms (gradgradcheck on a differentiable float op), so shards of equal
// case counts are not of equal time when the plan has runs of similar cases (a --dtype list, a
// library of float-only ops). Each case gets an expected cost from the table below, the mean
// seconds per result of the main job's report.json (`opconform run -j 2`, 27,465 results, 2 cores)
// by check and by kind of case: differentiable (a floating dtype of an op with a backward),
// another floating, complex, integral or bool. Shards are then filled by greedy longest processing
// time: the costliest case first, to the least loaded shard. Every shard plans the whole run and
// computes the same assignment from integer costs (no floating-point sums that could differ).
struct CheckWeight {
  const char* check;
  int differentiable, floating, complex, integral;  // microseconds per result
};
constexpr CheckWeight kCheckWeights[] = {
    {"autocast_consistency", 170, 80, 90, 90},     {"determinism", 1190, 1450, 1280, 1160},
    {"dtype_consistency", 960, 1030, 240, 200},    {"edge_shapes", 1250, 1040, 1220, 1140},
    {"error_inputs", 2740, 2360, 2860, 2290},      {"gradcheck", 20250, 660, 170, 170},
    {"gradgradcheck", 66110, 700, 160, 160},       {"memory_safety", 12350, 9610, 10640, 11470},
    {"stride_invariance", 4890, 5200, 5210, 3980}, {"test_aot_dispatch_dynamic", 38740, 26080, 32530, 17020},
    {"test_autograd_registration", 120, 290, 170, 110}, {"test_faketensor", 780, 540, 950, 550},
    {"test_schema", 980, 1090, 1050, 1010},        {"thread_safety", 7190, 7830, 7890, 7120},
    {"vmap_consistency", 2630, 2500, 2580, 1980},
    // Not in the main job: from `opconform check` of the ATen adapter; device_consistency as a
    // reference_agreement (one call on each device per sample).
    {"reference_agreement", 28530, 28530, 28530, 28530}, {"device_consistency", 28530, 28530, 28530, 28530},
};
constexpr int kUnknownCheckWeight = 5000;  // a check added since: about the mean of the table

int64_t case_cost(const std::vector<std::string>& checks, DType dtype, bool has_backward) {
  int64_t total = 0;
  for (const auto& check : checks) {
    int w = kUnknownCheckWeight;
    for (const CheckWeight& c : kCheckWeights) {
      if (check != c.check) continue;
      w = is_complex(dtype)                  ? c.complex
          : !is_floating(dtype)              ? c.integral
          : has_backward                     ? c.differentiable
                                             : c.floating;
    }
    total += w;
  }
  return total;
}

}  // namespace

Shard parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  OPCONFORM_CHECK(slash != std::string_view::npos, ErrorCode::kInvalidArgument, "--shard '", text,
                  "': expected i/N, e.g. 0/4 (shards are numbered from 0)");
  Shard s{parse_int(text.substr(0, slash), "--shard index"), parse_int(text.substr(slash + 1), "--shard count")};
  OPCONFORM_CHECK(s.count >= 1 && s.index >= 0 && s.index < s.count, ErrorCode::kInvalidArgument, "--shard '", text,
                  "': needs 0 <= i < N");
  return s;
}

// Note [Shard engines]: CI systems and batch schedulers that run N copies of a job each say which
// copy a process is, in variables of their own; a row of shard_engines() says how to read one.
// An engine whose count is 1 is not sharding (CircleCI sets CIRCLE_NODE_TOTAL=1 on every job,
// GitLab CI_NODE_TOTAL=1), so it neither shards nor conflicts. Two engines that give the same shard
// agree (a wrapper that copies one into another); two that differ are a usage error: a silent
// pick would run some cases twice and others never.
const std::vector<ShardEngine>& shard_engines() {
  static const std::vector<ShardEngine> engines = {
      {"gtest", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS", 0, nullptr, nullptr},
      {"gitlab", "CI_NODE_INDEX", "CI_NODE_TOTAL", 1, nullptr, nullptr},
      {"buildkite", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT", 0, nullptr, nullptr},
      {"circleci", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL", 0, nullptr, nullptr},
      // --array=4-7 gives IDs 4..7 (MIN 4); --array=0-6:2 IDs 0,2,4,6 (STEP 2): both are shards 0..3.
      {"slurm", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", 0, "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP"},
      {"kubernetes", "JOB_COMPLETION_INDEX", nullptr, 0, nullptr, nullptr},
  };
  return engines;
}

namespace {

const char* set_or_null(const std::function<const char*(const char*)>& get, const char* name) {
  if (name == nullptr) return nullptr;
  const char* v = get(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// One engine's shard, or nullopt when it is not sharding (Note [Shard engines]).
std::optional<Shard> engine_shard(const ShardEngine& e, const std::function<const char*(const char*)>& get,
                                  std::optional<int> shard_count) {
  const char* index_text = set_or_null(get, e.index_var);
  if (index_text == nullptr) return std::nullopt;
  const std::string what = std::string(e.name) + " " + e.index_var + "=" + index_text;
  int count = 0;
  if (e.count_var != nullptr) {
    const char* count_text = set_or_null(get, e.count_var);
    OPCONFORM_CHECK(count_text != nullptr, ErrorCode::kInvalidArgument, what, " is set but ", e.count_var,
                    " is not: cannot tell how many shards there are");
    count = parse_int(count_text, e.count_var);
  } else if (shard_count) {
    count = *shard_count;
  } else {
    const char* count_text = set_or_null(get, kShardCountVariable);
    OPCONFORM_CHECK(count_text != nullptr, ErrorCode::kInvalidArgument, what,
                    " is set but not the number of shards: give --shard-count N or ", kShardCountVariable, "=N");
    count = parse_int(count_text, kShardCountVariable);
  }
  const char* base_text = set_or_null(get, e.base_var);
  const char* step_text = set_or_null(get, e.step_var);
  // In 64 bits: ID - MIN of two ints can overflow an int.
  const int64_t raw = parse_int(index_text, e.index_var);
  const int64_t base = base_text ? parse_int(base_text, e.base_var) : e.base;
  const int64_t step = step_text ? parse_int(step_text, e.step_var) : 1;
  OPCONFORM_CHECK(count >= 1 && step >= 1 && raw >= base && (raw - base) % step == 0 && (raw - base) / step < count,
                  ErrorCode::kInvalidArgument, what, ": not one of ", count, " shards numbered from ", base,
                  step > 1 ? " in steps of " + std::to_string(step) : std::string(),
                  e.base_var ? " (a job array must be one range, e.g. --array=0-3)" : "");
  if (count == 1) return std::nullopt;
  return Shard{static_cast<int>((raw - base) / step), count, what};
}

}  // namespace

std::optional<Shard> shard_from_variables(const std::function<const char*(const char*)>& get,
                                          std::optional<int> shard_count) {
  std::optional<Shard> found;
  for (const ShardEngine& e : shard_engines()) {
    std::optional<Shard> s = engine_shard(e, get, shard_count);
    if (!s) continue;
    if (!found) {
      found = s;
      continue;
    }
    OPCONFORM_CHECK(s->index == found->index && s->count == found->count, ErrorCode::kInvalidArgument,
                    "the shard variables disagree: ", found->source, " (shard ", found->index, "/", found->count,
                    ") but ", s->source, " (shard ", s->index, "/", s->count,
                    "); unset one, or give --shard i/N, which wins");
    found->source += ", " + s->source;
  }
  OPCONFORM_CHECK(found || !shard_count || *shard_count == 1, ErrorCode::kInvalidArgument, "--shard-count ",
                  *shard_count, " but no shard index is set (JOB_COMPLETION_INDEX, or another engine's)");
  if (found && shard_count) {
    OPCONFORM_CHECK(*shard_count == found->count, ErrorCode::kInvalidArgument, "--shard-count ", *shard_count,
                    " but ", found->source, " is one of ", found->count, " shards");
  }
  return found;
}

std::optional<Shard> shard_from_environment(std::optional<int> shard_count) {
  return shard_from_variables([](const char* name) { return std::getenv(name); }, shard_count);
}

Shard resolve_shard(const std::string& flag, std::optional<int> shard_count) {
  OPCONFORM_CHECK(!shard_count || *shard_count >= 1, ErrorCode::kInvalidArgument, "--shard-count ", *shard_count,
                  ": needs at least 1");
  if (!flag.empty()) {
    Shard s = parse_shard(flag);
    OPCONFORM_CHECK(!shard_count || *shard_count == s.count, ErrorCode::kInvalidArgument, "--shard ", flag,
                    " but --shard-count ", *shard_count);
    if (s.count > 1) s.source = "--shard";
    return s;
  }
  if (auto s = shard_from_environment(shard_count)) return *s;
  return {};
}

std::vector<std::string> all_checks(bool against_reference) {
  std::vector<std::string> out;
  for (auto& name : conformance::check_names())
    if (against_reference || name != "reference_agreement") out.push_back(name);
  // Agreement first: it is what a vendor asks first, and its failures explain the others; only
  // thread_safety goes before it (Note [Concurrent first calls]).
  std::stable_partition(out.begin(), out.end(), [](const std::string& n) { return n == "reference_agreement"; });
  return conformance::in_run_order(std::move(out));
}

void validate(const PlanOptions& options) {
  for (const auto& c : options.checks) conformance::check_named(c);  // throws for an unknown name, listing the known ones
  for (const auto& d : options.devices) {
    OPCONFORM_CHECK(d == "cpu" || d == "cuda", ErrorCode::kInvalidArgument, "--device '", d,
                    "': known devices are cpu and cuda");
    // The reason is asked for here only, on the way out: it initialises CUDA in this process.
    if (d == "cuda" && !cuda::is_available_in_a_child())
      throw Error(ErrorCode::kDevice, "--device cuda: CUDA unavailable: " + cuda::unavailable_reason());
  }
  for (const auto& d : options.dtypes)
    OPCONFORM_CHECK(parse_dtype(d).has_value(), ErrorCode::kInvalidArgument, "--dtype '", d, "' is not a dtype");
}

std::vector<PlannedCase> plan_cases(const adapters::LibraryManifest* library, const Registry& reference,
                                    const PlanOptions& options) {
  validate(options);
  // A list given with --checks runs in run order too: thread_safety first, wherever it was named.
  std::vector<std::string> checks =
      options.checks.empty() ? all_checks(options.against_reference) : conformance::in_run_order(options.checks);
  std::vector<std::string> ops;
  if (library != nullptr) {
    for (const auto& op : library->ops)
      if (!op.schema.empty()) ops.push_back(op.name);  // an op without a schema cannot be called
  } else {
    for (const auto& info : reference::reference_op_infos(reference)) ops.push_back(info.name);
  }
  std::vector<PlannedCase> all;
  const NameFilter filter(options.ops);
  for (const auto& op : ops) {
    if (!filter.matches(op)) continue;
    std::vector<DType> dtypes;
    const adapters::ManifestOp* declared = library ? library->find(op) : nullptr;
    const auto info = reference::reference_op_info(reference, op);
    if (declared && declared->dtypes) {
      dtypes = *declared->dtypes;
    } else if (info) {
      dtypes = info->dtypes;
    } else {
      dtypes = {DType::Float32, DType::Float64};  // an op of the library's own: the generator's default
    }
    const bool has_backward = declared ? declared->backward : info && info->autograd;
    for (const auto& device : options.devices) {
      // device_consistency compares a device's kernel with the CPU's: it belongs to the other
      // device's cases (asked for by name, it runs anyway and says why it has nothing to do).
      std::vector<std::string> device_checks = checks;
      if (device == "cpu" && options.checks.empty()) std::erase(device_checks, std::string("device_consistency"));
      for (DType d : dtypes) {
        const std::string dtype(name(d));
        if (!options.dtypes.empty() && !contains(options.dtypes, dtype)) continue;
        all.push_back({op, device, dtype, device_checks, case_cost(device_checks, d, has_backward)});
      }
    }
  }
  if (options.shard.count <= 1) return all;
  const std::vector<int> shard_of = assign_shards(all, options.shard.count);
  std::vector<PlannedCase> mine;
  for (size_t i = 0; i < all.size(); ++i)
    if (shard_of[i] == options.shard.index) mine.push_back(std::move(all[i]));
  return mine;
}

// Note [Shards balanced by cost].
std::vector<int> assign_shards(const std::vector<PlannedCase>& cases, int count) {
  OPCONFORM_CHECK(count >= 1, ErrorCode::kInvalidArgument, "assign_shards: ", count, " shards");
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Ties in the plan's order, so that equal cases go round-robin as before.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cases[a].cost_us > cases[b].cost_us; });
  // The least loaded shard on top, the lowest index among equals.
  using Load = std::pair<int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int s = 0; s < count; ++s) loads.push({0, s});
  std::vector<int> shard_of(cases.size(), 0);
  for (size_t i : order) {
    auto [load, s] = loads.top();
    loads.pop();
    shard_of[i] = s;
    loads.push({load + std::max<int64_t>(cases[i].cost_us, 1), s});  // a free case still counts
  }
  return shard_of;
}

}  // namespace opconform::harness
