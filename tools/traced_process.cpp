// tools/traced_process.cpp — see traced_process.h.
#include "tools/traced_process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "util/ends_with.h"

namespace gpumemtrace::tools {

namespace {

bool looks_like_trace(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return name.find(".jsonl") != std::string::npos || util::ends_with(name, ".zst");
}

// The trace the recorder in process `pid` writes: a regular file named like a trace among the open
// files of its threads (the recorder's writer thread holds it, in a descriptor table of its own): the
// one with the lowest descriptor (the trace is the writer's first file), or the name that file's
// is tagged from. "" when there is none; `*unreadable` names a descriptor table that could not be read.
std::string trace_open_in(long pid, std::string* unreadable) {
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(task_dir.c_str());
  if (!tasks) return "";
  std::vector<std::pair<long, std::string>> candidates;  // descriptor, file
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    const std::string fd_dir = task_dir + "/" + task->d_name + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (!fds) {
      *unreadable = fd_dir + ": " + std::strerror(errno);
      continue;
    }
    while (const dirent* fd = readdir(fds)) {
      if (fd->d_name[0] == '.') continue;
      char target[4096];
      const ssize_t n = readlink((fd_dir + "/" + fd->d_name).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      struct stat st;
      const long number = std::atol(fd->d_name);
      if (target[0] != '/' || !looks_like_trace(target) || stat(target, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      candidates.emplace_back(number, target);
    }
    closedir(fds);
  }
  closedir(tasks);
  std::sort(candidates.begin(), candidates.end());
  if (candidates.empty()) return "";
  // The flight recorder's writer also holds the previous segment (NAME-prev) and the last window sealed
  // after an OOM (NAME-oom), either with a lower number than the current segment after a cut: the
  // trace is the one they are tagged from.
  std::string found = candidates.front().second;
  for (const char* tag : {"-prev", "-oom"}) {
    const size_t at = found.rfind(std::string(tag) + ".");
    if (at == std::string::npos || found.find('/', at) != std::string::npos) continue;
    const std::string untagged = found.substr(0, at) + found.substr(at + std::strlen(tag));
    for (const auto& candidate : candidates) {
      if (candidate.second == untagged) return untagged;
    }
  }
  return found;
}

// The children of every thread of `pid` (/proc/PID/task/TID/children; none where the kernel lacks it).
std::vector<long> children_of(long pid) {
  std::vector<long> out;
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(task_dir.c_str());
  if (!tasks) return out;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    std::ifstream children(task_dir + "/" + task->d_name + "/children");
    for (long child; children >> child;) out.push_back(child);
  }
  closedir(tasks);
  return out;
}

}  // namespace

bool process_alive(long pid) { return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

std::string trace_of_process(long pid, long* traced, std::string* why) {
  if (!process_alive(pid) || access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0) {
    *why = "no process " + std::to_string(pid);
    return "";
  }
  std::string unreadable;
  std::vector<long> queue{pid};
  // Bounded: a process tree of more than 4096 processes is searched no further.
  for (size_t i = 0; i < queue.size() && i < 4096; ++i) {
    const std::string found = trace_open_in(queue[i], &unreadable);
    if (!found.empty()) return *traced = queue[i], found;
    for (long child : children_of(queue[i])) queue.push_back(child);
  }
  *why = unreadable.empty()
             ? "process " + std::to_string(pid) + " is not traced: neither it nor its children have a trace open "
               "(is it running under gpumemtrace, and has it made a CUDA memory call?); or give the trace's path"
             : "cannot read " + unreadable + " (run as the process's user), or give the trace's path";
  return "";
}

}  // namespace gpumemtrace::tools
