// tests/e2e/programs/seccomp_filter.cpp — a program that installs a seccomp filter after start-up
// (as a sandbox does), then makes its first CUDA calls: the recorder starts under the filter.
//
// Usage: seccomp_filter CALL [kill]
//   CALL  rseq | futex | fstat | clone3 | clone | process_vm_readv | mincore | pipe2 | none: the system
//         call the filter refuses (EPERM), or, with `kill`, answers by killing the process
//         (SECCOMP_RET_KILL_PROCESS): none of them a call the program makes itself after that;
// then cudaMalloc, a mark with a label (the recorder reads the program's string), cudaFree, one thread
// of its own when the filter allows threads ("thread ok"), and "done". tests/e2e/test_hostile_start.py:
// the program runs as it would without the recorder.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace {

bool install_filter(const std::vector<long>& calls, bool kill) {
  std::vector<sock_filter> code{BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))};
  for (long call : calls) {
    code.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(call), 0, 1));
    code.push_back(BPF_STMT(BPF_RET | BPF_K, kill ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  }
  code.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog program{static_cast<unsigned short>(code.size()), code.data()};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

void* nothing(void* arg) { return arg; }

}  // namespace

int main(int argc, char** argv) {
  const std::string call = argc > 1 ? argv[1] : "none";
  const bool kill = argc > 2 && std::string(argv[2]) == "kill";
  std::vector<long> calls;
  if (call == "rseq") calls = {SYS_rseq};
  else if (call == "futex") calls = {SYS_futex};
  else if (call == "fstat") calls = {SYS_fstat, SYS_newfstatat, SYS_statx};
  else if (call == "clone3") calls = {SYS_clone3};
  else if (call == "clone") calls = {SYS_clone};
  else if (call == "process_vm_readv") calls = {SYS_process_vm_readv};
  else if (call == "mincore") calls = {SYS_mincore};
  else if (call == "pipe2") calls = {SYS_pipe2, SYS_pipe};
  else if (call != "none") return 2;
  if (!install_filter(calls, kill)) {
    std::perror("seccomp");
    return 3;
  }
  void* p = nullptr;
  if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 4;
  if (auto mark = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "gpumemtrace_report_mark")))
    mark("after the filter");
  if (cudaFree(p) != cudaSuccess) return 4;
  if (call != "rseq" && call != "futex" && call != "clone3") {  // the program's own threads work under this filter
    pthread_t thread;
    if (pthread_create(&thread, nullptr, nothing, nullptr) == 0 && pthread_join(thread, nullptr) == 0)
      std::printf("thread ok\n");
  }
  std::printf("done\n");
  return 0;
}
