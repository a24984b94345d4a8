/* Environment variables, read once, in one place (README: "Environment variables"). */
#ifndef CLCRT_ENV_H
#define CLCRT_ENV_H
typedef struct clcrt__env {
  const char *cache_dir;       /* CLCRT_CACHE_DIR */
  const char *xdg_cache_home;  /* XDG_CACHE_HOME */
  const char *home;            /* HOME */
  int cache_disable;           /* CLCRT_CACHE_DISABLE=1 */
  unsigned long long cache_max_bytes; /* CLCRT_CACHE_MAX_BYTES, default 1 GiB */
  const char *cuda_home;       /* CUDA_HOME, else CUDA_PATH */
} clcrt__env;
/* The values as first read; later changes to the environment are not seen. */
const clcrt__env *clcrt__env_get(void);
#endif
