/* clcrt diff: kernel-by-kernel differences between two builds, and the CI check
 * (--fail-on) that fails when a named resource grows. */
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char help[] =
    "usage: clcrt diff [--json] [--fail-on LIST] OLD NEW\n"
    "\n"
    "Compares two cubins (or compile-cache entries) kernel by kernel and prints every field\n"
    "that differs, kernels only in one of them, and a change of architecture. Kernels are\n"
    "matched by name; a clcrt kernel left over (clcrt_<sched>_<fn>) is matched with the one\n"
    "left over on the other side that runs the same tile function <fn> under another\n"
    "scheduler, such as clcrt_steal_f of an sm_90a build and clcrt_clc_f of an sm_100a one.\n"
    "\n"
    "  --json           one JSON document (schema \"clcrt-diff-1\", see docs/tool.md)\n"
    "  --fail-on LIST   comma-separated: regs, spills, smem, stack, all. Exit 1 when a\n"
    "                   kernel present in both has more of a named resource in NEW:\n"
    "                   regs = registers; spills = spill loads or stores (count or bytes);\n"
    "                   smem = static shared memory; stack = stack frame bytes\n"
    "  -h, --help\n"
    "\n"
    "Exit codes: 0 compared (differences alone do not fail); 1 --fail-on found growth;\n"
    "2 usage error; 3 OLD or NEW missing, unreadable or not a cubin.\n";

enum { F_REGS = 1, F_SPILLS = 2, F_SMEM = 4, F_STACK = 8 };

typedef struct field {
  const char *name;
  int fail_class; /* which --fail-on item watches this field, 0 none */
  size_t off;
  int is_u64;
} field;

#define FI(name, cls, member) {name, cls, offsetof(clcrt__cubin_kernel, member), 0}
#define FU(name, cls, member) {name, cls, offsetof(clcrt__cubin_kernel, member), 1}
static const field fields[] = {
    FI("registers", F_REGS, registers),
    FI("max_registers", 0, max_registers),
    FI("frame_bytes", F_STACK, frame_bytes),
    FI("min_stack_bytes", 0, min_stack_bytes),
    FU("static_smem", F_SMEM, static_smem),
    FU("reserved_smem", 0, reserved_smem),
    FI("spill_stores", F_SPILLS, spill_stores),
    FI("spill_loads", F_SPILLS, spill_loads),
    FI("spill_store_bytes", F_SPILLS, spill_store_bytes),
    FI("spill_load_bytes", F_SPILLS, spill_load_bytes),
    FI("param_bytes", 0, param_bytes),
    FI("num_params", 0, num_params),
    FI("mbarriers", 0, num_mbarriers),
    FI("barriers", 0, num_barriers),
    FI("clc_instructions", 0, clc_count),
    FI("clc_broadcast", 0, clc_broadcast),
    FI("reg_reconfig", 0, reg_reconfig),
    FU("text_bytes", 0, text_bytes),
};

static long long value(const clcrt__cubin_kernel *k, const field *f) {
  const char *p = (const char *)k + f->off;
  if (f->is_u64) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return (long long)v;
  }
  int v;
  memcpy(&v, p, sizeof v);
  return v;
}

static int parse_fail_on(const char *s, int *mask) {
  char buf[128];
  if (strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "regs") == 0) *mask |= F_REGS;
    else if (strcmp(t, "spills") == 0) *mask |= F_SPILLS;
    else if (strcmp(t, "smem") == 0) *mask |= F_SMEM;
    else if (strcmp(t, "stack") == 0) *mask |= F_STACK;
    else if (strcmp(t, "all") == 0) *mask |= F_REGS | F_SPILLS | F_SMEM | F_STACK;
    else return -1;
  }
  return 0;
}

static const char *class_name(int c) {
  return c == F_REGS ? "regs" : c == F_SPILLS ? "spills" : c == F_SMEM ? "smem" : c == F_STACK ? "stack" : "";
}

static const clcrt__cubin_kernel *find(const clcrt__cubin *c, const char *name) {
  for (size_t i = 0; i < c->num_kernels; i++)
    if (strcmp(c->kernels[i].name, name) == 0) return &c->kernels[i];
  return NULL;
}

/* The tile function a clcrt kernel runs: its name after clcrt_<sched>_, NULL for others. */
static const char *tile_fn_of(const clcrt__cubin_kernel *k) {
  return k->sched ? k->name + strlen("clcrt_") + strlen(k->sched) + 1 : NULL;
}

/* How many kernels of c that have no partner of the same name in `other` run tile function fn;
 * *last gets the last of them. */
static size_t unpaired_with_fn(const clcrt__cubin *c, const clcrt__cubin *other, const char *fn,
                               const clcrt__cubin_kernel **last) {
  size_t n = 0;
  for (size_t i = 0; i < c->num_kernels; i++) {
    const clcrt__cubin_kernel *k = &c->kernels[i];
    if (find(other, k->name) || !tile_fn_of(k) || strcmp(tile_fn_of(k), fn)) continue;
    n++;
    *last = k;
  }
  return n;
}

/* The kernel of b that k of a is compared with: the one of the same name; else, for a clcrt
 * kernel, the one kernel of b that runs the same tile function under another scheduler
 * (clcrt_steal_f on sm_90a, clcrt_clc_f on sm_100a: AUTO's two choices of one registration),
 * when that pairing is unambiguous on both sides. NULL when there is none. */
static const clcrt__cubin_kernel *partner(const clcrt__cubin *a, const clcrt__cubin *b, const clcrt__cubin_kernel *k) {
  const clcrt__cubin_kernel *same = find(b, k->name), *in_b = NULL, *in_a = NULL;
  if (same || !tile_fn_of(k)) return same;
  if (unpaired_with_fn(b, a, tile_fn_of(k), &in_b) != 1) return NULL;
  return unpaired_with_fn(a, b, tile_fn_of(k), &in_a) == 1 ? in_b : NULL;
}

static void dims_str(char *buf, size_t n, const uint32_t d[3]) {
  if (!d[0] && !d[1] && !d[2]) snprintf(buf, n, "none");
  else snprintf(buf, n, "%" PRIu32 "x%" PRIu32 "x%" PRIu32, d[0], d[1], d[2]);
}

/* Compares one kernel present in both; returns how many --fail-on checks it failed. */
static int diff_kernel(const clcrt__cubin_kernel *a, const clcrt__cubin_kernel *b, int mask, int json, int *nchanges) {
  int failed = 0, n = 0;
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    const field *f = &fields[i];
    long long va = value(a, f), vb = value(b, f);
    if (va == vb) continue;
    int known = f->is_u64 || (va != CLCRT__CUBIN_UNKNOWN && vb != CLCRT__CUBIN_UNKNOWN);
    int grew = known && vb > va && (mask & f->fail_class);
    failed += grew;
    if (json) {
      printf("%s{\"field\": \"%s\", \"old\": ", n ? ", " : "", f->name);
      json_int_or_null(stdout, va, f->is_u64 || va != CLCRT__CUBIN_UNKNOWN);
      printf(", \"new\": ");
      json_int_or_null(stdout, vb, f->is_u64 || vb != CLCRT__CUBIN_UNKNOWN);
      printf(", \"fails\": %s}", grew ? "true" : "false");
    } else {
      char sa[32], sb[32];
      snprintf(sa, sizeof sa, f->is_u64 || va != CLCRT__CUBIN_UNKNOWN ? "%lld" : "unknown", va);
      snprintf(sb, sizeof sb, f->is_u64 || vb != CLCRT__CUBIN_UNKNOWN ? "%lld" : "unknown", vb);
      printf("    %-18s %s -> %s", f->name, sa, sb);
      if (known) printf(" (%+lld)", vb - va);
      if (grew) printf("  FAIL (--fail-on %s)", class_name(f->fail_class));
      printf("\n");
    }
    n++;
  }
  static const char *const dnames[] = {"cluster", "reqntid", "maxntid"};
  const uint32_t *da[] = {a->cluster, a->reqntid, a->maxntid}, *db[] = {b->cluster, b->reqntid, b->maxntid};
  for (int i = 0; i < 3; i++) {
    if (memcmp(da[i], db[i], 3 * sizeof(uint32_t)) == 0) continue;
    if (json) {
      printf("%s{\"field\": \"%s\", \"old\": ", n ? ", " : "", dnames[i]);
      json_dims(stdout, da[i]);
      printf(", \"new\": ");
      json_dims(stdout, db[i]);
      printf(", \"fails\": false}");
    } else {
      char sa[48], sb[48];
      dims_str(sa, sizeof sa, da[i]);
      dims_str(sb, sizeof sb, db[i]);
      printf("    %-18s %s -> %s\n", dnames[i], sa, sb);
    }
    n++;
  }
  if ((a->sched == NULL) != (b->sched == NULL) || (a->sched && strcmp(a->sched, b->sched) != 0)) {
    if (json) {
      printf("%s{\"field\": \"sched\", \"old\": ", n ? ", " : "");
      json_str(stdout, a->sched);
      printf(", \"new\": ");
      json_str(stdout, b->sched);
      printf(", \"fails\": false}");
    } else {
      printf("    %-18s %s -> %s\n", "sched", a->sched ? a->sched : "none", b->sched ? b->sched : "none");
    }
    n++;
  }
  *nchanges = n;
  return failed;
}

int cmd_diff(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"fail-on", required_argument, NULL, 'f'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  int json = 0, mask = 0, o;
  tool_getopt_start();
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (o == 'j') json = 1;
    else if (o == 'f') {
      if (parse_fail_on(optarg, &mask)) {
        fprintf(stderr, "clcrt diff: --fail-on '%s': expected a comma-separated list of regs, spills, smem, stack, all\n",
                optarg);
        return TOOL_USAGE;
      }
    } else if (o == 'h') {
      fputs(help, stdout);
      return TOOL_OK;
    } else {
      fprintf(stderr, "clcrt diff: %s '%s'\n\n%s", o == ':' || optopt ? "option needs a value or is unknown:" : "unknown option",
              argv[optind - 1], help);
      return TOOL_USAGE;
    }
  }
  if (argc - optind != 2) {
    fprintf(stderr, "clcrt diff: expected two files, OLD and NEW\n\n%s", help);
    return TOOL_USAGE;
  }
  tool_input a, b;
  int ra = tool_input_load(&a, argv[optind]);
  if (ra != TOOL_OK) fprintf(stderr, "clcrt: %s: %s\n", argv[optind], a.err);
  int rb = tool_input_load(&b, argv[optind + 1]);
  if (rb != TOOL_OK) fprintf(stderr, "clcrt: %s: %s\n", argv[optind + 1], b.err);
  if (ra != TOOL_OK || rb != TOOL_OK) {
    tool_input_free(&a);
    tool_input_free(&b);
    return TOOL_BADINPUT;
  }
  const clcrt__cubin *ca = &a.cubin, *cb = &b.cubin;
  int failed = 0, any = 0;
  if (json) {
    printf("{\"schema\": \"clcrt-diff-1\", \"old\": ");
    json_str(stdout, a.path);
    printf(", \"new\": ");
    json_str(stdout, b.path);
    printf(",\n \"arch\": {\"old\": \"%s\", \"new\": \"%s\"},\n \"kernels\": [", ca->arch, cb->arch);
  } else if (strcmp(ca->arch, cb->arch) != 0) {
    printf("architecture: %s -> %s\n", ca->arch, cb->arch);
    any = 1;
  }
  size_t shown = 0;
  for (size_t i = 0; i < ca->num_kernels; i++) {
    const clcrt__cubin_kernel *ka = &ca->kernels[i], *kb = partner(ca, cb, ka);
    const int renamed = kb && strcmp(ka->name, kb->name) != 0;
    if (json) {
      printf("%s\n  {\"name\": ", shown++ ? "," : "");
      json_str(stdout, ka->name);
      if (renamed) {
        printf(", \"new_name\": ");
        json_str(stdout, kb->name);
      }
      printf(", \"status\": \"%s\", \"changes\": [", kb ? "compared" : "removed");
      int n = 0;
      if (kb) failed += diff_kernel(ka, kb, mask, 1, &n);
      printf("]}");
      continue;
    }
    if (!kb) {
      printf("kernel %s: only in OLD\n", ka->name);
      any = 1;
      continue;
    }
    /* The header line is printed before knowing whether anything differs, then the
     * kernel is reported as unchanged when nothing did. */
    if (renamed)
      printf("kernel %s -> %s (tile function %s, scheduler %s -> %s):\n", ka->name, kb->name, tile_fn_of(ka),
             ka->sched, kb->sched);
    else
      printf("kernel %s:\n", ka->name);
    int n = 0;
    failed += diff_kernel(ka, kb, mask, 0, &n);
    if (!n) printf("    unchanged\n");
    else any = 1;
  }
  for (size_t i = 0; i < cb->num_kernels; i++) {
    const clcrt__cubin_kernel *kb = &cb->kernels[i];
    if (partner(cb, ca, kb)) continue; /* compared above: pairing is symmetric */
    if (json) {
      printf("%s\n  {\"name\": ", shown++ ? "," : "");
      json_str(stdout, cb->kernels[i].name);
      printf(", \"status\": \"added\", \"changes\": []}");
    } else {
      printf("kernel %s: only in NEW\n", cb->kernels[i].name);
      any = 1;
    }
  }
  if (json) {
    printf("\n ],\n \"fail_on\": [");
    int first = 1;
    for (int c = F_REGS; c <= F_STACK; c <<= 1)
      if (mask & c) printf("%s\"%s\"", first ? "" : ", ", class_name(c)), first = 0;
    printf("], \"failed\": %s}\n", failed ? "true" : "false");
  } else {
    if (!any) printf("no differences\n");
    if (failed) printf("clcrt diff: %d resource%s grew (--fail-on)\n", failed, failed == 1 ? "" : "s");
  }
  tool_input_free(&a);
  tool_input_free(&b);
  return failed ? TOOL_CHECK : TOOL_OK;
}
