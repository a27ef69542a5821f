// interpose/recorder/fork_marker.h — tells the address space the recorder started in from a copy of
// it made by a fork that ran no atfork handler.
//
// fork() runs the recorder's atfork handler, which resets the child's recorder (lifecycle.cpp,
// on_fork_child). glibc's _Fork(), clone() without CLONE_VM and a raw fork or clone system call run
// none: the child inherits a recorder that looks active, with a ring that the parent's writer thread
// drains, and that thread does not exist in the child. Its events would be lost, and once the ring was
// full its hooks would wait for room forever.
//
// The marker is a word on a page advised MADV_WIPEONFORK (Linux 4.14): the kernel hands every child
// that gets a copy of the address space a zero-filled page there, whoever made it, while threads and
// CLONE_VM children (vfork, posix_spawn), which share the parent's memory and its writer, see the
// parent's word. Checking it costs one load. Where the kernel refuses the advice, the pid is compared
// instead (a system call per check).
//
// Thread-safety: arm() runs on the recorder's start-up paths (one thread at a time in an address
// space); copied() from any thread, any time, async-signal-safe.
#pragma once

namespace gpumemtrace {

// Marks the calling address space as the recorder's own (again, in a child that starts over).
void arm_fork_marker() noexcept;

// True when the marker was armed in another address space and this one is a copy of it made without
// the atfork handler. False before arm_fork_marker() was ever called.
bool copied_without_fork_handler() noexcept;

}  // namespace gpumemtrace
