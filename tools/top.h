// tools/top.h — `gpumemtrace top`: the launcher's live view (tools/top.cpp).
#pragma once

namespace gpumemtrace::top {

// `gpumemtrace top ARGS` (argv[0] is "top"). Returns the exit status.
int main(int argc, char** argv);

}  // namespace gpumemtrace::top
