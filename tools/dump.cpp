// tools/dump.cpp — see dump.h. The request is a file beside the trace, NAME.dump-request, holding the
// dump's path; the recorder's writer thread looks for it every 200 ms, makes the dump and answers in
// NAME.dump-result ("ok PATH" or "error WHY"). Both are written aside and renamed, so neither side
// reads half a file.
#include "tools/dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tools/subcommand.h"
#include "tools/traced_process.h"
#include "trace/format.h"
#include "util/terminal_text.h"

namespace gpumemtrace::dump {
namespace {

int fail(int status, const std::string& why) {
  fprintf(stderr, "gpumemtrace dump: %s\n", util::printable(why).c_str());
  return status;
}

// Writes `text` into `path` whole: into path.part, then renamed over it. False with errno set.
bool write_whole(const std::string& path, const std::string& text) {
  const std::string aside = path + ".part";
  const int fd = open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool whole = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int write_errno = errno;
  close(fd);
  if (whole && rename(aside.c_str(), path.c_str()) == 0) return true;
  const int why = whole ? errno : write_errno;  // the rename's, or the write's
  unlink(aside.c_str());
  errno = why;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string output;
  double timeout_s = 60;
  long pid = 0;
  CLI::App app{"", "gpumemtrace dump"};
  app.set_help_flag("-h,--help", "this text");
  app.footer("Seals what the recorder in process PID (or in its first traced descendant) wrote so far into a\n"
             "trace of its own, while the process goes on; with GPUMEMTRACE_KEEP, its last window. Prints the\n"
             "dump's path. Exit 0; 1 when the recorder refused or did not answer; 2 for bad usage or no traced\n"
             "process. docs/launcher.md, \"gpumemtrace dump\".");
  app.add_option("-o,--output", output, "the dump's path (default: beside the trace, its name with -dump)")
      ->type_name("FILE");
  app.add_option("--timeout", timeout_s, "seconds to wait for the recorder's answer (default 60)")
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("pid", pid, "the traced process (or its launcher)")->required()->check(CLI::PositiveNumber);
  if (const int status = tools::parse_subcommand(app, argc, argv, "gpumemtrace dump"); status >= 0) return status;
  long traced = 0;
  std::string why;
  const std::string trace = tools::trace_of_process(pid, &traced, &why);
  if (trace.empty()) return fail(2, why);
  // The recorder runs in another folder: a relative path is this command's.
  if (!output.empty() && output[0] != '/') {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return fail(2, std::string("cannot tell the current folder: ") + strerror(errno));
    output = std::string(cwd) + "/" + output;
  }
  const std::string request = trace + format::kDumpRequestSuffix;
  const std::string result = trace + format::kDumpResultSuffix;
  if (access(request.c_str(), F_OK) == 0) return fail(1, "a dump of " + trace + " is already asked for (" + request + ")");
  unlink(result.c_str());  // an answer nobody read (a dump that timed out before)
  if (!write_whole(request, output + "\n")) return fail(1, "cannot ask for a dump: " + request + ": " + strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::ifstream in(result);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      unlink(result.c_str());
      std::string answer = text.str();
      while (!answer.empty() && answer.back() == '\n') answer.pop_back();
      if (answer.compare(0, 3, "ok ") == 0) {
        printf("%s\n", answer.substr(3).c_str());
        return 0;
      }
      return fail(1, answer.compare(0, 6, "error ") == 0 ? answer.substr(6) : "the recorder's answer is not one: " + answer);
    }
    const bool alive = tools::process_alive(traced);
    if (!alive || std::chrono::steady_clock::now() >= deadline) {
      unlink(request.c_str());
      if (!alive) return fail(1, "process " + std::to_string(traced) + " ended before its recorder answered");
      return fail(1, "no answer from the recorder of process " + std::to_string(traced) + " in " + app.get_option("--timeout")->as<std::string>() +
                         " s (it answers every 200 ms: a recorder older than this launcher, or one run by another user, "
                         "does not; gpumemtrace.dump() inside the process does the same)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gpumemtrace::dump
