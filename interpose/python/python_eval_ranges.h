// interpose/python/python_eval_ranges.h — where the interpreter's eval loop lives in memory, so that
// merge_stacks() can tell which native frames are `_PyEval_EvalFrameDefault` (each stands for one run
// of Python frames).
//
// The ranges come from the ELF symbol tables (.symtab when present, else .dynsym) of the object that
// holds `_PyEval_EvalFrameDefault`, including compiler-split parts such as
// `_PyEval_EvalFrameDefault.cold`: dladdr() misses those local symbols. Found by name, never by a
// heuristic.
//
// Thread-safety: find_eval_ranges() reads a file and allocates (writer thread, once, never the hot
// path); it never walks the loaded objects: the caller says which object and where it is loaded.
#pragma once

#include <cstdint>
#include <vector>

namespace gpumemtrace::python {

struct AddressRange {
  uintptr_t begin;
  uintptr_t end;  // exclusive
};

// Ranges of every `_PyEval_EvalFrameDefault*` symbol of the ELF file `path`, loaded with bias `bias`.
// When the file cannot be read (or names none), `exported` alone (the exported symbol's extent, from
// the loader), if not empty.
std::vector<AddressRange> find_eval_ranges(const char* path, uintptr_t bias, AddressRange exported);

}  // namespace gpumemtrace::python
