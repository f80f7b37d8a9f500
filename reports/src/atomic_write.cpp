// write_atomically (writers.h) and ReportFiles (report_files.h): a report file is either the old
// one or the complete new one, never a truncated mix, even when the run is killed or the disk
// fills while writing. The temporary file lives in the target's directory because rename() is
// only atomic within one file system; everything goes through the directory's descriptor, so the
// directory cannot be swapped for another between the checks and the write.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "opconform/core/error.h"
#include "opconform/reports/report_files.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int error) {
  throw Error(ErrorCode::kInvalidArgument,
              "cannot write '" + path.string() + "': " + what + ": " + std::strerror(error));
}

// Closes the descriptor and removes the temporary file unless the rename happened.
struct TempFile {
  int dir = -1;
  std::string name;
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!renamed && !name.empty()) ::unlinkat(dir, name.c_str(), 0);
  }
};

// Creates a new temporary file next to `name` in `dir`: ".<name>.tmp-<pid>-<n>", created
// exclusively with mode 0666 so that the umask applies as it would to the file itself.
void create_temp(int dir, const std::string& name, const std::filesystem::path& shown, TempFile& temp) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string candidate = "." + name + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
    const int fd = ::openat(dir, candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd >= 0) {
      temp.dir = dir, temp.name = std::move(candidate), temp.fd = fd;
      return;
    }
    if (const int error = errno; error != EEXIST) fail(shown, "cannot create a temporary file in its directory", error);
  }
  fail(shown, "cannot find a free temporary file name", EEXIST);
}

// `content` as `name` in the directory `dir`.
void write_at(int dir, const std::string& name, std::string_view content, const std::filesystem::path& shown) {
  TempFile temp;
  create_temp(dir, name, shown, temp);
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(temp.fd, data, left);
    const int error = errno;  // read before anything else can change it
    if (n < 0 && error == EINTR) continue;
    if (n < 0) fail(shown, "write failed", error);
    data += n;
    left -= static_cast<size_t>(n);
  }
  // fsync before rename: otherwise a crash soon after can leave the new name on an empty file.
  if (::fsync(temp.fd) != 0) {
    const int error = errno;
    fail(shown, "fsync failed", error);
  }
  const int fd = temp.fd;
  temp.fd = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    fail(shown, "close failed", error);
  }
  if (::renameat(dir, temp.name.c_str(), dir, name.c_str()) != 0) {
    const int error = errno;
    fail(shown, "rename failed", error);
  }
  temp.renamed = true;
  ::fsync(dir);  // the rename itself durable; a failure here changes nothing for the content
}

// The directory of `path` (absolute), created, opened.
int open_parent(const std::filesystem::path& shown, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) fail(shown, "cannot create the directory '" + path.parent_path().string() + "'", ec.value());
  const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    const int error = errno;
    fail(shown, "cannot open the directory '" + path.parent_path().string() + "'", error);
  }
  return dir;
}

}  // namespace

// Note [The report formats are one list] (writers.h).
const std::vector<ReportFormat>& report_formats() {
  static const std::vector<ReportFormat> formats = {
      {"json", "report.json", "JSON report", to_json},
      {"junit", "junit.xml", "JUnit XML report", to_junit},
      {"markdown", "report.md", "Markdown report", to_markdown},
      {"html", "report.html", "HTML report", to_html},
  };
  return formats;
}

void write_atomically(const std::filesystem::path& target, std::string_view content) {
  OPCONFORM_CHECK(!target.empty() && target.has_filename(), ErrorCode::kInvalidArgument,
                  "cannot write '", target.string(), "': not a file path");
  const std::filesystem::path path = std::filesystem::absolute(target);
  const int dir = open_parent(target, path);
  try {
    write_at(dir, path.filename().string(), content, target);
  } catch (...) {
    ::close(dir);
    throw;
  }
  ::close(dir);
}

ReportFiles::ReportFiles(const ReportPaths& paths) {
  try {
    for (const ReportFormat& o : report_formats()) {
      const auto given = paths.given.find(o.flag);
      const std::string shown = given != paths.given.end() ? given->second : (paths.dir / o.file_name).string();
      if (shown.empty()) continue;
      const std::filesystem::path path = std::filesystem::absolute(shown);
      OPCONFORM_CHECK(path.has_filename(), ErrorCode::kInvalidArgument, "cannot write '", shown, "': not a file path");
      std::error_code ec;
      if (std::filesystem::is_directory(path, ec)) fail(shown, "it is a directory", EISDIR);
      size_t dir = 0;
      while (dir < dirs_.size() && dirs_[dir].path != path.parent_path()) ++dir;
      if (dir == dirs_.size()) dirs_.push_back({path.parent_path(), open_parent(shown, path)});
      TempFile probe;  // takes a new file; removed again by its destructor
      create_temp(dirs_[dir].fd, path.filename().string(), shown, probe);
      files_.push_back({shown, path.filename().string(), dir, o.write});
    }
  } catch (...) {
    for (auto& d : dirs_) ::close(d.fd);
    throw;
  }
}

ReportFiles::~ReportFiles() {
  for (auto& d : dirs_) ::close(d.fd);
}

std::vector<std::string> ReportFiles::write(const Report& report) const {
  std::vector<std::string> written;
  for (const auto& f : files_) {
    write_at(dirs_[f.dir].fd, f.name, f.format(report), f.shown);
    written.push_back(f.shown);
  }
  return written;
}

std::vector<std::filesystem::path> ReportFiles::directories() const {
  std::vector<std::filesystem::path> out;
  for (const auto& d : dirs_) out.push_back(d.path);
  return out;
}

}  // namespace opconform::reports
