#include "env.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static clcrt__env g_env;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }

static void read_env(void) {
  g_env.cache_dir = getenv("CLCRT_CACHE_DIR"); /* "" is meaningful: no disk cache */
  g_env.xdg_cache_home = nonempty(getenv("XDG_CACHE_HOME"));
  g_env.home = nonempty(getenv("HOME"));
  const char *d = getenv("CLCRT_CACHE_DISABLE");
  g_env.cache_disable = d && *d && strcmp(d, "0") != 0;
  g_env.cache_max_bytes = 1ull << 30;
  const char *m = nonempty(getenv("CLCRT_CACHE_MAX_BYTES"));
  if (m) {
    char *end;
    unsigned long long v = strtoull(m, &end, 10);
    if (end != m && *end == 0) g_env.cache_max_bytes = v;
  }
  g_env.cuda_home = nonempty(getenv("CUDA_HOME"));
  if (!g_env.cuda_home) g_env.cuda_home = nonempty(getenv("CUDA_PATH"));
}

const clcrt__env *clcrt__env_get(void) {
  pthread_once(&g_once, read_env);
  return &g_env;
}
