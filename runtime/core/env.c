#include "env.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clcrt__env g_env;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *nonempty(const char *s) { return s && *s ? s : NULL; }
/* A cache under a relative directory would move with the working directory. */
static const char *absolute(const char *s) { return s && s[0] == '/' ? s : NULL; }

int clcrt__parse_bytes(const char *s, unsigned long long *out) {
  if (!s || !isdigit((unsigned char)*s)) return 0; /* strtoull would take "-1" and " 1" */
  unsigned long long v = 0;
  const char *p = s;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (~0ull - d) / 10) return 0;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
  }
  if (shift) {
    p++;
    if (*p == 'i' || *p == 'I') p++;
  }
  if (*p == 'B' || *p == 'b') p++;
  if (*p) return 0;
  if (shift && v > (~0ull >> shift)) return 0;
  *out = v << shift;
  return 1;
}

int clcrt__parse_count(const char *s, unsigned lo, unsigned hi, unsigned *out) {
  if (!s || !*s) return 0;
  unsigned long long v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9') return 0;
    v = v * 10u + (unsigned)(*p - '0');
    if (v > hi) return 0;
  }
  if (v < lo) return 0;
  *out = (unsigned)v;
  return 1;
}

static void read_env(void) {
  g_env.cache_dir = getenv("CLCRT_CACHE_DIR"); /* "" is meaningful: no disk cache */
  g_env.xdg_cache_home = absolute(getenv("XDG_CACHE_HOME"));
  g_env.home = absolute(getenv("HOME"));
  const char *d = getenv("CLCRT_CACHE_DISABLE");
  g_env.cache_disable = d && *d && strcmp(d, "0") != 0;
  g_env.cache_max_bytes = CLCRT__CACHE_MAX_BYTES_DEFAULT;
  const char *m = nonempty(getenv("CLCRT_CACHE_MAX_BYTES"));
  if (m && !clcrt__parse_bytes(m, &g_env.cache_max_bytes)) g_env.cache_max_bytes_bad = m;
  g_env.cache_max_bytes_set = m && !g_env.cache_max_bytes_bad;
  g_env.cuda_home = nonempty(getenv("CUDA_HOME"));
  g_env.cuda_home_var = g_env.cuda_home ? "CUDA_HOME" : NULL;
  if (!g_env.cuda_home && (g_env.cuda_home = nonempty(getenv("CUDA_PATH"))) != NULL) g_env.cuda_home_var = "CUDA_PATH";
  g_env.tmpdir = absolute(nonempty(getenv("TMPDIR")));
  if (!g_env.tmpdir) g_env.tmpdir = "/tmp";
  const char *w = nonempty(getenv("CLCRT_WARMUP"));
  g_env.warmup = !(w && strcmp(w, "0") == 0);
  g_env.warmup_set = w != NULL;
  g_env.preempt_waves = CLCRT__PREEMPT_WAVES_DEFAULT;
  const char *pw = nonempty(getenv("CLCRT_PREEMPT_WAVES"));
  if (pw && !clcrt__parse_count(pw, 1, CLCRT__PREEMPT_WAVES_MAX, &g_env.preempt_waves)) g_env.preempt_waves_bad = pw;
  g_env.preempt_waves_set = pw && !g_env.preempt_waves_bad;
  g_env.chunk_cycles = CLCRT__CHUNK_CYCLES_DEFAULT;
  const char *cc = nonempty(getenv("CLCRT_STEAL_CHUNK_CYCLES"));
  if (cc && !clcrt__parse_count(cc, CLCRT__CHUNK_CYCLES_MIN, CLCRT__CHUNK_CYCLES_MAX, &g_env.chunk_cycles))
    g_env.chunk_cycles_bad = cc;
  g_env.chunk_cycles_set = cc && !g_env.chunk_cycles_bad;
  g_env.long_cycles = CLCRT__LONG_CYCLES_DEFAULT;
  const char *lc = nonempty(getenv("CLCRT_STEAL_LONG_CYCLES"));
  if (lc && !clcrt__parse_count(lc, 0, CLCRT__LONG_CYCLES_MAX, &g_env.long_cycles)) g_env.long_cycles_bad = lc;
  g_env.long_cycles_set = lc && !g_env.long_cycles_bad;
  const char *pdl = nonempty(getenv("CLCRT_PDL"));
  g_env.pdl = !(pdl && strcmp(pdl, "0") == 0);
}

const clcrt__env *clcrt__env_get(void) {
  pthread_once(&g_once, read_env);
  return &g_env;
}

/* The tunables that exist both as options and as environment variables, in one place: the
 * options a program sets, which a user can still override from the shell (to try a value
 * without rebuilding), as for every other environment variable here. */
int clcrt__tunables_get(const clcrt_runtime_opts *o, clcrt__tunables *t, char *why, size_t why_len) {
  const clcrt__env *e = clcrt__env_get();
  t->chunk_cycles = CLCRT__CHUNK_CYCLES_DEFAULT;
  t->long_cycles = CLCRT__LONG_CYCLES_DEFAULT;
  t->preempt_waves = CLCRT__PREEMPT_WAVES_DEFAULT;
  t->cache_max_bytes = CLCRT__CACHE_MAX_BYTES_DEFAULT;
  t->warmup = 1;
  if (o->steal_chunk_cycles) {
    if (o->steal_chunk_cycles > CLCRT__CHUNK_CYCLES_MAX)
      return snprintf(why, why_len, "clcrt_runtime_opts.steal_chunk_cycles is %u: at most %u (0: the default, %u)",
                      o->steal_chunk_cycles, CLCRT__CHUNK_CYCLES_MAX, CLCRT__CHUNK_CYCLES_DEFAULT),
             0;
    t->chunk_cycles = o->steal_chunk_cycles;
  }
  if (o->steal_long_cycles == CLCRT_OPT_OFF) {
    t->long_cycles = 0;
  } else if (o->steal_long_cycles) {
    if (o->steal_long_cycles > CLCRT__LONG_CYCLES_MAX)
      return snprintf(why, why_len,
                      "clcrt_runtime_opts.steal_long_cycles is %u: at most %u, or CLCRT_OPT_OFF for never (0: the "
                      "default, %u)",
                      o->steal_long_cycles, CLCRT__LONG_CYCLES_MAX, CLCRT__LONG_CYCLES_DEFAULT),
             0;
    t->long_cycles = o->steal_long_cycles;
  }
  if (o->preempt_waves) {
    if (o->preempt_waves > CLCRT__PREEMPT_WAVES_MAX)
      return snprintf(why, why_len, "clcrt_runtime_opts.preempt_waves is %u: at most %u (0: the default, %u)",
                      o->preempt_waves, CLCRT__PREEMPT_WAVES_MAX, CLCRT__PREEMPT_WAVES_DEFAULT),
             0;
    t->preempt_waves = o->preempt_waves;
  }
  if (o->cache_max_bytes) t->cache_max_bytes = o->cache_max_bytes == CLCRT_OPT_OFF ? 0 : o->cache_max_bytes;
  if (o->warmup) t->warmup = o->warmup > 0;
  if (e->chunk_cycles_set) t->chunk_cycles = e->chunk_cycles;
  if (e->long_cycles_set) t->long_cycles = e->long_cycles;
  if (e->preempt_waves_set) t->preempt_waves = e->preempt_waves;
  if (e->cache_max_bytes_set) t->cache_max_bytes = e->cache_max_bytes;
  if (e->warmup_set) t->warmup = e->warmup;
  return 1;
}
