#include "driver.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

const char *const clcrt__driver_names[] = {
#define CLCRT__DRV_NAME(name) #name,
    CLCRT_DRIVER_MAP(CLCRT__DRV_NAME)
#undef CLCRT__DRV_NAME
        NULL};

const clcrt__driver_opt_name clcrt__driver_opt_names[] = {
#define CLCRT__DRV_OPT_NAME(field, symbol, version) {#field, symbol, version},
    CLCRT_DRIVER_OPT_MAP(CLCRT__DRV_OPT_NAME)
#undef CLCRT__DRV_OPT_NAME
        {NULL, NULL, 0}};

static clcrt__driver g_real;
static const clcrt__driver *g_override;
static int g_pretend_missing;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_loaded;             /* 1 when g_real is usable */
static char g_err[1024];

typedef CUresult (*get_proc_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The toolkit's stub libcuda (lib64/stubs/libcuda.so, soname libcuda.so.1) exists so that
 * programs link without a driver; every call into it fails with CUDA_ERROR_STUB_LIBRARY.
 * It gets loaded when its directory is on LD_LIBRARY_PATH (or in ld.so.conf), and is not
 * an old driver: updating the driver would not help. */
static void stub_message(void *h) {
  struct link_map *lm = NULL;
  const char *path = dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name ? lm->l_name
                                                                                             : "libcuda.so.1";
  snprintf(g_err, sizeof g_err,
           "the libcuda.so.1 that was loaded (%.200s) is the CUDA toolkit's stub library, not a driver "
           "(CUDA_ERROR_STUB_LIBRARY): it only lets programs link. Take the toolkit's stubs directory out of "
           "LD_LIBRARY_PATH (and ld.so.conf) so that the NVIDIA driver's libcuda.so.1 is found, install the driver "
           "if there is none, or create the runtime with opts.target_arch (e.g. \"sm_90a\") to compile without a GPU",
           path);
}

static void load_driver(void) {
  /* The soname, never the development symlink: the toolkit's stub libcuda.so must not be
   * mistaken for a driver. */
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_err, sizeof g_err,
             "the CUDA driver (libcuda.so.1) could not be loaded: %s. Install the NVIDIA driver, or create the "
             "runtime with opts.target_arch (e.g. \"sm_90a\") to compile without a GPU",
             dlerror());
    return;
  }
  get_proc_fn gp = (get_proc_fn)dlsym(h, "cuGetProcAddress_v2");
  if (!gp) {
    snprintf(g_err, sizeof g_err,
             "the CUDA driver is too old: it has no cuGetProcAddress_v2 (CUDA 12.0 or newer is needed)");
    return;
  }
#define LOAD(name)                                                                                       \
  {                                                                                                      \
    CUdriverProcAddressQueryResult q;                                                                    \
    void *fn = NULL;                                                                                     \
    CUresult r = gp(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q);                          \
    if (r != CUDA_SUCCESS || !fn) {                                                                      \
      if (r == CUDA_ERROR_STUB_LIBRARY)                                                                  \
        stub_message(h);                                                                                 \
      else                                                                                               \
        snprintf(g_err, sizeof g_err,                                                                    \
                 "the CUDA driver has no %s for CUDA %d.%d (cuGetProcAddress returned %d): update the "  \
                 "driver",                                                                               \
                 #name, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, (int)r);                          \
      return;                                                                                            \
    }                                                                                                    \
    memcpy(&g_real.name, &fn, sizeof fn);                                                                \
  }
  CLCRT_DRIVER_MAP(LOAD)
#undef LOAD
  /* Optional entries: NULL when this driver does not have them (their callers say so). */
#define LOAD_OPT(field, symbol, version)                                                      \
  {                                                                                            \
    CUdriverProcAddressQueryResult q;                                                          \
    void *fn = NULL;                                                                           \
    if (gp(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS) fn = NULL; \
    memcpy(&g_real.field, &fn, sizeof fn);                                                     \
  }
  CLCRT_DRIVER_OPT_MAP(LOAD_OPT)
#undef LOAD_OPT
  /* The handle stays open for the life of the process: entry points are cached. */
  g_loaded = 1;
}

const clcrt__driver *clcrt__driver_get(char *err, size_t errlen) {
  if (g_override) return g_override;
  if (g_pretend_missing) {
    snprintf(err, errlen,
             "the CUDA driver (libcuda.so.1) could not be loaded (test: pretending it is missing). Install the NVIDIA "
             "driver, or create the runtime with opts.target_arch to compile without a GPU");
    return NULL;
  }
  pthread_once(&g_once, load_driver);
  if (!g_loaded) {
    snprintf(err, errlen, "%s", g_err);
    return NULL;
  }
  return &g_real;
}

void clcrt__driver_override(const clcrt__driver *table) { g_override = table; }
void clcrt__driver_pretend_missing(int missing) { g_pretend_missing = missing; }
