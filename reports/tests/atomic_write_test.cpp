// write_atomically: the file is the old one or the whole new one, and nothing else is left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <filesystem>

#include "opconform/reports/writers.h"
#include "support/error_of.h"
#include "support/golden.h"

namespace opconform::reports {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using opconform::testing::error_of;
using testing::read_file;

class ReportsWriteAtomically : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "opconform-write-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The names in `dir`, sorted: a leftover temporary file shows up here.
  static std::vector<std::string> names(const fs::path& dir) {
    std::vector<std::string> n;
    for (const auto& entry : fs::directory_iterator(dir)) n.push_back(entry.path().filename().string());
    std::sort(n.begin(), n.end());
    return n;
  }

  fs::path dir_;
};

TEST_F(ReportsWriteAtomically, WritesAndReplacesAndCreatesParents) {
  const fs::path path = dir_ / "out" / "deeper" / "report.json";
  write_atomically(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_atomically(path, std::string(100000, 'x'));
  EXPECT_EQ(read_file(path), std::string(100000, 'x'));
  write_atomically(path, "");
  EXPECT_EQ(read_file(path), "");
  EXPECT_THAT(names(path.parent_path()), ElementsAre("report.json"));
}

TEST_F(ReportsWriteAtomically, DiskFullMidWriteKeepsTheOldFile) {
  // A file-size limit makes write() fail with EFBIG part way through, as a full disk or an
  // exhausted quota would (root is not exempt, unlike from permissions). SIGXFSZ would kill the
  // process instead: it is ignored for the duration.
  const fs::path path = dir_ / "report.json";
  write_atomically(path, "the old report");
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 4096;
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Error e = error_of([&] { write_atomically(path, std::string(1 << 20, 'n')); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot write '" + path.string() + "'"), HasSubstr("write failed"),
                              HasSubstr("File too large")));
  EXPECT_EQ(read_file(path), "the old report");
  EXPECT_THAT(names(dir_), ElementsAre("report.json"));  // no temporary file left
}

TEST_F(ReportsWriteAtomically, ADirectoryInTheWayIsLeftAlone) {
  // The rename cannot replace a directory: the error names the path, the directory and its
  // content survive, and the temporary file is gone.
  const fs::path path = dir_ / "report.json";
  fs::create_directory(path);
  testing::write_file(path / "inside.txt", "keep");
  const Error e = error_of([&] { write_atomically(path, "new"); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot write '" + path.string() + "'"), HasSubstr("rename failed")));
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_EQ(read_file(path / "inside.txt"), "keep");
  EXPECT_THAT(names(dir_), ElementsAre("report.json"));
}

TEST_F(ReportsWriteAtomically, AFileWhereADirectoryShouldBeIsNamed) {
  testing::write_file(dir_ / "plain", "a file");
  const Error e = error_of([&] { write_atomically(dir_ / "plain" / "report.json", "x"); });
  EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot create the directory '" + (dir_ / "plain").string() + "'")));
  EXPECT_EQ(read_file(dir_ / "plain"), "a file");
  EXPECT_THAT(error_of([] { write_atomically("", "x"); }).what(), HasSubstr("not a file path"));
}

}  // namespace
}  // namespace opconform::reports
