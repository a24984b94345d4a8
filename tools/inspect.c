/* clcrt inspect: a cubin's architecture and each kernel's resources, as text or JSON. */
#include <getopt.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

extern char **environ;

static const char help[] =
    "usage: clcrt inspect [--json] [--sass] FILE...\n"
    "\n"
    "Shows what a cubin, or a compile-cache entry (<key>.clce in the cache directory, see\n"
    "clcrt cache ls), holds, read from the ELF itself: the architecture (with its a/f\n"
    "variant) and, per kernel, registers, stack, static shared memory (the compiler's\n"
    "reserved part apart), parameters, cluster shape, block size, mbarriers, spills, the\n"
    "scheduler clcrt built it with, and whether the Cluster Launch Control instruction\n"
    "(UGETNEXTWORKID) is in its code.\n"
    "\n"
    "  --json   one JSON document (schema \"clcrt-inspect-1\", see docs/tool.md)\n"
    "  --sass   also disassemble with nvdisasm (CUDA toolkit); exit 5 when it is not on PATH\n"
    "  -h, --help\n"
    "\n"
    "Exit codes: 0 every file read; 2 usage error; 3 a file is missing, unreadable or not a\n"
    "cubin (the others are still shown); 5 --sass without nvdisasm.\n";

static char *find_on_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return NULL;
  while (*path) {
    size_t l = strcspn(path, ":");
    size_t cap = l + strlen(prog) + 3;
    char *cand = malloc(cap);
    if (!cand) return NULL;
    /* An empty PATH entry means the current directory, as in the shell. */
    snprintf(cand, cap, "%.*s/%s", l ? (int)l : 1, l ? path : ".", prog);
    if (access(cand, X_OK) == 0) return cand;
    free(cand);
    path += l + (path[l] == ':');
  }
  return NULL;
}

static void print_dims(const char *label, const uint32_t d[3]) {
  printf("    %-16s %" PRIu32 " x %" PRIu32 " x %" PRIu32 "\n", label, d[0], d[1], d[2]);
}

static void print_kernel(const clcrt__cubin_kernel *k, long long dynamic_smem) {
  printf("  kernel %s", k->name);
  if (k->sched) printf("  (clcrt scheduler: %s)", k->sched);
  printf("\n");
  if (k->registers != CLCRT__CUBIN_UNKNOWN) printf("    %-16s %d", "registers", k->registers);
  else printf("    %-16s not recorded", "registers");
  if (k->max_registers != CLCRT__CUBIN_UNKNOWN) printf(" (limit %d)", k->max_registers);
  printf("\n");
  printf("    %-16s %d bytes frame, %d bytes minimum stack\n", "stack", k->frame_bytes, k->min_stack_bytes);
  printf("    %-16s %" PRIu64 " bytes static", "shared memory", k->static_smem);
  if (k->reserved_smem) printf(" (%" PRIu64 " reserved by the compiler, %" PRIu64 " the kernel's)", k->reserved_smem,
                               k->static_smem - k->reserved_smem);
  if (dynamic_smem >= 0) printf("; %lld bytes dynamic (as registered)\n", dynamic_smem);
  else printf("; dynamic: set at launch\n");
  printf("    %-16s %d bytes, %d parameter%s", "parameters", k->param_bytes, k->num_params, k->num_params == 1 ? "" : "s");
  if (k->param_offset != CLCRT__CUBIN_UNKNOWN) printf(" at c[0x0][0x%x]", (unsigned)k->param_offset);
  printf("\n");
  if (k->cluster[0]) {
    print_dims("cluster", k->cluster);
    if (k->explicit_cluster) printf("    %-16s explicit (launch must use it)\n", "");
  } else {
    printf("    %-16s not fixed at compile time\n", "cluster");
  }
  if (k->reqntid[0]) print_dims("block (required)", k->reqntid);
  if (k->maxntid[0]) print_dims("block (maximum)", k->maxntid);
  if (!k->reqntid[0] && !k->maxntid[0]) printf("    %-16s not fixed at compile time\n", "block");
  printf("    %-16s %d\n", "mbarriers", k->num_mbarriers == CLCRT__CUBIN_UNKNOWN ? 0 : k->num_mbarriers);
  if (k->spill_loads == CLCRT__CUBIN_UNKNOWN) printf("    %-16s not recorded\n", "spills");
  else if (!k->spill_loads && !k->spill_stores) printf("    %-16s none\n", "spills");
  else if (k->spill_load_bytes != CLCRT__CUBIN_UNKNOWN)
    printf("    %-16s %d stores (%d bytes), %d loads (%d bytes)\n", "spills", k->spill_stores, k->spill_store_bytes,
           k->spill_loads, k->spill_load_bytes);
  else printf("    %-16s %d stores, %d loads\n", "spills", k->spill_stores, k->spill_loads);
  if (k->has_clc)
    printf("    %-16s yes: %d x UGETNEXTWORKID%s\n", "CLC try_cancel", k->clc_count,
           k->clc_broadcast ? " (.BROADCAST present)" : " (.SELFCAST)");
  else printf("    %-16s no\n", "CLC try_cancel");
  if (k->reg_reconfig) printf("    %-16s yes (setmaxnreg)\n", "reg reconfig");
  printf("    %-16s %" PRIu64 " bytes (%" PRIu64 " instructions)\n", "code", k->text_bytes, k->text_bytes / 16);
  if (k->num_attrs) {
    printf("    %-16s", "other records");
    for (size_t i = 0; i < k->num_attrs; i++) printf(" 0x%02x", k->attrs[i].id);
    printf(" (not decoded; see --json)\n");
  }
}

static void print_text(const tool_input *in) {
  const clcrt__cubin *c = &in->cubin;
  printf("%s: %s%s, ELF ABI v%d (e_flags 0x%08" PRIx32 ")", in->path, c->arch, in->is_cache_entry ? " (cache entry)" : "",
         c->abi_version, c->e_flags);
  if (c->toolkit_version != CLCRT__CUBIN_UNKNOWN)
    printf(", CUDA %d.%d", c->toolkit_version / 10, c->toolkit_version % 10);
  printf(", %zu kernel%s\n", c->num_kernels, c->num_kernels == 1 ? "" : "s");
  if (c->tool_options) printf("  built by %s with: %s\n", c->producer ? c->producer : "?", c->tool_options);
  for (size_t i = 0; i < c->num_kernels; i++) print_kernel(&c->kernels[i], in->dynamic_smem);
}

/* nvdisasm reads a file; a cache entry's cubin is written to a temporary one first. */
static int run_nvdisasm(const char *nvdisasm, const tool_input *in) {
  char tmp[] = "/tmp/clcrt-sass-XXXXXX";
  const char *file = in->path;
  if (in->is_cache_entry) {
    int fd = mkstemp(tmp);
    if (fd < 0 || write(fd, in->elf, in->elf_size) != (ssize_t)in->elf_size) {
      if (fd >= 0) close(fd), unlink(tmp);
      fprintf(stderr, "clcrt: %s: could not write a temporary file for nvdisasm\n", in->path);
      return TOOL_BADINPUT;
    }
    close(fd);
    file = tmp;
  }
  fflush(stdout);
  char *argv[] = {(char *)nvdisasm, (char *)file, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, nvdisasm, NULL, NULL, argv, environ), status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  if (in->is_cache_entry) unlink(tmp);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "clcrt: %s: nvdisasm failed\n", in->path);
    return TOOL_BADINPUT;
  }
  return TOOL_OK;
}

int cmd_inspect(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"sass", no_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {0, 0, 0, 0}};
  int json = 0, sass = 0, o;
  tool_getopt_start();
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (o == 'j') json = 1;
    else if (o == 's') sass = 1;
    else if (o == 'h') {
      fputs(help, stdout);
      return TOOL_OK;
    } else {
      fprintf(stderr, "clcrt inspect: unknown option '%s'\n\n%s", argv[optind - 1], help);
      return TOOL_USAGE;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "clcrt inspect: no FILE given\n\n%s", help);
    return TOOL_USAGE;
  }
  if (json && sass) {
    fprintf(stderr, "clcrt inspect: --sass prints text and cannot be combined with --json\n");
    return TOOL_USAGE;
  }
  char *nvdisasm = NULL;
  if (sass && !(nvdisasm = find_on_path("nvdisasm"))) {
    fprintf(stderr, "clcrt inspect: --sass needs nvdisasm, which is not on the PATH; it ships with the full CUDA "
                    "toolkit (add <cuda>/bin to PATH)\n");
    return TOOL_NOTOOL;
  }
  int rc = TOOL_OK, first_ok = 1;
  if (json) printf("{\"schema\": \"clcrt-inspect-1\", \"files\": [");
  /* Errors are collected for the JSON document's "errors" list. */
  size_t nerr = 0;
  char **errs = calloc((size_t)argc, sizeof(char *));
  for (int i = optind; i < argc; i++) {
    tool_input in;
    if (tool_input_load(&in, argv[i]) != TOOL_OK) {
      fprintf(stderr, "clcrt: %s: %s\n", argv[i], in.err);
      if (errs && (errs[nerr] = malloc(strlen(argv[i]) + strlen(in.err) + 3)))
        sprintf(errs[nerr++], "%s\n%s", argv[i], in.err);
      tool_input_free(&in);
      rc = TOOL_BADINPUT;
      continue;
    }
    if (json) {
      printf("%s\n  {", first_ok ? "" : ",");
      json_cubin_header(stdout, &in);
      printf(",\n    \"kernels\": [");
      for (size_t k = 0; k < in.cubin.num_kernels; k++) {
        printf("%s\n    ", k ? "," : "");
        json_kernel(stdout, &in.cubin.kernels[k], in.dynamic_smem, "    ");
      }
      printf("]}");
    } else {
      if (!first_ok) printf("\n");
      print_text(&in);
      if (nvdisasm) {
        int r = run_nvdisasm(nvdisasm, &in);
        if (r != TOOL_OK) rc = r;
      }
    }
    first_ok = 0;
    tool_input_free(&in);
  }
  if (json) {
    printf("\n], \"errors\": [");
    for (size_t e = 0; e < nerr; e++) {
      char *nl = strchr(errs[e], '\n');
      *nl = 0;
      printf("%s{\"path\": ", e ? ", " : "");
      json_str(stdout, errs[e]);
      printf(", \"error\": ");
      json_str(stdout, nl + 1);
      printf("}");
    }
    printf("]}\n");
  }
  for (size_t e = 0; e < nerr; e++) free(errs[e]);
  free(errs);
  free(nvdisasm);
  return rc;
}
