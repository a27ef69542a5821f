// tests/e2e/programs/signal_view.cpp — what a program sees of its signal actions, and what chaining to
// "the previous handler" does, once the recorder runs. For tests/e2e/test_invisible.py, which
// compares each mode's output and exit status with and without the recorder.
//   signal_view view      allocates 1001 bytes (the recorder starts), then prints the action
//                         sigaction() reports for SIGTERM, SIGINT, SIGHUP and SIGABRT, and what
//                         signal() returns when a handler replaces the default one
//   signal_view own       installs a SIGTERM handler, allocates, prints what sigaction() reports
//   signal_view chain     allocates; a "library" installs a SIGINT handler that chains to the
//                         handler it replaced when that is a function (as many do), raises SIGINT,
//                         prints "survived", exits 0
//   signal_view ignore    allocates, ignores SIGTERM, raises it, prints "survived"
//   signal_view resethand allocates, installs a SA_RESETHAND handler for SIGTERM, raises SIGTERM twice:
//                         the first is handled, the second ends the process
//   signal_view vfork     allocates, installs a SIGINT handler, then a vfork child sets SIGINT back to
//                         the default before it exits (as CPython's subprocess does before its exec);
//                         the parent raises SIGINT: its handler runs, it prints "survived", exits 0
#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

void allocate() {
  void* p = nullptr;
  cudaMalloc(&p, 1001);
}

void own_handler(int) {}

const char* describe(void (*handler)(int)) {
  if (handler == SIG_DFL) return "default";
  if (handler == SIG_IGN) return "ignored";
  if (handler == own_handler) return "own handler";
  return "someone else's handler";
}

struct sigaction g_previous;
void chaining_handler(int sig) {
  const char msg[] = "library handler\n";
  ssize_t ignored = write(STDOUT_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    if (g_previous.sa_flags & SA_SIGINFO)
      g_previous.sa_sigaction(sig, nullptr, nullptr);
    else
      g_previous.sa_handler(sig);
  }
}

void say_handled(int) {
  const char msg[] = "handled\n";
  ssize_t ignored = write(STDOUT_FILENO, msg, sizeof msg - 1);
  (void)ignored;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc == 2 ? argv[1] : "";
  if (!strcmp(mode, "own")) signal(SIGTERM, own_handler);
  allocate();
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (!strcmp(mode, "view") || !strcmp(mode, "own")) {
    const int signals[] = {SIGTERM, SIGINT, SIGHUP, SIGABRT};
    for (int sig : signals) {
      struct sigaction now;
      sigaction(sig, nullptr, &now);
      printf("%s: %s\n", strsignal(sig), describe(now.sa_handler));
    }
    printf("signal() replaced: %s\n", describe(signal(SIGHUP, own_handler)));
    printf("signal() replaced: %s\n", describe(signal(SIGHUP, SIG_DFL)));
    return 0;
  }
  if (!strcmp(mode, "chain")) {
    struct sigaction sa = {};
    sa.sa_handler = chaining_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_previous);
    raise(SIGINT);
    printf("survived\n");
    return 0;
  }
  if (!strcmp(mode, "ignore")) {
    signal(SIGTERM, SIG_IGN);
    raise(SIGTERM);
    printf("survived\n");
    return 0;
  }
  if (!strcmp(mode, "resethand")) {
    struct sigaction sa = {};
    sa.sa_handler = say_handled;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    raise(SIGTERM);
    printf("once\n");
    raise(SIGTERM);
    printf("twice\n");
    return 0;
  }
  if (!strcmp(mode, "vfork")) {
    signal(SIGINT, say_handled);
    const pid_t child = vfork();
    if (child == 0) {
      signal(SIGINT, SIG_DFL);  // the child's own action, in its parent's memory
      _exit(0);
    }
    int status = 0;
    if (child > 0) waitpid(child, &status, 0);
    raise(SIGINT);
    printf("survived\n");
    return 0;
  }
  fprintf(stderr, "usage: signal_view view|own|chain|ignore|resethand|vfork\n");
  return 2;
}
