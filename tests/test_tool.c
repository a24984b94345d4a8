/* The clcrt tool, run as a program (CLCRT_TEST_TOOL) on real cubins: every command, its
 * output and its exit code, including hostile inputs. Cubins come from nvcc
 * (tests/cubin_fixtures.h) and from `clcrt compile` itself for sm_90a and sm_100a. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cubin_fixtures.h"

static const char *tool(void) {
  const char *t = getenv("CLCRT_TEST_TOOL");
  return t && *t ? t : "build/clcrt";
}

static char tmpdir[256];
static char *out_text, *err_text;

/* Runs `clcrt ARGS` (a shell fragment) with extra environment assignments env (may be
 * ""); returns the exit code and keeps stdout and stderr in out_text / err_text. */
static int run_env(const char *env, const char *fmt, ...) {
  char args[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s %s %s > %s/out 2> %s/err", env, tool(), args, tmpdir, tmpdir);
  int st = system(cmd);
  free(out_text);
  free(err_text);
  char p[512];
  size_t n;
  snprintf(p, sizeof p, "%s/out", tmpdir);
  out_text = (char *)slurp(p, &n);
  snprintf(p, sizeof p, "%s/err", tmpdir);
  err_text = (char *)slurp(p, &n);
  ck_assert_msg(out_text && err_text, "could not read the output of: %s", cmd);
  ck_assert_msg(WIFEXITED(st), "killed: %s", cmd);
  return WEXITSTATUS(st);
}
#define run(...) run_env("", __VA_ARGS__)

static void has(const char *text, const char *what) {
  ck_assert_msg(strstr(text, what) != NULL, "expected \"%s\" in:\n%.2000s", what, text);
}

static void lacks(const char *text, const char *what) {
  ck_assert_msg(strstr(text, what) == NULL, "did not expect \"%s\" in:\n%.2000s", what, text);
}

/* The JSON must parse, when python3 is there to check it. */
static void valid_json(const char *what) {
  if (system("command -v python3 >/dev/null 2>&1") != 0) return;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s/out", tmpdir);
  ck_assert_msg(system(cmd) == 0, "%s: output is not valid JSON:\n%s", what, out_text);
}

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/clcrt-test-tool-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

static const char *fx(const char *name) { return fixture_path(name, "cubin"); }

START_TEST(help_and_version) {
  static const char *const cmds[] = {"", "compile ", "inspect ", "diff ", "cache "};
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    ck_assert_int_eq(run("%s--help", cmds[i]), 0);
    has(out_text, "usage: clcrt");
    has(out_text, "Exit codes");
  }
  ck_assert_int_eq(run("--version"), 0);
  has(out_text, "clcrt 0.");
  /* Every help names cache entries as the cache writes them (cache_commands lists *.clce). */
  for (size_t i = 1; i < sizeof cmds / sizeof *cmds; i++) {
    ck_assert_int_eq(run("%s--help", cmds[i]), 0);
    lacks(out_text, ".clcrt");
  }
  ck_assert_int_eq(run("inspect --help"), 0);
  has(out_text, "<key>.clce");
}
END_TEST

START_TEST(usage_errors) {
  ck_assert_int_eq(run(""), 2);
  ck_assert_int_eq(run("frobnicate"), 2);
  has(err_text, "unknown command");
  ck_assert_int_eq(run("inspect"), 2);
  ck_assert_int_eq(run("inspect --bogus %s", fx("cluster_90a")), 2);
  ck_assert_int_eq(run("diff %s", fx("cluster_90a")), 2);
  ck_assert_int_eq(run("diff --fail-on registers %s %s", fx("cluster_90a"), fx("cluster_90a")), 2);
  ck_assert_int_eq(run("compile --fn f --args A x.cu"), 2);
  has(err_text, "clcrt compile: --arch is required\n"); /* the missing flag, and only it */
  ck_assert_int_eq(run("compile --arch sm_90a --args A x.cu"), 2);
  has(err_text, "clcrt compile: --fn is required\n");
  ck_assert_int_eq(run("compile --arch sm_90a --fn f x.cu"), 2);
  has(err_text, "clcrt compile: --args is required\n");
  ck_assert_int_eq(run("compile --fn f x.cu"), 2);
  has(err_text, "clcrt compile: --arch and --args are required\n");
  ck_assert_int_eq(run("compile --arch sm_90a --fn f --args A --smem 48X x.cu"), 2);
  has(err_text, "--smem wants a number of bytes, with an optional K or M suffix");
  ck_assert_int_eq(run("compile --arch sm_90a --fn f --args A --block 0,1 x.cu"), 2);
  ck_assert_int_eq(run("cache frob"), 2);
  ck_assert_int_eq(run("inspect --json --sass %s", fx("cluster_90a")), 2);
}
END_TEST

START_TEST(inspect_text) {
  ck_assert_int_eq(run("inspect %s %s %s", fx("cluster_90a"), fx("cluster_100a"), fx("clc_100a")), 0);
  has(out_text, "sm_90a, ELF ABI v8 (e_flags 0x06005a04), CUDA 13.0, 2 kernels");
  has(out_text, "sm_100a, ELF ABI v8 (e_flags 0x06006402)");
  has(out_text, "kernel cluster_kernel");
  has(out_text, "cluster          2 x 2 x 1");
  has(out_text, "5128 bytes static (1024 reserved by the compiler, 4104 the kernel's)");
  has(out_text, "block (maximum)  256 x 1 x 1");
  has(out_text, "yes: 1 x UGETNEXTWORKID (.BROADCAST present)");
  has(out_text, "yes: 1 x UGETNEXTWORKID (.SELFCAST)");
  ck_assert_int_eq(run("inspect %s", fx("spill_90a")), 0);
  has(out_text, "registers        32 (limit 32)");
  has(out_text, "bytes), ");
  has(out_text, "loads (");
  ck_assert_int_eq(run("inspect %s", fx("cluster_100f")), 0);
  has(out_text, "sm_100f");
}
END_TEST

START_TEST(inspect_json) {
  ck_assert_int_eq(run("inspect --json %s %s %s", fx("cluster_90a"), fx("clc_100a"), fx("spill_100a")), 0);
  valid_json("inspect --json");
  has(out_text, "\"schema\": \"clcrt-inspect-1\"");
  has(out_text, "\"arch\": \"sm_90a\", \"sm\": 90, \"variant\": \"a\"");
  has(out_text, "\"cluster\": [2, 2, 1]");
  has(out_text, "\"clc\": {\"present\": true, \"count\": 1, \"broadcast\": true}");
  has(out_text, "\"shared\": {\"static\": 5128, \"reserved\": 1024, \"user\": 4104, \"dynamic\": null}");
  has(out_text, "{\"id\": 80, \"format\": 3, \"value\": 0}"); /* an undecoded record, raw */
  has(out_text, "\"errors\": []");
  /* A bad file among good ones: the good ones are still reported, the exit code says 3. */
  ck_assert_int_eq(run("inspect --json %s /nonexistent.cubin", fx("cluster_90a")), 3);
  valid_json("inspect --json with an error");
  has(out_text, "\"path\": \"/nonexistent.cubin\", \"error\": ");
  has(out_text, "cluster_kernel");
}
END_TEST

START_TEST(hostile_files) {
  char p[600];
  snprintf(p, sizeof p, "%s/empty.cubin", tmpdir);
  fclose(fopen(p, "w"));
  ck_assert_int_eq(run("inspect %s", p), 3);
  has(err_text, "empty");
  ck_assert_int_eq(run("inspect %s", tmpdir), 3);
  has(err_text, "is a directory");
  ck_assert_int_eq(run("inspect /nonexistent/x.cubin"), 3);
  has(err_text, "No such file");
  ck_assert_int_eq(run("inspect %s", "tests/data/clc.cu"), 3);
  has(err_text, "not an ELF file");
  ck_assert_int_eq(run("inspect /dev/null"), 3);
  has(err_text, "not a regular file");
  /* Truncated and corrupted copies of a real cubin. */
  size_t n;
  unsigned char *d = slurp(fx("cluster_100a"), &n);
  ck_assert_ptr_nonnull(d);
  snprintf(p, sizeof p, "%s/cut.cubin", tmpdir);
  static const size_t cuts[] = {3, 63, 64, 1000, 4000};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    FILE *f = fopen(p, "wb");
    fwrite(d, 1, cuts[i], f);
    fclose(f);
    ck_assert_int_eq(run("inspect %s", p), 3);
    has(err_text, "clcrt: ");
  }
  memset(d + 40, 0xff, 8); /* e_shoff */
  FILE *f = fopen(p, "wb");
  fwrite(d, 1, n, f);
  fclose(f);
  ck_assert_int_eq(run("inspect --json %s", p), 3);
  has(err_text, "section header table");
  ck_assert_int_eq(run("diff %s %s", p, fx("cluster_100a")), 3);
  free(d);
}
END_TEST

/* Every cut of a real cubin, from inside the ELF header to one byte short of whole, exits 3
 * with a message: each batch of cuts goes through one `inspect --json` run, whose JSON must
 * list no file and one error per cut. */
START_TEST(every_truncation_refused) {
  size_t n;
  unsigned char *d = slurp(fx("cluster_90a"), &n);
  ck_assert_ptr_nonnull(d);
  char dir[600], p[700];
  const size_t batch = 512;
  for (size_t first = 1; first < n; first += batch) {
    snprintf(dir, sizeof dir, "%s/cuts%zu", tmpdir, first);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    size_t count = 0;
    for (size_t l = first; l < n && l < first + batch; l++, count++) {
      snprintf(p, sizeof p, "%s/%05zu.cubin", dir, l);
      FILE *f = fopen(p, "wb");
      ck_assert_ptr_nonnull(f);
      ck_assert_uint_eq(fwrite(d, 1, l, f), l);
      fclose(f);
    }
    ck_assert_int_eq(run("inspect --json %s/*.cubin", dir), 3);
    has(out_text, "\"files\": [\n]");
    size_t errors = 0;
    for (const char *q = out_text; (q = strstr(q, "{\"path\": ")) != NULL; q++) errors++;
    ck_assert_uint_eq(errors, count);
    has(err_text, "clcrt: ");
    if (first + batch >= n) has(err_text, "program header table"); /* the last cuts lose only those */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
  }
  free(d);
}
END_TEST

/* Runs `clcrt inspect --json FILE` as this process's child and returns its exit code, with the
 * child's peak resident memory in *rss_kb. */
static int inspect_rss(const char *file, long *rss_kb) {
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "exec %s inspect --json '%s' > %s/out 2> %s/err", tool(), file, tmpdir, tmpdir);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  int st;
  struct rusage ru;
  ck_assert_int_eq(wait4(pid, &st, 0, &ru), pid);
  ck_assert(WIFEXITED(st));
  *rss_kb = ru.ru_maxrss;
  free(out_text), free(err_text);
  char p[512];
  size_t len;
  snprintf(p, sizeof p, "%s/out", tmpdir);
  out_text = (char *)slurp(p, &len);
  snprintf(p, sizeof p, "%s/err", tmpdir);
  err_text = (char *)slurp(p, &len);
  ck_assert(out_text && err_text);
  return WEXITSTATUS(st);
}

/* Large files are judged by their first bytes and header tables, not read whole (a 900 MB
 * file of zeros once took 953 MB of memory before it was refused): sparse files, so the test
 * costs no disk. Memory is compared with the same tool reading a small cubin. */
START_TEST(large_files_not_read_whole) {
  long base, rss;
  ck_assert_int_eq(inspect_rss(fx("cluster_100a"), &base), 0);
  char p[600];
  snprintf(p, sizeof p, "%s/zeros.cubin", tmpdir);
  int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 900l << 20), 0);
  close(fd);
  ck_assert_int_eq(inspect_rss(p, &rss), 3);
  has(err_text, "not an ELF file");
  ck_assert_msg(rss < base + 64 * 1024, "%ld KiB for a file of zeros (%ld KiB for a small cubin)", rss, base);
  /* A cubin followed by 900 MB of zeros: its own bytes are read, and reported. */
  size_t n;
  unsigned char *d = slurp(fx("cluster_100a"), &n);
  ck_assert_ptr_nonnull(d);
  snprintf(p, sizeof p, "%s/padded.cubin", tmpdir);
  fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, d, n), (ssize_t)n);
  ck_assert_int_eq(ftruncate(fd, 900l << 20), 0);
  close(fd);
  ck_assert_int_eq(inspect_rss(p, &rss), 0);
  char want[64];
  snprintf(want, sizeof want, "\"bytes\": %zu,", n);
  has(out_text, want);
  ck_assert_msg(rss < base + 64 * 1024, "%ld KiB for a padded cubin (%ld KiB for a small cubin)", rss, base);
  /* A cubin whose program headers sit past 1 GiB: refused for its size, unread. */
  uint64_t phoff, far = (1ull << 30) + 4096;
  uint16_t phnum;
  memcpy(&phoff, d + 32, 8), memcpy(&phnum, d + 56, 2);
  snprintf(p, sizeof p, "%s/far.cubin", tmpdir);
  fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  unsigned char *m = malloc(n);
  memcpy(m, d, n);
  memcpy(m + 32, &far, 8);
  ck_assert_int_eq(write(fd, m, n), (ssize_t)n);
  ck_assert_int_eq(pwrite(fd, d + phoff, phnum * 56u, (off_t)far), (ssize_t)(phnum * 56u));
  close(fd);
  ck_assert_int_eq(inspect_rss(p, &rss), 3);
  has(err_text, "more than the 1073741824 (1 GiB) this tool reads");
  ck_assert_msg(rss < base + 64 * 1024, "%ld KiB for a 1 GiB cubin (%ld KiB for a small cubin)", rss, base);
  free(m);
  free(d);
}
END_TEST

START_TEST(sass_needs_nvdisasm) {
  /* A PATH without nvdisasm: a plain message and exit 5. */
  ck_assert_int_eq(run_env("PATH=/nonexistent", "inspect --sass %s", fx("cluster_90a")), 5);
  has(err_text, "nvdisasm, which is not on the PATH");
  /* A stand-in nvdisasm: the tool hands it the file. */
  char p[600], cmd[2400];
  snprintf(p, sizeof p, "%s/bin", tmpdir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s && printf '#!/bin/sh\\necho FAKE-NVDISASM \"$1\"\\n' > %s/nvdisasm && chmod +x %s/nvdisasm", p, p, p);
  ck_assert_int_eq(system(cmd), 0);
  char env[800];
  snprintf(env, sizeof env, "PATH=%s:/usr/bin:/bin", p);
  ck_assert_int_eq(run_env(env, "inspect --sass %s", fx("cluster_90a")), 0);
  has(out_text, "kernel cluster_kernel");
  has(out_text, "FAKE-NVDISASM");
  has(out_text, fx("cluster_90a"));
}
END_TEST

START_TEST(diff_and_fail_on) {
  ck_assert_int_eq(run("diff %s %s", fx("cluster_90a"), fx("cluster_90a")), 0);
  has(out_text, "no differences");
  ck_assert_int_eq(run("diff --fail-on all %s %s", fx("cluster_90a"), fx("cluster_100a")), 0);
  has(out_text, "architecture: sm_90a -> sm_100a");
  /* Dropping -maxrregcount: registers grow, spills shrink. */
  const char *lo = fx("spill_90a"), *hi = fx("nospill_90a");
  ck_assert_int_eq(run("diff --fail-on regs %s %s", lo, hi), 1);
  has(out_text, "registers          32 -> ");
  has(out_text, "FAIL (--fail-on regs)");
  ck_assert_int_eq(run("diff --fail-on spills,smem %s %s", lo, hi), 0);
  ck_assert_int_eq(run("diff --fail-on spills %s %s", hi, lo), 1);
  has(out_text, "FAIL (--fail-on spills)");
  ck_assert_int_eq(run("diff --fail-on stack %s %s", hi, lo), 1);
  ck_assert_int_eq(run("diff --json --fail-on regs,spills %s %s", hi, lo), 1);
  valid_json("diff --json");
  has(out_text, "\"schema\": \"clcrt-diff-1\"");
  has(out_text, "\"failed\": true");
  has(out_text, "\"fail_on\": [\"regs\", \"spills\"]");
  /* Kernels only on one side. */
  ck_assert_int_eq(run("diff --fail-on all %s %s", fx("cluster_90a"), fx("spill_90a")), 0);
  has(out_text, "kernel cluster_kernel: only in OLD");
  has(out_text, "kernel spill_kernel: only in NEW");
}
END_TEST

static const char tile_src[] =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static void write_bytes(const char *name, const void *data, size_t n) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

static void write_src(const char *name, const char *text) { write_bytes(name, text, strlen(text)); }

/* clcrt compile for sm_90a and sm_100a with every scheduler that the target supports,
 * then inspect: the entry symbol names the scheduler, and only clc has UGETNEXTWORKID. */
START_TEST(compile_then_inspect) {
  write_src("scale.cu", tile_src);
  static const struct {
    const char *arch, *sched;
    int clc;
  } builds[] = {{"sm_90a", "steal", 0}, {"sm_90a", "static", 0}, {"sm_90a", "fixed", 0},
                {"sm_100a", "clc", 1},  {"sm_100a", "steal", 0}, {"sm_100a", "fixed", 0}};
  for (size_t i = 0; i < sizeof builds / sizeof *builds; i++) {
    ck_assert_int_eq(run("compile --no-cache --arch %s --fn scale_tile --args ScaleArgs --sched %s --cluster 2,1,1 "
                         "--block 128 -o %s/k%zu.cubin %s/scale.cu",
                         builds[i].arch, builds[i].sched, tmpdir, i, tmpdir),
                     0);
    has(out_text, "wrote ");
    ck_assert_int_eq(run("inspect --json %s/k%zu.cubin", tmpdir, i), 0);
    valid_json("inspect of a compiled cubin");
    char want[200];
    snprintf(want, sizeof want, "\"name\": \"clcrt_%s_scale_tile\"", builds[i].sched);
    has(out_text, want);
    snprintf(want, sizeof want, "\"sched\": \"%s\"", builds[i].sched);
    has(out_text, want);
    snprintf(want, sizeof want, "\"arch\": \"%s\"", builds[i].arch);
    has(out_text, want);
    has(out_text, builds[i].clc ? "\"clc\": {\"present\": true" : "\"clc\": {\"present\": false");
  }
  /* One tile function built for sm_90a (AUTO: steal) and sm_100a (AUTO: clc): diff pairs the
   * two kernels by their tile function rather than report each as only on one side. */
  ck_assert_int_eq(run("diff %s/k0.cubin %s/k3.cubin", tmpdir, tmpdir), 0);
  has(out_text,
      "kernel clcrt_steal_scale_tile -> clcrt_clc_scale_tile (tile function scale_tile, scheduler steal -> clc)");
  has(out_text, "sched              steal -> clc");
  lacks(out_text, "only in");
  ck_assert_int_eq(run("diff --json %s/k3.cubin %s/k0.cubin", tmpdir, tmpdir), 0);
  valid_json("diff --json across schedulers");
  has(out_text,
      "\"name\": \"clcrt_clc_scale_tile\", \"new_name\": \"clcrt_steal_scale_tile\", \"status\": \"compared\"");
  lacks(out_text, "\"added\"");
  /* --observed: the variant traced runs launch; trace code makes it larger than the kernel
   * as registered (k2, FIXED on sm_90a, 2-CTA clusters). */
  ck_assert_int_eq(run("compile --no-cache --observed --arch sm_90a --fn scale_tile --args ScaleArgs --sched fixed "
                       "--cluster 2,1,1 --block 128 -o %s/obs.cubin %s/scale.cu",
                       tmpdir, tmpdir),
                   0);
  has(out_text, "the variant for trace");
  char p0[600], p1[600];
  snprintf(p0, sizeof p0, "%s/k2.cubin", tmpdir);
  snprintf(p1, sizeof p1, "%s/obs.cubin", tmpdir);
  struct stat s0, s1;
  ck_assert_int_eq(stat(p0, &s0), 0);
  ck_assert_int_eq(stat(p1, &s1), 0);
  ck_assert_int_gt(s1.st_size, s0.st_size);
  ck_assert_int_eq(run("inspect --json %s", p1), 0);
  has(out_text, "\"name\": \"clcrt_fixed_scale_tile\"");
  /* --variant: a STEAL kernel's variant for graph captures and preemption is larger than
   * the kernel as registered; a word it does not know is a usage error. */
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn scale_tile --args ScaleArgs --sched steal "
                       "--block 128 -o %s/lean.cubin %s/scale.cu",
                       tmpdir, tmpdir),
                   0);
  ck_assert_int_eq(run("compile --no-cache --variant graph,preempt --arch sm_90a --fn scale_tile --args ScaleArgs "
                       "--sched steal --block 128 -o %s/gp.cubin %s/scale.cu",
                       tmpdir, tmpdir),
                   0);
  has(out_text, "the variant for graph preempt");
  snprintf(p0, sizeof p0, "%s/lean.cubin", tmpdir);
  snprintf(p1, sizeof p1, "%s/gp.cubin", tmpdir);
  ck_assert_int_eq(stat(p0, &s0), 0);
  ck_assert_int_eq(stat(p1, &s1), 0);
  ck_assert_int_gt(s1.st_size, s0.st_size);
  ck_assert_int_eq(run("compile --no-cache --variant graph,fast --arch sm_90a --fn scale_tile --args ScaleArgs "
                       "%s/scale.cu",
                       tmpdir),
                   2);
  has(err_text, "--variant wants a comma list of trace, graph, preempt and short, not");
  /* Options after the file, as nvcc and cuobjdump take them: the same cubin as options first;
   * after "--" a word is a file even when it looks like an option. */
  ck_assert_int_eq(run("compile --no-cache %s/scale.cu --arch sm_90a --fn scale_tile --args ScaleArgs --sched steal "
                       "--block 128 -o %s/late.cubin",
                       tmpdir, tmpdir),
                   0);
  ck_assert_int_eq(run("diff %s/lean.cubin %s/late.cubin --fail-on all", tmpdir, tmpdir), 0);
  ck_assert_int_eq(run("inspect %s/late.cubin --json", tmpdir), 0);
  valid_json("inspect with --json after the file");
  ck_assert_int_eq(run("inspect -- --json"), 3);
  has(err_text, "--json");
  /* Default output name, and AUTO picking CLC on sm_100a. */
  ck_assert_int_eq(run("compile --no-cache -q --arch sm_100a --fn scale_tile --args ScaleArgs %s/scale.cu", tmpdir), 0);
  ck_assert_int_eq(run("inspect scale_tile.sm_100a.cubin"), 0);
  unlink("scale_tile.sm_100a.cubin");
  has(out_text, "clcrt scheduler: clc");
}
END_TEST

START_TEST(compile_errors) {
  write_src("bad.cu", "struct A { int *p; };\n__device__ void f(const clcrt::Tile &t, const A &a) { a.p[0] = nope; }\n");
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn f --args A -o %s/x.cubin %s/bad.cu", tmpdir, tmpdir), 4);
  has(err_text, "CLCRT_E_COMPILE");
  has(err_text, "\"nope\" is undefined"); /* NVRTC's log */
  write_src("scale.cu", tile_src);
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn scale_tile --args ScaleArgs --sched clc %s/scale.cu", tmpdir), 2);
  /* --smem with the suffixes the cache size takes: 48K fits, 1M (1048576 bytes) does not. */
  ck_assert_int_eq(run("compile --no-cache -q --arch sm_90a --fn scale_tile --args ScaleArgs --smem 48K -o %s/s.cubin "
                       "%s/scale.cu",
                       tmpdir, tmpdir),
                   0);
  ck_assert_int_eq(run("compile --no-cache -q --arch sm_90a --fn scale_tile --args ScaleArgs --smem 1M -o %s/s.cubin "
                       "%s/scale.cu",
                       tmpdir, tmpdir),
                   2);
  has(err_text, "--smem 1048576"); /* the flag the user typed, not the C field */
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn scale_tile --args ScaleArgs %s/missing.cu", tmpdir), 3);
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn scale_tile --args ScaleArgs %s", tmpdir), 3);
  /* A NUL byte would end the source NVRTC gets there, and what follows would vanish. */
  char nul[sizeof tile_src + 16];
  memcpy(nul, tile_src, sizeof tile_src); /* with its NUL */
  memcpy(nul + sizeof tile_src, "garbage(", 8);
  write_bytes("nul.cu", nul, sizeof tile_src + 8);
  ck_assert_int_eq(run("compile --no-cache --arch sm_90a --fn scale_tile --args ScaleArgs -o %s/nul.cubin %s/nul.cu",
                       tmpdir, tmpdir),
                   3);
  char want[100];
  snprintf(want, sizeof want, "nul.cu: byte %zu is a NUL", sizeof tile_src - 1);
  has(err_text, want);
}
END_TEST

/* The library's messages name the C fields and constants a C caller sets; clcrt compile's user
 * set them with flags, and its messages name the flags. */
START_TEST(compile_messages_name_flags) {
  write_src("scale.cu", tile_src);
  static const struct {
    const char *flags, *want[2];
  } cases[] = {
      {"--arch sm_90a --fn scal_tile --args ScaleArgs", {"does not appear in the source: check --fn", NULL}},
      {"--arch sm_90a --fn scale_tile --args Nope", {"check --args", NULL}},
      {"--arch sm_90a --fn scale_tile --args ScaleArgs --sched clc",
       {"--sched clc needs Cluster Launch Control", "use --sched steal or --sched auto"}},
      {"--arch sm_90a --fn scale_tile --args ScaleArgs --sched static --grid full",
       {"--grid applies to --sched steal only", NULL}},
      {"--arch sm_90a --fn scale_tile --args ScaleArgs --smem 400000", {"--smem 400000: sm_90a allows", NULL}},
      {"--arch sm_90a --fn scale_tile --args ScaleArgs -X -arch=sm_80",
       {"--nvrtc-opt \"-arch=sm_80\": the architecture", "(set --arch instead)"}},
      {"--arch hopper --fn scale_tile --args ScaleArgs", {"--arch \"hopper\" is not an architecture", NULL}},
      {"--arch sm_90a --fn scale_tile --args ScaleArgs --cuda-home /", {"(--cuda-home)", "leave out --cuda-home"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ck_assert_int_eq(run("compile --no-cache %s -o %s/x.cubin %s/scale.cu", cases[i].flags, tmpdir, tmpdir), 2);
    for (int w = 0; w < 2 && cases[i].want[w]; w++) has(err_text, cases[i].want[w]);
    static const char *const c_words[] = {"desc->", "opts.", "CLCRT_SCHED_", "CLCRT_GRID_", "target_arch", "NULL"};
    for (size_t w = 0; w < sizeof c_words / sizeof *c_words; w++)
      ck_assert_msg(!strstr(err_text, c_words[w]), "%s: \"%s\" in:\n%s", cases[i].flags, c_words[w], err_text);
  }
}
END_TEST

/* The cache commands over a cache that `clcrt compile` filled. */
START_TEST(cache_commands) {
  write_src("scale.cu", tile_src);
  char env[600], dir[400];
  snprintf(dir, sizeof dir, "%s/cache", tmpdir);
  snprintf(env, sizeof env, "CLCRT_CACHE_DIR=%s", dir);
  ck_assert_int_eq(run_env(env, "cache ls"), 0);
  has(out_text, "no entries");
  ck_assert_int_eq(run_env(env, "compile -q --arch sm_90a --fn scale_tile --args ScaleArgs -o %s/a.cubin %s/scale.cu",
                           tmpdir, tmpdir),
                   0);
  ck_assert_int_eq(run_env(env, "compile -q --arch sm_100a --fn scale_tile --args ScaleArgs -o %s/b.cubin %s/scale.cu",
                           tmpdir, tmpdir),
                   0);
  ck_assert_int_eq(run_env(env, "cache ls"), 0);
  has(out_text, "clcrt_steal_scale_tile (steal)");
  has(out_text, "clcrt_clc_scale_tile (clc)");
  ck_assert_int_eq(run_env(env, "cache ls --json"), 0);
  valid_json("cache ls --json");
  has(out_text, "\"valid\": true");
  ck_assert_int_eq(run_env(env, "cache info"), 0);
  has(out_text, "entries    2 (0 damaged)");
  /* inspect and diff take entries like cubins. */
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "ls %s/*.clce > %s/list", dir, tmpdir);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(run_env(env, "inspect $(cat %s/list)", tmpdir), 0);
  has(out_text, "(cache entry)");
  has(out_text, "bytes dynamic (as registered)");
  ck_assert_int_eq(run_env(env, "diff $(head -1 %s/list) $(head -1 %s/list)", tmpdir, tmpdir), 0);
  ck_assert_int_eq(run_env(env, "cache info $(head -1 %s/list)", tmpdir), 0);
  has(out_text, "resources  clcrt_");
  /* ENTRY as `cache ls` prints it (the key's first 16 digits), and as the whole key. */
  ck_assert_int_eq(run_env(env, "cache ls"), 0);
  const char *line = strstr(out_text, "clcrt_steal_scale_tile (steal)");
  ck_assert_ptr_nonnull(line);
  while (line > out_text && line[-1] != '\n') line--;
  char key[17];
  ck_assert_int_eq(sscanf(line, "%16s", key), 1);
  ck_assert_int_eq(run_env(env, "cache info %s", key), 0);
  has(out_text, "kernel     clcrt_steal_scale_tile");
  has(out_text, "resources  clcrt_steal_scale_tile");
  ck_assert_int_eq(run_env("", "cache info %s --dir %s", key, dir), 0); /* an option after ENTRY */
  has(out_text, "kernel     clcrt_steal_scale_tile");
  ck_assert_int_eq(run_env(env, "cache info $(basename $(grep %s %s/list) .clce)", key, tmpdir), 0);
  has(out_text, "kernel     clcrt_steal_scale_tile");
  ck_assert_int_eq(run_env(env, "cache info 0123zz"), 3);
  has(err_text, "no entry of");
  snprintf(cmd, sizeof cmd, "touch %s/abc1.clce %s/abc2.clce", dir, dir);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(run_env(env, "cache info abc"), 3);
  has(err_text, "2 entries of");
  has(err_text, "start with abc: give more of the key");
  snprintf(cmd, sizeof cmd, "rm %s/abc1.clce %s/abc2.clce", dir, dir);
  ck_assert_int_eq(system(cmd), 0);
  /* A damaged entry is reported, not trusted. */
  snprintf(cmd, sizeof cmd, "f=$(head -1 %s/list); printf 'XXXX' | dd of=$f bs=1 seek=300 conv=notrunc 2>/dev/null", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(run_env(env, "inspect $(head -1 %s/list)", tmpdir), 3);
  has(err_text, "damaged");
  ck_assert_int_eq(run_env(env, "cache ls"), 0);
  has(out_text, "DAMAGED");
  ck_assert_int_eq(run_env(env, "cache clear"), 0);
  has(out_text, "removed 2 entries");
  ck_assert_int_eq(run_env(env, "cache ls --dir %s", dir), 0);
  has(out_text, "no entries");
  /* A --dir that does not exist is a mistake, not an empty cache. */
  static const char *const subs[] = {"clear", "ls", "info"};
  for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
    ck_assert_int_eq(run_env(env, "cache %s --dir %s/nonexistent", subs[i], tmpdir), 3);
    has(err_text, "No such file or directory; name an existing cache directory");
  }
  ck_assert_int_eq(run_env(env, "cache clear --dir %s/scale.cu", tmpdir), 3);
  has(err_text, "not a directory");
}
END_TEST

int main(void) {
  if (fixtures_make() != 0) {
    fprintf(stderr, "test_tool: could not make the test cubins (nvcc needed)\n");
    return 1;
  }
  Suite *s = suite_create("tool");
  TCase *t = tcase_create("tool");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 300);
  tcase_add_test(t, help_and_version);
  tcase_add_test(t, usage_errors);
  tcase_add_test(t, inspect_text);
  tcase_add_test(t, inspect_json);
  tcase_add_test(t, hostile_files);
  tcase_add_test(t, every_truncation_refused);
  tcase_add_test(t, large_files_not_read_whole);
  tcase_add_test(t, sass_needs_nvdisasm);
  tcase_add_test(t, diff_and_fail_on);
  tcase_add_test(t, compile_then_inspect);
  tcase_add_test(t, compile_errors);
  tcase_add_test(t, compile_messages_name_flags);
  tcase_add_test(t, cache_commands);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_FORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
