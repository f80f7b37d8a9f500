// Where a run's report files go, opened before the run: each file's directory is created,
// checked to take a new file and held open by a descriptor, and at the end the files are
// written relative to that descriptor (a temporary file and a rename, as write_atomically). So a
// run whose reports cannot be written fails before any check runs, and a library under test that
// swaps a report folder for a symlink during the run does not redirect the reports.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "opconform/reports/report.h"

namespace opconform::reports {

// Each format's given path (by its flag, report_formats() in writers.h), or <dir>/<its file
// name> where none is given; an empty path skips that format.
struct ReportPaths {
  std::filesystem::path dir = "opconform-report";
  std::map<std::string, std::string, std::less<>> given;  // "json" -> "out/r.json"
};

class ReportFiles {
 public:
  // Throws opconform::Error naming the path when a directory cannot be created or opened, takes
  // no new file, or a path is a directory.
  explicit ReportFiles(const ReportPaths& paths);
  ~ReportFiles();
  ReportFiles(const ReportFiles&) = delete;
  ReportFiles& operator=(const ReportFiles&) = delete;

  // Writes every format; returns the paths written (as given).
  std::vector<std::string> write(const Report& report) const;
  // The directories the files go to (absolute, each once), for the workers' sandbox to make
  // read-only.
  std::vector<std::filesystem::path> directories() const;

 private:
  struct File {
    std::string shown;                     // the path as given, for messages
    std::string name;                      // its file name in the directory
    size_t dir;                            // index into dirs_
    std::string (*format)(const Report&);  // the writer
  };
  struct Dir {
    std::filesystem::path path;
    int fd = -1;
  };
  std::vector<File> files_;
  std::vector<Dir> dirs_;
};

}  // namespace opconform::reports
