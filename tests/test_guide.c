/* The guide's code and the teaching examples, compiled on the CPU so that neither can rot.
 *
 * docs/tile-functions.md: every fenced block of code carries a mark, an HTML comment on the line
 * before it, that says how this suite checks it (README.md's ```cpp blocks too):
 *   <!-- compile: tile_fn=F args=A [state=S prologue=P] [block=X[,Y[,Z]]] [cluster=X[,Y[,Z]]]
 *        [smem=BYTES] [sched=auto|clc|steal|static|fixed] [arch=sm_90a|sm_100a] [option=OPT]
 *        [file=NAME] [expect=CLCRT_E_...] [error="TEXT"] -->
 *        before a ```cpp block: the block is registered in compile-only mode for sm_90a and
 *        sm_100a (only `arch` when given; only sm_100a for clc) and must give CLCRT_OK, or the
 *        status `expect` with TEXT in clcrt_errmsg. file=NAME also writes it to NAME in the
 *        folder the sh blocks run in;
 *   <!-- compile: host --> before a ```c block: compiled with cc -fsyntax-only -Werror after
 *        #include <stdio.h>, <cuda.h> and "clcrt.h";
 *   <!-- run: sh --> before a ```sh block: run by sh -e in a scratch folder holding the file=
 *        blocks and run.json (a trace of three tiles), with the clcrt tool first on the PATH;
 *        it must exit 0;
 *   <!-- run: python --> before a ```python block: run by python/tests/test_guide.py.
 * A block of code without a mark fails the suite, so nothing unchecked can be added; ```text
 * blocks (what a program prints) need none. README.md's other blocks (make, pip) are not
 * checked here.
 *
 * The examples examples/ragged_sum.c, stencil2d.c, splitk.c and taskgraph_chain.c are compiled
 * into this suite, their main renamed, and their own registration functions (taskgraph_chain's
 * graph) are called for sm_90a (every scheduler the example runs) and sm_100a;
 * tests/gpu_examples.c runs them. */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clcrt.h"
#include "clcrt_ops.h"

int ragged_sum_main(void);
int stencil2d_main(void);
int splitk_main(void);
int taskgraph_chain_main(void);
#define main ragged_sum_main
#include "../examples/ragged_sum.c"
#undef main
#define main stencil2d_main
#include "../examples/stencil2d.c"
#undef main
#define main splitk_main
#include "../examples/splitk.c"
#undef main
#define main taskgraph_chain_main
#include "../examples/taskgraph_chain.c"
#undef main

/* ---- the marked blocks ---- */

enum { MAX_BLOCKS = 128 };
typedef struct block {
  const char *doc;    /* which file */
  int line;           /* of the opening fence */
  char lang[16];
  char *mark;         /* the comment's text after "compile:" or "run:", NULL when unmarked */
  int run;            /* the mark was "run:" rather than "compile:" */
  char *text;
} block;
static block g_blocks[MAX_BLOCKS];
static int g_nblocks;
static char g_problems[4096]; /* unmarked or malformed blocks, one line each */

static const char *repo_path(const char *rel, char *buf, size_t n) {
  const char *slash = strrchr(__FILE__, '/');
  if (slash) snprintf(buf, n, "%.*s/../%s", (int)(slash - __FILE__), __FILE__, rel);
  else snprintf(buf, n, "../%s", rel);
  return buf;
}

static char *slurp_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = NULL;
  long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1))) {
    s[fread(s, 1, (size_t)n, f)] = 0;
  }
  fclose(f);
  return s;
}

static void problem(const char *doc, int line, const char *what) {
  size_t l = strlen(g_problems);
  snprintf(g_problems + l, sizeof g_problems - l, "%s:%d: %s\n", doc, line, what);
}

/* Collects doc's fenced blocks and their marks. only_cpp: README.md, whose blocks of commands
 * for the reader are not checked. */
static void parse_doc(const char *doc, int only_cpp) {
  char path[PATH_MAX];
  char *text = slurp_text(repo_path(doc, path, sizeof path));
  if (!text) {
    problem(doc, 0, "cannot be read");
    return;
  }
  char *prev = NULL;
  int line = 0;
  for (char *p = text; *p;) {
    char *eol = strchr(p, '\n');
    if (eol) *eol = 0;
    line++;
    if (strncmp(p, "```", 3) == 0) {
      const char *lang = p + 3;
      int open_line = line;
      size_t cap = 4096, len = 0;
      char *body = malloc(cap);
      body[0] = 0;
      p = eol ? eol + 1 : p + strlen(p);
      /* The body, up to the closing fence. */
      while (*p) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        line++;
        if (strcmp(p, "```") == 0) {
          p = e ? e + 1 : p + strlen(p);
          break;
        }
        size_t l = strlen(p);
        while (len + l + 2 > cap) body = realloc(body, cap *= 2);
        memcpy(body + len, p, l);
        len += l;
        body[len++] = '\n';
        body[len] = 0;
        p = e ? e + 1 : p + l;
      }
      const char *m = prev ? strstr(prev, "<!-- ") : NULL;
      int checked = !only_cpp || strcmp(lang, "cpp") == 0;
      if (!*lang && !only_cpp) {
        problem(doc, open_line, "a fenced block without a language (```cpp, ```c, ```sh, ```text, ...)");
        free(body);
      } else if (!*lang || strcmp(lang, "text") == 0 || strcmp(lang, "json") == 0 || !checked) {
        free(body);
      } else if (!m || (strncmp(m + 5, "compile:", 8) && strncmp(m + 5, "run:", 4)) || !strstr(m, "-->")) {
        char why[160];
        snprintf(why, sizeof why, "a ```%s block without a <!-- compile: ... --> or <!-- run: ... --> mark", lang);
        problem(doc, open_line, why);
        free(body);
      } else if (g_nblocks == MAX_BLOCKS) {
        problem(doc, open_line, "more blocks than the suite's MAX_BLOCKS");
        free(body);
      } else {
        block *b = &g_blocks[g_nblocks++];
        b->doc = doc;
        b->line = open_line;
        snprintf(b->lang, sizeof b->lang, "%s", lang);
        b->run = strncmp(m + 5, "run:", 4) == 0;
        const char *a = m + 5 + (b->run ? 4 : 8), *z = strstr(a, "-->");
        b->mark = strndup(a, (size_t)(z - a));
        b->text = body;
      }
      prev = NULL;
      continue;
    }
    prev = p;
    p = eol ? eol + 1 : p + strlen(p);
  }
  free(text); /* the blocks and marks were copied */
}

/* The value of key in a mark (`key=value` or `key="value with spaces"`), or NULL. */
static char *attr(const char *mark, const char *key, char *buf, size_t n) {
  size_t kl = strlen(key);
  for (const char *p = mark; (p = strstr(p, key)) != NULL; p += kl) {
    if ((p != mark && !isspace((unsigned char)p[-1])) || p[kl] != '=') continue;
    const char *v = p + kl + 1;
    size_t o = 0;
    if (*v == '"') { /* a quoted value; \" and \\ stand for " and \ */
      for (v++; *v && *v != '"'; v++) {
        if (*v == '\\' && v[1]) v++;
        if (o + 1 < n) buf[o++] = *v;
      }
      if (*v != '"') return NULL;
    } else {
      for (; *v && !isspace((unsigned char)*v); v++)
        if (o + 1 < n) buf[o++] = *v;
    }
    buf[o] = 0;
    return buf;
  }
  return NULL;
}

static clcrt_dim3 dim3_of(const char *s) {
  clcrt_dim3 d = {1, 1, 1};
  if (sscanf(s, "%u,%u,%u", &d.x, &d.y, &d.z) < 1) ck_abort_msg("bad dimensions \"%s\"", s);
  return d;
}

static clcrt_runtime *rt_for(const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = ""; /* every block really compiles */
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", arch, clcrt_errmsg(rt));
  return rt;
}

static const char *tool_dir(char *buf, size_t n) {
  const char *t = getenv("CLCRT_TEST_TOOL");
  char real[PATH_MAX];
  ck_assert_msg(realpath(t && *t ? t : "build/clcrt", real) != NULL, "no clcrt tool: set CLCRT_TEST_TOOL");
  char *slash = strrchr(real, '/');
  *slash = 0;
  snprintf(buf, n, "%s", real);
  return buf;
}

static void write_file(const char *dir, const char *name, const char *text) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  ck_assert_int_eq(fclose(f), 0);
}

static void check_cpp(const block *b) {
  char v[256], err[512];
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  char fn[128] = "", args[128] = "", state[128] = "", pro[128] = "", opt[256] = "";
  ck_assert_msg(attr(b->mark, "tile_fn", fn, sizeof fn) && attr(b->mark, "args", args, sizeof args),
                "%s:%d: the mark names no tile_fn= and args=", b->doc, b->line);
  d.source = b->text;
  d.tile_fn = fn;
  d.args_type = args;
  if (attr(b->mark, "state", state, sizeof state)) d.state_type = state;
  if (attr(b->mark, "prologue", pro, sizeof pro)) d.prologue_fn = pro;
  d.block = attr(b->mark, "block", v, sizeof v) ? dim3_of(v) : (clcrt_dim3){128, 1, 1};
  if (attr(b->mark, "cluster", v, sizeof v)) d.cluster = dim3_of(v);
  if (attr(b->mark, "smem", v, sizeof v)) d.smem_bytes = (unsigned)strtoul(v, NULL, 0);
  const char *opts[1] = {opt};
  if (attr(b->mark, "option", opt, sizeof opt)) d.options = opts, d.num_options = 1;
  static const char *const names[] = {"auto", "clc", "steal", "static", "fixed"};
  if (attr(b->mark, "sched", v, sizeof v)) {
    size_t i = 0;
    while (i < 5 && strcmp(v, names[i])) i++;
    ck_assert_msg(i < 5, "%s:%d: sched=%s", b->doc, b->line, v);
    d.sched = (clcrt_sched)i;
  }
  char expect[64] = "CLCRT_OK";
  attr(b->mark, "expect", expect, sizeof expect);
  const char *want_err = attr(b->mark, "error", err, sizeof err);
  char archv[32];
  const char *only = attr(b->mark, "arch", archv, sizeof archv);
  static const char *const arches[] = {"sm_90a", "sm_100a"};
  int compiled = 0;
  for (int i = 0; i < 2; i++) {
    if (only ? strcmp(only, arches[i]) != 0 : d.sched == CLCRT_SCHED_CLC && i == 0) continue;
    clcrt_runtime *rt = rt_for(arches[i]);
    clcrt_kernel *k = NULL;
    clcrt_status st = clcrt_register(rt, &d, &k);
    ck_assert_msg(strcmp(clcrt_status_name(st), expect) == 0, "%s:%d for %s: %s, want %s:\n%s", b->doc, b->line,
                  arches[i], clcrt_status_name(st), expect, clcrt_errmsg(rt));
    if (want_err)
      ck_assert_msg(strstr(clcrt_errmsg(rt), want_err) != NULL, "%s:%d for %s: the message lacks \"%s\":\n%s",
                    b->doc, b->line, arches[i], want_err, clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
    compiled++;
  }
  ck_assert_msg(compiled > 0, "%s:%d: compiled for no architecture", b->doc, b->line);
}

static void check_host(const block *b) {
  char dir[] = "/tmp/clcrt-guide-XXXXXX", path[PATH_MAX], inc[PATH_MAX], cmd[3 * PATH_MAX];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char *src = malloc(strlen(b->text) + 128);
  sprintf(src, "#include <stdio.h>\n#include <cuda.h>\n#include \"clcrt.h\"\n%s", b->text);
  write_file(dir, "snippet.c", src);
  free(src);
  const char *cuda = getenv("CUDA_HOME");
  snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I%s -I%s/include %s/snippet.c",
           repo_path("include", inc, sizeof inc), cuda && *cuda ? cuda : "/usr/local/cuda", dir);
  int rc = system(cmd);
  snprintf(path, sizeof path, "rm -rf %s", dir);
  if (system(path) != 0) fprintf(stderr, "could not remove %s\n", dir);
  ck_assert_msg(rc == 0, "%s:%d: the host code does not compile (%s):\n%s", b->doc, b->line, cmd, b->text);
}

/* A trace of three tiles on two SMs, for the sh blocks' `clcrt trace` commands. */
static void write_trace(const char *dir) {
  clcrt_trace_record r[3];
  memset(r, 0, sizeof r);
  for (int i = 0; i < 3; i++) {
    r[i].start_ns = 1000000u + 500u * (unsigned)i;
    r[i].end_ns = r[i].start_ns + 2000u;
    r[i].tile = r[i].unit = (unsigned)i;
    r[i].cluster = r[i].sm = (unsigned)(i % 2);
    r[i].flags = i == 2 ? CLCRT_TRACE_STOLEN : 0;
  }
  clcrt_trace *t = NULL;
  ck_assert_int_eq(clcrt_trace_create(r, 3, 0, &t), CLCRT_OK);
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/run.json", dir);
  ck_assert_int_eq(clcrt_trace_save_json(t, p), CLCRT_OK);
  clcrt_trace_destroy(t);
}

static void check_sh(const block *b) {
  char dir[] = "/tmp/clcrt-guide-XXXXXX", tdir[PATH_MAX], name[256], cmd[2 * PATH_MAX + 256];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  for (int i = 0; i < g_nblocks; i++)
    if (!g_blocks[i].run && attr(g_blocks[i].mark, "file", name, sizeof name)) write_file(dir, name, g_blocks[i].text);
  write_file(dir, "commands.sh", b->text);
  write_trace(dir);
  snprintf(cmd, sizeof cmd, "cd %s && PATH=%s:$PATH CLCRT_CACHE_DIR=%s/cache sh -e commands.sh > out.txt 2>&1", dir,
           tool_dir(tdir, sizeof tdir), dir);
  int rc = system(cmd);
  char out[PATH_MAX];
  snprintf(out, sizeof out, "%s/out.txt", dir);
  char *text = slurp_text(out);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  ck_assert_msg(rc == 0, "%s:%d: the commands failed:\n%s\n-- output:\n%s", b->doc, b->line, b->text,
                text ? text : "");
  free(text);
}

START_TEST(every_block_marked) {
  ck_assert_msg(!g_problems[0], "%s", g_problems);
  ck_assert_int_ge(g_nblocks, 10);
}
END_TEST

/* Whether the mark is the single word w. */
static int mark_is(const block *b, const char *w) {
  const char *m = b->mark;
  while (isspace((unsigned char)*m)) m++;
  size_t l = strlen(w);
  if (strncmp(m, w, l)) return 0;
  for (m += l; isspace((unsigned char)*m); m++) {
  }
  return *m == 0;
}

START_TEST(guide_block) {
  const block *b = &g_blocks[_i];
  if (!b->run && !strcmp(b->lang, "cpp")) check_cpp(b);
  else if (!b->run && !strcmp(b->lang, "c") && mark_is(b, "host")) check_host(b);
  else if (b->run && !strcmp(b->lang, "sh") && mark_is(b, "sh")) check_sh(b);
  else if (b->run && !strcmp(b->lang, "python") && mark_is(b, "python")) return; /* python/tests/test_guide.py */
  else ck_abort_msg("%s:%d: a ```%s block marked \"%s\": no such check", b->doc, b->line, b->lang, b->mark);
}
END_TEST

/* ---- the examples ---- */

typedef clcrt_status (*example_register)(clcrt_runtime *rt, clcrt_sched sched, clcrt_kernel **k);
static const struct {
  const char *name;
  example_register reg;
} g_examples[] = {{"ragged_sum", ragged_register}, {"stencil2d", stencil_register}, {"splitk", splitk_register}};

/* What each example is compiled for: sm_90a under every scheduler it runs, and sm_100a under
 * AUTO (CLC there). */
static const struct {
  const char *arch;
  clcrt_sched sched;
} builds[] = {{"sm_90a", CLCRT_SCHED_AUTO},
              {"sm_90a", CLCRT_SCHED_STATIC},
              {"sm_90a", CLCRT_SCHED_FIXED},
              {"sm_100a", CLCRT_SCHED_AUTO}};

/* Each example's tile function for those builds. */
START_TEST(example_compiles) {
  for (size_t i = 0; i < sizeof builds / sizeof builds[0]; i++) {
    clcrt_runtime *rt = rt_for(builds[i].arch);
    clcrt_kernel *k = NULL;
    clcrt_status st = g_examples[_i].reg(rt, builds[i].sched, &k);
    ck_assert_msg(st == CLCRT_OK, "%s for %s, %s: %s", g_examples[_i].name, builds[i].arch,
                  clcrt_sched_name(builds[i].sched), clcrt_errmsg(rt));
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
    ck_assert_int_eq(info.stack_bytes, 0); /* nothing spilled or kept in local memory */
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* The task-graph example's graph, as its main makes it, for the same builds. */
START_TEST(taskgraph_example_compiles) {
  for (size_t i = 0; i < sizeof builds / sizeof builds[0]; i++) {
    clcrt_runtime *rt = rt_for(builds[i].arch);
    clcrt_ops *ops = NULL;
    ck_assert_int_eq(clcrt_ops_create(rt, &ops), CLCRT_OK);
    clcrt_taskgraph *g = NULL;
    clcrt_status st = chain_create(ops, builds[i].sched, &g);
    ck_assert_msg(st == CLCRT_OK, "taskgraph_chain for %s, %s: %s", builds[i].arch,
                  clcrt_sched_name(builds[i].sched), clcrt_errmsg(rt));
    clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(clcrt_taskgraph_kernel(g), &info), CLCRT_OK);
    ck_assert_int_eq(info.stack_bytes, 0);
    clcrt_taskgraph_destroy(g);
    clcrt_ops_destroy(ops);
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* Without a GPU each example says why and exits 2, as its comment promises. */
START_TEST(example_without_gpu) {
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, NULL);
  clcrt_runtime_destroy(rt);
  if (st == CLCRT_OK) {
    static const char *const names[] = {"ragged_sum", "stencil2d", "splitk", "taskgraph_chain"};
    printf("test_guide: SKIP %s without a GPU: this machine has one\n", names[_i]);
    return;
  }
  int (*mains[])(void) = {ragged_sum_main, stencil2d_main, splitk_main, taskgraph_chain_main};
  ck_assert_int_eq(mains[_i](), 2);
}
END_TEST

int main(void) {
  parse_doc("docs/tile-functions.md", 0);
  parse_doc("README.md", 1);
  Suite *s = suite_create("guide");
  TCase *tc = tcase_create("guide");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, every_block_marked);
  tcase_add_loop_test(tc, guide_block, 0, g_nblocks);
  suite_add_tcase(s, tc);
  tc = tcase_create("examples");
  tcase_set_timeout(tc, 120);
  int n = (int)(sizeof g_examples / sizeof g_examples[0]);
  tcase_add_loop_test(tc, example_compiles, 0, n);
  tcase_add_loop_test(tc, example_without_gpu, 0, n + 1); /* and taskgraph_chain */
  tcase_add_test(tc, taskgraph_example_compiles);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
