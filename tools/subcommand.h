// tools/subcommand.h — the launcher's subcommands (`top`, `dump`) parse their options alike.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>

namespace gpumemtrace::tools {

// Parses argv into `app` (the subcommand's options; argv[0] is its name). -1: go on; otherwise the exit
// status: 0 after --help (printed), 2 after a usage error (one line on stderr naming `program`).
inline int parse_subcommand(CLI::App& app, int argc, char** argv, const char* program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    fprintf(stderr, "%s: %s (see %s --help)\n", program, e.what(), program);
    return 2;
  }
  return -1;
}

}  // namespace gpumemtrace::tools
