// tests/unit/recorder_trace_file_test.cpp — TraceFile: safe creation (planted names skipped, never
// followed), high close-on-exec descriptors, and no write once the descriptor is not our file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "interpose/writer/trace_file.h"

using gpumemtrace::numbered_path;
using gpumemtrace::open_trace_file;
using gpumemtrace::TraceFile;

namespace {

std::string make_temp_dir() {
  char tmpl[] = "/tmp/gpumemtrace-unit-XXXXXX";
  return mkdtemp(tmpl);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TraceFile open_ok(const std::string& path, bool named, std::string* note) {
  TraceFile f;
  std::string error;
  EXPECT_TRUE(open_trace_file(path, named, &f, note, &error)) << error;
  return f;
}

}  // namespace

TEST(TraceFile, NumberedNameKeepsTheTraceSuffix) {
  EXPECT_EQ(numbered_path("d/gpumemtrace.x.1.jsonl", 2), "d/gpumemtrace.x.1-2.jsonl");
  EXPECT_EQ(numbered_path("d/run.jsonl.zst", 1), "d/run-1.jsonl.zst");
  EXPECT_EQ(numbered_path("d.jsonl/out", 3), "d.jsonl/out-3");
  // A template without .jsonl (out/x.%p.zst): the name stays a .zst (issue 20: was x.42.zst-1,
  // written uncompressed and skipped by gpumem-report out/).
  EXPECT_EQ(numbered_path("out/x.42.zst", 1), "out/x.42-1.zst");
  EXPECT_EQ(numbered_path("out/.zst", 1), "out/.zst-1");
}

TEST(TraceFile, NewFileIsPrivateWithAHighCloseOnExecDescriptor) {
  const std::string dir = make_temp_dir();
  std::string note;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  EXPECT_EQ(f.path(), dir + "/t.jsonl");
  EXPECT_TRUE(note.empty());
  EXPECT_GE(f.fd(), 1000);
  EXPECT_EQ(fcntl(f.fd(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  struct stat st;
  ASSERT_EQ(stat(f.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  f.close_if_ours();
}

TEST(TraceFile, EarlierTraceOfOursTakesTheNextNameSilently) {
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/t.jsonl") << "earlier\n";
  std::string note;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  EXPECT_EQ(f.path(), dir + "/t-1.jsonl");
  EXPECT_TRUE(note.empty()) << note;
  EXPECT_EQ(read_file(dir + "/t.jsonl"), "earlier\n");
  f.close_if_ours();
}

TEST(TraceFile, PlantedSymlinkIsNotFollowedAndIsReported) {
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/victim") << "victim\n";
  ASSERT_EQ(symlink((dir + "/victim").c_str(), (dir + "/t.jsonl").c_str()), 0);
  std::string note;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  EXPECT_EQ(f.path(), dir + "/t-1.jsonl");
  EXPECT_NE(note.find("symbolic link; not used"), std::string::npos) << note;
  std::string error;
  ASSERT_TRUE(f.write_all("x\n", 2, &error)) << error;
  EXPECT_EQ(read_file(dir + "/victim"), "victim\n");
  f.close_if_ours();
}

TEST(TraceFile, CutBackToWholeBytesAndWritesGoOnFromThere) {
  const std::string dir = make_temp_dir();
  std::string note, error;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  ASSERT_TRUE(f.write_all("one\n", 4, &error)) << error;
  ASSERT_TRUE(f.write_all("half a li", 9, &error)) << error;
  EXPECT_EQ(f.written(), 13u);
  bool removed = true;
  ASSERT_TRUE(f.cut_back_to(4, &removed));
  EXPECT_FALSE(removed);
  ASSERT_TRUE(f.write_all("two\n", 4, &error)) << error;
  EXPECT_EQ(read_file(dir + "/t.jsonl"), "one\ntwo\n");  // no hole where the half line was
  EXPECT_EQ(f.written(), 8u);
  f.close_if_ours();
}

TEST(TraceFile, CutBackToNothingRemovesTheFile) {
  const std::string dir = make_temp_dir();
  std::string note, error;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  ASSERT_TRUE(f.write_all("half", 4, &error)) << error;
  bool removed = false;
  ASSERT_TRUE(f.cut_back_to(0, &removed));
  EXPECT_TRUE(removed);
  struct stat st;
  EXPECT_NE(lstat((dir + "/t.jsonl").c_str(), &st), 0);
  f.close_if_ours();
}

TEST(TraceFile, OnlyAFileWeCreatedIsCutBack) {
  const std::string dir = make_temp_dir();
  const std::string fifo = dir + "/trace.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a reader, so the FIFO opens
  std::string note;
  TraceFile f = open_ok(fifo, true, &note);
  EXPECT_FALSE(f.can_cut_back());
  bool removed = true;
  EXPECT_FALSE(f.cut_back_to(0, &removed));
  EXPECT_FALSE(removed);
  f.close_if_ours();
  close(reader);
}

TEST(TraceFile, DescriptorReusedByTheProgramIsLeftAloneAndOurFileReopened) {
  const std::string dir = make_temp_dir();
  std::string note, error;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  ASSERT_TRUE(f.write_all("one\n", 4, &error)) << error;
  const int lost = f.fd();
  const int program_file = open((dir + "/program").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_EQ(dup2(program_file, lost), lost);  // the program takes our number
  ASSERT_TRUE(f.write_all("two\n", 4, &error)) << error;
  EXPECT_NE(f.fd(), lost);
  f.close_if_ours();
  EXPECT_EQ(read_file(dir + "/t.jsonl"), "one\ntwo\n");
  EXPECT_EQ(read_file(dir + "/program"), "");
  EXPECT_EQ(fcntl(lost, F_GETFD), 0) << "the program's descriptor must stay open";
  close(lost);
  close(program_file);
}

TEST(TraceFile, TraceReplacedAtItsPathStopsWriting) {
  const std::string dir = make_temp_dir();
  std::string note, error;
  TraceFile f = open_ok(dir + "/t.jsonl", false, &note);
  close(f.fd());
  ASSERT_EQ(rename((dir + "/t.jsonl").c_str(), (dir + "/moved").c_str()), 0);
  std::ofstream(dir + "/t.jsonl") << "someone else's\n";
  EXPECT_FALSE(f.write_all("x\n", 2, &error));
  EXPECT_NE(error.find("no longer the trace file"), std::string::npos) << error;
  EXPECT_EQ(read_file(dir + "/t.jsonl"), "someone else's\n");
}

TEST(TraceFile, NamedFifoWithoutAReaderFailsInBoundedTime) {
  const std::string dir = make_temp_dir();
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0600), 0);
  TraceFile f;
  std::string note, error;
  EXPECT_FALSE(open_trace_file(dir + "/fifo", true, &f, &note, &error));
  EXPECT_NE(error.find("no reader on the FIFO"), std::string::npos) << error;
}
