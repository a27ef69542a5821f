// interpose/python/python_offsets.h — the pinned memory layout of the CPython structures the frame
// reader walks, per minor version (x86-64, default GIL builds only).
//
// None of this is supported API. Each number below was taken with offsetof() against that version's
// own internal headers (Include/internal/pycore_frame.h & co.); tests/python/test_python_stacks.py
// exercises every row on the installed CPythons (3.9.18 3.10.13 3.11.7/3.11.2 3.12.1 3.13.0). The reader checks
// the running interpreter's version (Py_GetVersion) before using a row, and an unknown version disables
// Python frames with one warning. Same approach as py-spy and austin.
//
// Thread-safety: constants only.
#pragma once

#include <cstdint>

namespace gpumemtrace::python {

enum class FrameLayout : uint8_t {
  kFrameObject,  // 3.9, 3.10: a linked list of PyFrameObject, one native eval frame per Python frame
  kIsEntry,      // 3.11: _PyInterpreterFrame with an is_entry flag on the last frame of an eval call
  kCStackOwner,  // 3.12, 3.13: _PyInterpreterFrame; each eval call starts with a shim frame owned by
                 // the C stack (owner == 3) that the walk skips
};

struct PythonOffsets {
  int minor;                 // 3.<minor>
  FrameLayout layout;
  // PyThreadState -> innermost frame: *(ts + tstate_frame) is the frame, or, when tstate_cframe >= 0,
  // *(*(ts + tstate_cframe) + cframe_current) is.
  int tstate_cframe;         // -1: none
  int cframe_current;
  int tstate_frame;          // used when tstate_cframe < 0
  // frame
  int frame_back;            // f_back / previous
  int frame_code;            // f_code / f_executable
  int frame_lasti;           // 3.9-3.10: int f_lasti; 3.11+: _Py_CODEUNIT* prev_instr / instr_ptr
  int lasti_scale;           // 3.9: bytes (1); 3.10: instructions (2); unused 3.11+
  int frame_is_entry;        // 3.11 (bool); -1 otherwise
  int frame_owner;           // 3.11+ (char); -1 before
  // PyCodeObject
  int code_filename;
  int code_name;             // co_qualname on 3.11+ ("Model.forward"), co_name before
  int code_firstlineno;
  int code_linetable;        // co_lnotab (3.9), co_linetable (3.10+, two different formats)
  int code_adaptive;         // 3.11+: offset of co_code_adaptive (the first instruction); -1 before
  // PyUnicodeObject (compact): sizeof(PyASCIIObject) and sizeof(PyCompactUnicodeObject)
  int ascii_size;
  int compact_size;
};

// Common to 3.9-3.13 (verified by the same test): ob_type at +8, ob_size (PyVarObject) at +16,
// PyBytesObject.ob_sval at +32, PyASCIIObject.length at +16 and .state at +32.
inline constexpr int kObType = 8;
inline constexpr int kObSize = 16;
inline constexpr int kBytesData = 32;
inline constexpr int kUnicodeLength = 16;
inline constexpr int kUnicodeState = 32;
inline constexpr int kOwnedByCStack = 3;  // FRAME_OWNED_BY_CSTACK (3.12+)

inline constexpr PythonOffsets kPythonOffsets[] = {
    // minor layout                    tcf  cfc  tfr back code lasti sc  entry owner file name first lt  adapt asc cmp
    {9, FrameLayout::kFrameObject, -1, 0, 24, 24, 32, 104, 1, -1, -1, 104, 112, 40, 120, -1, 48, 72},
    {10, FrameLayout::kFrameObject, -1, 0, 24, 24, 32, 96, 2, -1, -1, 104, 112, 40, 120, -1, 48, 72},
    {11, FrameLayout::kIsEntry, 56, 8, 0, 48, 32, 56, 1, 68, 69, 112, 128, 72, 136, 184, 48, 72},
    {12, FrameLayout::kCStackOwner, 56, 0, 0, 8, 0, 56, 1, -1, 70, 112, 128, 68, 136, 192, 40, 56},
    {13, FrameLayout::kCStackOwner, -1, 0, 72, 8, 0, 56, 1, -1, 70, 112, 128, 68, 136, 200, 40, 56},
};

// The row for 3.<minor>, or nullptr when that version is not supported.
inline const PythonOffsets* python_offsets_for(int major, int minor) {
  if (major != 3) return nullptr;
  for (const PythonOffsets& o : kPythonOffsets)
    if (o.minor == minor) return &o;
  return nullptr;
}

}  // namespace gpumemtrace::python
