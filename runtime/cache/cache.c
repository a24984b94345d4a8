/* The compile cache: keys, the disk directory, the disk lookups and stores, the counters.
 *
 * A key is the SHA-256 of everything that can change the cubin or the kernel's metadata:
 *   - the key schema (bump KEY_SCHEMA when the recipe below changes);
 *   - NVRTC: its version and the identity (path, size, mtime, inode) of the libnvrtc
 *     actually loaded, because patch releases keep the version number, and of the
 *     libnvrtc-builtins files beside it (NVRTC loads them at its first compile; they hold
 *     the built-in headers);
 *   - the architecture with its suffix ("sm_90a" and "sm_90" differ);
 *   - every embedded template file, by name and bytes (hashed once per process);
 *   - the canonical NVRTC options, in order, and the whole generated translation unit
 *     (the user's source, the entry, the scheduler's template arguments);
 *   - the resolved description: entry name, scheduler, grid kind, block, cluster, smem,
 *     minimum CTAs per SM (__launch_bounds__);
 *   - the CUDA toolkit's include directories, identified by the toolkit's real path,
 *     version.json when present, and the size, mtime and inode of include/, cuda.h and
 *     CCCL's version header (hashing thousands of toolkit headers on every registration
 *     would cost more than it protects against; a toolkit changes as a whole);
 *   - the user's include_digest, when given.
 *
 * The headers a tile function reads from disk are not in the key: NVRTC says which files
 * it read (its time trace), and the entry holds them with their hashes, which a lookup
 * checks (deps.h: the manifest). With include_digest the user vouches for every header
 * instead, and nothing is traced or checked.
 *
 * What the runtime cannot cover makes a compile uncached, never a stale hit: without
 * include_digest, user -I, -include or precompiled-header options (a file added to an
 * earlier include directory would shadow the one read), a source that uses __has_include,
 * and whatever deps.h lists (a header changed while it was compiled, a trace it cannot
 * read, ...). */
#include "cache.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deps.h"
#include "diskcache.h"
#include "embedded.h"
#include "env.h"
#include "sha256.h"

#define KEY_SCHEMA "clcrt-cache-key-3" /* 2: the minimum CTAs per SM, libnvrtc-builtins; 3: headers in a manifest */

static int is_builtins(const struct dirent *d) { return strncmp(d->d_name, "libnvrtc-builtins", 17) == 0; }

static void hash_stat(clcrt__sha256_ctx *c, const char *path) {
  struct stat s;
  uint64_t v[5] = {0};
  if (stat(path, &s) == 0)
    v[0] = (uint64_t)s.st_size, v[1] = (uint64_t)s.st_mtim.tv_sec, v[2] = (uint64_t)s.st_mtim.tv_nsec,
    v[3] = (uint64_t)s.st_ino, v[4] = (uint64_t)s.st_dev;
  clcrt__sha256_str(c, path);
  clcrt__sha256_field(c, v, sizeof v);
}

/* The libnvrtc-builtins files in the directory of libnvrtc (lib), in name order so that
 * the digest does not depend on the directory's order. NVRTC dlopens the one of its own
 * version when it first compiles, which is after the first key is needed, so the files
 * are hashed by identity rather than by asking the loader. */
static void hash_builtins(clcrt__sha256_ctx *c, const char *lib) {
  const char *slash = strrchr(lib, '/');
  char dir[PATH_MAX];
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if ((size_t)(slash - lib) < sizeof dir) snprintf(dir, sizeof dir, "%.*s", (int)(slash - lib), lib);
  else return;
  struct dirent **names = NULL;
  int n = scandir(dir, &names, is_builtins, alphasort);
  for (int i = 0; i < n; i++) {
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
    hash_stat(c, path);
    free(names[i]); /* scandir allocates with malloc, not clcrt's allocator */
  }
  free(names);
}

/* Digests computed once per process: the template and the NVRTC library. */
static uint8_t g_template[CLCRT__SHA256_BYTES], g_nvrtc[CLCRT__SHA256_BYTES];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void once_init(void) {
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  for (const clcrt__embedded_file *f = clcrt__embedded; f->name; f++) {
    clcrt__sha256_str(&c, f->name);
    clcrt__sha256_field(&c, f->text, f->len);
  }
  clcrt__sha256_final(&c, g_template);

  clcrt__sha256_init(&c);
  Dl_info info;
  if (dladdr((void *)(uintptr_t)nvrtcCompileProgram, &info) && info.dli_fname) {
    hash_stat(&c, info.dli_fname);
    hash_builtins(&c, info.dli_fname);
  } else {
    clcrt__sha256_str(&c, NULL);
  }
  clcrt__sha256_final(&c, g_nvrtc);
}

/* Toolkit digests by cuda_home, remembered for the process: stat'ing the toolkit on
 * every registration would cost more than a memory-cache hit. */
#define TOOLKITS 8
static struct {
  char home[512];
  uint8_t digest[CLCRT__SHA256_BYTES];
} g_toolkits[TOOLKITS];
static int g_ntoolkits;
static pthread_mutex_t g_toolkit_lock = PTHREAD_MUTEX_INITIALIZER;

static void toolkit_digest(const char *home, uint8_t out[CLCRT__SHA256_BYTES]) {
  pthread_mutex_lock(&g_toolkit_lock);
  for (int i = 0; i < g_ntoolkits; i++)
    if (strcmp(g_toolkits[i].home, home) == 0) {
      memcpy(out, g_toolkits[i].digest, CLCRT__SHA256_BYTES);
      pthread_mutex_unlock(&g_toolkit_lock);
      return;
    }
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  char path[PATH_MAX + 64], real[PATH_MAX];
  clcrt__sha256_str(&c, realpath(home, real) ? real : home);
  snprintf(path, sizeof path, "%s/version.json", home);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) clcrt__sha256_update(&c, buf, (size_t)n);
    close(fd);
  }
  static const char *const probes[] = {"include", "include/cuda.h", "include/cccl",
                                       "include/cccl/cuda/std/__cccl/version.h"};
  for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
    snprintf(path, sizeof path, "%s/%s", home, probes[i]);
    hash_stat(&c, path);
  }
  clcrt__sha256_final(&c, out);
  if (g_ntoolkits < TOOLKITS && strlen(home) < sizeof g_toolkits[0].home) {
    strcpy(g_toolkits[g_ntoolkits].home, home);
    memcpy(g_toolkits[g_ntoolkits].digest, out, CLCRT__SHA256_BYTES);
    g_ntoolkits++;
  }
  pthread_mutex_unlock(&g_toolkit_lock);
}

int clcrt__cache_key(clcrt_runtime *rt, clcrt__build *b, uint8_t key[CLCRT__KEY_BYTES]) {
  memset(key, 0, CLCRT__KEY_BYTES);
  b->want_deps = 0;
  /* With include_digest the user vouches for every header the source can reach (their
   * -I directories, absolute or quoted includes); the digest goes into the key, and no
   * header is traced. */
  if (b->has_user_include_dirs && !b->include_digest) {
    clcrt__log(rt, CLCRT_LOG_DEBUG,
               "%s is not cached: it names -I, -include or precompiled-header options and no include_digest (a "
               "header added to one of those directories later would not be seen)",
               b->name);
    return 0;
  }
  if (b->probes_files && !b->include_digest) {
    clcrt__log(rt, CLCRT_LOG_DEBUG,
               "%s is not cached: its source uses __has_include, whose answer depends on files that are never "
               "read; pass include_digest to vouch for them",
               b->name);
    return 0;
  }
  b->want_deps = !b->include_digest && b->may_read_files;
  pthread_once(&g_once, once_init);
  uint8_t toolkit[CLCRT__SHA256_BYTES];
  toolkit_digest(rt->opts.cuda_home ? rt->opts.cuda_home : "", toolkit);

  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  clcrt__sha256_str(&c, KEY_SCHEMA);
  int32_t nv[2] = {rt->nvrtc_major, rt->nvrtc_minor};
  clcrt__sha256_field(&c, nv, sizeof nv);
  clcrt__sha256_field(&c, g_nvrtc, sizeof g_nvrtc);
  clcrt__sha256_str(&c, rt->arch);
  clcrt__sha256_field(&c, g_template, sizeof g_template);
  clcrt__sha256_field(&c, toolkit, sizeof toolkit);
  uint32_t n = (uint32_t)b->num_options;
  clcrt__sha256_field(&c, &n, sizeof n);
  for (int i = 0; i < b->num_options; i++) clcrt__sha256_str(&c, b->options[i]);
  clcrt__sha256_str(&c, b->source);
  clcrt__sha256_str(&c, b->user_name);
  clcrt__sha256_str(&c, b->user_src);
  clcrt__sha256_str(&c, b->entry);
  clcrt__sha256_str(&c, b->name);
  uint32_t meta[10] = {(uint32_t)b->sched, (uint32_t)b->grid, b->block.x,   b->block.y,    b->block.z,
                       b->cluster.x,       b->cluster.y,      b->cluster.z, b->smem_bytes, b->min_blocks};
  clcrt__sha256_field(&c, meta, sizeof meta);
  clcrt__sha256_str(&c, b->include_digest);
  clcrt__sha256_final(&c, key);
  return 1;
}

/* Why dir must not be used, or NULL. The cache trusts its entries (a checksum is no
 * signature), so a directory where any user may create files is refused: another user
 * could plant a cubin under a key they can compute. Group-writable directories (a team's
 * shared cache) are the owner's choice. */
static const char *unusable_dir(const char *dir) {
  if (strlen(dir) + 1 + CLCRT__DC_FILE_LEN + 1 > CLCRT__DC_PATH_BYTES)
    return "its path is too long for the entries' paths";
  struct stat s;
  if (stat(dir, &s) != 0) return "it cannot be examined";
  if (s.st_mode & S_IWOTH) return "every user may write to it (entries could be planted); use a directory of your own";
  return NULL;
}

clcrt_status clcrt__cache_init(clcrt_runtime *rt) {
  rt->disk_dir = NULL;
  const clcrt__env *env = clcrt__env_get();
  /* Each warning names the value the runtime uses (runtime.c resolved it before this call):
   * an options field a program set where the environment's text is refused, else the default. */
  if (env->cache_max_bytes_bad)
    clcrt__log(rt, CLCRT_LOG_WARN,
               "CLCRT_CACHE_MAX_BYTES=\"%.64s\" is not a size (digits with an optional K, M, G or T): the cap is %llu "
               "bytes",
               env->cache_max_bytes_bad, rt->cache_max_bytes);
  if (env->preempt_waves_bad)
    clcrt__log(rt, CLCRT_LOG_WARN, "CLCRT_PREEMPT_WAVES=\"%.64s\" is not a count from 1 to %u: using %u",
               env->preempt_waves_bad, CLCRT__PREEMPT_WAVES_MAX, rt->preempt_waves);
  if (env->chunk_cycles_bad)
    clcrt__log(rt, CLCRT_LOG_WARN, "CLCRT_STEAL_CHUNK_CYCLES=\"%.64s\" is not a count from %u to %u: using %u",
               env->chunk_cycles_bad, CLCRT__CHUNK_CYCLES_MIN, CLCRT__CHUNK_CYCLES_MAX, rt->chunk_cycles);
  if (env->long_cycles_bad)
    clcrt__log(rt, CLCRT_LOG_WARN, "CLCRT_STEAL_LONG_CYCLES=\"%.64s\" is not a count from 0 to %u: using %u",
               env->long_cycles_bad, CLCRT__LONG_CYCLES_MAX, rt->long_cycles);
  const char *why = NULL;
  char *dir;
  if (clcrt__dc_resolve_dir(rt->opts.cache_dir, &dir, &why) != CLCRT_OK)
    return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory resolving the cache directory");
  if (!dir) {
    clcrt__log(rt, CLCRT_LOG_DEBUG, "disk cache off: %s", why);
    return CLCRT_OK;
  }
  /* A path that can never hold an entry is refused before anything is created: mkdir
   * would otherwise leave the levels that fit behind before the first one that does not. */
  char buf[256];
  if ((why = clcrt__dc_path_problem(dir, buf, sizeof buf)) != NULL) {
    clcrt__log(rt, CLCRT_LOG_WARN, "disk cache off: %.512s is not used: %s", dir, why);
    clcrt__free(dir);
    return CLCRT_OK;
  }
  int e = clcrt__dc_mkdirs(dir);
  if (e) {
    clcrt__log(rt, CLCRT_LOG_WARN, "disk cache off: cannot create %.512s (%s); kernels are compiled, not stored",
               dir, strerror(e));
    clcrt__free(dir);
    return CLCRT_OK;
  }
  /* The directory by its absolute path: a relative one would follow the program's
   * working directory from one registration to the next. When this fails the path is
   * kept as given (it still names the directory just made). */
  char real[PATH_MAX];
  if (realpath(dir, real)) {
    char *abs = clcrt__strdup(real);
    if (abs) clcrt__free(dir), dir = abs;
  }
  if ((why = unusable_dir(dir)) != NULL) {
    clcrt__log(rt, CLCRT_LOG_WARN, "disk cache off: %.512s is not used: %s", dir, why);
    clcrt__free(dir);
    return CLCRT_OK;
  }
  /* A directory we may only read still serves hits (a cache shipped read-only). */
  if (access(dir, W_OK | X_OK) != 0)
    clcrt__log(rt, CLCRT_LOG_WARN, "disk cache %s is not writable: existing entries are used, new ones not stored",
               dir);
  rt->disk_dir = dir;
  return CLCRT_OK;
}

const char *clcrt_runtime_cache_dir(const clcrt_runtime *rt) { return rt ? rt->disk_dir : NULL; }

void clcrt__cache_fini(clcrt_runtime *rt) {
  clcrt__free(rt->disk_dir);
  rt->disk_dir = NULL;
}

/* Whether an entry's metadata differs from the build it was looked up for; why names the
 * first field that differs, with both values. */
static int meta_differs(const clcrt__dc_meta *m, const clcrt_runtime *rt, const clcrt__build *b, char *why, size_t n) {
  if (strcmp(m->name, b->name) != 0)
    snprintf(why, n, "it holds the entry %.80s, this description makes %.80s", m->name, b->name);
  else if (strcmp(m->arch, rt->arch) != 0)
    snprintf(why, n, "it was compiled for %.31s, this runtime compiles for %s", m->arch, rt->arch);
  else if (m->sched != b->sched)
    snprintf(why, n, "it was compiled for scheduler %s, this description uses %s", clcrt__sched_name(m->sched),
             clcrt__sched_name(b->sched));
  else if (m->grid != b->grid)
    snprintf(why, n, "it was compiled for grid kind %u, this description uses %u", (unsigned)m->grid,
             (unsigned)b->grid);
  else if (memcmp(&m->block, &b->block, sizeof m->block) != 0)
    snprintf(why, n, "it was compiled for block (%u,%u,%u), this description has (%u,%u,%u)", m->block.x, m->block.y,
             m->block.z, b->block.x, b->block.y, b->block.z);
  else if (memcmp(&m->cluster, &b->cluster, sizeof m->cluster) != 0)
    snprintf(why, n, "it was compiled for cluster (%u,%u,%u), this description has (%u,%u,%u)", m->cluster.x,
             m->cluster.y, m->cluster.z, b->cluster.x, b->cluster.y, b->cluster.z);
  else if (m->smem_bytes != b->smem_bytes)
    snprintf(why, n, "it was compiled for %u bytes of dynamic shared memory, this description has %u", m->smem_bytes,
             b->smem_bytes);
  else if (m->min_blocks != b->min_blocks)
    snprintf(why, n, "it was compiled for %u CTAs per SM, this description asks for %u", m->min_blocks,
             b->min_blocks);
  else
    return 0;
  return 1;
}

int clcrt__disk_get(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], clcrt__build *b) {
  if (!rt->disk_dir) return 0;
  clcrt__dc_entry e;
  char rwhy[512];
  clcrt_status st = clcrt__dc_read(rt->disk_dir, key, &e, rwhy, sizeof rwhy);
  if (st == CLCRT_E_NOT_FOUND) return 0;
  char hex[2 * CLCRT__KEY_BYTES + 1];
  clcrt__hex(key, CLCRT__KEY_BYTES, hex);
  if (st != CLCRT_OK) {
    clcrt__log(rt, st == CLCRT_E_CORRUPT ? CLCRT_LOG_INFO : CLCRT_LOG_WARN,
               "disk cache entry %.16s… for %s unusable (%s): compiling again", hex, b->name, rwhy);
    return 0;
  }
  /* Equal keys imply equal descriptions; checking the metadata as well costs nothing and
   * turns any bug in the key recipe (or a forged entry) into a miss instead of a wrong kernel. */
  char differs[256];
  if (meta_differs(&e.meta, rt, b, differs, sizeof differs)) {
    clcrt__log(rt, CLCRT_LOG_WARN, "disk cache entry %.16s… for %s does not match its key: %s; compiling again", hex,
               b->name, differs);
    clcrt__dc_entry_free(&e);
    return 0;
  }
  const clcrt__dc_meta *m = &e.meta;
  /* The headers the entry was compiled from must still be what they were. */
  clcrt__deps *deps = NULL;
  char why[512];
  clcrt_status ds = clcrt__deps_decode(m->deps ? m->deps : "", &deps);
  if (ds != CLCRT_OK || !clcrt__deps_check(deps, 0, 1, why, sizeof why)) {
    if (ds == CLCRT_E_CORRUPT) snprintf(why, sizeof why, "its list of headers is damaged");
    else if (ds == CLCRT_E_NOMEM) snprintf(why, sizeof why, "out of memory reading its list of headers");
    clcrt__log(rt, CLCRT_LOG_INFO, "disk cache entry %.16s… for %s is stale: %s; compiling again", hex, b->name, why);
    clcrt__deps_free(deps);
    clcrt__dc_entry_free(&e);
    return 0;
  }
  clcrt__deps_free(b->deps);
  b->deps = deps->n ? deps : NULL;
  if (!deps->n) clcrt__deps_free(deps);
  b->cubin = e.cubin;
  b->cubin_size = (size_t)m->cubin_size;
  b->ptx = e.ptx;
  b->compile_ms = 0;
  e.cubin = NULL;
  e.ptx = NULL;
  clcrt__dc_entry_free(&e);
  return 1;
}

void clcrt__disk_put(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], const clcrt__build *b) {
  if (!rt->disk_dir || !b->cubin || !b->cubin_size) return;
  char *deps = clcrt__deps_encode(b->deps);
  if (!deps) {
    clcrt__log(rt, CLCRT_LOG_WARN, "%s not stored in the disk cache: out of memory", b->name);
    return;
  }
  size_t olen = 0;
  for (int i = 0; i < b->num_options; i++) olen += strlen(b->options[i]) + 1;
  char *opts = clcrt__malloc(olen + 1);
  if (!opts) {
    clcrt__log(rt, CLCRT_LOG_WARN, "%s not stored in the disk cache: out of memory", b->name);
    clcrt__free(deps);
    return;
  }
  char *p = opts;
  for (int i = 0; i < b->num_options; i++) {
    size_t n = strlen(b->options[i]);
    memcpy(p, b->options[i], n);
    p += n;
    if (i + 1 < b->num_options) *p++ = '\n';
  }
  *p = 0;
  clcrt__dc_meta m = {0};
  memcpy(m.key, key, CLCRT__KEY_BYTES);
  m.sched = b->sched;
  m.grid = b->grid;
  m.block = b->block;
  m.cluster = b->cluster;
  m.smem_bytes = b->smem_bytes;
  m.min_blocks = b->min_blocks;
  m.nvrtc_major = rt->nvrtc_major;
  m.nvrtc_minor = rt->nvrtc_minor;
  m.compile_ms = b->compile_ms;
  m.name = b->name;
  m.arch = rt->arch;
  m.options = opts;
  m.deps = deps;
  char why[512];
  clcrt_status st = clcrt__dc_write(rt->disk_dir, &m, b->cubin, b->cubin_size, b->ptx, b->ptx ? strlen(b->ptx) : 0,
                                    rt->cache_max_bytes, why, sizeof why);
  if (st != CLCRT_OK) clcrt__log(rt, CLCRT_LOG_INFO, "%s not stored in the disk cache: %s", b->name, why);
  clcrt__free(opts);
  clcrt__free(deps);
}

clcrt_status clcrt_cache_stats_get(const clcrt_runtime *rt, clcrt_cache_stats *out) {
  if (!rt) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_cache_stats_get: the runtime is NULL");
  clcrt_runtime *mrt = (clcrt_runtime *)rt; /* the lock and the message are not part of the value */
  if (!out) return clcrt__fail(mrt, CLCRT_E_INVALID, "clcrt_cache_stats_get: out is NULL");
  if (out->size < sizeof out->size)
    return clcrt__fail(mrt, CLCRT_E_INVALID,
                       "clcrt_cache_stats_get: out->size is %zu: initialise it with CLCRT_CACHE_STATS_INIT", out->size);
  size_t n = out->size < sizeof *out ? out->size : sizeof *out;
  clcrt_cache_stats s;
  if (mrt->lock_ok) pthread_mutex_lock(&mrt->lock);
  s = rt->cstats;
  if (mrt->lock_ok) pthread_mutex_unlock(&mrt->lock);
  s.size = out->size;
  memcpy(out, &s, n);
  return CLCRT_OK;
}

/* The description's own key, for a memory-cache lookup before clcrt__build_prepare (which
 * builds the translation unit and stats the toolkit: several microseconds). It hashes
 * the description as given, field by field, so two descriptions that differ in any way
 * (even ones that resolve to the same build) get different keys; that only costs a
 * slower path, never a wrong kernel. A runtime may map it to a kernel only when that
 * kernel's content key was cacheable: what can change behind a description (headers in
 * -I directories, quoted includes) makes a build uncacheable, and then the slow path
 * runs every time. Returns 0 when d cannot be hashed (bad size). */
int clcrt__desc_key(const clcrt_tile_desc *d, uint8_t key[CLCRT__KEY_BYTES]) {
  if (!d || d->size < offsetof(clcrt_tile_desc, num_options) + sizeof d->num_options ||
      d->size > sizeof(clcrt_tile_desc))
    return 0;
  clcrt_tile_desc f = CLCRT_TILE_DESC_INIT;
  memcpy(&f, d, d->size);
  if (f.num_options < 0 || (f.num_options > 0 && !f.options)) return 0;
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  clcrt__sha256_str(&c, "clcrt-desc-key-2");
  clcrt__sha256_str(&c, f.source);
  clcrt__sha256_str(&c, f.tile_fn);
  clcrt__sha256_str(&c, f.args_type);
  clcrt__sha256_str(&c, f.state_type);
  clcrt__sha256_str(&c, f.prologue_fn);
  clcrt__sha256_str(&c, f.include_digest);
  /* Every field of clcrt_tile_desc: one added to the struct must be added here. */
  uint32_t v[11] = {f.block.x,   f.block.y,    f.block.z,         f.cluster.x,      f.cluster.y,
                    f.cluster.z, f.smem_bytes, (uint32_t)f.sched, (uint32_t)f.grid, (uint32_t)f.num_options,
                    f.min_blocks_per_sm};
  clcrt__sha256_field(&c, v, sizeof v);
  for (int i = 0; i < f.num_options; i++) clcrt__sha256_str(&c, f.options[i]);
  clcrt__sha256_final(&c, key);
  return 1;
}
