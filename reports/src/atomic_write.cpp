// write_atomically (writers.h): a report file is either the old one or the complete new one,
// never a truncated mix, even when the run is killed or the disk fills while writing. The
// temporary file lives in the target's directory because rename() is only atomic within one
// file system.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "opconform/core/error.h"
#include "opconform/reports/writers.h"

namespace opconform::reports {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int error) {
  throw Error(ErrorCode::kInvalidArgument,
              "cannot write '" + path.string() + "': " + what + ": " + std::strerror(error));
}

// Closes the descriptor and removes the temporary file unless the rename happened.
struct TempFile {
  std::filesystem::path path;
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!renamed && !path.empty()) ::unlink(path.c_str());
  }
};

// Creates a new temporary file next to `path`: ".<name>.tmp-<pid>-<n>", created exclusively with
// mode 0666 so that the umask applies as it would to the file itself.
void create_temp(const std::filesystem::path& path, TempFile& temp) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::filesystem::path candidate = path.parent_path() / ("." + path.filename().string() + ".tmp-" +
                                                            std::to_string(::getpid()) + "-" +
                                                            std::to_string(counter.fetch_add(1)));
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      temp.path = std::move(candidate);
      temp.fd = fd;
      return;
    }
    if (const int error = errno; error != EEXIST) fail(path, "cannot create a temporary file in its directory", error);
  }
  fail(path, "cannot find a free temporary file name", EEXIST);
}

}  // namespace

void write_atomically(const std::filesystem::path& target, std::string_view content) {
  OPCONFORM_CHECK(!target.empty() && target.has_filename(), ErrorCode::kInvalidArgument,
                  "cannot write '", target.string(), "': not a file path");
  // An absolute path keeps the temporary file in the same directory even for "report.json".
  const std::filesystem::path path = std::filesystem::absolute(target);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) fail(target, "cannot create the directory '" + path.parent_path().string() + "'", ec.value());

  TempFile temp;
  create_temp(path, temp);
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(temp.fd, data, left);
    const int error = errno;  // read before anything else can change it
    if (n < 0 && error == EINTR) continue;
    if (n < 0) fail(target, "write failed", error);
    data += n;
    left -= static_cast<size_t>(n);
  }
  // fsync before rename: otherwise a crash soon after can leave the new name on an empty file.
  if (::fsync(temp.fd) != 0) {
    const int error = errno;
    fail(target, "fsync failed", error);
  }
  const int fd = temp.fd;
  temp.fd = -1;
  if (::close(fd) != 0) {
    const int error = errno;
    fail(target, "close failed", error);
  }
  if (::rename(temp.path.c_str(), path.c_str()) != 0) {
    const int error = errno;
    fail(target, "rename failed", error);
  }
  temp.renamed = true;
  // Make the rename itself durable; a failure here changes nothing for the file's content.
  if (int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

namespace {
// The report files' paths: each given path, or <dir>/<file>; empty ones are skipped.
std::vector<std::string> report_file_paths(const ReportPaths& paths) {
  std::vector<std::string> out;
  const std::pair<const std::optional<std::string>*, const char*> files[] = {
      {&paths.json, "report.json"}, {&paths.junit, "junit.xml"}, {&paths.markdown, "report.md"}, {&paths.html, "report.html"}};
  for (const auto& [given, file] : files) {
    std::string path = *given ? **given : (paths.dir / file).string();
    if (!path.empty()) out.push_back(std::move(path));
  }
  return out;
}
}  // namespace

void check_report_paths(const ReportPaths& paths) {
  for (const std::string& target : report_file_paths(paths)) {
    const std::filesystem::path path = std::filesystem::absolute(target);
    OPCONFORM_CHECK(path.has_filename(), ErrorCode::kInvalidArgument, "cannot write '", target, "': not a file path");
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      fail(target, "it is a directory", EISDIR);
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) fail(target, "cannot create the directory '" + path.parent_path().string() + "'", ec.value());
    TempFile probe;  // removed again by its destructor
    create_temp(path, probe);
  }
}

std::vector<std::string> write_report_files(const Report& report, const ReportPaths& paths) {
  const struct {
    const std::optional<std::string>& given;
    const char* file;
    std::string (*format)(const Report&);
  } outputs[] = {{paths.json, "report.json", to_json},
                 {paths.junit, "junit.xml", to_junit},
                 {paths.markdown, "report.md", to_markdown},
                 {paths.html, "report.html", to_html}};
  std::vector<std::string> written;
  for (const auto& o : outputs) {
    const std::string path = o.given ? *o.given : (paths.dir / o.file).string();
    if (path.empty()) continue;
    write_atomically(path, o.format(report));
    written.push_back(path);
  }
  return written;
}

}  // namespace opconform::reports
