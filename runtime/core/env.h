/* Environment variables, read once, in one place (README: "Environment variables"). */
#ifndef CLCRT_ENV_H
#define CLCRT_ENV_H
#include <stddef.h>

#include "clcrt.h"

typedef struct clcrt__env {
  const char *cache_dir;       /* CLCRT_CACHE_DIR */
  const char *xdg_cache_home;  /* XDG_CACHE_HOME, when absolute (the XDG spec: relative paths are ignored) */
  const char *home;            /* HOME, when absolute */
  int cache_disable;           /* CLCRT_CACHE_DISABLE=1 */
  unsigned long long cache_max_bytes; /* CLCRT_CACHE_MAX_BYTES, default 1 GiB; 0: no cap */
  const char *cache_max_bytes_bad;    /* the text of CLCRT_CACHE_MAX_BYTES when it is not a size (then the default) */
  const char *cuda_home;       /* CUDA_HOME, else CUDA_PATH */
  const char *cuda_home_var;   /* which of the two cuda_home came from, or NULL */
  const char *tmpdir;          /* TMPDIR when absolute, else /tmp: NVRTC's time traces (compile.c) */
  int warmup;                  /* CLCRT_WARMUP: 0 turns off the NVRTC warm-up of device runtimes (warmup.c) */
  unsigned preempt_waves;      /* CLCRT_PREEMPT_WAVES: reserve waves of a STEAL grid that may yield (launch.c) */
  const char *preempt_waves_bad; /* its text when it is not a count from 1 to 64 (then the default) */
  unsigned chunk_cycles;       /* CLCRT_STEAL_CHUNK_CYCLES: cycles a STEAL claim's units should last (launch.c) */
  const char *chunk_cycles_bad; /* its text when it is not a count in range (then the default) */
  unsigned long_cycles;        /* CLCRT_STEAL_LONG_CYCLES: per CTA of a cluster, cycles per unit from which a
                                  STEAL run goes one cluster per unit (launch.c); 0: never */
  const char *long_cycles_bad; /* its text when it is not a count in range (then the default) */
  int pdl;                     /* CLCRT_PDL: 0 launches runs without programmatic dependent launch (launch.c) */
  /* Which of the runtime's tunables the environment sets (present and valid): those override
   * clcrt_runtime_opts (clcrt__tunables_get). */
  int chunk_cycles_set, long_cycles_set, preempt_waves_set, cache_max_bytes_set, warmup_set;
} clcrt__env;

/* The tunables a runtime runs with (clcrt_runtime_opts, README "Environment variables"). */
typedef struct clcrt__tunables {
  unsigned chunk_cycles;              /* a STEAL claim's units last about this many cycles */
  unsigned long_cycles;               /* long units from this many cycles per CTA; 0: never */
  unsigned preempt_waves;             /* reserve waves of a STEAL grid that may yield */
  unsigned long long cache_max_bytes; /* the disk cache's cap; 0: none */
  int warmup;                         /* the NVRTC warm-up of device runtimes: 1 on, 0 off */
} clcrt__tunables;
/* Each tunable: the option when it is not 0 (CLCRT_OPT_OFF where a field allows it), else the
 * default; the environment variable, when set to a valid value, overrides either. Returns 1; 0
 * with why filled (and *t undefined) when an option is out of its range. */
int clcrt__tunables_get(const clcrt_runtime_opts *o, clcrt__tunables *t, char *why, size_t why_len);
#define CLCRT__PREEMPT_WAVES_DEFAULT 2u
#define CLCRT__PREEMPT_WAVES_MAX 64u
#define CLCRT__CHUNK_CYCLES_DEFAULT 8000u
#define CLCRT__CHUNK_CYCLES_MIN 1u
#define CLCRT__CHUNK_CYCLES_MAX 10000000u
#define CLCRT__LONG_CYCLES_DEFAULT 4000u
#define CLCRT__LONG_CYCLES_MAX 100000000u
#define CLCRT__CACHE_MAX_BYTES_DEFAULT (1ull << 30)
/* The values as first read; later changes to the environment are not seen. */
const clcrt__env *clcrt__env_get(void);
/* Parses a byte count: decimal digits with an optional K, M, G or T suffix (powers of
 * 1024; a trailing "B" or "iB" is allowed). Returns 0 and leaves *out alone for anything
 * else: a sign, spaces, a fraction, a value that does not fit in 64 bits. */
int clcrt__parse_bytes(const char *s, unsigned long long *out);
/* Decimal digits only, from lo to hi. Returns 0 and leaves *out alone for anything else. */
int clcrt__parse_count(const char *s, unsigned lo, unsigned hi, unsigned *out);
#endif
