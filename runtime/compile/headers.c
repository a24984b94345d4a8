/* The headers a compile read, from NVRTC's time trace; see headers.h and cache/deps.h. */
#include "headers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deps.h"
#include "env.h"

/* No trace of a tile function comes near this (about 80 KB for the README kernel). */
#define MAX_TRACE_BYTES (256u << 20)

int clcrt__hdr_trace_begin(clcrt__hdr_trace *t, clcrt__build *b) {
  memset(t, 0, sizeof *t);
  const char *tmp = clcrt__env_get()->tmpdir;
  /* mkdtemp makes the directory 0700 under a name nobody can predict: the trace files in
   * it cannot be planted or read by another user. */
  if (snprintf(t->dir, sizeof t->dir, "%s/clcrt-trace-XXXXXX", tmp) >= (int)sizeof t->dir || !mkdtemp(t->dir)) {
    snprintf(b->deps_why, sizeof b->deps_why,
             "no directory for NVRTC's time trace could be made in %.200s (%s): set TMPDIR to a writable directory",
             tmp, strerror(errno));
    t->dir[0] = 0;
    return -1;
  }
  static const char opt[] = "--fdevice-time-trace=";
  size_t dl = strlen(t->dir);
  for (int i = 0; i < 2; i++) {
    memcpy(t->opt[i], opt, sizeof opt - 1);
    memcpy(t->opt[i] + sizeof opt - 1, t->dir, dl);
    snprintf(t->opt[i] + sizeof opt - 1 + dl, sizeof t->opt[i] - (sizeof opt - 1 + dl), "/t%d", i);
  }
  return 0;
}

/* The whole of a file, NUL-terminated, or NULL with errno set. */
static char *slurp(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return NULL;
  struct stat s;
  char *buf = NULL;
  int e = 0;
  if (fstat(fd, &s) != 0) e = errno;
  else if (!S_ISREG(s.st_mode)) e = EINVAL;
  else if ((uint64_t)s.st_size > MAX_TRACE_BYTES) e = EFBIG;
  else if (!(buf = clcrt__malloc((size_t)s.st_size + 1))) e = ENOMEM;
  else {
    size_t got = 0;
    while (got < (size_t)s.st_size) {
      ssize_t r = read(fd, buf + got, (size_t)s.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    buf[got] = 0;
    *len = got;
  }
  close(fd);
  errno = e;
  return buf;
}

void clcrt__hdr_trace_collect(clcrt_runtime *rt, clcrt__hdr_trace *t, int attempt, clcrt__build *b) {
  if (!t->dir[0]) return;
  /* NVRTC 13.0 appends ".json" to the name it is given; take the name itself if a later
   * one does not. */
  char path[PATH_MAX + 16];
  size_t len = 0;
  snprintf(path, sizeof path, "%s/t%d.json", t->dir, attempt);
  char *json = slurp(path, &len);
  if (!json) {
    snprintf(path, sizeof path, "%s/t%d", t->dir, attempt);
    json = slurp(path, &len);
  }
  if (!json) {
    snprintf(b->deps_why, sizeof b->deps_why, "NVRTC wrote no time trace (%s)", strerror(errno));
    return;
  }
  char inc[CLCRT__CUDA_HOME_MAX + 16], real[PATH_MAX];
  snprintf(inc, sizeof inc, "%s/include", rt->opts.cuda_home);
  const char *mem_names[] = {"clcrt_entry", b->user_name ? b->user_name : "clcrt_entry"};
  clcrt__deps_ctx ctx = {realpath(inc, real) ? real : NULL, mem_names, 2, "clcrt.cuh", t->started[attempt]};
  clcrt__deps *d = NULL;
  clcrt_status st = clcrt__deps_from_trace(json, len, &ctx, &d, b->deps_why, sizeof b->deps_why);
  clcrt__free(json);
  if (st == CLCRT_E_NOMEM) snprintf(b->deps_why, sizeof b->deps_why, "out of memory reading NVRTC's time trace");
  if (st == CLCRT_OK) b->deps = d;
}

void clcrt__hdr_trace_end(clcrt__hdr_trace *t) {
  if (!t->dir[0]) return;
  DIR *d = opendir(t->dir);
  for (struct dirent *de; d && (de = readdir(d)) != NULL;)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) unlinkat(dirfd(d), de->d_name, 0);
  if (d) closedir(d);
  rmdir(t->dir);
  t->dir[0] = 0;
}
