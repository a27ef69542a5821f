// tools/gpumemtrace.cpp — the launcher: `gpumemtrace run|ci [options] -- CMD ARGS...`.
//
// Runs CMD under the recorder (LD_PRELOAD of libgpumemtrace.so, every process CMD starts writes its own
// trace into one directory), waits for it, then runs gpumem-report on that directory. `run` exits with
// CMD's status; `ci` exits with CMD's status when CMD failed, otherwise with the report's gate verdict.
// docs/launcher.md is the prose version of --help.
//
// Signals: SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 sent to the launcher by another process (kill,
// a CI runner's timeout) are forwarded to CMD; the same signals typed at the terminal already reach CMD
// (same process group) and are not sent twice. The launcher itself never dies of them while CMD runs, so
// the report of an interrupted run is still printed. When the launcher dies anyway (SIGKILL), CMD gets
// SIGKILL too (PR_SET_PDEATHSIG).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "report/analyses/suppressions.h"
#include "interpose/recorder/config.h"
#include "report/cli/options.h"
#include "report/outputs/export_events.h"
#include "tools/dump.h"
#include "tools/top.h"
#include "util/edit_distance.h"
#include "util/keep.h"

namespace {

namespace report = gpumemtrace::report;
namespace util = gpumemtrace::util;
namespace var = gpumemtrace::var;  // the variable names, from the recorder's one list (interpose/recorder/config.h)

const char kHelp[] =
    "usage: gpumemtrace run [-o DIR] [--report FILE] [--keep D|SIZE] [-q] [REPORT OPTIONS] -- CMD [ARGS...]\n"
    "       gpumemtrace ci  [-o DIR] [--report FILE] [-q] [GATE AND REPORT OPTIONS] -- CMD [ARGS...]\n"
    "       gpumemtrace top [--interval S] [--sort KEY] [--batch [--iterations N]] PID | TRACE\n"
    "       gpumemtrace dump [-o FILE] [--timeout S] PID\n"
    "       gpumemtrace kernel install [--python PY] [--name NAME] [--display-name TEXT] [--user | --prefix DIR]\n"
    "       gpumemtrace --help | --version\n"
    "\n"
    "Runs CMD with every CUDA memory event recorded (with its call stack, Python frames included), then\n"
    "prints gpumem-report's analysis of the run: leaks, peaks, OOM post-mortems, growth, fragmentation.\n"
    "\n"
    "Commands:\n"
    "  run   run CMD, print the report, exit with CMD's exit status (128+N if a signal N killed it).\n"
    "  ci    run CMD; if it failed, print the report and exit with CMD's status (128+N for a signal);\n"
    "        otherwise exit with the report's gate verdict: 0 every gate passed, 1 a gate failed,\n"
    "        2 the traces could not be read (or no trace was written), 3 a gate met a cut trace (no verdict).\n"
    "  top   a live view of a running process's GPU memory (PID: a process running under gpumemtrace; TRACE:\n"
    "        a trace being written, also by another host on a shared file system), refreshed every\n"
    "        --interval seconds (default 1): live bytes per device and per call site, what grew since the\n"
    "        last refresh, the OOMs. Keys: 1/2/3 sort by live bytes, growth, count (--sort live|grew|count);\n"
    "        l level (CUDA allocations or allocator blocks); d device; / filter; q quit. --batch: a plain\n"
    "        screen per refresh on stdout until the trace ends (or --iterations N). Exit 0; 2 when the\n"
    "        trace cannot be found or read.\n"
    "  dump  seal what the recorder of process PID (or of its first traced descendant) wrote so far into a\n"
    "        trace of its own while the process goes on (with GPUMEMTRACE_KEEP: its last window); prints\n"
    "        the dump's path (-o FILE, default beside the trace with -dump). Exit 0; 1 when the recorder\n"
    "        refused or did not answer in --timeout S (default 60); 2 bad usage or no traced process.\n"
    "  kernel install  register a Jupyter kernel for PY (default python3, which needs ipykernel) that\n"
    "        runs under the recorder, its traces in --output DIR (default gpumemtrace-traces/ in the\n"
    "        notebook's folder); --name (gpumemtrace), --display-name, --user, --prefix, --sys-prefix as\n"
    "        `jupyter kernelspec install` has them. `%load_ext gpumemtrace` in it gives %%gpumemtrace\n"
    "        (docs/notebooks.md). Exit 0; 2 with one line when it cannot be installed.\n"
    "\n"
    "Options (before --):\n"
    "  -o DIR, --output DIR   directory for the traces (created if needed); default: a new directory\n"
    "                         gpumemtrace-YYYYmmdd-HHMMSS-PID in the current directory. Every process CMD\n"
    "                         starts (DataLoader workers, torchrun ranks, subprocesses) writes its own\n"
    "                         trace file there; the report covers them all, one section per process.\n"
    "                         Traces already in DIR (earlier runs) are kept and left out of the report.\n"
    "  --report FILE          write the report to FILE. Default: a text report on stdout after CMD's own\n"
    "                         output; any other --format into DIR (report.json, report.html,\n"
    "                         report.perfetto.json, report.folded), never onto CMD's stdout.\n"
    "  --report-per-process   also write each process's JSON report beside its trace when CMD ends\n"
    "                         (TRACE.report.json, its rank from RANK, SLURM_PROCID, ...): one launcher per\n"
    "                         node or task (srun), then `gpumem-report merge DIR...` for the job's view.\n"
    "  -q, --quiet            no launcher notes and no recorder line on stderr (warnings remain).\n"
    "  --keep D|SIZE          flight recorder (GPUMEMTRACE_KEEP): keep only the run's end, at least half\n"
    "                         of D (2h, 30min, 45s) or SIZE (20G, 300M) of trace and at most all of it, in\n"
    "                         rotating segments; the report covers that window (docs/long-runs.md).\n"
    "  -h, --help             this text.   --version   the version.\n"
    "  Any other option is passed to gpumem-report, checked before CMD starts, for example:\n"
    "    --fail-on-leak[=SIZE]  gate: leaked bytes above SIZE (default 0; K/M/G, KiB/MiB/GiB)\n"
    "    --fail-on-growth       gate: a call site whose live bytes keep rising\n"
    "    --suppressions FILE    LSAN-style leak:PATTERN lines\n"
    "    --format json          the report as one JSON object (into DIR/report.json unless --report)\n"
    "  (see `gpumem-report --help` for the full list).\n"
    "The `--` before CMD is required: it separates the options from the command.\n"
    "\n"
    "Environment set for CMD:\n"
    "  LD_PRELOAD           libgpumemtrace.so (next to this program, or in ../lib) prepended to your LD_PRELOAD\n"
    "  GPUMEMTRACE_OUTPUT   DIR/ (one file per process)\n"
    "  PYTHONPATH           the Python startup directory prepended (../python beside bin/, or\n"
    "                       ../share/gpumemtrace/python, or tools/python in a source tree), which turns\n"
    "                       on PyTorch tensor-level events\n"
  "  PYTEST_PLUGINS       gpumemtrace_pytest appended (every pytest test becomes a scope of the trace);\n"
  "                       not with GPUMEMTRACE_PYTEST=0\n"
  "  GPUMEMTRACE_PYTEST_GATE  with ci --fail-on-leak: the gate, which the plugin applies to each test\n"
  "                       inside pytest (a test it fails fails in pytest's output and JUnit XML)\n"
    "  NVTX_INJECTION64_PATH  not set here: the recorder sets it in each traced process where it is unset,\n"
    "                       so that NVTX ranges become phases (docs/capture.md, GPUMEMTRACE_NVTX)\n"
    "  Any other GPUMEMTRACE_* variable you set is passed on to the recorder (docs/configuration.md).\n"
    "Environment read by the launcher:\n"
    "  GPUMEMTRACE_LIBRARY  the recorder library to preload instead of the one beside this program\n"
    "  GPUMEMTRACE_REPORT   the analyzer to run instead of <dir of gpumemtrace>/gpumem-report\n"
    "                       (GPUMEMTRACE_LIBRARY and GPUMEMTRACE_REPORT: relative to the current directory)\n"
    "\n"
    "Exit status: as described under Commands; 2 for bad usage (one line on stderr) or when the recorder\n"
    "library or the analyzer cannot be found. A command that cannot be found gives 127, one that cannot be\n"
    "executed 126 (both found before DIR is made).\n"
    "Files: a DIR the launcher makes is private (0700); new report files (--report, DIR/report.*) are\n"
    "0600, as the traces are.\n"
    "\n"
    "Examples:\n"
    "  gpumemtrace run -- python train.py --epochs 1\n"
    "  gpumemtrace ci --fail-on-leak=1MiB --fail-on-growth -o traces -- python -m pytest tests/gpu\n"
    "  gpumemtrace run --report memory.txt -- python train.py > train.log\n"
    "  gpumemtrace run -o traces -- torchrun --nproc-per-node 8 train.py\n";

bool g_quiet = false;
volatile sig_atomic_t g_child = 0;

void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char* fmt, ...) {
  if (g_quiet) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("gpumemtrace: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

int usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int usage_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpumemtrace: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(" (see gpumemtrace --help)\n", stderr);
  va_end(ap);
  return 2;
}

bool exists(const std::string& path, mode_t type) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == type;
}

bool is_elf(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {0, 0, 0, 0};
  size_t n = fread(magic, 1, 4, f);
  fclose(f);
  return n == 4 && memcmp(magic, "\x7f" "ELF", 4) == 0;
}

// The directory of this program's file, symbolic links resolved (the kernel's /proc/self/exe): the
// release bundle, an installed tree and the wheel all work wherever they are unpacked or linked
// from. "" when /proc is not mounted.
std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  std::string path(buf);
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : (slash == 0 ? "/" : path.substr(0, slash));
}

// Where the recorder and the Python helpers sit beside this program, in each layout it ships in
// (docs/install.md): the build tree (build/gpumemtrace, build/libgpumemtrace.so, tools/python), the
// release bundle and the wheel (bin/, lib/, python/), `make install` (bin/, lib/, share/gpumemtrace/python).
// The first candidate that exists wins; the first one is named in the error when none does.
std::vector<std::string> library_candidates(const std::string& bindir) {
  return {bindir + "/libgpumemtrace.so", bindir + "/../lib/libgpumemtrace.so"};
}
std::vector<std::string> python_candidates(const std::string& bindir) {
  return {bindir + "/../python", bindir + "/../share/gpumemtrace/python", bindir + "/../tools/python"};
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// Makes `path` and the directories above it that are missing, private (0700): they hold traces, whose
// names tell who ran what, and reports. Existing ones keep their mode.
bool mkdirs(const std::string& path) {
  std::string cur;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    cur = path.substr(0, j);
    if (!cur.empty() && mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return false;
    i = j + 1;
  }
  return exists(path, S_IFDIR);
}

// What execvp will find for `name`: 0 for an executable file, else ENOENT (not found) or EACCES
// (found, but not executable, or a directory). Searched as glibc's execvp searches: a name with a '/'
// as it is; any other in each PATH entry in turn (an empty entry: the current directory; PATH unset:
// confstr(_CS_PATH)), EACCES only when no entry has an executable file of that name.
int command_error(const std::string& name) {
  auto check = [](const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return errno == EACCES ? EACCES : ENOENT;
    return S_ISDIR(st.st_mode) || access(path.c_str(), X_OK) != 0 ? EACCES : 0;
  };
  if (name.empty()) return ENOENT;
  if (name.find('/') != std::string::npos) return check(name);
  std::string search;
  if (const char* path = getenv("PATH")) {
    search = path;
  } else {
    char buf[PATH_MAX] = "/bin:/usr/bin";
    if (confstr(_CS_PATH, nullptr, 0) <= sizeof buf) confstr(_CS_PATH, buf, sizeof buf);
    search = buf;
  }
  int error = ENOENT;
  for (size_t start = 0;;) {
    const size_t colon = search.find(':', start);
    const std::string dir = search.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const int found = check((dir.empty() ? "." : dir) + "/" + name);
    if (found == 0) return 0;
    if (found == EACCES) error = EACCES;
    if (colon == std::string::npos) return error;
    start = colon + 1;
  }
}

std::string default_output_dir() {
  char stamp[32];
  time_t now = time(nullptr);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return std::string("gpumemtrace-") + stamp + "-" + std::to_string(getpid());
}

std::string prepend_path(const char* name, const std::string& first) {
  const char* old = getenv(name);
  if (!old || !*old) return first;
  return first + ":" + old;
}

// `item` added at the end of the comma-separated list in variable `name` (once).
std::string append_to_list(const char* name, const std::string& item) {
  const char* old = getenv(name);
  if (!old || !*old) return item;
  const std::string list = std::string(",") + old + ",";
  if (list.find("," + item + ",") != std::string::npos) return old;
  return std::string(old) + "," + item;
}

// True when variable `name` is set to 0, off, no or false (any case), as the recorder reads switches.
bool switched_off(const char* name) {
  const char* value = getenv(name);
  if (!value) return false;
  for (const char* off : {"0", "off", "no", "false"})
    if (strcasecmp(value, off) == 0) return true;
  return false;
}

// Forward signals that another process sent us; terminal-generated ones (si_code SI_KERNEL) already
// reached CMD through the foreground process group.
void forward_signal(int sig, siginfo_t* info, void*) {
  pid_t child = g_child;
  if (child > 0 && (info == nullptr || info->si_code != SI_KERNEL)) kill(child, sig);
}

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void install_forwarding() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = forward_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : kForwarded) sigaction(sig, &sa, nullptr);
}

void restore_default_signals() {
  for (int sig : kForwarded) signal(sig, SIG_DFL);
}

// The forwarded signals, blocked around fork: one arriving before the parent knows the child's pid
// stays pending until then (instead of being forwarded to nobody), and the child never runs our
// handler (it restores the default dispositions first, then unblocks).
void block_forwarded(sigset_t* saved) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, saved);
}

// Runs argv with extra environment (name, value pairs); returns the wait status, or -1. `*exec_error`
// (when given) gets the errno of an exec that failed (the child said so through a close-on-exec pipe,
// then exited 127 or 126), else 0.
int spawn_and_wait(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                   bool forward, int* exec_error = nullptr) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  if (exec_error) *exec_error = 0;
  int exec_pipe[2] = {-1, -1};
  if (exec_error && pipe2(exec_pipe, O_CLOEXEC) != 0) exec_pipe[0] = exec_pipe[1] = -1;
  sigset_t saved_mask;
  if (forward) block_forwarded(&saved_mask);
  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    if (forward) sigprocmask(SIG_SETMASK, &saved_mask, nullptr);
    for (int fd : exec_pipe)
      if (fd >= 0) close(fd);
    fprintf(stderr, "gpumemtrace: fork: %s\n", strerror(err));
    return -1;
  }
  if (pid == 0) {
    // The child dies with the launcher (SIGKILL, OOM killer, a crash): never an orphan that keeps a GPU.
    // The launcher may have died before prctl: then the parent is already someone else.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(126);
    restore_default_signals();
    if (forward) sigprocmask(SIG_SETMASK, &saved_mask, nullptr);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execvp(args[0], args.data());
    int err = errno;
    fprintf(stderr, "gpumemtrace: %s: %s\n", args[0], strerror(err));
    if (exec_pipe[1] >= 0) {
      ssize_t ignored = write(exec_pipe[1], &err, sizeof err);  // lost: the status is taken for CMD's
      (void)ignored;
    }
    _exit(err == ENOENT ? 127 : 126);
  }
  if (forward) {
    g_child = pid;
    sigprocmask(SIG_SETMASK, &saved_mask, nullptr);  // a signal pending since fork goes to the child now
  }
  if (exec_pipe[0] >= 0) {
    // EOF when the exec succeeded (the pipe closed with it), the errno when it failed.
    close(exec_pipe[1]);
    int err = 0;
    ssize_t n;
    while ((n = read(exec_pipe[0], &err, sizeof err)) < 0 && errno == EINTR) {
    }
    if (n == sizeof err) *exec_error = err;
    close(exec_pipe[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "gpumemtrace: waitpid: %s\n", strerror(errno));
      g_child = 0;
      return -1;
    }
  }
  g_child = 0;
  return status;
}

int exit_code_of(int status) {
  if (status < 0) return 2;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 2;
}

// The names in `dir` (hidden ones left out), sorted.
std::vector<std::string> list_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (struct dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The recorder to preload: GPUMEMTRACE_LIBRARY, else the first candidate beside this program that
// exists (the first one when none does: the caller says it is missing).
std::string recorder_library(const std::string& bindir) {
  const char* lib_env = getenv(var::kLibrary);
  std::string library_path = library_candidates(bindir).front();
  for (const std::string& candidate : library_candidates(bindir)) {
    char resolved[PATH_MAX];
    if (exists(candidate, S_IFREG)) {
      library_path = realpath(candidate.c_str(), resolved) ? resolved : candidate;  // no "bin/.." in LD_PRELOAD
      break;
    }
  }
  return absolute(lib_env && *lib_env ? lib_env : library_path);
}

// The Python startup directory (sitecustomize.py and the gpumemtrace package), or "".
std::string python_startup_dir(const std::string& bindir) {
  for (const std::string& candidate : python_candidates(bindir)) {
    if (exists(candidate + "/sitecustomize.py", S_IFREG)) {
      char resolved[PATH_MAX];
      return realpath(candidate.c_str(), resolved) ? resolved : candidate;
    }
  }
  return "";
}

// `gpumemtrace kernel install [--python PY] [OPTIONS]`: a Jupyter kernel for PY (default python3)
// that runs under the recorder. The kernel spec is written by the Python package
// (tools/python/gpumemtrace/kernel.py) with PY itself, so that it lands where that Python's Jupyter
// looks and names that interpreter; this only finds the library and the package. Exit: PY's status
// (0 installed, 2 with one line), 2 for bad usage or a missing piece.
const char kKernelHelp[] =
    "usage: gpumemtrace kernel install [--python PY] [--name NAME] [--display-name TEXT]\n"
    "                                  [--user | --prefix DIR | --sys-prefix] [--output DIR]\n"
    "\n"
    "Registers a Jupyter kernel whose ipykernel runs under the recorder; `%load_ext gpumemtrace` in it\n"
    "gives %%gpumemtrace, each cell's GPU memory shown under it (docs/notebooks.md).\n"
    "\n"
    "Options:\n"
    "  --python PY           the kernel's interpreter (default python3 on PATH); it needs ipykernel\n"
    "  --name NAME           the kernel's name (default gpumemtrace); an existing one is replaced\n"
    "  --display-name TEXT   the name the notebook shows (default \"Python 3 (gpumemtrace)\")\n"
    "  --user                into the user's Jupyter folder (~/.local/share/jupyter)\n"
    "  --prefix DIR          into DIR/share/jupyter\n"
    "  --sys-prefix          into PY's sys.prefix\n"
    "  --output DIR          the kernel's traces (default gpumemtrace-traces/ in the notebook's folder)\n"
    "  -h, --help            this text\n"
    "Without --user, --prefix or --sys-prefix: the system's folder, as `jupyter kernelspec install`.\n"
    "Exit status: 0 installed; 2 with one line when it cannot be (bad usage, a PY that cannot run or has\n"
    "no ipykernel, a folder that cannot be written).\n";

int kernel_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(kKernelHelp, stdout);
      return 0;
    }
  }
  if (argc < 2 || strcmp(argv[1], "install") != 0)
    return usage_error("expected `gpumemtrace kernel install [--python PY] [--name NAME] [--display-name TEXT] "
                       "[--user | --prefix DIR | --sys-prefix] [--output DIR]`");
  std::string python = "python3";
  std::vector<std::string> args;
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "--python") == 0 && i + 1 < argc) {
      python = argv[++i];
    } else if (strncmp(argv[i], "--python=", 9) == 0) {
      python = argv[i] + 9;
    } else {
      args.push_back(argv[i]);
    }
  }
  const std::string bindir = self_dir();
  const std::string library = recorder_library(bindir);
  const std::string python_dir = python_startup_dir(bindir);
  if (!exists(library, S_IFREG)) {
    fprintf(stderr, "gpumemtrace: the recorder library %s does not exist (build it with make, or set GPUMEMTRACE_LIBRARY)\n", library.c_str());
    return 2;
  }
  if (python_dir.empty() || !exists(python_dir + "/gpumemtrace/kernel.py", S_IFREG)) {
    fprintf(stderr, "gpumemtrace: the gpumemtrace Python package is not beside this program (%s)\n", bindir.c_str());
    return 2;
  }
  if (const int error = command_error(python)) {
    fprintf(stderr, "gpumemtrace: %s: %s (name the Python the kernel is for with --python)\n", python.c_str(),
            error == ENOENT && python.find('/') == std::string::npos ? "command not found" : strerror(error));
    return 2;
  }
  std::vector<std::string> cmd = {python, "-m", "gpumemtrace.kernel", "install", "--library", library,
                                  "--python-path", python_dir};
  cmd.insert(cmd.end(), args.begin(), args.end());
  const int status = spawn_and_wait(cmd, {{"PYTHONPATH", prepend_path("PYTHONPATH", python_dir)}}, false);
  return exit_code_of(status) == 0 ? 0 : 2;
}

// The launcher's command line: `run|ci [LAUNCHER AND REPORT OPTIONS] -- CMD [ARGS...]`.
struct LaunchOptions {
  bool ci = false;
  bool help = false;
  bool version = false;
  std::string output_dir;   // -o DIR: the traces; "" = a new directory
  std::string report_file;  // --report FILE: the report; "" = standard output (text) or DIR/report.EXT
  bool report_per_process = false;  // --report-per-process: TRACE.report.json beside each trace
  std::string keep;         // --keep D|SIZE: GPUMEMTRACE_KEEP for CMD; "" = not set here
  std::vector<std::string> report_options;  // everything else before `--`, for gpumem-report
  report::Options report;                   // report_options as gpumem-report will read them
  std::vector<std::string> cmd;
};

// Throws report::UsageError (one line, exit 2). The report options are checked here, with
// gpumem-report's own definition, so a typo is found before CMD runs, not after it.
LaunchOptions parse_command_line(int argc, char** argv) {
  LaunchOptions options;
  if (argc < 2) throw report::UsageError("expected a command: run, ci, top, dump or kernel");
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") return options.help = true, options;
  if (command == "--version") return options.version = true, options;
  if (command != "run" && command != "ci") {
    const char* const commands[] = {"run", "ci", "top", "dump", "kernel"};
    const char* const* nearest = util::nearest_name(command, commands, 1);
    throw report::UsageError("unknown command '" + command + "'" +
                             (nearest ? std::string("; did you mean ") + *nearest + "?" : ": expected run, ci, top, dump or kernel"));
  }
  options.ci = command == "ci";
  // Everything after the first `--` is CMD, untouched.
  std::vector<std::string> before;
  bool separator = false;
  for (int i = 2; i < argc; ++i) {
    if (!separator && std::string(argv[i]) == "--") {
      separator = true;
    } else {
      (separator ? options.cmd : before).push_back(argv[i]);
    }
  }
  CLI::App app{"", "gpumemtrace " + command};
  app.set_help_flag();
  app.allow_extras();  // the report's options, checked below
  app.add_flag("-h,--help", options.help);
  app.add_flag("--version", options.version);
  app.add_flag("-q,--quiet", g_quiet);
  app.add_option("-o,--output", options.output_dir)->type_name("DIR");
  app.add_option("--report", options.report_file)->type_name("FILE");
  app.add_flag("--report-per-process", options.report_per_process);
  app.add_option("--keep", options.keep)->type_name("D|SIZE");
  report::check_option_words(before, {"--output", "--report", "--quiet", "--report-per-process", "--keep"});
  std::vector<std::string> reversed(before.rbegin(), before.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    throw report::UsageError(error.what());
  }
  if (options.help || options.version) return options;
  uint64_t keep_ns, keep_bytes;
  if (!options.keep.empty() && !util::parse_keep(options.keep.c_str(), &keep_ns, &keep_bytes)) {
    throw report::UsageError("--keep " + options.keep + ": expected a duration such as 2h, 30min or 45s, or a size >= 128K such as 20G");
  }
  if (!separator) throw report::UsageError("missing '--' before the command to run");
  if (options.cmd.empty()) throw report::UsageError("no command after '--'");
  options.report_options = app.remaining();
  options.report = report::parse_forwarded_options(options.report_options);
  if (options.report.help || options.report.version) {
    throw report::UsageError("--help and --version come right after gpumemtrace, not before '--'");
  }
  return options;
}

// Where the report goes when --report is not given: text to standard output after CMD's own output;
// the other formats into DIR, so that they are never mixed with what CMD printed.
std::string default_report_file(const report::Options& report, const std::string& dir) {
  switch (report.format) {
    case report::OutputFormat::Text: return "";
    case report::OutputFormat::Json: return dir + "/report.json";
    case report::OutputFormat::Html: return dir + "/report.html";
    case report::OutputFormat::Perfetto: return dir + "/report.perfetto.json";
    case report::OutputFormat::Folded: return dir + "/report.folded";
  }
  return "";
}

// The leak gate as the pytest plugin applies it to each test inside pytest (GPUMEMTRACE_PYTEST_GATE): the
// gpumem-report options that decide a test's leak, one per line, --fail-on-leak=BYTES first.
std::string pytest_gate(const report::Options& report) {
  std::string gate = "--fail-on-leak=" + std::to_string(*report.fail_on_leak) + "\n";
  if (!report.suppressions.empty()) gate += "--suppressions=" + absolute(report.suppressions) + "\n";
  if (!report.default_suppressions) gate += "--no-default-suppressions\n";
  return gate;
}

// --report-per-process: each trace's own JSON report beside it (TRACE.report.json, the name
// `gpumem-report merge DIR` reads), with the leak rules the run's report uses. A report that cannot be
// made is said, and the others are still written.
void write_reports_per_process(const std::string& analyzer, const report::Options& options,
                               const std::vector<std::string>& traces) {
  for (const std::string& trace : traces) {
    const size_t slash = trace.rfind('/');
    const std::string out = trace.substr(0, slash + 1) + report::export_stem(trace) + ".report.json";
    std::vector<std::string> argv = {analyzer, "--format", "json", "--no-progress", "-o", out};
    if (!options.suppressions.empty()) argv.push_back("--suppressions=" + absolute(options.suppressions));
    if (!options.default_suppressions) argv.push_back("--no-default-suppressions");
    argv.push_back(trace);
    const int code = exit_code_of(spawn_and_wait(argv, {}, true));
    if (code != 0) fprintf(stderr, "gpumemtrace: gpumem-report exited with status %d for %s: no %s\n", code, trace.c_str(), out.c_str());
  }
}

// True when `path`'s directory exists and is writable: a report that could not be written is found
// before CMD runs.
bool report_file_writable(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  return exists(dir, S_IFDIR) && access(dir.c_str(), W_OK) == 0 && !exists(path, S_IFDIR);
}

}  // namespace

int main(int argc, char** argv) {
  // `gpumemtrace top`: the live view (tools/top.cpp), options of its own.
  if (argc >= 2 && strcmp(argv[1], "top") == 0) return gpumemtrace::top::main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "dump") == 0) return gpumemtrace::dump::main(argc - 1, argv + 1);
  if (argc >= 2 && strcmp(argv[1], "kernel") == 0) return kernel_main(argc - 1, argv + 1);
  LaunchOptions options;
  try {
    options = parse_command_line(argc, argv);
    if (!options.report.suppressions.empty()) report::Suppressions::load(options.report.suppressions);
  } catch (const report::UsageError& error) {
    return usage_error("%s", error.what());
  } catch (const std::exception& error) {  // a suppressions file that cannot be read or parsed
    fprintf(stderr, "gpumemtrace: %s\n", error.what());
    return 2;
  }
  if (options.help) {
    fputs(kHelp, stdout);
    return 0;
  }
  if (options.version) {
    printf("gpumemtrace %s\n", GPUMEMTRACE_VERSION);
    return 0;
  }
  const bool ci = options.ci;
  const std::vector<std::string>& cmd = options.cmd;
  const std::string output = options.output_dir.empty() ? default_output_dir() : options.output_dir;
  if (!options.report_file.empty() && !report_file_writable(options.report_file)) {
    return usage_error("--report %s: its directory does not exist or is not writable", options.report_file.c_str());
  }

  const std::string bindir = self_dir();
  if (bindir.empty()) {
    fprintf(stderr, "gpumemtrace: cannot find this program's own directory (/proc/self/exe: is /proc mounted?)\n");
    return 2;
  }
  const std::string library = recorder_library(bindir);
  // A relative GPUMEMTRACE_REPORT is resolved against the current directory, as GPUMEMTRACE_LIBRARY
  // is (a bare name would otherwise be checked here and then looked up on PATH by exec).
  const char* report_env = getenv(var::kReport);
  const std::string report = absolute(report_env && *report_env ? std::string(report_env) : bindir + "/gpumem-report");
  if (!exists(library, S_IFREG)) {
    fprintf(stderr, "gpumemtrace: the recorder library %s does not exist (build it with make, or set GPUMEMTRACE_LIBRARY)\n", library.c_str());
    return 2;
  }
  if (!is_elf(library)) {  // ld.so would only warn, in every process, and nothing would be traced
    fprintf(stderr, "gpumemtrace: the recorder library %s is not an ELF shared object\n", library.c_str());
    return 2;
  }
  if (access(report.c_str(), X_OK) != 0) {
    fprintf(stderr, "gpumemtrace: the analyzer %s is not an executable (build it with make, or set GPUMEMTRACE_REPORT; a relative one is resolved against the current directory)\n", report.c_str());
    return 2;
  }
  const std::string python_dir = python_startup_dir(bindir);

  // A command that cannot be run is said now, as exec would say it, and before DIR is made: not
  // after an empty run, as "no trace was written".
  if (const int error = command_error(cmd[0])) {
    const bool searched = cmd[0].find('/') == std::string::npos;
    fprintf(stderr, "gpumemtrace: %s: %s\n", cmd[0].c_str(),
            error == ENOENT && searched ? "command not found" : strerror(error));
    return error == ENOENT ? 127 : 126;
  }

  const std::string dir = absolute(output);
  const bool dir_existed = exists(dir, S_IFDIR);
  if (!mkdirs(dir)) {
    fprintf(stderr, "gpumemtrace: cannot create the output directory %s: %s\n", dir.c_str(), strerror(errno));
    return 2;
  }

  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", prepend_path("LD_PRELOAD", library)},
      {var::kOutput, dir + "/"},
  };
  if (!python_dir.empty()) env.push_back({"PYTHONPATH", prepend_path("PYTHONPATH", python_dir)});
  if (g_quiet) env.push_back({var::kQuiet, "1"});  // -q: not even the recorder's line
  if (!options.keep.empty()) env.push_back({var::kKeep, options.keep});
  // The launcher says where the traces go (below); the traced processes need not, unless asked.
  if (!getenv(var::kVerbose)) env.push_back({var::kVerbose, "0"});
  // pytest loads the modules PYTEST_PLUGINS names: the plugin makes every test a scope. (Where the wheel
  // is installed, pytest has loaded it through its entry point first, and the name finds it loaded.)
  if (!python_dir.empty() && exists(python_dir + "/gpumemtrace_pytest.py", S_IFREG) && !switched_off(var::kPytest)) {
    env.push_back({"PYTEST_PLUGINS", append_to_list("PYTEST_PLUGINS", "gpumemtrace_pytest")});
    if (ci && options.report.fail_on_leak) env.push_back({var::kPytestGate, pytest_gate(options.report)});
  }

  // A reused DIR may hold earlier runs' traces: only the files this run adds are its traces. (The
  // recorder never overwrites a file, so each of them is new.)
  const std::vector<std::string> before = list_entries(dir);

  note("tracing into %s/", dir.c_str());
  install_forwarding();
  int exec_error = 0;
  const int status = spawn_and_wait(cmd, env, true, &exec_error);
  const int cmd_code = exit_code_of(status);
  if (exec_error) {  // CMD never ran (the child said why): no report, and no directory left behind
    if (!dir_existed) rmdir(dir.c_str());
    return cmd_code;
  }
  // SIGPIPE: CMD wrote into a pipe whose reader left (`gpumemtrace run ... | head`); a shell says nothing.
  if (status >= 0 && WIFSIGNALED(status)) {
    if (WTERMSIG(status) != SIGPIPE)
      note("%s was killed by signal %d (%s)", cmd[0].c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else if (cmd_code != 0)
    note("%s exited with status %d", cmd[0].c_str(), cmd_code);

  std::vector<std::string> traces;
  for (const std::string& name : list_entries(dir)) {
    if (std::binary_search(before.begin(), before.end(), name)) continue;
    // The flight recorder's window sealed after an OOM (interpose/writer/flight.cpp): a part of the
    // process's own trace, read on its own.
    if (!options.keep.empty() && name.find("-oom.") != std::string::npos) {
      note("the window before the last OOM, on its own: %s/%s", dir.c_str(), name.c_str());
      continue;
    }
    traces.push_back(dir + "/" + name);
  }
  if (traces.empty()) {
    fprintf(stderr,
            "gpumemtrace: no trace was written into %s/ (did the program load the CUDA runtime? is "
            "LD_PRELOAD removed by the program?)\n",
            dir.c_str());
    return ci && cmd_code == 0 ? 2 : cmd_code;
  }

  if (options.report_per_process) write_reports_per_process(report, options.report, traces);

  std::vector<std::string> report_argv = {report};
  report_argv.insert(report_argv.end(), options.report_options.begin(), options.report_options.end());
  if (g_quiet) report_argv.push_back("--no-progress");
  const std::string report_file =
      options.report_file.empty() ? default_report_file(options.report, dir) : absolute(options.report_file);
  if (!report_file.empty()) report_argv.insert(report_argv.end(), {"-o", report_file});
  report_argv.insert(report_argv.end(), traces.begin(), traces.end());
  const int report_status = spawn_and_wait(report_argv, {}, true);
  const int report_code = exit_code_of(report_status);
  // 0, 1 and 3 are the analyzer's verdicts (fine, a gate failed, a gate met a cut trace); anything
  // else is its failure.
  const bool verdict = report_code == 0 || report_code == 1 || report_code == 3;
  if (report_code != 0 && !(ci && verdict))
    note("gpumem-report exited with status %d; the traces are in %s/", report_code, dir.c_str());
  else if (!report_file.empty())
    note("report written to %s; traces kept in %s/", report_file.c_str(), dir.c_str());
  else if (before.empty())
    note("traces kept in %s/ (read again with: gpumem-report %s)", dir.c_str(), dir.c_str());
  else
    note("traces kept in %s/ (this run's %zu file(s) beside %zu earlier entries)", dir.c_str(), traces.size(),
         before.size());

  if (!ci) return cmd_code;
  if (cmd_code != 0) return cmd_code;
  return verdict ? report_code : 2;  // a crashed analyzer is not a verdict
}
