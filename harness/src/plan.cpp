#include "opconform/harness/plan.h"

#include <fnmatch.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "opconform/conformance/check.h"
#include "opconform/core/cuda.h"
#include "opconform/core/dtype.h"
#include "opconform/core/error.h"
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

// Whether a GPU is usable, asked in a child process: the harness forks its workers later, and a
// process that has initialised CUDA must not fork (CUDA state is not fork-safe).
bool cuda_available_in_a_child() {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(cuda::is_available() ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
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

std::optional<Shard> shard_from_environment() {
  const char* index = std::getenv("GTEST_SHARD_INDEX");
  const char* total = std::getenv("GTEST_TOTAL_SHARDS");
  if (index == nullptr || total == nullptr || *index == '\0' || *total == '\0') return std::nullopt;
  Shard s{parse_int(index, "GTEST_SHARD_INDEX"), parse_int(total, "GTEST_TOTAL_SHARDS")};
  OPCONFORM_CHECK(s.count >= 1 && s.index >= 0 && s.index < s.count, ErrorCode::kInvalidArgument,
                  "GTEST_SHARD_INDEX=", s.index, " GTEST_TOTAL_SHARDS=", s.count, ": needs 0 <= index < total");
  return s;
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
    OPCONFORM_CHECK(d != "cuda" || cuda_available_in_a_child(), ErrorCode::kDevice,
                    "--device cuda: no CUDA device is available on this machine (or this build has no CUDA)");
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
  for (const auto& op : ops) {
    if (fnmatch(options.ops.c_str(), op.c_str(), 0) != 0) continue;
    std::vector<DType> dtypes;
    const adapters::ManifestOp* declared = library ? library->find(op) : nullptr;
    if (declared && declared->dtypes) {
      dtypes = *declared->dtypes;
    } else if (auto info = reference::reference_op_info(reference, op)) {
      dtypes = info->dtypes;
    } else {
      dtypes = {DType::Float32, DType::Float64};  // an op of the library's own: the generator's default
    }
    for (const auto& device : options.devices) {
      // device_consistency compares a device's kernel with the CPU's: it belongs to the other
      // device's cases (asked for by name, it runs anyway and says why it has nothing to do).
      std::vector<std::string> device_checks = checks;
      if (device == "cpu" && options.checks.empty()) std::erase(device_checks, std::string("device_consistency"));
      for (DType d : dtypes) {
        const std::string dtype(name(d));
        if (!options.dtypes.empty() && !contains(options.dtypes, dtype)) continue;
        all.push_back({op, device, dtype, device_checks});
      }
    }
  }
  std::vector<PlannedCase> mine;
  for (size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % static_cast<size_t>(options.shard.count)) == options.shard.index) mine.push_back(all[i]);
  return mine;
}

}  // namespace opconform::harness
