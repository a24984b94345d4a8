/* clcrt: compile tile functions ahead of time, inspect and compare cubins, manage the
 * compile cache, summarise and draw timeline traces. The manual is docs/tool.md; `clcrt
 * COMMAND --help` prints each command's. */
#include <stdio.h>
#include <string.h>

#include "clcrt.h"
#include "tool.h"

static const char usage[] =
    "usage: clcrt COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Commands:\n"
    "  compile   compile a tile function into a cubin, with no GPU needed\n"
    "  inspect   show a cubin's architecture and each kernel's resources\n"
    "  diff      compare two cubins kernel by kernel; fail a CI check when resources grow\n"
    "  cache     list, describe or clear the compile cache\n"
    "  trace     summarise a timeline trace (JSON) or draw it as a PNG or SVG picture\n"
    "\n"
    "Options:\n"
    "  -h, --help     this text (COMMAND --help: that command's)\n"
    "  --version      the clcrt version\n"
    "\n"
    "Exit codes: 0 success; 1 diff --fail-on found growth; 2 usage error; 3 bad or\n"
    "unreadable input file (or an output that cannot be written); 4 compile error; 5 a\n"
    "needed external tool (nvdisasm) is missing.\n";

int tool_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return 0;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return TOOL_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    fputs(usage, stdout);
    return TOOL_OK;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("clcrt %d.%d.%d\n", CLCRT_VERSION_MAJOR, CLCRT_VERSION_MINOR, CLCRT_VERSION_PATCH);
    return TOOL_OK;
  }
  if (strcmp(cmd, "compile") == 0) return cmd_compile(argc - 1, argv + 1);
  if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 1, argv + 1);
  if (strcmp(cmd, "diff") == 0) return cmd_diff(argc - 1, argv + 1);
  if (strcmp(cmd, "cache") == 0) return cmd_cache(argc - 1, argv + 1);
  if (strcmp(cmd, "trace") == 0) return cmd_trace(argc - 1, argv + 1);
  fprintf(stderr, "clcrt: unknown command '%s'\n\n%s", cmd, usage);
  return TOOL_USAGE;
}
