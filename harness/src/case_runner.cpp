#include "opconform/harness/case_runner.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <map>

#include "opconform/conformance/opcheck.h"
#include "opconform/core/dtype.h"
#include "opconform/harness/worker_pool.h"
#include "opconform/conformance/case_spec.h"

namespace opconform::harness {

// Note [Library text in a repro line]: an op name comes from the library under test, so it may hold
// anything a shell would act on: `;`, `$( )`, a newline that makes one pasted line two commands,
// terminal control bytes. Only letters, digits and `_-.,:/=+@%^` stay bare; anything else is quoted,
// and a string with a control byte is written as $'...' with \n, \t and \xHH escapes (bash, zsh,
// ksh and POSIX.1-2024 shells read it; split_command_line too), so the line stays one line of
// printable text that the shell takes as exactly this word.
std::string quoted(const std::string& s) {
  const auto safe = [](unsigned char c) { return std::isalnum(c) != 0 || std::strchr("_-.,:/=+@%^", c) != nullptr; };
  const auto control = [](unsigned char c) { return c < 0x20 || c == 0x7f; };
  if (!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return c != '\0' && safe(c); })) return s;
  if (std::none_of(s.begin(), s.end(), [&](char c) { return control(c); })) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  }
  std::string out = "$'";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (control(u)) out += ::opconform::detail::concat("\\x", "0123456789abcdef"[u >> 4], "0123456789abcdef"[u & 15]);
    else out += c;
  }
  return out + "'";
}

namespace {

// Note [A crash says its input]: a crash or a hang is reported from the note the worker left
// before the call (the sample's description), since nothing can be asked of the dead worker. A
// description gives sizes, dtypes and layouts; the values of small tensors are often what makes
// a kernel crash (an index out of range, a zero divisor), so they are part of the note.
std::string small_tensor_values(const conformance::Sample& sample, const FunctionSchema& schema) {
  constexpr int64_t kMaxElements = 32;
  std::string out;
  for (size_t i = 0; i < sample.args.size(); ++i) {
    const Tensor* t = sample.args[i].get_if<Tensor>();
    if (t == nullptr || !t->defined() || t->is_fake() || t->numel() > kMaxElements || !t->device().is_cpu()) continue;
    const std::string name = i < schema.arguments.size() ? schema.arguments[i].name : "arg" + std::to_string(i);
    out += "; " + name + " = " + t->to_string();
  }
  return out.empty() ? out : " (values:" + out.substr(1) + ")";
}

}  // namespace

std::string repro_line(const std::string& prefix, const reports::CaseResult& r, uint64_t seed) {
  std::string line = prefix + " --ops " + quoted(r.op) + " --checks " + r.check + " --device " + r.device;
  if (!r.dtype.empty()) line += " --dtype " + r.dtype;
  if (seed != 0) line += " --seed " + std::to_string(seed);
  return line;
}

conformance::GenerateSpec case_generate_spec(const CaseContext& ctx, const PlannedCase& c) {
  conformance::GenerateSpec spec = conformance::case_spec(c.op, *parse_dtype(c.dtype), ctx.samples);
  if (ctx.seed) spec.seed = *ctx.seed;
  if (ctx.large_percent) spec.large_percent = *ctx.large_percent;
  if (ctx.large_max_numel) spec.large_max_numel = *ctx.large_max_numel;
  spec.seed = conformance::resolve_seed(spec);  // OPCONFORM_SEED wins, as in opcheck: the seed repro lines give
  spec.devices = {Device::parse(c.device)};
  return spec;
}

std::vector<reports::CaseResult> run_case(const CaseContext& ctx, const PlannedCase& c,
                                          const std::vector<std::string>& checks,
                                          const std::function<void(const std::string&)>& on_check_start,
                                          const std::function<void(const reports::CaseResult&)>& on_result) {
  const conformance::GenerateSpec spec = case_generate_spec(ctx, c);
  conformance::OpcheckOptions options;
  options.test_utils = checks;
  options.raise_exception = false;  // every result is reported, not thrown
  options.reference = ctx.reference;
  options.definitions = ctx.definitions;
  auto last = std::chrono::steady_clock::now();
  std::map<std::string, double> seconds;
  std::string running;
  options.on_check_start = [&](const std::string& check) {
    const auto now = std::chrono::steady_clock::now();
    running = check, last = now;
    if (on_check_start) on_check_start(check);
  };

  // In a worker, each sample's description is noted as a check starts on it (note_running), so a
  // crash or a hang names it; described once per case, when the samples are generated.
  std::vector<std::string> notes;
  size_t current = 0;
  if (in_worker()) {
    options.on_samples = [&](const std::vector<conformance::Sample>& samples) {
      const auto& schema = ctx.registry.get(c.op).schema();
      notes.clear();
      for (size_t i = 0; i < samples.size(); ++i)
        notes.push_back("sample " + std::to_string(i + 1) + " of " + std::to_string(samples.size()) + ": " +
                        conformance::description_of(samples[i], schema) + small_tensor_values(samples[i], schema));
    };
    options.on_sample = [&](size_t i) {
      if (i == conformance::OpcheckOptions::kShrinking) {
        if (current < notes.size()) note_running("a smaller form of the failing " + notes[current]);
      } else if (i < notes.size()) {
        note_running(notes[current = i]);
      }
    };
  }
  std::vector<reports::CaseResult> out;
  auto result_of = [&](const std::string& check, const conformance::CheckResult& r) {
    reports::CaseResult cr;
    cr.op = c.op, cr.check = check, cr.device = c.device, cr.dtype = c.dtype;
    cr.outcome = r.outcome;
    cr.message = r.message;
    cr.minimal_input = r.minimal_input;
    if (!r.ok()) cr.recorded_cause = r.cause;  // a skip's cause is its outcome's (Note [A result's JSON is small])
    cr.seconds = seconds.count(check) ? seconds[check] : 0;
    if (!r.ok()) {
      cr.repro = repro_line(ctx.repro_prefix, cr, spec.seed);
    }
    return cr;
  };
  std::map<std::string, reports::CaseResult> by_check;
  options.on_check_done = [&](const conformance::CheckResult& r) {
    const auto now = std::chrono::steady_clock::now();
    seconds[r.check] = std::chrono::duration<double>(now - last).count();
    reports::CaseResult cr = result_of(r.check, r);
    if (on_result) on_result(cr);
    by_check[r.check] = std::move(cr);
  };
  try {
    conformance::opcheck(ctx.registry.get(c.op), spec, options, ctx.registry);
  } catch (const std::exception& e) {
    // No sample could be generated, an unknown op: every check not done fails with the reason.
    for (const auto& check : checks) {
      if (by_check.count(check)) continue;
      reports::CaseResult cr =
          result_of(check, {check, conformance::Outcome::failed, "the case could not run: " + std::string(e.what()), "", {}});
      if (on_result) on_result(cr);
      by_check[check] = std::move(cr);
    }
  }
  for (const auto& check : checks)
    if (auto it = by_check.find(check); it != by_check.end()) out.push_back(it->second);
  return out;
}

}  // namespace opconform::harness
