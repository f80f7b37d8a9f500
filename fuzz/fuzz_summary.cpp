// fuzz_summary: turns one nightly run's libFuzzer logs and crash files into a report in the
// harness's formats (report.json, junit.xml, report.md, report.html; reports/include), one
// result per target: passed (no crash), crashed (a crash, leak or out-of-memory input),
// timed_out (only slow inputs), failed (the target left no statistics: it did not run).
//
//   fuzz_summary --out DIR --budget SECONDS --jobs N --started ISO8601 --seconds WALL
//                --command TEXT --bin-dir DIR TARGET...
//
// DIR is nightly.sh's output folder: logs/<target>/*.log (libFuzzer's output, one file per job),
// crashes/<target>/ (crash files, each minimised one beside it as <file>.min). The report goes to
// DIR/report/; report.md gets a table of exec/s, coverage and corpus per target.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "opconform/reports/report_files.h"
#include "opconform/reports/writers.h"

namespace {

namespace fs = std::filesystem;
using opconform::reports::CaseResult;
using opconform::reports::Outcome;
using opconform::reports::Report;

// What one target's logs say, summed over its jobs (coverage: the best job's).
struct Stats {
  bool ran = false;             // some job printed its final statistics or a status line
  uint64_t executions = 0;      // stat::number_of_executed_units
  uint64_t execs_per_second = 0;  // stat::average_exec_per_sec, summed over parallel jobs
  uint64_t new_units = 0;       // stat::new_units_added
  uint64_t peak_rss_mb = 0;
  uint64_t cov = 0, ft = 0, corpus = 0;  // from the last status line ("#N ... cov: X ft: Y corp: Z/...")
  int jobs = 0;
  std::vector<std::string> findings;  // the lines that say what went wrong
};

struct Crash {
  fs::path file;
  std::optional<fs::path> minimised;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Stats read_logs(const fs::path& dir) {
  Stats s;
  if (!fs::is_directory(dir)) return s;
  static const std::regex status(R"(^#\d+\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/)");
  static const std::regex stat(R"(^stat::(\w+):\s+(\d+))");
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    std::istringstream log(read_file(entry.path()));
    bool job_counted = false;
    uint64_t cov = 0, ft = 0, corpus = 0;
    for (std::string line; std::getline(log, line);) {
      std::smatch m;
      if (std::regex_search(line, m, status)) {
        cov = std::stoull(m[1]), ft = std::stoull(m[2]), corpus = std::stoull(m[3]);
        s.ran = true;
      } else if (std::regex_search(line, m, stat)) {
        const uint64_t v = std::stoull(m[2]);
        if (m[1] == "number_of_executed_units") s.executions += v, job_counted = true;
        if (m[1] == "average_exec_per_sec") s.execs_per_second += v;
        if (m[1] == "new_units_added") s.new_units += v;
        if (m[1] == "peak_rss_mb") s.peak_rss_mb = std::max(s.peak_rss_mb, v);
        s.ran = true;
      } else if (line.rfind("==opconform fuzz finding==", 0) == 0 || line.rfind("SUMMARY: ", 0) == 0 ||
                 line.find("ERROR: libFuzzer") != std::string::npos) {
        if (s.findings.size() < 8) s.findings.push_back(line);
      }
    }
    s.cov = std::max(s.cov, cov), s.ft = std::max(s.ft, ft), s.corpus = std::max(s.corpus, corpus);
    if (job_counted) ++s.jobs;
  }
  return s;
}

std::vector<Crash> read_crashes(const fs::path& dir) {
  std::vector<Crash> crashes;
  if (!fs::is_directory(dir)) return crashes;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& p = entry.path();
    const std::string name = p.filename().string();
    if (!entry.is_regular_file() || p.extension() == ".min" || name.rfind("slow-unit-", 0) == 0) continue;
    Crash c{p, std::nullopt};
    if (fs::path min = p.string() + ".min"; fs::exists(min)) c.minimised = min;
    crashes.push_back(c);
  }
  std::sort(crashes.begin(), crashes.end(), [](const Crash& a, const Crash& b) { return a.file < b.file; });
  return crashes;
}

// A reproducer's bytes as text: printable ASCII kept, the rest as \xNN; at most 1 KiB.
std::string escaped(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes.substr(0, 1024)) {
    if ((c >= 0x20 && c < 0x7f && c != '\\') || c == '\n') {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  if (bytes.size() > 1024) out += "... (" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

CaseResult summarise(const std::string& target, const Stats& s, const std::vector<Crash>& crashes, const fs::path& bin_dir,
                     int budget) {
  CaseResult r;
  r.op = target;
  r.check = "libfuzzer";
  r.device = "cpu";
  r.seconds = budget;
  std::ostringstream msg;
  msg << s.executions << " executions in " << budget << " s over " << s.jobs << " job(s): " << s.execs_per_second
      << " exec/s; cov " << s.cov << ", ft " << s.ft << ", corpus " << s.corpus << " inputs (" << s.new_units
      << " new); peak RSS " << s.peak_rss_mb << " MB.";
  bool only_timeouts = !crashes.empty();
  for (const Crash& c : crashes) {
    only_timeouts = only_timeouts && c.file.filename().string().rfind("timeout-", 0) == 0;
    msg << "\n" << c.file.filename().string() << ": " << c.file.string();
    if (c.minimised) msg << " (minimised: " << c.minimised->string() << ")";
  }
  for (const std::string& line : s.findings) msg << "\n" << line;
  r.message = msg.str();
  if (!crashes.empty()) {
    const Crash& first = crashes.front();
    const fs::path reproducer = first.minimised.value_or(first.file);
    r.outcome = only_timeouts ? Outcome::timed_out : Outcome::crashed;
    r.repro = (bin_dir / (target + "_fuzz")).string() + " " + reproducer.string();
    r.minimal_input = escaped(read_file(reproducer));
  } else if (!s.ran) {
    r.outcome = Outcome::failed;
    r.message = "no libFuzzer statistics in the logs: the target did not run (is it built?)\n" + r.message;
  }
  return r;
}

// The table the standard Markdown summary lacks: the numbers of every target, passing or not.
std::string stats_table(const std::vector<std::string>& targets, const std::map<std::string, Stats>& stats,
                        const std::map<std::string, size_t>& crash_counts, const Report& report) {
  std::ostringstream out;
  out << "\n## Fuzz targets\n\n| target | outcome | exec/s | executions | cov | ft | corpus | new | crashes |\n"
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t i = 0; i < targets.size(); ++i) {
    const Stats& s = stats.at(targets[i]);
    const CaseResult& r = report.results[i];
    out << "| `" << targets[i] << "` | " << r.outcome << " | " << s.execs_per_second << " | " << s.executions << " | "
        << s.cov << " | " << s.ft << " | " << s.corpus << " | " << s.new_units << " | " << crash_counts.at(targets[i]) << " |\n";
  }
  return out.str();
}

int usage(const std::string& why) {
  std::cerr << "fuzz_summary: " << why
            << "\nusage: fuzz_summary --out DIR --budget S --jobs N --started ISO8601 --seconds WALL --command TEXT "
               "--bin-dir DIR TARGET...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> options;
  std::vector<std::string> targets;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) return usage("no value after " + arg);
      options[arg.substr(2)] = argv[++i];
    } else {
      targets.push_back(arg);
    }
  }
  for (const char* required : {"out", "budget", "bin-dir"})
    if (options.count(required) == 0) return usage(std::string("--") + required + " is required");
  if (targets.empty()) return usage("no targets");

  try {
    const fs::path out = options["out"];
    const int budget = std::stoi(options["budget"]);
    Report report;
    report.info.tool_version = OPCONFORM_VERSION;
    report.info.library = "opconform fuzz targets";
    report.info.command = options["command"];
    report.info.started_at = options["started"];
    report.seconds = options.count("seconds") ? std::stod(options["seconds"]) : 0;
    std::map<std::string, Stats> stats;
    std::map<std::string, size_t> crash_counts;
    for (const std::string& target : targets) {
      stats[target] = read_logs(out / "logs" / target);
      const std::vector<Crash> crashes = read_crashes(out / "crashes" / target);
      crash_counts[target] = crashes.size();
      report.results.push_back(summarise(target, stats[target], crashes, options["bin-dir"], budget));
    }
    const fs::path dir = out / "report";
    opconform::reports::ReportPaths paths;
    paths.dir = dir;
    paths.given["markdown"] = "";  // written below, with the table of numbers
    opconform::reports::ReportFiles(paths).write(report);
    const std::string table = stats_table(targets, stats, crash_counts, report);
    opconform::reports::write_atomically(dir / "report.md", opconform::reports::to_markdown(report) + table);
    std::cout << table.substr(1) << "\nreport: " << dir.string() << "/{report.json,report.md,report.html,junit.xml}\n";
    return opconform::reports::fails(report) ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "fuzz_summary: " << e.what() << "\n";
    return 2;
  }
}
