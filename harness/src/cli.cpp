#include "opconform/harness/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "opconform/conformance/check.h"
#include "opconform/core/error.h"
#include "opconform/harness/conformance_run.h"
#include "opconform/harness/library_probe.h"
#include "opconform/harness/name_filter.h"
#include "opconform/conformance/case_spec.h"
#include "opconform/reference/coverage.h"
#include "opconform/reference/op_info.h"
#include "opconform/reference/reference.h"
#include "opconform/reports/console.h"
#include "opconform/reports/diff_merge.h"
#include "opconform/reports/report_files.h"
#include "opconform/reports/writers.h"

namespace opconform::harness {
namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The checks a --checks filter (name_filter.h) selects, in the order named; empty for "" (every check,
// plan.h). A name that is no check, a glob that matches none, or reference_agreement named without
// a reference is a usage error; a glob skips reference_agreement then, as the default does.
std::vector<std::string> select_checks(const std::string& text, bool against_reference) {
  if (text.empty()) return {};
  const NameFilter filter(text);
  for (const auto& p : filter.positive()) {
    if (!is_glob(p)) conformance::check_named(p);  // throws "unknown check 'x' (known: ...)"
    OPCONFORM_CHECK(p != "reference_agreement" || against_reference, ErrorCode::kInvalidArgument,
                    "--checks reference_agreement needs a reference to compare with: opconform check --library ... "
                    "--against reference");
  }
  const std::vector<std::string> known = conformance::check_names();
  for (const auto& p : filter.unmatched(known))
    throw Error(ErrorCode::kInvalidArgument, "--checks '" + p + "' matches no check (opconform list --checks lists them)");
  // In the order the patterns name them (as --checks a,b always ran), each once.
  std::vector<std::string> selected;
  for (const auto& p : filter.positive())
    for (const auto& c : all_checks(against_reference))
      if (NameFilter(p).matches(c) && filter.matches(c) && std::find(selected.begin(), selected.end(), c) == selected.end())
        selected.push_back(c);
  OPCONFORM_CHECK(!selected.empty(), ErrorCode::kInvalidArgument, "--checks '", text, "' leaves no check to run");
  return selected;
}

std::string join(const std::vector<std::string>& args) {
  std::string out = "opconform";
  for (const auto& a : args) out += " " + a;
  return out;
}

// The largest report.json read (report diff/merge): the main job's is about 12 MB.
constexpr std::uintmax_t kMaxReportBytes = std::uintmax_t{1} << 30;

// A report file: a regular file (not /dev/zero, a FIFO or a directory) of at most kMaxReportBytes.
std::string read_file(const std::string& path) {
  std::error_code ec;
  OPCONFORM_CHECK(std::filesystem::is_regular_file(path, ec), ErrorCode::kInvalidArgument, "cannot read '", path,
                  "': not a regular file");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  OPCONFORM_CHECK(!ec && size <= kMaxReportBytes, ErrorCode::kInvalidArgument, "cannot read '", path, "': ",
                  ec ? ec.message() : "larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInvalidArgument, "cannot read '" + path + "'");
  return {std::istreambuf_iterator<char>(in), {}};
}

// Seconds for --timeout: a finite number in (0, one day]; CLI::PositiveNumber lets NaN through
// (NaN <= 0 is false) and 1e10 s overflowed the millisecond deadline.
const CLI::Validator kSeconds(
    [](const std::string& text) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(v > 0 && v <= 86400)) return "must be seconds in (0, 86400]: " + text;
      return "";
    },
    "SECONDS");

reports::Report read_report(const std::string& path) {
  try {
    return reports::report_from_json(read_file(path));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, "report '" + path + "': " + e.what());
  }
}

// How long `list` and `doctor` wait for a library to load (in a child: library_probe.h).
constexpr double kProbeTimeoutS = 60;

// --json, --junit, ...: one option per report format (Note [The report formats are one list]).
// CLI11 needs a place per option before parsing; an option given sets paths[flag].
void add_report_path_options(CLI::App& app, std::map<std::string, std::string, std::less<>>& paths,
                             const std::string& help_suffix) {
  for (const reports::ReportFormat& format : reports::report_formats()) {
    const std::string flag(format.flag);
    app.add_option_function<std::string>(
        "--" + flag, [&paths, flag](const std::string& path) { paths[flag] = path; },
        std::string(format.description) + help_suffix);
  }
}

// The flags `run`, `check` and `repro` share.
struct RunFlags {
  RunRequest request;
  std::string ops = "*", checks, devices = "cpu", dtypes, shard, fail_on, expect;
  std::optional<uint64_t> seed;
  int jobs = -1;
  std::optional<int64_t> memory_limit_mib;
  std::optional<int> shard_count;
  bool no_sandbox = false;
  std::string color = "auto";

  void add_to(CLI::App& app) {
    app.add_option("--ops", ops,
                   "Operators to check, as gtest's --gtest_filter: globs over qualified names separated by ':', then "
                   "'-' and globs to leave out, e.g. 'aten::add*:aten::mul*-aten::add.out'; a glob that matches no "
                   "operator is a usage error")
        ->capture_default_str();
    app.add_option("--checks", checks,
                   "Checks, as --ops: names or globs separated by ':' or ',', then '-' and those to leave out, e.g. "
                   "'*-gradgradcheck' (default: every check, reference_agreement only against the reference; see "
                   "`opconform list --checks`)");
    app.add_option("--device", devices, "Comma-separated devices: cpu, cuda")->capture_default_str();
    app.add_option("--dtype", dtypes, "Comma-separated dtypes (default: every dtype the op supports)");
    app.add_option("--samples", request.plan.samples, "Generated samples per case and check")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("--large-percent", request.plan.large_percent,
                   "Percent of samples in the large tier (a size around a power of two or a tile width; default " +
                       std::to_string(conformance::kCaseLargePercent) + "); 0 turns it off")
        ->check(CLI::Range(0, 100));
    app.add_option("--large-max-numel", request.plan.large_max_numel,
                   "Most elements of a large-tier tensor (default " + std::to_string(conformance::kCaseLargeMaxNumel) +
                       ")")
        ->check(CLI::PositiveNumber);
    app.add_option("--seed", seed, "Replace every case's fixed seed (replays a reported failure)");
    app.add_option("--jobs,-j", jobs,
                   "Worker processes (default: one per CPU); 0 runs in this process, without crash isolation. Each worker gets OMP_NUM_THREADS=1 unless it is set")
        ->check(CLI::Range(0, 1024));
    app.add_option("--shard", shard,
                   "Run shard i of N ('i/N', from 0); when unset, read from the engine's variables: GoogleTest, GitLab "
                   "parallel, Buildkite, CircleCI, Slurm job arrays, Kubernetes Indexed Jobs (docs/distributed.md)");
    app.add_option("--shard-count", shard_count,
                   "The number of shards, for engines that give only an index (Kubernetes JOB_COMPLETION_INDEX; "
                   "or OPCONFORM_SHARD_COUNT)")
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--timeout", request.timeout_s, "Seconds a check may run in a worker before it is timed_out")
        ->capture_default_str()
        ->check(kSeconds);
    app.add_option("--device-jobs", request.device_jobs,
                   "Workers that may run cases on a GPU at the same time (0: as many as -j); the other workers run "
                   "the CPU cases meanwhile. Worker processes on one GPU take turns in its time slicing: on an H200, "
                   "8 workers checked a quarter of what 1 did (README, CUDA)")
        ->check(CLI::Range(0, 1024))
        ->capture_default_str();
    app.add_option("--pass-env", request.sandbox.pass_env,
                   "An environment variable the workers keep (repeatable); they keep only PATH, HOME, locale, temp and "
                   "library paths, CUDA_*, OPCONFORM_* and sanitizer options otherwise");
    app.add_option("--memory-limit", memory_limit_mib,
                   "MiB of address space a worker may use (default: half the machine's memory; 0: no limit; "
                   "off by default with --device cuda, and always in an AddressSanitizer build, which reserve address space)")
        ->check(CLI::Range(0, 1 << 30));
    app.add_flag("--no-sandbox", no_sandbox,
                 "Run workers in their own process group only, without the sandbox's other layers (to debug a "
                 "kernel, or to measure what the sandbox costs)");
    app.add_flag("--keep-going-after-hang", request.keep_going_after_hang,
                 "After a check timed out, run the case's remaining checks too (default: skipped, saying why)");
    app.add_option("--report-dir", request.report_dir,
                   "Where report.json, junit.xml, report.md and report.html go")
        ->capture_default_str();
    add_report_path_options(app, request.report_paths, " path (\"\" to skip)");
    app.add_flag("--verbose,-v", request.verbose, "Print every result in full (message, minimal input, repro line)");
    app.add_flag("--quiet,-q", request.quiet, "No header or progress: only the results that fail the run, the summary and the verdict");
    app.add_option("--color", color, "Colour on the console: auto (a terminal or FORCE_COLOR, never with NO_COLOR), always, never")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    app.add_flag("--list-cases", request.list_cases,
                 "Print the cases that would run (op, device, dtype, checks) and their counts, run nothing, write no report");
    app.add_option("--fail-on", fail_on,
                   "Comma-separated outcomes that make the exit status 1, and 'untested' for cases on which every "
                   "check was skipped, unsupported or mistrusted (default: failed,crashed,timed_out,untested; add unsupported "
                   "to fail on ops without a backward; add 'stale' to fail on --expect entries that matched nothing)");
    app.add_option("--expect", expect,
                   "An expectations file (docs/expectations.md): known findings, each with a reason, that do not fail "
                   "the run; an entry that matches nothing is reported stale, one past its 'until' date fails the run. "
                   "`opconform report expect report.json` writes one to start from");
  }

  // RLIMIT_AS for workers: --memory-limit, else half the machine's memory, except where address
  // space is reserved far beyond use (AddressSanitizer's shadow, the CUDA runtime).
  std::optional<uint64_t> memory_limit(const std::vector<std::string>& devices) const {
#if defined(__SANITIZE_ADDRESS__)
    return std::nullopt;  // the shadow memory needs terabytes of address space: any limit kills the worker
#else
    if (memory_limit_mib) return *memory_limit_mib == 0 ? std::nullopt : std::optional<uint64_t>(uint64_t(*memory_limit_mib) << 20);
    for (const auto& d : devices)
      if (d == "cuda") return std::nullopt;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return std::nullopt;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
#endif
  }

  // Fills the request from the parsed flags; throws opconform::Error for bad values.
  RunRequest finish(const std::vector<std::string>& args) {
    RunRequest r = request;
    r.plan.ops = ops;
    // --checks needs to know whether a reference is compared with: resolved by the caller (select_checks).
    r.plan.devices = split_list(devices);
    r.plan.dtypes = split_list(dtypes);
    r.plan.seed = seed;
    r.plan.shard = resolve_shard(shard, shard_count);  // --shard wins over the engines' variables
    r.jobs = jobs >= 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    r.sandbox.memory_limit = memory_limit(r.plan.devices);
    r.sandbox.enabled = !no_sandbox;
    if (!fail_on.empty()) r.fail_on = reports::parse_fail_policy(fail_on);
    if (!expect.empty()) {  // read now: a malformed file is a usage error before anything runs
      r.expectations = reports::read_expectations(expect);
      r.expectations_file = expect;
    }
    r.command = join(args);
    if (color != "auto") r.color = color == "always";
    if (r.list_cases) r.write_reports = false;
    return r;
  }
};

// 1 when a result has an outcome of --fail-on, or the library could not be loaded at all
// (whatever --fail-on says); 2 when the filters matched nothing (a typo must not pass CI).
int exit_status(const RunOutcome& run, const RunRequest& request) {
  if (run.stop_signal != 0) return 128 + run.stop_signal;  // the shell's convention for a signal
  for (const auto& p : run.unmatched_ops)
    std::cerr << "opconform: --ops '" << p << "' matches no operator" << (request.library.empty() ? "" : " of the library")
              << " (opconform list" << (request.library.empty() ? "" : " --library ...") << " shows them)\n";
  if (!run.unmatched_ops.empty()) return 2;
  if (run.load_failed || reports::fails(run.report)) return 1;
  if (run.planned_cases == 0) {
    std::cerr << "opconform: no case matches --ops '" << request.plan.ops << "'"
              << (request.plan.dtypes.empty() ? "" : ", --dtype") << (request.plan.shard.count > 1 ? ", --shard" : "")
              << " (opconform list shows the operators)\n";
    return 2;
  }
  return 0;
}

adapters::PluginOptions parse_plugin_options(const std::vector<std::string>& texts) {
  adapters::PluginOptions out;
  for (const auto& t : texts) out.push_back(adapters::parse_plugin_option(t));
  return out;
}

// One operator as `list` shows it, with or without --library (one format for both).
struct ListedOp {
  std::string name, schema;
  std::vector<std::string> kernels;                 // cpu, cuda, fake, autograd
  std::optional<std::vector<std::string>> dtypes;   // nullopt: the reference's (a plugin declared none)
  std::vector<std::string> declared;                // what a plugin declared beyond kernels
};

struct Listing {
  std::string name, version, origin;
  std::vector<ListedOp> ops;
  adapters::LibraryManifest manifest;  // options and problems (empty for the reference)
};

std::vector<std::string> kernel_names(bool cpu, bool cuda, bool fake, bool autograd) {
  std::vector<std::string> out;
  for (auto [has, name] : {std::pair{cpu, "cpu"}, {cuda, "cuda"}, {fake, "fake"}, {autograd, "autograd"}})
    if (has) out.push_back(name);
  return out;
}

std::vector<std::string> dtype_names(const std::vector<DType>& dtypes) {
  std::vector<std::string> out;
  for (DType t : dtypes) out.emplace_back(name(t));
  return out;
}

Listing reference_listing(const Registry& reference, const NameFilter& ops) {
  Listing l{"reference", OPCONFORM_VERSION, "bundled", {}, {}};
  for (const auto& info : reference::reference_op_infos(reference))
    if (ops.matches(info.name))
      l.ops.push_back({info.name, info.schema, kernel_names(info.cpu, info.cuda, info.fake, info.autograd),
                       dtype_names(info.dtypes), {}});
  return l;
}

Listing library_listing(adapters::LibraryManifest lib, const NameFilter& ops) {
  Listing l{lib.name, lib.version, lib.origin, {}, {}};
  for (const auto& op : lib.ops) {
    if (!ops.matches(op.name)) continue;
    ListedOp row{op.name, op.schema, kernel_names(op.cpu, op.cuda, op.fake, op.backward), std::nullopt, {}};
    if (op.dtypes) row.dtypes = dtype_names(*op.dtypes);
    if (op.declared.reference_fake) row.declared.push_back("fake:reference");
    if (op.declared.sample_builder) row.declared.push_back("samples:plugin");
    if (op.declared.constraints) row.declared.push_back("constraints:plugin");
    l.ops.push_back(std::move(row));
  }
  l.manifest = std::move(lib);
  return l;
}

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

void print_listing(const Listing& l) {
  using reports::console_text;
  std::cout << console_text(l.name) << " " << console_text(l.version) << " (" << console_text(l.origin, true, 4096)
            << "): " << l.ops.size() << " operators\n";
  for (const auto& op : l.ops) {
    std::string declared;
    for (const auto& d : op.declared) declared += "  " + d;
    std::cout << console_text(op.name) << "  [" << comma_list(op.kernels) << "]  "
              << (op.dtypes ? comma_list(*op.dtypes) : "(reference dtypes)") << declared << "  "
              << console_text(op.schema.empty() ? "(no schema)" : op.schema, true, 4096) << "\n";
  }
  for (const auto& o : l.manifest.option_specs) {
    std::cout << "option: --plugin-option " << console_text(o.name) << "=..." << (o.required ? " (required)" : "")
              << (o.repeatable ? " (repeatable)" : "")
              << (o.default_value.empty() ? "" : " (default " + console_text(o.default_value) + ")") << "  "
              << console_text(o.help, false) << "\n";
  }
  for (const auto& p : l.manifest.problems)
    std::cout << "problem: " << console_text(p.op) << ": " << console_text(p.message, false) << "\n";
}

// --json: the same as one object, strings whole (JSON escapes them), for scripts.
void print_listing_json(const Listing& l) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const auto& op : l.ops) {
    ops.push_back({{"name", op.name}, {"schema", op.schema}, {"kernels", op.kernels},
                   {"dtypes", op.dtypes ? nlohmann::ordered_json(*op.dtypes) : nlohmann::ordered_json(nullptr)},
                   {"declared", op.declared}});
  }
  nlohmann::ordered_json options = nlohmann::ordered_json::array(), problems = nlohmann::ordered_json::array();
  for (const auto& o : l.manifest.option_specs)
    options.push_back({{"name", o.name}, {"required", o.required}, {"repeatable", o.repeatable},
                       {"default", o.default_value}, {"help", o.help}});
  for (const auto& p : l.manifest.problems) problems.push_back({{"op", p.op}, {"message", p.message}});
  const nlohmann::ordered_json doc = {{"library", {{"name", l.name}, {"version", l.version}, {"origin", l.origin}}},
                                      {"ops", std::move(ops)}, {"options", std::move(options)},
                                      {"problems", std::move(problems)}};
  std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

struct ListFlags {
  std::string library;
  adapters::PluginOptions plugin_options;
  bool checks = false, names = false, json = false;
  std::string markdown, ops = "*";
};

// `names` prints bare names, one a line, for scripts (opconform_add_conformance_tests reads them):
// the operators matching `ops`; `json` the whole listing as JSON.
int list_command(const ListFlags& flags) {
  if (flags.checks) {
    for (const auto& c : all_checks(true)) std::cout << c << "\n";
    return 0;
  }
  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  if (!flags.markdown.empty()) {
    const auto infos = reference::reference_op_infos(reference);
    reports::write_atomically(flags.markdown, reference::format_coverage_markdown(reference::core_aten_opset(), infos));
    std::cout << "wrote " << flags.markdown << " (" << infos.size() << " reference operators)\n";
    return 0;
  }
  const NameFilter ops(flags.ops);
  Listing listing;
  if (flags.library.empty()) {
    listing = reference_listing(reference, ops);
  } else {
    ProbeResult probe = probe_library(flags.library, reference, kProbeTimeoutS, {}, flags.plugin_options);
    if (probe.failure) {
      std::cerr << "opconform: " << reports::console_text(probe.failure->message, false) << "\n";
      return 3;
    }
    listing = library_listing(std::move(*probe.manifest), ops);
  }
  if (flags.names) {
    for (const auto& op : listing.ops) std::cout << reports::console_text(op.name, true, 4096) << "\n";
  } else if (flags.json) {
    print_listing_json(listing);
  } else {
    print_listing(listing);
  }
  return 0;
}

// Registrations that point nowhere and ops missing the parts checks need. Exit 1 when something
// is broken (a dangling implementation, a load problem, a library that does not load); missing
// parts are reported, not fatal. Notes are only what can be fixed: a missing autograd formula is
// noted where the reference differentiates the op (the reference's own ops without a formula are
// not differentiable: comparisons, integer and out= ops, factories), or where opconform cannot
// tell (a library's own op).
int doctor_command(const std::string& library, const adapters::PluginOptions& plugin_options) {
  Registry reference;
  auto registration = reference::register_reference_ops(reference);
  int broken = 0, notes = 0;
  if (library.empty()) {
    for (const auto& op : reference.dangling_impls()) {
      std::cout << "broken: '" << op << "' has kernels but no definition (a dangling implementation)\n";
      ++broken;
    }
    for (const auto& info : reference::reference_op_infos(reference))
      if (!info.fake) std::cout << "note: '" << info.name << "' has no fake kernel\n", ++notes;
    std::cout << "opconform doctor: " << broken << " broken, " << notes << " notes\n";
    return broken == 0 ? 0 : 1;
  }
  const ProbeResult probe = probe_library(library, reference, kProbeTimeoutS, {}, plugin_options);
  if (probe.failure) {
    std::cout << "broken: " << reports::console_text(probe.failure->message, false) << "\n";
    std::cout << "opconform doctor: 1 broken, 0 notes\n";
    return 1;
  }
  const adapters::LibraryManifest& lib = *probe.manifest;
  for (const auto& op : lib.dangling) {
    std::cout << "broken: '" << reports::console_text(op) << "' has kernels but no definition (a dangling implementation)\n";
    ++broken;
  }
  for (const auto& p : lib.problems) {
    std::cout << "broken: '" << reports::console_text(p.op) << "': " << reports::console_text(p.message, false) << "\n";
    ++broken;
  }
  for (const auto& op : lib.ops) {
    const std::string name = reports::console_text(op.name);
    if (!op.cpu && !op.cuda) std::cout << "note: '" << name << "' has no real kernel (cpu or cuda)\n", ++notes;
    if (!op.fake) {
      std::cout << "note: '" << name << "' has no fake kernel: test_faketensor and graph capture cannot use it\n";
      ++notes;
    }
    if (op.backward) continue;
    const auto info = reference::reference_op_info(reference, op.name);
    if (info && info->autograd) {
      std::cout << "note: '" << name << "' has no autograd formula: the reference differentiates it, so gradients "
                << "through it fail (the gradient checks say unsupported)\n";
      ++notes;
    } else if (!info) {
      std::cout << "note: '" << name << "' has no autograd formula: if it is differentiable, gradients through it fail\n";
      ++notes;
    }
  }
  std::cout << "opconform doctor: " << broken << " broken, " << notes << " notes\n";
  return broken == 0 ? 0 : 1;
}

int report_diff_command(const std::string& before, const std::string& after, const std::string& markdown) {
  const reports::ReportDiff d = reports::diff(read_report(before), read_report(after));
  const std::string text = reports::format_diff(d);
  if (!markdown.empty()) reports::write_atomically(markdown, text);
  std::cout << text;
  // Results that vanished (a library that no longer loads, an op dropped) fail it too.
  return d.new_findings.empty() && d.regressions.empty() && d.removed_ops.empty() ? 0 : 1;
}

int report_merge_command(const std::vector<std::string>& inputs, const RunRequest& outputs) {
  std::vector<reports::Report> shards;
  for (const auto& path : inputs) shards.push_back(read_report(path));
  const reports::Report merged = reports::merge(shards);
  for (const auto& path : reports::ReportFiles(report_paths(outputs)).write(merged))
    std::cerr << "opconform: wrote " << path << "\n";
  std::cout << "opconform report merge: " << shards.size() << " reports, " << merged.results.size() << " results\n";
  return reports::fails(merged) ? 1 : 0;  // the shards' own --fail-on
}

// `opconform report diff|expect|findings|merge`: the commands on JSON reports.
struct ReportCommands {
  std::string diff_before, diff_after, diff_markdown, expect_input, findings_input;
  std::vector<std::string> merge_inputs;
  RunRequest merge_outputs;
  CLI::App *diff = nullptr, *expect = nullptr, *findings = nullptr, *merge = nullptr;

  void add_to(CLI::App& app) {
    auto* report = app.add_subcommand("report", "Compare or join JSON reports, list their findings, or start an expectations file from one");
    report->require_subcommand(1);
    diff = report->add_subcommand("diff", "New findings (by cause), findings gone, regressions, fixes and new ops between two JSON reports (exit 1 on a new finding or a regression)");
    diff->add_option("before", diff_before, "The older report.json")->required()->check(CLI::ExistingFile);
    diff->add_option("after", diff_after, "The newer report.json")->required()->check(CLI::ExistingFile);
    diff->add_option("--markdown", diff_markdown, "Also write the diff as Markdown to this path");
    expect = report->add_subcommand(
        "expect", "Print an expectations file (for --expect) with one entry per finding of a JSON report, reasons to fill in");
    expect->add_option("report", expect_input, "The report.json")->required()->check(CLI::ExistingFile);
    findings = report->add_subcommand(
        "findings", "Print a JSON report's findings and unsupported causes as Markdown tables, one row per cause");
    findings->add_option("report", findings_input, "The report.json")->required()->check(CLI::ExistingFile);
    merge = report->add_subcommand("merge", "Join shard reports into one (all four formats)");
    merge->add_option("reports", merge_inputs, "The shards' report.json files")->required()->check(CLI::ExistingFile);
    merge->add_option("--report-dir", merge_outputs.report_dir, "Where the merged reports go")->capture_default_str();
    add_report_path_options(*merge, merge_outputs.report_paths, " path of the merged report");
  }
  bool chosen() const { return *diff || *expect || *findings || *merge; }
  int run() const {
    if (*diff) return report_diff_command(diff_before, diff_after, diff_markdown);
    if (*findings) {
      std::cout << reports::findings_tables_markdown(read_report(findings_input));
      return 0;
    }
    if (*expect) {
      std::cout << reports::expectations_for(read_report(expect_input));
      return 0;
    }
    return report_merge_command(merge_inputs, merge_outputs);
  }
};

}  // namespace

namespace {
// The word of a $'...' string starting at `from` (after $'), appended to `word`; returns the index
// of the closing quote. The escapes quoted() writes: \\ \' \n \t \xHH (and \r, \").
size_t ansi_c_quoted(const std::string& line, size_t from, std::string& word) {
  for (size_t j = from; j < line.size(); ++j) {
    if (line[j] == '\'') return j;
    if (line[j] != '\\' || j + 1 >= line.size()) {
      word += line[j];
      continue;
    }
    const char e = line[++j];
    if (e == 'n') word += '\n';
    else if (e == 't') word += '\t';
    else if (e == 'r') word += '\r';
    else if (e == 'x' && j + 2 < line.size() && std::isxdigit(static_cast<unsigned char>(line[j + 1])) != 0 &&
             std::isxdigit(static_cast<unsigned char>(line[j + 2])) != 0) {
      word += static_cast<char>(std::stoi(line.substr(j + 1, 2), nullptr, 16));
      j += 2;
    } else {
      word += e;  // \\, \', \"
    }
  }
  throw Error(ErrorCode::kInvalidArgument, "unbalanced $' in: " + line);
}
}  // namespace

std::vector<std::string> split_command_line(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '$' && i + 1 < line.size() && line[i + 1] == '\'') {  // $'...': Note [Library text in a repro line]
      i = ansi_c_quoted(line, i + 2, word);
      in_word = true;
    } else if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) throw Error(ErrorCode::kInvalidArgument, "unbalanced ' in: " + line);
      word += line.substr(i + 1, end - i - 1), in_word = true, i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) word += line[j] == '\\' && j + 1 < line.size() ? line[++j] : line[j];
      if (j >= line.size()) throw Error(ErrorCode::kInvalidArgument, "unbalanced \" in: " + line);
      in_word = true, i = j;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i], in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(word), word.clear(), in_word = false;
    } else {
      word += c, in_word = true;
    }
  }
  if (in_word) out.push_back(word);
  return out;
}

std::string repro_line_as_printed(std::string_view text) {
  // Copied from the console ("repro: ..."), the Markdown report ("Repro: `...`") or JUnit.
  const auto trim = [&] {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) text.remove_suffix(1);
  };
  trim();
  for (std::string_view prefix : {"repro:", "Repro:"})
    if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
  trim();
  while (text.size() >= 2 && text.front() == '`' && text.back() == '`') text = text.substr(1, text.size() - 2);
  trim();
  return std::string(text);
}

// The help's footer: what the exit status means and what the environment changes. The shard
// variables come from the engines' table (plan.h), so the help cannot fall behind it.
std::string help_footer() {
  std::string out = R"(Exit status:
  0  the run passed (nothing --fail-on names), or the command did what it was asked
  1  the verdict: a result --fail-on names (default failed, crashed, timed_out, untested) that no
     --expect entry covers, an --expect entry past its date (or a stale one, with --fail-on stale),
     a library that does not load, broken registrations (doctor), a new finding or a regression
     (report diff)
  2  a usage error: an unknown flag or value, a --ops or --checks pattern that matches nothing, a
     malformed --expect file
  3  an error that stopped the command before it could report (a file it cannot read or write)
  128+N  stopped by signal N (SIGINT: 130, SIGTERM: 143); the partial report is still written
Environment:
  NO_COLOR        no colour on the console (no-color.org); wins over FORCE_COLOR
  FORCE_COLOR     colour also off a terminal (force-color.org); "0" is off; --color overrides both
  OPCONFORM_SEED  replaces every case's seed, as --seed does (repro lines may carry it)
  OPCONFORM_ZYGOTE=0  a worker that replaces a crashed one loads the library itself, instead of
                  being forked from a process that loaded it once (the default, CPU cases only)
  OPCONFORM_THREAD_SAFETY_THREADS  threads thread_safety calls an op from at once (2 to 64; default:
                  the CPUs the worker may run on, 2 to 4)
  Shards, when --shard is not given (index and count):
)";
  for (const ShardEngine& e : shard_engines()) {
    out += "    " + std::string(e.name) + ": " + e.index_var + "/" + (e.count_var ? e.count_var : kShardCountVariable);
    if (e.base != 0) out += " (from " + std::to_string(e.base) + ")";
    out += "\n";
  }
  return out + "    " + kShardCountVariable + " (or --shard-count) gives the count to an engine without one\n" + R"(Workers keep only PATH, HOME, locale, temp and library paths, CUDA_*, OPCONFORM_* and sanitizer
options of the environment (--pass-env NAME keeps another).)";
}

int opconform_main(const std::vector<std::string>& args) {
  CLI::App app{
      "opconform: conformance checks for operator libraries against PyTorch's operator semantics.\n"
      "Every operator runs through opcheck's checks and opconform's own properties on generated samples;\n"
      "libraries loaded with --library run in worker processes, so a crash or a hang is a result, not the end.",
      "opconform"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");
  app.set_version_flag("--version", std::string("opconform ") + OPCONFORM_VERSION, "Print opconform's version and exit");
  app.footer(help_footer());

  RunFlags run_flags, check_flags, repro_flags;
  auto* run = app.add_subcommand("run", "The main job: the bundled reference checked by every check, report in ./opconform-report/");
  run_flags.add_to(*run);

  auto* check = app.add_subcommand("check", "Check an operator library (a plugin, opconform/plugin.h) against the reference");
  std::string against = "reference";
  check->add_option("--library", check_flags.request.library, "The plugin's shared library")->required();
  check->add_option("--against", against, "reference (compare every op with the reference) or none")
      ->check(CLI::IsMember({"reference", "none"}))
      ->capture_default_str();
  check_flags.add_to(*check);
  std::vector<std::string> check_plugin_options, list_plugin_options, doctor_plugin_options;
  const char* plugin_option_help = "NAME=VALUE passed to the plugin (repeatable; `opconform list --library X` lists what it takes)";
  check->add_option("--plugin-option", check_plugin_options, plugin_option_help);

  ListFlags list_flags;
  auto* list = app.add_subcommand("list", "List the reference's operators, a library's operators (--library), or the checks");
  list->add_option("--library", list_flags.library, "A plugin to list instead of the reference");
  list->add_option("--plugin-option", list_plugin_options, plugin_option_help);
  list->add_flag("--checks", list_flags.checks, "List the checks instead");
  list->add_option("--markdown", list_flags.markdown, "Write the Core ATen coverage page of the reference (docs/reference.md)");
  list->add_flag("--names", list_flags.names, "Operator names only, one a line (for scripts)");
  list->add_flag("--json", list_flags.json, "The listing as JSON (library, ops with kernels and dtypes, options, problems)");
  list->add_option("--ops", list_flags.ops, "Only the operators this filter selects, as run --ops: 'aten::add*:aten::mul*-aten::add.out'")
      ->capture_default_str();

  std::string doctor_library;
  auto* doctor = app.add_subcommand("doctor", "Find dangling implementations and ops without fake kernels or autograd formulas");
  doctor->add_option("--library", doctor_library, "A plugin to examine instead of the reference");
  doctor->add_option("--plugin-option", doctor_plugin_options, plugin_option_help);

  std::string repro_line;
  auto* repro = app.add_subcommand("repro", "Replay one result from a report's repro line in a worker, verbosely (add --jobs 0 to the line to run it in this process)");
  repro->add_option("line", repro_line, "The repro line, e.g. \"opconform check --library x.so --ops aten::neg ...\"")
      ->required();

  ReportCommands report_commands;
  report_commands.add_to(app);

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    const int status = app.exit(e, out, err);
    std::cout << out.str();
    std::cerr << err.str();
    return status == 0 ? 0 : 2;
  }

  // Values the parser cannot judge (shards, check and dtype names): a usage error too.
  RunRequest request;
  if (*run || *check) {
    try {
      request = (*run ? run_flags : check_flags).finish(args);
      request.against_reference = *check && against == "reference";
      request.plan.checks = select_checks((*run ? run_flags : check_flags).checks, request.against_reference);
      for (const auto& option : check_plugin_options) request.plugin_options.push_back(adapters::parse_plugin_option(option));
      OPCONFORM_CHECK(!*check || !request.library.empty(), ErrorCode::kInvalidArgument,
                      "--library is empty: give the plugin's shared library (`opconform run` checks the reference)");
      validate(request.plan);
      // The reports can be written: found now, not after every check ran.
      if (request.write_reports) request.report_files = std::make_shared<reports::ReportFiles>(report_paths(request));
    } catch (const std::exception& e) {
      std::cerr << "opconform: " << reports::console_text(e.what(), false) << "\n";
      return 2;
    }
  }
  adapters::PluginOptions doctor_options;
  try {
    list_flags.plugin_options = parse_plugin_options(list_plugin_options);
    doctor_options = parse_plugin_options(doctor_plugin_options);
  } catch (const std::exception& e) {
    std::cerr << "opconform: " << reports::console_text(e.what(), false) << "\n";
    return 2;
  }
  try {
    if (*run || *check) return exit_status(run_conformance(request), request);
    if (*list) return list_command(list_flags);
    if (*doctor) return doctor_command(doctor_library, doctor_options);
    if (*repro) {
      std::vector<std::string> line = split_command_line(repro_line_as_printed(repro_line));
      // Variables the line sets first (OPCONFORM_THREAD_SAFETY_THREADS=4 opconform check ...) hold for the replay.
      while (!line.empty() && line[0].find('=') != std::string::npos && line[0].find('=') > 0 &&
             line[0].rfind("--", 0) != 0) {
        const size_t eq = line[0].find('=');
        ::setenv(line[0].substr(0, eq).c_str(), line[0].substr(eq + 1).c_str(), 1);
        line.erase(line.begin());
      }
      if (!line.empty() && line[0] == "opconform") line.erase(line.begin());
      if (line.empty() || (line[0] != "run" && line[0] != "check")) {
        std::cerr << "opconform repro: the line must be an 'opconform run' or 'opconform check' command\n";
        return 2;
      }
      // In one worker, so that a crash is a result and not the end of opconform (add --jobs 0 to
      // the line to run it in this process under a debugger); every result printed, no report files.
      const bool in_process = std::find(line.begin(), line.end(), "--jobs") != line.end() ||
                              std::find(line.begin(), line.end(), "-j") != line.end();
      if (!in_process) line.insert(line.end(), {"--jobs", "1"});
      // The one case the line names, whole: a CI job's shard variables must not shard it away.
      if (std::find(line.begin(), line.end(), "--shard") == line.end()) line.insert(line.end(), {"--shard", "0/1"});
      for (const reports::ReportFormat& format : reports::report_formats()) line.insert(line.end(), {"--" + std::string(format.flag), ""});
      line.push_back("--verbose");
      return opconform_main(line);
    }
    if (report_commands.chosen()) return report_commands.run();
  } catch (const std::exception& e) {
    std::cerr << "opconform: " << reports::console_text(e.what(), false) << "\n";
    return 3;
  }
  return 2;
}

}  // namespace opconform::harness
