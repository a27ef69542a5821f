// tests/python/progs/late_python_host.c — a non-Python program that loads libpython late.
// It allocates (the frame reader looks for CPython and finds none), then loads libpython (argv[1]) and
// runs Python (argv[2]) that allocates through the global scope. Used by
// tests/python/test_python_trace.py: the late libpython must be noticed (the writer notes new
// objects), and the second allocation get its Python frames. Linked against the simulated runtime.
#define _DEFAULT_SOURCE /* usleep */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

int cudaMalloc(void** p, size_t n);

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* p;
  cudaMalloc(&p, 4242); /* before libpython */
  void* py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!py) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  usleep(500 * 1000); /* the writer's periodic module refresh (GPUMEMTRACE_FLUSH_MS) sees it */
  void (*init)(void) = (void (*)(void))dlsym(py, "Py_Initialize");
  int (*run)(const char*) = (int (*)(const char*))dlsym(py, "PyRun_SimpleString");
  if (!init || !run) return 2;
  init();
  return run(argv[2]) == 0 ? 0 : 3;
}
