/* Test cubins for the parser and tool suites (test_cubin.c, test_tool.c): made at test
 * time by nvcc from the sources in tests/data, with ptxas's -v report kept next to each so that the
 * parser's numbers can be checked against the compiler's own. Header-only so that each
 * suite stays one file; tests/common is for helpers every suite links. */
#ifndef CLCRT_TEST_CUBIN_FIXTURES_H
#define CLCRT_TEST_CUBIN_FIXTURES_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct fixture {
  const char *name; /* file stem: <name>.cubin and <name>.log in the fixture directory */
  const char *src;  /* tests/data/<src> */
  const char *gencode;
  const char *extra;
} fixture;

static const fixture fixtures[] = {
    {"cluster_90a", "cluster.cu", "arch=compute_90a,code=sm_90a", ""},
    {"cluster_90", "cluster.cu", "arch=compute_90,code=sm_90", ""},
    {"cluster_100a", "cluster.cu", "arch=compute_100a,code=sm_100a", ""},
    {"cluster_100f", "cluster.cu", "arch=compute_100f,code=sm_100f", ""},
    {"spill_90a", "spill.cu", "arch=compute_90a,code=sm_90a", "-maxrregcount=32"},
    {"spill_100a", "spill.cu", "arch=compute_100a,code=sm_100a", "-maxrregcount=32"},
    {"nospill_90a", "spill.cu", "arch=compute_90a,code=sm_90a", ""},
    {"clc_100a", "clc.cu", "arch=compute_100a,code=sm_100a", ""},
};
#define NUM_FIXTURES (sizeof fixtures / sizeof *fixtures)

static char fixture_dir_buf[1024];

static const char *fixture_dir(void) {
  if (!fixture_dir_buf[0]) {
    const char *b = getenv("CLCRT_TEST_BUILD");
    snprintf(fixture_dir_buf, sizeof fixture_dir_buf, "%s/fixtures", b && *b ? b : "build");
  }
  return fixture_dir_buf;
}

static const char *data_dir(void) {
  const char *d = getenv("CLCRT_TEST_DATA");
  return d && *d ? d : "tests/data";
}

/* Makes every fixture that is missing. Returns 0, or -1 (with a message) when nvcc is not
 * available or fails; called from main() before the tests fork. */
static int fixtures_make(void) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", fixture_dir());
  if (system(cmd) != 0) return -1;
  for (size_t i = 0; i < NUM_FIXTURES; i++) {
    const fixture *f = &fixtures[i];
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s.cubin", fixture_dir(), f->name);
    if (stat(path, &st) == 0 && st.st_size > 0) continue;
    snprintf(cmd, sizeof cmd, "nvcc -cubin -gencode %s %s -Xptxas -v -o '%s' '%s/%s' > '%s/%s.log' 2>&1", f->gencode,
             f->extra, path, data_dir(), f->src, fixture_dir(), f->name);
    int rc = system(cmd);
    if (rc != 0) {
      fprintf(stderr, "fixtures: `%s` failed (is nvcc on PATH?)\n", cmd);
      unlink(path);
      return -1;
    }
  }
  return 0;
}

__attribute__((unused)) static char *fixture_path(const char *name, const char *ext) {
  static char buf[4][1200];
  static int slot;
  char *p = buf[slot++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s.%s", fixture_dir(), name, ext);
  return p;
}

__attribute__((unused)) static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long l = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc(l > 0 ? (size_t)l + 1 : 1);
  if (d && l >= 0 && fread(d, 1, (size_t)l, f) == (size_t)l) {
    d[l] = 0;
    *n = (size_t)l;
  } else {
    free(d);
    d = NULL;
  }
  fclose(f);
  return d;
}

/* ptxas -v's numbers for one kernel, read from the fixture's log. */
typedef struct ptxas_report {
  int found, registers, stack_frame, spill_stores, spill_loads, smem;
} ptxas_report;

__attribute__((unused)) static ptxas_report ptxas_for(const char *fixture_name, const char *kernel) {
  ptxas_report r = {0, -1, -1, -1, -1, 0};
  size_t n;
  char *log = (char *)slurp(fixture_path(fixture_name, "log"), &n);
  if (!log) return r;
  char key[512];
  snprintf(key, sizeof key, "Compiling entry function '%s'", kernel);
  char *p = strstr(log, key);
  if (p) {
    char *next = strstr(p + 1, "Compiling entry function");
    if (next) *next = 0;
    char *q = strstr(p, "bytes stack frame");
    if (q) {
      while (q > p && q[-1] != '\n') q--;
      sscanf(q, " %d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &r.stack_frame, &r.spill_stores,
             &r.spill_loads);
    }
    q = strstr(p, "Used ");
    if (q) {
      r.found = sscanf(q, "Used %d registers", &r.registers) == 1;
      char *s = strstr(q, "bytes smem");
      char *eol = strchr(q, '\n');
      if (s && (!eol || s < eol)) {
        while (s > q && s[-1] == ' ') s--;
        while (s > q && s[-1] >= '0' && s[-1] <= '9') s--;
        r.smem = atoi(s);
      }
    }
  }
  free(log);
  return r;
}
#endif
