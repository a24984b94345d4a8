/* The compile cache: SHA-256 against FIPS 180-4, the disk entry format and its failure
 * modes, eviction, and the cache end to end through clcrt_register in compile-only mode
 * (sm_90a: no GPU needed). Every test gets a fresh directory from mkdtemp. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache.h"
#include "clcrt.h"
#include "deps.h"
#include "diskcache.h"
#include "env.h"
#include "internal.h"
#include "sha256.h"

/* ---- helpers ---------------------------------------------------------------------- */

static char g_dir[256];

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  chmod(p, 0700);
  return remove(p);
}
static void dir_setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/clcrt-cache-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
}
static void dir_teardown(void) {
  chmod(g_dir, 0700);
  nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_log[16384];
static void log_cb(void *user, clcrt_log_level lvl, const char *msg) {
  (void)user;
  pthread_mutex_lock(&g_log_lock);
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "[%d] %s\n", (int)lvl, msg);
  pthread_mutex_unlock(&g_log_lock);
}

static clcrt_runtime *rt_in(const char *dir, const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = dir;
  o.log = log_cb;
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  return rt;
}
static clcrt_runtime *rt_new(void) { return rt_in(g_dir, "sm_90a"); }

static const char *SCALE =
    "struct ScaleArgs { float *x; long n; float alpha; };\n"
    "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
    "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
    "  if (i < a.n) a.x[i] *= a.alpha;\n"
    "}\n";

static clcrt_tile_desc scale_desc(unsigned block) {
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = SCALE;
  d.tile_fn = "scale_tile";
  d.args_type = "ScaleArgs";
  d.block = (clcrt_dim3){block, 1, 1};
  d.sched = CLCRT_SCHED_STEAL;
  return d;
}

static clcrt_kernel *reg(clcrt_runtime *rt, const clcrt_tile_desc *d) {
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, d, &k);
  ck_assert_msg(st == CLCRT_OK, "register: %s: %s", clcrt_status_name(st), clcrt_errmsg(rt));
  return k;
}

static clcrt_cache_stats stats(const clcrt_runtime *rt) {
  clcrt_cache_stats s = CLCRT_CACHE_STATS_INIT;
  ck_assert_int_eq(clcrt_cache_stats_get(rt, &s), CLCRT_OK);
  return s;
}

static int count_visit(void *user, const char *path, const clcrt__dc_meta *m, clcrt_status st, const char *why) {
  (void)path, (void)why, (void)m;
  int *c = user;
  c[st == CLCRT_OK ? 0 : 1]++;
  return 0;
}
/* [0] good entries, [1] damaged ones. */
static void count_entries(const char *dir, int out[2]) {
  out[0] = out[1] = 0;
  ck_assert_int_eq(clcrt__dc_foreach(dir, 1, count_visit, out), CLCRT_OK);
}

static int only_entry_path(const char *dir, char *out, size_t n) {
  int found = 0;
  DIR *d = opendir(dir);
  for (struct dirent *de; d && (de = readdir(d));)
    if (strstr(de->d_name, CLCRT__DC_SUFFIX)) found++, snprintf(out, n, "%s/%s", dir, de->d_name);
  if (d) closedir(d);
  return found;
}

static long file_size(const char *p) {
  struct stat s;
  return stat(p, &s) == 0 ? (long)s.st_size : -1;
}

static void flip_byte(const char *path, long off) {
  int fd = open(path, O_RDWR);
  ck_assert_int_ge(fd, 0);
  unsigned char c;
  ck_assert_int_eq(pread(fd, &c, 1, off), 1);
  c ^= 0x5a;
  ck_assert_int_eq(pwrite(fd, &c, 1, off), 1);
  close(fd);
}

/* ---- SHA-256 ---------------------------------------------------------------------- */

static void hex_of(const void *p, size_t n, char out[65]) {
  uint8_t d[32];
  clcrt__sha256_once(p, n, d);
  clcrt__hex(d, 32, out);
}

static void check_vectors(void) {
  /* FIPS 180-4 examples (csrc.nist.gov, SHA256.pdf and SHA2_Additional.pdf). */
  static const struct {
    const char *msg, *hex;
  } v[] = {
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  char h[65];
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    hex_of(v[i].msg, strlen(v[i].msg), h);
    ck_assert_str_eq(h, v[i].hex);
  }
  /* One million 'a', fed in uneven pieces so that every buffering path runs. */
  static char a[1000000];
  memset(a, 'a', sizeof a);
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  for (size_t off = 0, step = 1; off < sizeof a; off += step, step = step % 131 + 7)
    clcrt__sha256_update(&c, a + off, off + step > sizeof a ? sizeof a - off : step);
  uint8_t d[32];
  clcrt__sha256_final(&c, d);
  clcrt__hex(d, 32, h);
  ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  /* Bytes 0x00..0xff repeated, every length up to 300: incremental equals one shot. */
  unsigned char buf[300];
  for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 7 + 3);
  for (size_t n = 0; n <= sizeof buf; n++) {
    uint8_t one[32], inc[32];
    clcrt__sha256_once(buf, n, one);
    clcrt__sha256_init(&c);
    clcrt__sha256_update(&c, buf, n / 3);
    clcrt__sha256_update(&c, buf + n / 3, n - n / 3);
    clcrt__sha256_final(&c, inc);
    ck_assert_mem_eq(one, inc, 32);
  }
}

START_TEST(sha256_fips_vectors) {
  int accel = clcrt__sha256_force_portable(0);
  check_vectors();
  ck_assert_int_eq(clcrt__sha256_force_portable(1), 0);
  check_vectors();
  clcrt__sha256_force_portable(0);
  if (!accel) fprintf(stderr, "note: no SHA extensions on this CPU; only the portable path was tested\n");
}
END_TEST

START_TEST(sha256_fields_do_not_run_together) {
  uint8_t x[32], y[32];
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c), clcrt__sha256_str(&c, "ab"), clcrt__sha256_str(&c, "c"), clcrt__sha256_final(&c, x);
  clcrt__sha256_init(&c), clcrt__sha256_str(&c, "a"), clcrt__sha256_str(&c, "bc"), clcrt__sha256_final(&c, y);
  ck_assert(memcmp(x, y, 32) != 0);
  clcrt__sha256_init(&c), clcrt__sha256_str(&c, NULL), clcrt__sha256_final(&c, x);
  clcrt__sha256_init(&c), clcrt__sha256_str(&c, ""), clcrt__sha256_final(&c, y);
  ck_assert(memcmp(x, y, 32) != 0);
}
END_TEST

/* ---- the entry format ------------------------------------------------------------- */

static unsigned char g_cubin[3000];
static const char *g_ptx = "//\n// Generated by NVIDIA NVVM Compiler\n.version 9.0\n.target sm_90a\n";

static clcrt__dc_meta sample_meta(uint8_t seed) {
  clcrt__dc_meta m = {0};
  for (int i = 0; i < 32; i++) m.key[i] = (uint8_t)(seed * 31 + i);
  m.sched = CLCRT_SCHED_STEAL;
  m.grid = CLCRT_GRID_PERSISTENT;
  m.block = (clcrt_dim3){256, 1, 1};
  m.cluster = (clcrt_dim3){2, 1, 1};
  m.smem_bytes = 4096;
  m.nvrtc_major = 13, m.nvrtc_minor = 0;
  m.compile_ms = 23.5;
  m.name = "clcrt_steal_scale_tile";
  m.arch = "sm_90a";
  m.options = "--gpu-architecture=sm_90a\n-std=c++17";
  for (size_t i = 0; i < sizeof g_cubin; i++) g_cubin[i] = (unsigned char)(i * 13 + seed);
  return m;
}

static void write_sample(uint8_t seed) {
  clcrt__dc_meta m = sample_meta(seed);
  char why[256] = "";
  ck_assert_msg(clcrt__dc_write(g_dir, &m, g_cubin, sizeof g_cubin, g_ptx, strlen(g_ptx), 0, why, sizeof why) ==
                    CLCRT_OK,
                "%s", why);
}

START_TEST(entry_roundtrip) {
  write_sample(1);
  clcrt__dc_meta m = sample_meta(1);
  clcrt__dc_entry e;
  char why[256] = "";
  ck_assert_msg(clcrt__dc_read(g_dir, m.key, &e, why, sizeof why) == CLCRT_OK, "%s", why);
  ck_assert_mem_eq(e.cubin, g_cubin, sizeof g_cubin);
  ck_assert_uint_eq(e.meta.cubin_size, sizeof g_cubin);
  ck_assert_str_eq(e.ptx, g_ptx);
  ck_assert_str_eq(e.meta.name, m.name);
  ck_assert_str_eq(e.meta.arch, "sm_90a");
  ck_assert_str_eq(e.meta.options, m.options);
  ck_assert_int_eq(e.meta.sched, CLCRT_SCHED_STEAL);
  ck_assert_int_eq(e.meta.grid, CLCRT_GRID_PERSISTENT);
  ck_assert_uint_eq(e.meta.block.x, 256);
  ck_assert_uint_eq(e.meta.cluster.x, 2);
  ck_assert_uint_eq(e.meta.smem_bytes, 4096);
  ck_assert_int_eq(e.meta.nvrtc_major, 13);
  ck_assert(e.meta.compile_ms > 23.4 && e.meta.compile_ms < 23.6);
  clcrt__dc_entry_free(&e);

  char path[512];
  ck_assert(clcrt__dc_path(g_dir, m.key, path, sizeof path));
  clcrt__dc_meta h;
  ck_assert_int_eq(clcrt__dc_read_meta(path, 1, &h, why, sizeof why), CLCRT_OK);
  ck_assert_uint_eq(h.file_size, (uint64_t)file_size(path));
  clcrt__dc_meta_free(&h);

  /* No PTX is fine too. */
  m = sample_meta(2);
  ck_assert_int_eq(clcrt__dc_write(g_dir, &m, g_cubin, sizeof g_cubin, NULL, 0, 0, NULL, 0), CLCRT_OK);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_OK);
  ck_assert_ptr_null(e.ptx);
  clcrt__dc_entry_free(&e);

  unsigned long n;
  unsigned long long bytes;
  ck_assert_int_eq(clcrt__dc_usage(g_dir, &n, &bytes), CLCRT_OK);
  ck_assert_uint_eq(n, 2);
  int c[2];
  count_entries(g_dir, c);
  ck_assert_int_eq(c[0], 2);
  ck_assert_int_eq(c[1], 0);
  /* A key that was never written is simply absent. */
  m.key[0] ^= 1;
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_E_NOT_FOUND);
}
END_TEST

/* Every kind of damage is CLCRT_E_CORRUPT (a miss), never a crash or a wrong kernel. */
START_TEST(entry_damage_is_a_miss) {
  clcrt__dc_meta m = sample_meta(3);
  char path[512], why[256];
  ck_assert(clcrt__dc_path(g_dir, m.key, path, sizeof path));
  long size = 0;
  clcrt__dc_entry e;
  /* A byte flipped in the magic, schema, lengths, name, cubin, PTX or checksum. */
  long offs[] = {0, 8, 12, 20, 50, 72, 118, 130, 300, 3100, -1, -32};
  for (size_t i = 0; i < sizeof offs / sizeof *offs; i++) {
    write_sample(3);
    size = file_size(path);
    flip_byte(path, offs[i] < 0 ? size + offs[i] : offs[i]);
    why[0] = 0;
    ck_assert_msg(clcrt__dc_read(g_dir, m.key, &e, why, sizeof why) == CLCRT_E_CORRUPT, "offset %ld", offs[i]);
    ck_assert(why[0]);
  }
  /* Truncated anywhere, down to empty. */
  long cuts[] = {0, 1, 8, 127, 128, 160, 1000, size - 33, size - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    write_sample(3);
    ck_assert_int_eq(truncate(path, cuts[i]), 0);
    ck_assert_msg(clcrt__dc_read(g_dir, m.key, &e, NULL, 0) == CLCRT_E_CORRUPT, "cut at %ld", cuts[i]);
  }
  /* Extended with garbage. */
  write_sample(3);
  FILE *f = fopen(path, "ab");
  fputs("trailing", f);
  fclose(f);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_E_CORRUPT);
  /* A foreign file under an entry's name. */
  f = fopen(path, "wb");
  for (int i = 0; i < 5000; i++) fputc("not a cubin "[i % 12], f);
  fclose(f);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_E_CORRUPT);
  /* A valid entry renamed to another key's name. */
  write_sample(4);
  clcrt__dc_meta m4 = sample_meta(4);
  char p4[512];
  clcrt__dc_path(g_dir, m4.key, p4, sizeof p4);
  ck_assert_int_eq(rename(p4, path), 0);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, why, sizeof why), CLCRT_E_CORRUPT);
  ck_assert_ptr_nonnull(strstr(why, "key"));
  /* A directory in its place. */
  unlink(path);
  mkdir(path, 0700);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_E_CORRUPT);
  rmdir(path);
  /* And rewriting repairs it. */
  write_sample(3);
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_OK);
  clcrt__dc_entry_free(&e);
}
END_TEST

static void set_mtime(const char *dir, uint8_t seed, time_t t) {
  clcrt__dc_meta m = sample_meta(seed);
  char p[512];
  clcrt__dc_path(dir, m.key, p, sizeof p);
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  ck_assert_int_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
}
static int present(uint8_t seed) {
  clcrt__dc_meta m = sample_meta(seed);
  char p[512];
  clcrt__dc_path(g_dir, m.key, p, sizeof p);
  return access(p, F_OK) == 0;
}

START_TEST(evict_least_recently_used) {
  time_t now = time(NULL);
  for (uint8_t s = 1; s <= 5; s++) write_sample(s), set_mtime(g_dir, s, now - 1000 + s * 10);
  long one = 0;
  {
    clcrt__dc_meta m = sample_meta(1);
    char p[512];
    clcrt__dc_path(g_dir, m.key, p, sizeof p);
    one = file_size(p);
  }
  /* A hit on the oldest makes it the most recently used. */
  clcrt__dc_meta m1 = sample_meta(1);
  clcrt__dc_entry e;
  ck_assert_int_eq(clcrt__dc_read(g_dir, m1.key, &e, NULL, 0), CLCRT_OK);
  clcrt__dc_entry_free(&e);
  unsigned long removed = 0;
  ck_assert_int_eq(clcrt__dc_evict(g_dir, (unsigned long long)(3 * one), NULL, &removed), CLCRT_OK);
  ck_assert_uint_eq(removed, 2);
  ck_assert(present(1) && !present(2) && !present(3) && present(4) && present(5));
  /* keep is never removed, even when it is the oldest. */
  set_mtime(g_dir, 4, now - 5000);
  ck_assert_int_eq(clcrt__dc_evict(g_dir, (unsigned long long)one, "does-not-matter", &removed), CLCRT_OK);
  ck_assert_uint_eq(removed, 2);
  unsigned long n;
  ck_assert_int_eq(clcrt__dc_usage(g_dir, &n, NULL), CLCRT_OK);
  ck_assert_uint_eq(n, 1);
}
END_TEST

START_TEST(write_respects_cap) {
  clcrt__dc_meta m = sample_meta(1);
  long one = (long)(CLCRT__DC_FIXED + strlen(m.name) + strlen(m.arch) + strlen(m.options) + sizeof g_cubin +
                    strlen(g_ptx) + CLCRT__DC_SUM);
  unsigned long long cap = (unsigned long long)(2 * one + one / 2);
  for (uint8_t s = 1; s <= 6; s++) {
    clcrt__dc_meta ms = sample_meta(s);
    ck_assert_int_eq(clcrt__dc_write(g_dir, &ms, g_cubin, sizeof g_cubin, g_ptx, strlen(g_ptx), cap, NULL, 0),
                     CLCRT_OK);
    set_mtime(g_dir, s, time(NULL) - 100 + s); /* distinct ages even within one second */
    unsigned long long bytes;
    unsigned long n;
    clcrt__dc_usage(g_dir, &n, &bytes);
    ck_assert_uint_le(bytes, cap);
    ck_assert(present(s)); /* the entry just written survives its own eviction */
  }
  ck_assert(present(5) && present(6) && !present(4));
  /* An entry bigger than the cap is not written at all. */
  clcrt__dc_meta m9 = sample_meta(9);
  ck_assert_int_eq(clcrt__dc_write(g_dir, &m9, g_cubin, sizeof g_cubin, NULL, 0, 100, NULL, 0), CLCRT_E_UNSUPPORTED);
  ck_assert(!present(9));
}
END_TEST

START_TEST(clear_and_stale_temporaries) {
  for (uint8_t s = 1; s <= 3; s++) write_sample(s);
  char p[512];
  snprintf(p, sizeof p, "%s/.tmp-0123456789abcdef-AAAAAA", g_dir);
  fclose(fopen(p, "w"));
  struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  utimensat(AT_FDCWD, p, old, 0);
  snprintf(p, sizeof p, "%s/.tmp-fresh-BBBBBB", g_dir);
  fclose(fopen(p, "w"));
  snprintf(p, sizeof p, "%s/README", g_dir);
  fclose(fopen(p, "w"));
  /* Eviction removes the stale temporary, not a fresh one a writer may still be using. */
  ck_assert_int_eq(clcrt__dc_evict(g_dir, 1ull << 40, NULL, NULL), CLCRT_OK);
  snprintf(p, sizeof p, "%s/.tmp-0123456789abcdef-AAAAAA", g_dir);
  ck_assert_int_ne(access(p, F_OK), 0);
  snprintf(p, sizeof p, "%s/.tmp-fresh-BBBBBB", g_dir);
  ck_assert_int_eq(access(p, F_OK), 0);
  unsigned long removed;
  ck_assert_int_eq(clcrt__dc_clear(g_dir, &removed), CLCRT_OK);
  ck_assert_uint_eq(removed, 4);
  snprintf(p, sizeof p, "%s/README", g_dir);
  ck_assert_int_eq(access(p, F_OK), 0); /* not ours: left alone */
  unsigned long n;
  ck_assert_int_eq(clcrt__dc_usage(g_dir, &n, NULL), CLCRT_OK);
  ck_assert_uint_eq(n, 0);
  /* A missing directory is an empty cache. */
  snprintf(p, sizeof p, "%s/nope", g_dir);
  ck_assert_int_eq(clcrt__dc_usage(p, &n, NULL), CLCRT_OK);
  ck_assert_uint_eq(n, 0);
}
END_TEST

/* Fail every allocation in turn: statuses, never crashes or leaks (the ASan build checks). */
START_TEST(entry_io_out_of_memory) {
  write_sample(1);
  clcrt__dc_meta m = sample_meta(7);
  int ok_read = 0, ok_write = 0;
  for (long n = 1; n < 40; n++) {
    clcrt__dc_entry e;
    clcrt__dc_meta m1 = sample_meta(1);
    clcrt__alloc_fail_after(n);
    clcrt_status st = clcrt__dc_read(g_dir, m1.key, &e, NULL, 0);
    clcrt__alloc_fail_after(0);
    ck_assert(st == CLCRT_OK || st == CLCRT_E_NOMEM);
    if (st == CLCRT_OK) ok_read++, clcrt__dc_entry_free(&e);
    m.key[0] = (uint8_t)n;
    clcrt__alloc_fail_after(n);
    st = clcrt__dc_write(g_dir, &m, g_cubin, sizeof g_cubin, g_ptx, strlen(g_ptx), 1ull << 30, NULL, 0);
    clcrt__alloc_fail_after(0);
    ck_assert(st == CLCRT_OK || st == CLCRT_E_NOMEM);
    ok_write += st == CLCRT_OK;
  }
  ck_assert_int_gt(ok_read, 0);
  ck_assert_int_gt(ok_write, 0);
  int c[2];
  count_entries(g_dir, c);
  ck_assert_int_eq(c[1], 0);
}
END_TEST

START_TEST(resolve_directory) {
  char *d;
  const char *why;
  ck_assert_int_eq(clcrt__dc_resolve_dir("", &d, &why), CLCRT_OK);
  ck_assert_ptr_null(d);
  ck_assert_ptr_nonnull(why);
  ck_assert_int_eq(clcrt__dc_resolve_dir("/x/y", &d, &why), CLCRT_OK);
  ck_assert_str_eq(d, "/x/y");
  clcrt__free(d);
}
END_TEST

static void env_resolves(const char *var, const char *val, const char *expect) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("CLCRT_CACHE_DIR"), unsetenv("XDG_CACHE_HOME"), unsetenv("CLCRT_CACHE_DISABLE");
    setenv("HOME", "/home/u", 1);
    if (var) setenv(var, val, 1);
    char *d = NULL;
    const char *why;
    clcrt__dc_resolve_dir(NULL, &d, &why);
    _exit(expect ? !(d && strcmp(d, expect) == 0) : d != NULL);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s=%s", var ? var : "-", val ? val : "-");
}

START_TEST(resolve_directory_from_environment) {
  env_resolves(NULL, NULL, "/home/u/.cache/clcrt");
  env_resolves("XDG_CACHE_HOME", "/xdg", "/xdg/clcrt");
  env_resolves("CLCRT_CACHE_DIR", "/c", "/c");
  env_resolves("CLCRT_CACHE_DIR", "", NULL);
  env_resolves("CLCRT_CACHE_DISABLE", "1", NULL);
}
END_TEST

/* ---- end to end through clcrt_register ---------------------------------------------- */

static int entries_in(const char *dir) {
  unsigned long n = 0;
  clcrt__dc_usage(dir, &n, NULL);
  return (int)n;
}

/* clcrt_kernel_info.from_cache of a kernel: how the latest registration that returned it
 * found it. */
static int from_cache(const clcrt_kernel *k) {
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  return info.from_cache;
}

START_TEST(e2e_memory_hit) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc d = scale_desc(256);
  clcrt_kernel *a = reg(rt, &d);
  ck_assert_int_eq(from_cache(a), 0);
  /* The same description again, and an equal copy of it: the loaded kernel, no NVRTC. */
  clcrt_kernel *b = reg(rt, &d);
  ck_assert_int_eq(from_cache(b), 1);
  char *src = strdup(SCALE);
  clcrt_tile_desc d2 = scale_desc(256);
  d2.source = src;
  clcrt_kernel *c = reg(rt, &d2);
  free(src);
  ck_assert_ptr_eq(a, b);
  ck_assert_ptr_eq(a, c);
  ck_assert_int_eq(from_cache(c), 1);
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 1);
  ck_assert_uint_eq(s.mem_hits, 2);
  ck_assert_uint_eq(s.disk_hits, 0);
  ck_assert(s.compile_ms > 0);
  ck_assert_int_eq(entries_in(g_dir), 1);
  clcrt_runtime_destroy(rt);
  /* A description that differs but resolves to the same kernel (AUTO is STEAL on sm_90a) is
   * found by the content key: in the next runtime, from the disk, then from memory. */
  rt = rt_new();
  clcrt_tile_desc autod = scale_desc(256);
  autod.sched = CLCRT_SCHED_AUTO;
  a = reg(rt, &autod);
  ck_assert_int_eq(from_cache(a), 2);
  ck_assert_ptr_eq(reg(rt, &d), a);
  ck_assert_int_eq(from_cache(a), 1);
  s = stats(rt);
  ck_assert_uint_eq(s.disk_hits, 1);
  ck_assert_uint_eq(s.mem_hits, 1);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(e2e_disk_hit_across_runtimes) {
  clcrt_tile_desc d = scale_desc(256);
  clcrt_runtime *rt1 = rt_new();
  clcrt_kernel *k1 = reg(rt1, &d);
  const void *cubin1;
  size_t size1;
  ck_assert_int_eq(clcrt_kernel_cubin(k1, &cubin1, &size1), CLCRT_OK);
  void *copy = malloc(size1);
  memcpy(copy, cubin1, size1);
  clcrt_runtime_destroy(rt1);

  clcrt_runtime *rt2 = rt_new();
  clcrt_kernel *k2 = reg(rt2, &d);
  clcrt_cache_stats s = stats(rt2);
  ck_assert_uint_eq(s.disk_hits, 1);
  ck_assert_uint_eq(s.misses, 0);
  ck_assert(s.compile_ms == 0);
  const void *cubin2;
  size_t size2;
  ck_assert_int_eq(clcrt_kernel_cubin(k2, &cubin2, &size2), CLCRT_OK);
  ck_assert_uint_eq(size1, size2);
  ck_assert_mem_eq(copy, cubin2, size1);
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k2, &info), CLCRT_OK);
  ck_assert_int_eq(info.from_cache, 2);
  ck_assert_str_eq(info.name, "clcrt_steal_scale_tile");
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k2, &ptx), CLCRT_OK); /* stored with the entry */
  ck_assert_ptr_nonnull(strstr(ptx, "clcrt_steal_scale_tile"));
  free(copy);
  clcrt_runtime_destroy(rt2);
}
END_TEST

static void damaged_entry_case(int truncate_it) {
  clcrt_tile_desc d = scale_desc(128);
  clcrt_runtime *rt = rt_new();
  reg(rt, &d);
  clcrt_runtime_destroy(rt);
  char path[512];
  ck_assert_int_eq(only_entry_path(g_dir, path, sizeof path), 1);
  long size = file_size(path);
  if (truncate_it) ck_assert_int_eq(truncate(path, size / 2), 0);
  else flip_byte(path, size / 2);
  g_log[0] = 0;
  rt = rt_new();
  clcrt_kernel *k = reg(rt, &d);
  ck_assert_ptr_nonnull(k);
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.disk_hits, 0);
  ck_assert_uint_eq(s.misses, 1);
  ck_assert_ptr_nonnull(strstr(g_log, "unusable"));
  clcrt_runtime_destroy(rt);
  /* Rewritten: the next runtime hits. */
  int c[2];
  count_entries(g_dir, c);
  ck_assert_int_eq(c[0], 1);
  ck_assert_int_eq(c[1], 0);
  ck_assert_int_eq(file_size(path), size);
  rt = rt_new();
  reg(rt, &d);
  ck_assert_uint_eq(stats(rt).disk_hits, 1);
  clcrt_runtime_destroy(rt);
}
START_TEST(e2e_corrupted_entry) { damaged_entry_case(0); }
END_TEST
START_TEST(e2e_truncated_entry) { damaged_entry_case(1); }
END_TEST

START_TEST(e2e_unwritable_directory) {
  /* A directory that cannot be created (its parent is a file): compile without it. */
  char p[512];
  snprintf(p, sizeof p, "%s/file", g_dir);
  fclose(fopen(p, "w"));
  snprintf(p, sizeof p, "%s/file/cache", g_dir);
  g_log[0] = 0;
  clcrt_runtime *rt = rt_in(p, "sm_90a");
  ck_assert_ptr_nonnull(strstr(g_log, "disk cache off"));
  clcrt_tile_desc d = scale_desc(256);
  ck_assert_ptr_nonnull(reg(rt, &d));
  ck_assert_uint_eq(stats(rt).misses, 1);
  clcrt_runtime_destroy(rt);
  if (geteuid() == 0) return; /* root writes through mode bits: the rest needs a user */
  /* A directory we may read but not write: hits are served, nothing is stored. */
  snprintf(p, sizeof p, "%s/ro", g_dir);
  rt = rt_in(p, "sm_90a");
  reg(rt, &d);
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(chmod(p, 0500), 0);
  g_log[0] = 0;
  rt = rt_in(p, "sm_90a");
  ck_assert_ptr_nonnull(strstr(g_log, "not writable"));
  reg(rt, &d);
  ck_assert_uint_eq(stats(rt).disk_hits, 1);
  clcrt_tile_desc d2 = scale_desc(64);
  ck_assert_ptr_nonnull(reg(rt, &d2));
  ck_assert_uint_eq(stats(rt).misses, 1);
  ck_assert_int_eq(entries_in(p), 1);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(e2e_disabled) {
  clcrt_tile_desc d = scale_desc(256);
  for (int i = 0; i < 2; i++) {
    g_log[0] = 0;
    clcrt_runtime *rt = rt_in("", "sm_90a");
    reg(rt, &d);
    ck_assert_uint_eq(stats(rt).misses, 1); /* never a disk hit */
    clcrt_runtime_destroy(rt);
  }
  ck_assert_int_eq(entries_in(g_dir), 0);
}
END_TEST

START_TEST(e2e_size_cap) {
  char measure[512], capped[512];
  snprintf(measure, sizeof measure, "%s/measure", g_dir);
  snprintf(capped, sizeof capped, "%s/capped", g_dir);
  /* Learn an entry's size in a child, so that this process reads the environment after
   * setting the cap. */
  pid_t pid = fork();
  if (pid == 0) {
    clcrt_tile_desc d = scale_desc(64);
    clcrt_runtime *rt = rt_in(measure, "sm_90a");
    clcrt_kernel *k = NULL;
    _exit(clcrt_register(rt, &d, &k) != CLCRT_OK);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  unsigned long long one;
  ck_assert_int_eq(clcrt__dc_usage(measure, NULL, &one), CLCRT_OK);
  ck_assert_uint_gt(one, 0);
  unsigned long long cap = 2 * one + one / 2;
  char v[32];
  snprintf(v, sizeof v, "%llu", cap);
  setenv("CLCRT_CACHE_MAX_BYTES", v, 1);
  clcrt_runtime *rt = rt_in(capped, "sm_90a");
  unsigned blocks[] = {64, 128, 256, 512};
  for (int i = 0; i < 4; i++) {
    clcrt_tile_desc d = scale_desc(blocks[i]);
    reg(rt, &d);
    unsigned long long bytes;
    unsigned long n;
    ck_assert_int_eq(clcrt__dc_usage(capped, &n, &bytes), CLCRT_OK);
    ck_assert_uint_le(bytes, cap);
    ck_assert_uint_ge(n, 1);
  }
  ck_assert_int_lt(entries_in(capped), 4);
  clcrt_runtime_destroy(rt);
  /* The newest entry survived: a fresh runtime hits it. */
  rt = rt_in(capped, "sm_90a");
  clcrt_tile_desc d = scale_desc(512);
  reg(rt, &d);
  ck_assert_uint_eq(stats(rt).disk_hits, 1);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(e2e_changes_miss) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc base = scale_desc(256);
  reg(rt, &base);
  const char *o1[] = {"-DVARIANT=1"}, *o2[] = {"-DVARIANT=2"};
  clcrt_tile_desc d = base;
  d.options = o1, d.num_options = 1;
  reg(rt, &d);
  d.options = o2;
  reg(rt, &d);
  char *src = malloc(strlen(SCALE) + 32);
  sprintf(src, "%s// a comment\n", SCALE);
  d = base;
  d.source = src;
  reg(rt, &d);
  d = base;
  d.block.x = 128;
  reg(rt, &d);
  d = base;
  d.smem_bytes = 1024;
  reg(rt, &d);
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 6);
  ck_assert_uint_eq(s.mem_hits, 0);
  ck_assert_int_eq(entries_in(g_dir), 6);
  clcrt_runtime_destroy(rt);
  /* Another architecture misses the same directory; this one hits all six. */
  rt = rt_in(g_dir, "sm_100a");
  reg(rt, &base);
  ck_assert_uint_eq(stats(rt).misses, 1);
  ck_assert_uint_eq(stats(rt).disk_hits, 0);
  clcrt_runtime_destroy(rt);
  rt = rt_new();
  d = base;
  d.source = src;
  reg(rt, &base), reg(rt, &d);
  ck_assert_uint_eq(stats(rt).disk_hits, 2);
  free(src);
  clcrt_runtime_destroy(rt);
}
END_TEST

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(e2e_unhashable_headers) {
  char inc[512], hdr[600], opt[600];
  snprintf(inc, sizeof inc, "%s/inc", g_dir);
  mkdir(inc, 0700);
  snprintf(hdr, sizeof hdr, "%s/factor.h", inc);
  write_file(hdr, "#define FACTOR 2.0f\n");
  snprintf(opt, sizeof opt, "-I%s", inc);
  const char *opts[] = {opt};
  static const char *SRC =
      "#include <factor.h>\n"
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) a.x[i] *= a.alpha * FACTOR;\n"
      "}\n";
  clcrt_tile_desc d = scale_desc(256);
  d.source = SRC;
  d.options = opts, d.num_options = 1;
  char cache[512];
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  clcrt_runtime *rt = rt_in(cache, "sm_90a");
  /* -I without a digest: compiled every time, never stored. */
  const void *c1, *c2;
  size_t n1, n2;
  clcrt_kernel *k1 = reg(rt, &d);
  clcrt_kernel_cubin(k1, &c1, &n1);
  write_file(hdr, "#define FACTOR 3.0f\n");
  clcrt_kernel *k2 = reg(rt, &d);
  clcrt_kernel_cubin(k2, &c2, &n2);
  ck_assert(n1 != n2 || memcmp(c1, c2, n1) != 0); /* the new header was seen */
  ck_assert_uint_eq(stats(rt).uncached, 2);
  ck_assert_int_eq(entries_in(cache), 0);
  /* With a digest: cached under it; a new digest is a new key. */
  d.include_digest = "factor-v3";
  reg(rt, &d), reg(rt, &d);
  d.include_digest = "factor-v4";
  reg(rt, &d);
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 2);
  ck_assert_uint_eq(s.mem_hits, 1);
  ck_assert_int_eq(entries_in(cache), 2);

  /* A quoted include without -I is found in the current directory: cached with the header
   * it read (its manifest), and seen again when the header changes. */
  ck_assert_int_eq(chdir(inc), 0);
  static const char *QSRC =
      "#include \"factor.h\"\n"
      "struct ScaleArgs { float *x; long n; float alpha; };\n"
      "__device__ void scale_tile(const clcrt::Tile &t, const ScaleArgs &a) {\n"
      "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
      "  if (i < a.n) a.x[i] *= a.alpha * FACTOR;\n"
      "}\n";
  clcrt_tile_desc q = scale_desc(256);
  q.source = QSRC;
  usleep(100 * 1000); /* older than CLCRT__DEPS_SETTLE_MS, or it is not stored */
  s = stats(rt);
  clcrt_kernel *q1 = reg(rt, &q), *q2 = reg(rt, &q);
  ck_assert_ptr_eq(q1, q2);
  ck_assert_uint_eq(stats(rt).misses, s.misses + 1);
  ck_assert_uint_eq(stats(rt).mem_hits, s.mem_hits + 1);
  ck_assert_uint_eq(stats(rt).uncached, s.uncached);
  write_file(hdr, "#define FACTOR 4.0f\n");
  clcrt_kernel *q3 = reg(rt, &q);
  ck_assert_ptr_ne(q3, q1);
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(chdir("/"), 0);
}
END_TEST

/* ---- headers on disk: the manifest (deps.h) --------------------------------------- */

/* Whether PTX holds the float constant v (1.5f or 2.5f), which NVRTC writes as a float
 * (0f3FC00000) or, stored as a word, as the integer of its bits (1069547520). */
static int ptx_has(const char *ptx, float v) {
  const char *f = v == 1.5f ? "0f3FC00000" : "0f40200000", *i = v == 1.5f ? "1069547520" : "1075838976";
  return ptx && (strstr(ptx, f) || strstr(ptx, i));
}

typedef struct child_result {
  clcrt_status st;
  int from_cache;
  int saw_1_5, saw_2_5;
  char msg[512];
} child_result;

/* Registers src in a new process (its own runtime on g_dir/cache, in directory cwd when
 * given, with cuda_home when given) and says what came back: where from, and which
 * constant the PTX holds. */
static child_result register_in_child(const char *src, const char *cwd, const char *cuda_home) {
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child_result r;
    memset(&r, 0, sizeof r);
    if (cwd && chdir(cwd) != 0) _exit(2);
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", g_dir);
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = "sm_90a";
    o.cache_dir = cache;
    o.cuda_home = cuda_home;
    clcrt_runtime *rt = NULL;
    r.st = clcrt_runtime_create(&rt, &o);
    clcrt_kernel *k = NULL;
    if (r.st == CLCRT_OK) {
      clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
      d.source = src;
      d.tile_fn = "val_tile";
      d.args_type = "ValArgs";
      d.block = (clcrt_dim3){128, 1, 1};
      r.st = clcrt_register(rt, &d, &k);
    }
    snprintf(r.msg, sizeof r.msg, "%s", clcrt_errmsg(rt));
    if (r.st == CLCRT_OK) {
      clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
      clcrt_kernel_info_get(k, &info);
      r.from_cache = info.from_cache;
      const char *ptx = NULL;
      if (clcrt_kernel_ptx(k, &ptx) == CLCRT_OK) {
        r.saw_1_5 = ptx_has(ptx, 1.5f);
        r.saw_2_5 = ptx_has(ptx, 2.5f);
      }
    }
    clcrt_runtime_destroy(rt);
    _exit(write(fds[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
  }
  close(fds[1]);
  child_result r;
  memset(&r, 0, sizeof r);
  ck_assert_int_eq(read(fds[0], &r, sizeof r), (ssize_t)sizeof r);
  close(fds[0]);
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child status %d", ws);
  return r;
}

/* Writes a header and waits until it is older than CLCRT__DEPS_SETTLE_MS: a header
 * modified just before a compile is never stored (its content might not be what NVRTC
 * read), which would make the hits below misses. */
static void write_settled(const char *path, const char *text) {
  write_file(path, text);
  usleep(120 * 1000);
}

typedef struct header_form {
  const char *what;
  const char *include; /* the lines before the tile function: %s is the header's absolute path */
  int relative_home;   /* <../../x/val.h> through a toolkit at g_dir/tk */
  int in_dir;          /* run in the header's directory (quoted include of a bare name) */
  int probe;           /* __has_include: the header's existence is what changes */
  int cached;          /* whether an unchanged header is a disk hit */
} header_form;

static const header_form FORMS[] = {
    {"angle brackets, absolute path", "#include <%s>\n", 0, 0, 0, 1},
    {"angle brackets, relative to the toolkit's include directory", "#include <../../x/val.h>\n", 1, 0, 0, 1},
    {"a comment between # and include", "#/**/include \"val.h\"\n", 0, 1, 0, 1},
    {"the digraph %:", "%%:include \"%s\"\n", 0, 0, 0, 1},
    {"a line splice after #", "#\\\ninclude \"%s\"\n", 0, 0, 0, 1},
    {"a macro naming the header", "#define VAL_H \"%s\"\n#include VAL_H\n", 0, 0, 0, 1},
    {"__has_include of an absolute path",
     "#if __has_include(<%s>)\n#define VAL 2.5f\n#else\n#define VAL 1.5f\n#endif\n", 0, 0, 1, 0},
};
#define NFORMS ((int)(sizeof FORMS / sizeof *FORMS))

/* Stale headers: the disk cache once served kernels compiled from a header that had changed since,
 * for every way of naming a header its include scan did not foresee. Each form: compile
 * in one process, register again with the header unchanged in another (a disk hit where
 * the form is cacheable), change the header and register in a third: it must see the new
 * value. The header includes a second one, which is the one that changes, so that nested
 * headers are covered too. */
START_TEST(e2e_header_forms_never_stale) {
  const header_form *f = &FORMS[_i];
  char x[512], val[600], inner[600], tk[512], tkinc[600], cudah[700], src[2048], pre[1024];
  snprintf(x, sizeof x, "%s/x", g_dir);
  snprintf(val, sizeof val, "%s/val.h", x);
  snprintf(inner, sizeof inner, "%s/inner.h", x);
  ck_assert_int_eq(mkdir(x, 0700), 0);
  const char *home = NULL;
  if (f->relative_home) {
    snprintf(tk, sizeof tk, "%s/tk", g_dir);
    snprintf(tkinc, sizeof tkinc, "%s/include", tk);
    snprintf(cudah, sizeof cudah, "%s/cuda.h", tkinc);
    ck_assert_int_eq(mkdir(tk, 0700), 0);
    ck_assert_int_eq(mkdir(tkinc, 0700), 0);
    write_file(cudah, "/* a toolkit for this test */\n");
    home = tk;
  }
  snprintf(pre, sizeof pre, f->include, val);
  snprintf(src, sizeof src,
           "%s"
           "struct ValArgs { float *x; };\n"
           "__device__ void val_tile(const clcrt::Tile &t, const ValArgs &a) { a.x[t.linear] = VAL; }\n",
           pre);
  const char *cwd = f->in_dir ? x : NULL;
  if (f->probe) {
    usleep(120 * 1000);
  } else {
    write_file(val, "#include \"inner.h\"\n");
    write_settled(inner, "#define VAL 1.5f\n");
  }
  child_result a = register_in_child(src, cwd, home);
  ck_assert_msg(a.st == CLCRT_OK, "%s: %s", f->what, a.msg);
  ck_assert_msg(a.saw_1_5 && !a.saw_2_5 && a.from_cache == 0, "%s: first compile", f->what);
  child_result b = register_in_child(src, cwd, home);
  ck_assert_msg(b.st == CLCRT_OK && b.saw_1_5 && !b.saw_2_5, "%s: unchanged: %s", f->what, b.msg);
  ck_assert_msg(b.from_cache == (f->cached ? 2 : 0), "%s: unchanged header: from_cache %d", f->what, b.from_cache);
  if (f->probe) write_settled(val, "/* now it exists */\n");
  else write_settled(inner, "#define VAL 2.5f\n");
  child_result c = register_in_child(src, cwd, home);
  ck_assert_msg(c.st == CLCRT_OK, "%s: %s", f->what, c.msg);
  ck_assert_msg(c.saw_2_5 && !c.saw_1_5, "%s: stale kernel after the header changed (from_cache %d)", f->what,
                c.from_cache);
  ck_assert_int_eq(c.from_cache, 0);
  /* And the new kernel is what the cache holds now (except where nothing is stored). */
  child_result e = register_in_child(src, cwd, home);
  ck_assert_msg(e.st == CLCRT_OK && e.saw_2_5 && e.from_cache == (f->cached ? 2 : 0), "%s: after the change",
                f->what);
}
END_TEST

/* The memory cache does not serve a kernel compiled from a header that changed in the
 * meantime either: the same description registered again after the edit compiles anew
 * (the old kernel stays valid for whoever holds it). A header deleted since is a miss too. */
START_TEST(e2e_header_edit_in_one_process) {
  char val[512], src[1024], cache[512];
  snprintf(val, sizeof val, "%s/val.h", g_dir);
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  snprintf(src, sizeof src,
           "#include \"%s\"\n"
           "struct ValArgs { float *x; };\n"
           "__device__ void val_tile(const clcrt::Tile &t, const ValArgs &a) { a.x[t.linear] = VAL; }\n",
           val);
  write_settled(val, "#define VAL 1.5f\n");
  clcrt_runtime *rt = rt_in(cache, "sm_90a");
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src;
  d.tile_fn = "val_tile";
  d.args_type = "ValArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  clcrt_kernel *k1 = reg(rt, &d), *k2 = reg(rt, &d);
  ck_assert_ptr_eq(k1, k2);
  const char *ptx;
  ck_assert_int_eq(clcrt_kernel_ptx(k1, &ptx), CLCRT_OK);
  ck_assert(ptx_has(ptx, 1.5f));
  write_settled(val, "#define VAL 2.5f\n");
  clcrt_kernel *k3 = reg(rt, &d);
  ck_assert_ptr_ne(k3, k1);
  ck_assert_int_eq(clcrt_kernel_ptx(k3, &ptx), CLCRT_OK);
  ck_assert(ptx_has(ptx, 2.5f));
  ck_assert_int_eq(clcrt_kernel_ptx(k1, &ptx), CLCRT_OK); /* the old one is still there */
  ck_assert(ptx_has(ptx, 1.5f));
  ck_assert_ptr_eq(reg(rt, &d), k3); /* unchanged since: a memory hit */
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 2);
  ck_assert_uint_eq(s.mem_hits, 2);
  /* Gone: the registration fails as NVRTC says, nothing stale is served. */
  ck_assert_int_eq(unlink(val), 0);
  clcrt_kernel *k4 = NULL;
  ck_assert_int_eq(clcrt_register(rt, &d, &k4), CLCRT_E_COMPILE);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "val.h"));
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Toolkit headers stay cacheable: the key covers the toolkit by its identity, so
 * <cuda_bf16.h> is neither traced into the manifest nor a reason not to cache. And a
 * header changed less than CLCRT__DEPS_SETTLE_MS before the compile is not stored (what
 * was hashed might not be what was compiled). */
START_TEST(e2e_toolkit_headers_cached) {
  static const char *BF16 =
      "#include <cuda_bf16.h>\n"
      "struct BfArgs { __nv_bfloat16 *x; };\n"
      "__device__ void bf_tile(const clcrt::Tile &t, const BfArgs &a) {\n"
      "  a.x[t.linear] = __float2bfloat16(2.0f);\n"
      "}\n";
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = BF16;
  d.tile_fn = "bf_tile";
  d.args_type = "BfArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  clcrt_runtime *rt = rt_new();
  reg(rt, &d);
  ck_assert_uint_eq(stats(rt).misses, 1);
  clcrt_runtime_destroy(rt);
  rt = rt_new();
  clcrt_kernel *k = reg(rt, &d);
  ck_assert_uint_eq(stats(rt).disk_hits, 1);
  ck_assert_ptr_null(k->deps); /* nothing outside the toolkit */
  clcrt_runtime_destroy(rt);

  char val[512], src[1024];
  snprintf(val, sizeof val, "%s/fresh.h", g_dir);
  snprintf(src, sizeof src,
           "#include \"%s\"\n"
           "struct ValArgs { float *x; };\n"
           "__device__ void val_tile(const clcrt::Tile &t, const ValArgs &a) { a.x[t.linear] = VAL; }\n",
           val);
  write_file(val, "#define VAL 1.5f\n"); /* no waiting */
  d.source = src;
  d.tile_fn = "val_tile";
  d.args_type = "ValArgs";
  g_log[0] = 0;
  rt = rt_new();
  reg(rt, &d);
  ck_assert_uint_eq(stats(rt).uncached, 1);
  ck_assert_msg(strstr(g_log, "modified while it was being compiled"), "%s", g_log);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Where the trace cannot be written ($TMPDIR not a directory), a compile that reads a header
 * still succeeds, uncached, and the log says why; one that reads none is cached as ever. */
START_TEST(e2e_no_trace_directory) {
  char val[512], src[1024];
  snprintf(val, sizeof val, "%s/val.h", g_dir);
  snprintf(src, sizeof src,
           "#include <%s>\n"
           "struct ValArgs { float *x; };\n"
           "__device__ void val_tile(const clcrt::Tile &t, const ValArgs &a) { a.x[t.linear] = VAL; }\n",
           val);
  write_settled(val, "#define VAL 1.5f\n");
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TMPDIR", "/nonexistent/tmp", 1);
    clcrt_runtime *rt = rt_new();
    clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
    d.source = src;
    d.tile_fn = "val_tile";
    d.args_type = "ValArgs";
    d.block = (clcrt_dim3){128, 1, 1};
    clcrt_kernel *k = NULL;
    if (clcrt_register(rt, &d, &k) != CLCRT_OK) _exit(2);
    clcrt_tile_desc plain = scale_desc(128);
    if (clcrt_register(rt, &plain, &k) != CLCRT_OK) _exit(3);
    clcrt_cache_stats s = stats(rt);
    clcrt_runtime_destroy(rt);
    _exit(s.uncached == 1 && s.misses == 1 && strstr(g_log, "TMPDIR") ? 0 : 4);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child status %d", ws);
}
END_TEST

/* include_digest still vouches for headers: nothing is traced or checked, and a new digest
 * is a new key. */
START_TEST(e2e_include_digest_vouches) {
  char val[512], src[1024];
  snprintf(val, sizeof val, "%s/val.h", g_dir);
  snprintf(src, sizeof src,
           "#include <%s>\n"
           "struct ValArgs { float *x; };\n"
           "__device__ void val_tile(const clcrt::Tile &t, const ValArgs &a) { a.x[t.linear] = VAL; }\n",
           val);
  write_file(val, "#define VAL 1.5f\n");
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = src;
  d.tile_fn = "val_tile";
  d.args_type = "ValArgs";
  d.block = (clcrt_dim3){128, 1, 1};
  d.include_digest = "val-1";
  clcrt_runtime *rt = rt_new();
  clcrt_kernel *k = reg(rt, &d);
  ck_assert_ptr_null(k->deps);
  clcrt_runtime_destroy(rt);
  write_file(val, "#define VAL 2.5f\n");
  rt = rt_new();
  k = reg(rt, &d); /* the user said the headers are what "val-1" names: a hit */
  ck_assert_uint_eq(stats(rt).disk_hits, 1);
  d.include_digest = "val-2";
  k = reg(rt, &d);
  ck_assert_uint_eq(stats(rt).misses, 1);
  const char *ptx;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  ck_assert(ptx_has(ptx, 2.5f));
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The manifest's pieces: the text scans (splices, digraphs, UCNs), the text form and its
 * damage, and the check. */
START_TEST(deps_pieces) {
  const char *may[] = {"#include </x>", "%:include \"x\"", "#/**/include \"x\"", "#\\\ninclude <x>", "# inc\\\nlude <x>",
                       "#include_next <x>", "#import <x>", "\\u0069nclude"};
  for (size_t i = 0; i < sizeof may / sizeof *may; i++)
    ck_assert_msg(clcrt__text_may_read_files(may[i], strlen(may[i])), "%s", may[i]);
  /* The template's own headers and the toolkit's, named plainly on a line of their own, are
   * read from memory or from the toolkit (which the key covers); any other spelling counts. */
  const char *may2[] = {"#include \"clcrt_tilemap.cuh\" // a comment", "#include \"./clcrt_tilemap.cuh\"",
                        "#define X \\\n#include \"clcrt_tilemap.cuh\"\n", "#include \"clcrt_tilemap.cuh\"\\\n\"/x.h\"",
                        "#include </abs/x.h>", "#include <../../x/val.h>", "#include <a/../../b.h>",
                        "#include <cuda_bf16.h> // c", "#/**/include \"clcrt_tilemap.cuh\"",
                        "#include \"clcrt_tilemap.cuh\"\n#include \"/x.h\"\n"};
  for (size_t i = 0; i < sizeof may2 / sizeof *may2; i++)
    ck_assert_msg(clcrt__text_may_read_files(may2[i], strlen(may2[i])), "%s", may2[i]);
  const char *wont[] = {"int includes; // included",
                        "__global__ void k() {}",
                        "#pragma unroll",
                        "#define X(a) a##b",
                        "#include \"clcrt_tilemap.cuh\"\nint x;\n",
                        "  #  include   \"clcrt_tilemap.cuh\"  \r\n",
                        "#include \"clcrt.cuh\"",
                        "#include <cuda_bf16.h>\n#include <cuda/std/cstdint>\n#include <a..b/c.h>\n"};
  for (size_t i = 0; i < sizeof wont / sizeof *wont; i++)
    ck_assert_msg(!clcrt__text_may_read_files(wont[i], strlen(wont[i])), "%s", wont[i]);
  const char *probe[] = {"#if __has_include(<x>)", "__has_\\\ninclude", "__has_include_next(\"y\")"};
  for (size_t i = 0; i < sizeof probe / sizeof *probe; i++)
    ck_assert_msg(clcrt__text_probes_files(probe[i], strlen(probe[i])), "%s", probe[i]);
  ck_assert(!clcrt__text_probes_files("has_include", 11));

  char p1[512], p2[512];
  snprintf(p1, sizeof p1, "%s/a b.h", g_dir); /* a space in the path */
  snprintf(p2, sizeof p2, "%s/c.h", g_dir);
  write_file(p1, "#define A 1\n");
  write_file(p2, "#define C 1\n");
  char json[2048];
  snprintf(json, sizeof json,
           "{\"traceEvents\": [{}, {\"args\":{\"detail\":\"__nv_nvrtc_builtin_header.h\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"clcrt.cuh\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"%s\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"%s\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"%s\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"clcrt_entry\"},\"name\":\"Processing Header File\"},"
           "{\"args\":{\"detail\":\"f(int)\"},\"name\":\"Scanning Function Body\"}]}",
           p1, p2, p1);
  clcrt__deps_ctx ctx = {NULL, (const char *const[]){"clcrt_entry"}, 1, "clcrt.cuh", {0, 0}};
  clock_gettime(CLOCK_REALTIME, &ctx.started);
  char why[512] = "";
  clcrt__deps *d = NULL;
  /* Just written: not settled. */
  ck_assert_int_eq(clcrt__deps_from_trace(json, strlen(json), &ctx, &d, why, sizeof why), CLCRT_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(why, "modified"));
  ctx.started.tv_sec += 1;
  ck_assert_msg(clcrt__deps_from_trace(json, strlen(json), &ctx, &d, why, sizeof why) == CLCRT_OK, "%s", why);
  ck_assert_uint_eq(d->n, 2); /* builtins, the template and #line names left out; p1 once */
  ck_assert_str_eq(d->v[0].path, p1);
  ck_assert_int_eq(clcrt__deps_check(d, 1, 0, why, sizeof why), 1);
  char *text = clcrt__deps_encode(d);
  clcrt__deps *back = NULL;
  ck_assert_int_eq(clcrt__deps_decode(text, &back), CLCRT_OK);
  ck_assert_uint_eq(back->n, 2);
  ck_assert_str_eq(back->v[0].path, p1);
  ck_assert_mem_eq(back->v[1].sha, d->v[1].sha, 32);
  ck_assert_int_eq(clcrt__deps_check(back, 0, 1, why, sizeof why), 1);
  /* Damaged text forms. */
  const char *bad[] = {"zz\n", "0123 4 x\n", text + 1};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    clcrt__deps *x = NULL;
    ck_assert_int_eq(clcrt__deps_decode(bad[i], &x), CLCRT_E_CORRUPT);
  }
  clcrt__free(text);
  /* Same size, other bytes: changed, with the quick check too (ctime moved). */
  write_file(p2, "#define C 2\n");
  ck_assert_int_eq(clcrt__deps_check(d, 1, 0, why, sizeof why), 0);
  ck_assert_msg(strstr(why, "c.h") && strstr(why, "changed"), "%s", why);
  unlink(p1);
  ck_assert_int_eq(clcrt__deps_check(back, 0, 0, why, sizeof why), 0);
  ck_assert_msg(strstr(why, "gone"), "%s", why);
  clcrt__deps_free(d);
  clcrt__deps_free(back);
  /* A trace without the template's header is not understood: uncached. */
  const char *foreign = "{\"traceEvents\": [{\"args\":{\"detail\":\"x.h\"},\"name\":\"Other\"}]}";
  ck_assert_int_eq(clcrt__deps_from_trace(foreign, strlen(foreign), &ctx, &d, why, sizeof why), CLCRT_E_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(why, "clcrt.cuh"));
  ck_assert_int_eq(clcrt__deps_from_trace("[1,", 3, &ctx, &d, why, sizeof why), CLCRT_E_UNSUPPORTED);
}
END_TEST

START_TEST(e2e_processes_race) {
  unsigned blocks[] = {64, 128, 256};
  for (int round = 0; round < 2; round++) {
    enum { N = 4 };
    pid_t kids[N];
    for (int i = 0; i < N; i++) {
      kids[i] = fork();
      if (kids[i] == 0) {
        clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
        o.target_arch = "sm_90a";
        o.cache_dir = g_dir;
        clcrt_runtime *rt = NULL;
        if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) _exit(2);
        for (int j = 0; j < 3; j++) {
          clcrt_tile_desc d = scale_desc(blocks[(i + j) % 3]);
          clcrt_kernel *k = NULL;
          if (clcrt_register(rt, &d, &k) != CLCRT_OK) _exit(3);
        }
        clcrt_runtime_destroy(rt);
        _exit(0);
      }
    }
    /* Meanwhile, read everything there is, over and over: never a damaged entry. */
    int live = N, reads = 0;
    while (live > 0) {
      int c[2];
      count_entries(g_dir, c);
      ck_assert_int_eq(c[1], round == 0 ? 0 : c[1]); /* round 1 starts from damaged entries */
      reads++;
      int ws;
      pid_t p = waitpid(-1, &ws, WNOHANG);
      if (p > 0) {
        ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child status %d", ws);
        live--;
      }
    }
    int c[2];
    count_entries(g_dir, c);
    ck_assert_int_eq(c[0], 3);
    ck_assert_int_eq(c[1], 0);
    /* No temporary file left behind. */
    DIR *dir = opendir(g_dir);
    for (struct dirent *de; (de = readdir(dir));) ck_assert(strncmp(de->d_name, ".tmp-", 5) != 0);
    closedir(dir);
    /* Round 1: every entry damaged, all processes rewrite them at once. */
    dir = opendir(g_dir);
    for (struct dirent *de; (de = readdir(dir));)
      if (strstr(de->d_name, CLCRT__DC_SUFFIX)) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name);
        truncate(p, 200);
      }
    closedir(dir);
    (void)reads;
  }
}
END_TEST

typedef struct {
  clcrt_runtime *rt;
  pthread_barrier_t *go;
  clcrt_kernel *k;
  clcrt_status st;
} reg_job;
static void *reg_thread(void *p) {
  reg_job *j = p;
  clcrt_tile_desc d = scale_desc(256);
  pthread_barrier_wait(j->go);
  j->st = clcrt_register(j->rt, &d, &j->k);
  return NULL;
}

START_TEST(e2e_threads_one_key) {
  enum { T = 8 };
  clcrt_runtime *rt = rt_new();
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, T);
  pthread_t th[T];
  reg_job jobs[T];
  for (int i = 0; i < T; i++) {
    jobs[i] = (reg_job){rt, &go, NULL, CLCRT_E_INVALID};
    pthread_create(&th[i], NULL, reg_thread, &jobs[i]);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(jobs[i].st, CLCRT_OK);
    ck_assert_ptr_eq(jobs[i].k, jobs[0].k);
  }
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 1);
  ck_assert_uint_eq(s.mem_hits, T - 1);
  pthread_barrier_destroy(&go);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The disk-hit path with every allocation failing in turn: OK or NOMEM, nothing else. */
START_TEST(e2e_disk_hit_out_of_memory) {
  clcrt_tile_desc d = scale_desc(256);
  clcrt_runtime *rt = rt_new();
  reg(rt, &d);
  clcrt_runtime_destroy(rt);
  int ok = 0;
  for (long n = 1; n < 400 && ok < 3; n++) {
    rt = rt_new();
    clcrt_kernel *k = NULL;
    clcrt__alloc_fail_after(n);
    clcrt_status st = clcrt_register(rt, &d, &k);
    clcrt__alloc_fail_after(0);
    ck_assert_msg(st == CLCRT_OK || st == CLCRT_E_NOMEM, "n=%ld: %s", n, clcrt_status_name(st));
    ok += st == CLCRT_OK;
    clcrt_runtime_destroy(rt);
  }
  ck_assert_int_gt(ok, 0);
  int c[2];
  count_entries(g_dir, c);
  ck_assert_int_eq(c[0], 1);
  ck_assert_int_eq(c[1], 0);
}
END_TEST

START_TEST(e2e_stats_arguments) {
  clcrt_runtime *rt = rt_new();
  clcrt_cache_stats s = CLCRT_CACHE_STATS_INIT;
  ck_assert_int_eq(clcrt_cache_stats_get(NULL, &s), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_cache_stats_get(rt, NULL), CLCRT_E_INVALID);
  s.size = 0;
  ck_assert_int_eq(clcrt_cache_stats_get(rt, &s), CLCRT_E_INVALID);
  clcrt_tile_desc d = scale_desc(256);
  reg(rt, &d), reg(rt, &d);
  /* A caller built against an older, shorter struct gets only what it has room for. */
  struct {
    clcrt_cache_stats s;
    unsigned long long canary;
  } old;
  memset(&old, 0xab, sizeof old);
  old.s.size = offsetof(clcrt_cache_stats, disk_hits);
  ck_assert_int_eq(clcrt_cache_stats_get(rt, &old.s), CLCRT_OK);
  ck_assert_uint_eq(old.s.mem_hits, 1);
  ck_assert_uint_eq(old.s.size, offsetof(clcrt_cache_stats, disk_hits));
  unsigned char ab[sizeof(unsigned long long)];
  memset(ab, 0xab, sizeof ab);
  ck_assert_mem_eq(&old.s.disk_hits, ab, sizeof ab);
  clcrt_runtime_destroy(rt);
}
END_TEST

static void add_e2e_tests(TCase *t) {
  tcase_add_test(t, e2e_memory_hit);
  tcase_add_test(t, e2e_disk_hit_across_runtimes);
  tcase_add_test(t, e2e_corrupted_entry);
  tcase_add_test(t, e2e_truncated_entry);
  tcase_add_test(t, e2e_unwritable_directory);
  tcase_add_test(t, e2e_disabled);
  tcase_add_test(t, e2e_size_cap);
  tcase_add_test(t, e2e_changes_miss);
  tcase_add_test(t, e2e_unhashable_headers);
  tcase_add_test(t, e2e_processes_race);
  tcase_add_test(t, e2e_threads_one_key);
  tcase_add_test(t, e2e_disk_hit_out_of_memory);
  tcase_add_test(t, e2e_stats_arguments);
}

/* ---- review findings: each of these failed before its fix ---------------------------- */

/* The description's key covers every field, min_blocks_per_sm included: two descriptions
 * that differ only there must never share the memory fast path's kernel. */
START_TEST(desc_key_covers_every_field) {
  const char *o1[] = {"-DA=1"};
  clcrt_tile_desc v[16];
  int n = 0;
  v[n++] = scale_desc(256);
  for (int i = 1; i < 14; i++) v[i] = v[0];
  v[n++].block.y = 2;
  v[n++].cluster = (clcrt_dim3){2, 1, 1};
  v[n++].smem_bytes = 16;
  v[n++].sched = CLCRT_SCHED_FIXED;
  v[n++].grid = CLCRT_GRID_FULL;
  v[n].options = o1, v[n++].num_options = 1;
  v[n++].state_type = "S";
  v[n++].prologue_fn = "p";
  v[n++].include_digest = "digest";
  v[n++].min_blocks_per_sm = 2;
  v[n++].min_blocks_per_sm = 3;
  v[n++].args_type = "OtherArgs";
  v[n++].tile_fn = "other_tile";
  uint8_t keys[16][CLCRT__KEY_BYTES];
  for (int i = 0; i < n; i++) ck_assert(clcrt__desc_key(&v[i], keys[i]));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < i; j++) ck_assert_msg(memcmp(keys[i], keys[j], CLCRT__KEY_BYTES) != 0, "variants %d and %d", i, j);
}
END_TEST

/* The content key covers the minimum CTAs per SM by itself, not only through the text of
 * the generated entry. */
START_TEST(content_key_covers_min_blocks) {
  clcrt_runtime *rt = rt_in("", "sm_90a");
  clcrt_tile_desc d = scale_desc(256);
  clcrt__build b;
  ck_assert_int_eq(clcrt__build_prepare(rt, &d, 0, &b), CLCRT_OK);
  uint8_t k0[CLCRT__KEY_BYTES], k2[CLCRT__KEY_BYTES];
  ck_assert(clcrt__cache_key(rt, &b, k0));
  b.min_blocks = 2;
  ck_assert(clcrt__cache_key(rt, &b, k2));
  ck_assert(memcmp(k0, k2, sizeof k0) != 0);
  clcrt__build_free(&b);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The observed variant (traces and statistics) is a kernel of its own in the caches: its key
 * differs from the registered kernel's, a second runtime finds both on disk, and each
 * runtime compiles it at most once. */
START_TEST(e2e_observed_variant_cached) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc d = scale_desc(256);
  clcrt__build b0, b1;
  uint8_t k0[CLCRT__KEY_BYTES], k1[CLCRT__KEY_BYTES];
  ck_assert_int_eq(clcrt__build_prepare(rt, &d, 0, &b0), CLCRT_OK);
  ck_assert_int_eq(clcrt__build_prepare(rt, &d, 1, &b1), CLCRT_OK);
  ck_assert(clcrt__cache_key(rt, &b0, k0) && clcrt__cache_key(rt, &b1, k1));
  ck_assert(memcmp(k0, k1, sizeof k0) != 0);
  clcrt__build_free(&b0);
  clcrt__build_free(&b1);
  clcrt_kernel *k = reg(rt, &d), *o = NULL, *o2 = NULL;
  ck_assert_int_eq(clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o), CLCRT_OK);
  ck_assert_int_eq(clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o2), CLCRT_OK);
  ck_assert_ptr_eq(o, o2);
  ck_assert_uint_eq(stats(rt).misses, 2);
  clcrt_runtime_destroy(rt);
  rt = rt_new();
  k = reg(rt, &d);
  ck_assert_int_eq(clcrt__kernel_variant(k, CLCRT_USE_TRACE, &o), CLCRT_OK);
  ck_assert_uint_eq(stats(rt).disk_hits, 2);
  ck_assert_uint_eq(stats(rt).misses, 0);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* End to end: two descriptions differing only in min_blocks_per_sm are two kernels, in
 * memory and on disk; and an entry whose stored minimum differs from the build's is a
 * miss, whatever its key says. */
START_TEST(e2e_min_blocks_never_shared) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc d0 = scale_desc(256), d2 = d0;
  d2.min_blocks_per_sm = 2;
  clcrt_kernel *k0 = reg(rt, &d0), *k2 = reg(rt, &d2);
  ck_assert_ptr_ne(k0, k2);
  ck_assert_uint_eq(k0->min_blocks, 0);
  ck_assert_uint_eq(k2->min_blocks, 2);
  ck_assert_ptr_eq(reg(rt, &d2), k2);
  ck_assert_ptr_eq(reg(rt, &d0), k0);
  ck_assert_uint_eq(stats(rt).misses, 2);
  clcrt_runtime_destroy(rt);
  rt = rt_new();
  k2 = reg(rt, &d2);
  k0 = reg(rt, &d0);
  ck_assert_uint_eq(stats(rt).disk_hits, 2);
  ck_assert_uint_eq(k0->min_blocks, 0);
  ck_assert_uint_eq(k2->min_blocks, 2);
  /* The entry of d0 looked up for a build that wants 3 CTAs per SM: a miss. */
  clcrt__build b;
  ck_assert_int_eq(clcrt__build_prepare(rt, &d0, 0, &b), CLCRT_OK);
  uint8_t key[CLCRT__KEY_BYTES];
  ck_assert(clcrt__cache_key(rt, &b, key));
  b.min_blocks = 3;
  g_log[0] = 0;
  ck_assert_int_eq(clcrt__disk_get(rt, key, &b), 0);
  ck_assert_ptr_nonnull(strstr(g_log, "compiling again"));
  b.min_blocks = 0;
  ck_assert_int_eq(clcrt__disk_get(rt, key, &b), 1);
  clcrt__build_free(&b);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(entry_keeps_min_blocks) {
  clcrt__dc_meta m = sample_meta(7);
  m.min_blocks = 3;
  ck_assert_int_eq(clcrt__dc_write(g_dir, &m, g_cubin, sizeof g_cubin, NULL, 0, 0, NULL, 0), CLCRT_OK);
  clcrt__dc_entry e;
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, NULL, 0), CLCRT_OK);
  ck_assert_uint_eq(e.meta.min_blocks, 3);
  clcrt__dc_entry_free(&e);
}
END_TEST

/* A FIFO planted under an entry's name used to block the reader's open() for ever. */
START_TEST(fifo_entry_is_a_miss) {
  clcrt__dc_meta m = sample_meta(8);
  char path[512], why[256] = "";
  ck_assert(clcrt__dc_path(g_dir, m.key, path, sizeof path));
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  alarm(20); /* a hang fails the test rather than the whole run */
  clcrt__dc_entry e;
  ck_assert_int_eq(clcrt__dc_read(g_dir, m.key, &e, why, sizeof why), CLCRT_E_CORRUPT);
  ck_assert_ptr_nonnull(strstr(why, "not a regular file"));
  clcrt__dc_meta h;
  ck_assert_int_eq(clcrt__dc_read_meta(path, 1, &h, why, sizeof why), CLCRT_E_CORRUPT);
  alarm(0);
}
END_TEST

/* CLCRT_CACHE_MAX_BYTES, read in a child (the environment is read once per process):
 * expect the cap and whether the text was refused. */
static void max_bytes_is(const char *val, unsigned long long want, int bad) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CLCRT_CACHE_MAX_BYTES", val, 1);
    const clcrt__env *e = clcrt__env_get();
    _exit(e->cache_max_bytes == want && (e->cache_max_bytes_bad != NULL) == bad ? 0 : 1);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "CLCRT_CACHE_MAX_BYTES=\"%s\": want %llu%s", val, want,
                bad ? " (refused)" : "");
}

START_TEST(max_bytes_from_environment) {
  const unsigned long long def = 1ull << 30;
  max_bytes_is("12345", 12345, 0);
  max_bytes_is("0", 0, 0); /* no cap */
  max_bytes_is("64K", 64ull << 10, 0);
  max_bytes_is("2G", 2ull << 30, 0);
  max_bytes_is("3GiB", 3ull << 30, 0);
  max_bytes_is("512mb", 512ull << 20, 0);
  max_bytes_is("1T", 1ull << 40, 0);
  max_bytes_is("-1", def, 1); /* strtoull made this 2^64 - 1: no cap at all */
  max_bytes_is("-5G", def, 1);
  max_bytes_is("18446744073709551616", def, 1); /* 2^64 */
  max_bytes_is("99999999999999999999999", def, 1);
  max_bytes_is("17179869184T", def, 1); /* 2^34 T overflows */
  max_bytes_is("abc", def, 1);
  max_bytes_is(" 5", def, 1);
  max_bytes_is("5 ", def, 1);
  max_bytes_is("1.5G", def, 1);
  max_bytes_is("0x100", def, 1);
  max_bytes_is("5X", def, 1);
}
END_TEST

/* Resolution with a whole environment: NULL values are unset. */
static void dir_resolves(const char *xdg, const char *home, const char *expect) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("CLCRT_CACHE_DIR"), unsetenv("CLCRT_CACHE_DISABLE");
    if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
    if (home) setenv("HOME", home, 1);
    else unsetenv("HOME");
    char *d = NULL;
    const char *why = NULL;
    clcrt_status st = clcrt__dc_resolve_dir(NULL, &d, &why);
    _exit(st == CLCRT_OK && (expect ? d && strcmp(d, expect) == 0 : !d && why) ? 0 : 1);
  }
  int ws;
  waitpid(pid, &ws, 0);
  ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "XDG_CACHE_HOME=%s HOME=%s: want %s", xdg ? xdg : "(unset)",
                home ? home : "(unset)", expect ? expect : "no disk cache");
}

START_TEST(resolve_directory_hostile_environment) {
  /* The XDG Base Directory spec: a relative XDG_CACHE_HOME is invalid and ignored. */
  dir_resolves("relative/xdg", "/home/u", "/home/u/.cache/clcrt");
  dir_resolves("./xdg", "/home/u", "/home/u/.cache/clcrt");
  dir_resolves("", "/home/u", "/home/u/.cache/clcrt");
  dir_resolves("/xdg", "relative-home", "/xdg/clcrt");
  /* No usable HOME: no disk cache rather than one that moves with the working directory. */
  dir_resolves(NULL, "relative-home", NULL);
  dir_resolves(NULL, "", NULL);
  dir_resolves(NULL, NULL, NULL);
  dir_resolves("relative/xdg", NULL, NULL);
}
END_TEST

/* A directory every user may write to: another user could plant entries. */
START_TEST(e2e_world_writable_directory_refused) {
  char p[512];
  snprintf(p, sizeof p, "%s/shared", g_dir);
  ck_assert_int_eq(mkdir(p, 0700), 0);
  ck_assert_int_eq(chmod(p, 0777), 0);
  g_log[0] = 0;
  clcrt_runtime *rt = rt_in(p, "sm_90a");
  ck_assert_msg(strstr(g_log, "disk cache off") && strstr(g_log, "every user"), "%s", g_log);
  clcrt_tile_desc d = scale_desc(256);
  reg(rt, &d);
  ck_assert_int_eq(entries_in(p), 0);
  clcrt_runtime_destroy(rt);
  /* Group-writable (a team's cache) is the owner's choice. */
  ck_assert_int_eq(chmod(p, 0770), 0);
  rt = rt_in(p, "sm_90a");
  reg(rt, &d);
  ck_assert_int_eq(entries_in(p), 1);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A relative cache directory is the one it named when the runtime was created, wherever
 * the program's working directory goes afterwards. */
START_TEST(e2e_relative_directory_stays_put) {
  char here[512], there[512], rel[600];
  snprintf(here, sizeof here, "%s/here", g_dir);
  snprintf(there, sizeof there, "%s/there", g_dir);
  ck_assert_int_eq(mkdir(here, 0700), 0);
  ck_assert_int_eq(mkdir(there, 0700), 0);
  ck_assert_int_eq(chdir(here), 0);
  clcrt_runtime *rt = rt_in("cache", "sm_90a");
  ck_assert_int_eq(chdir(there), 0);
  clcrt_tile_desc d = scale_desc(256);
  reg(rt, &d);
  clcrt_runtime_destroy(rt);
  snprintf(rel, sizeof rel, "%s/cache", here);
  ck_assert_int_eq(entries_in(rel), 1);
  ck_assert_int_eq(chdir("/"), 0);
}
END_TEST

/* clcrt_runtime_cache_dir names the directory the runtime really uses: absolute, and NULL
 * when the cache is off or the directory was refused. */
START_TEST(e2e_cache_dir_reported) {
  ck_assert_ptr_null(clcrt_runtime_cache_dir(NULL));
  char real[PATH_MAX], here[PATH_MAX + 8];
  ck_assert_ptr_nonnull(realpath(g_dir, real));
  clcrt_runtime *rt = rt_in(g_dir, "sm_90a");
  ck_assert_str_eq(clcrt_runtime_cache_dir(rt), real);
  clcrt_runtime_destroy(rt);
  rt = rt_in("", "sm_90a");
  ck_assert_ptr_null(clcrt_runtime_cache_dir(rt));
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(chdir(g_dir), 0);
  rt = rt_in("rel", "sm_90a");
  snprintf(here, sizeof here, "%s/rel", real);
  ck_assert_str_eq(clcrt_runtime_cache_dir(rt), here);
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(chdir("/"), 0);
  snprintf(here, sizeof here, "%s/shared", g_dir);
  ck_assert_int_eq(mkdir(here, 0700), 0);
  ck_assert_int_eq(chmod(here, 0777), 0);
  rt = rt_in(here, "sm_90a");
  ck_assert_ptr_null(clcrt_runtime_cache_dir(rt));
  clcrt_runtime_destroy(rt);
}
END_TEST

/* A directory whose entries' paths would not fit the path buffers is refused once, at
 * creation, instead of failing every lookup and every store. */
START_TEST(e2e_directory_path_too_long) {
  char p[4200];
  int n = snprintf(p, sizeof p, "%s", g_dir);
  while (n + 201 < CLCRT__DC_PATH_BYTES - 8) {
    p[n++] = '/';
    memset(p + n, 'd', 200);
    n += 200;
    p[n] = 0;
  }
  ck_assert_int_lt(n, CLCRT__DC_PATH_BYTES - 8);
  ck_assert_int_gt(n + 1 + (int)CLCRT__DC_FILE_LEN, CLCRT__DC_PATH_BYTES - 1);
  g_log[0] = 0;
  clcrt_runtime *rt = rt_in(p, "sm_90a");
  ck_assert_msg(strstr(g_log, "disk cache off") && strstr(g_log, "too long"), "%s", g_log);
  clcrt_tile_desc d = scale_desc(256);
  g_log[0] = 0;
  reg(rt, &d);
  ck_assert_msg(!strstr(g_log, "path too long"), "%s", g_log);
  clcrt_runtime_destroy(rt);
  /* Refused before anything was made: not even the first level exists. */
  p[strlen(g_dir) + 201] = 0;
  ck_assert_msg(access(p, F_OK) != 0, "%s was created", p);
}
END_TEST

static int dir_is_empty(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *de; d && (de = readdir(d));) n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  if (d) closedir(d);
  return d && n == 0;
}

/* CLCRT_CACHE_DIR naming a path that can never hold an entry (a component longer than a
 * file name may be, or more bytes than a path may hold) is refused before a single
 * directory is made: mkdir used to create every level that fit first. */
START_TEST(e2e_cache_dir_too_long_creates_nothing) {
  char comp[301], deep[600], longp[4300];
  memset(comp, 'x', 300);
  comp[300] = 0;
  snprintf(deep, sizeof deep, "%s/a/b/%s/c", g_dir, comp);
  int n = snprintf(longp, sizeof longp, "%s/a", g_dir);
  while (n < 4200) n += snprintf(longp + n, sizeof longp - (size_t)n, "/%.*s", 100, comp);
  const char *dirs[] = {deep, longp};
  for (int i = 0; i < 2; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("CLCRT_CACHE_DIR", dirs[i], 1);
      clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
      o.target_arch = "sm_90a";
      o.log = log_cb;
      clcrt_runtime *rt = NULL;
      if (clcrt_runtime_create(&rt, &o) != CLCRT_OK) _exit(2);
      clcrt_tile_desc d = scale_desc(256);
      clcrt_kernel *k = NULL;
      if (clcrt_register(rt, &d, &k) != CLCRT_OK) _exit(3);
      clcrt_runtime_destroy(rt);
      /* The log says why, naming the limit it ran into. */
      const char *want = i == 0 ? "a file name holds at most" : "too long";
      _exit(strstr(g_log, "disk cache off") && strstr(g_log, want) ? 0 : 4);
    }
    int ws;
    waitpid(pid, &ws, 0);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "case %d: child status %d", i, ws);
    ck_assert_msg(dir_is_empty(g_dir), "case %d: directories were created under %s", i, g_dir);
  }
}
END_TEST

/* Not a fix: hostile places that already worked, kept working. Each still compiles. */
START_TEST(e2e_hostile_paths_still_compile) {
  char file[512], loop[512], p[600];
  snprintf(file, sizeof file, "%s/a-file", g_dir);
  fclose(fopen(file, "w"));
  snprintf(loop, sizeof loop, "%s/loop", g_dir);
  ck_assert_int_eq(symlink(loop, loop), 0);
  snprintf(p, sizeof p, "%s/cache", loop);
  char longp[5000];
  memset(longp, 'x', sizeof longp - 1);
  longp[0] = '/';
  longp[sizeof longp - 1] = 0;
  const char *dirs[] = {file, loop, p, longp};
  clcrt_tile_desc d = scale_desc(256);
  for (int i = 0; i < 4; i++) {
    g_log[0] = 0;
    clcrt_runtime *rt = rt_in(dirs[i], "sm_90a");
    ck_assert_msg(strstr(g_log, "disk cache off"), "%.80s: %s", dirs[i], g_log);
    reg(rt, &d);
    clcrt_runtime_destroy(rt);
  }
  /* A CUDA_HOME that is not a toolkit, or longer than any path, is refused when the runtime
   * is created, with a message, rather than passed on to NVRTC (test_core: test_bad_cuda_home). */
  const char *homes[] = {"/nonexistent/cuda", longp};
  for (int i = 0; i < 2; i++) {
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = "sm_90a";
    o.cache_dir = g_dir;
    o.cuda_home = homes[i];
    clcrt_runtime *rt = NULL;
    ck_assert_int_eq(clcrt_runtime_create(&rt, &o), CLCRT_E_INVALID);
    ck_assert_msg(strstr(clcrt_errmsg(rt), i ? "characters long" : "include/cuda.h"), "message: %s",
                  clcrt_errmsg(rt));
    clcrt_runtime_destroy(rt);
  }
}
END_TEST

/* A log line longer than 1 KiB reaches the callback whole: the reason an entry of a
 * 1300-character tile function is not stored comes after its name, and was cut off. */
START_TEST(e2e_long_log_lines_whole) {
  char fn[1301], *src = malloc(4096);
  memset(fn, 'f', 1300);
  fn[0] = 'l', fn[1300] = 0;
  snprintf(src, 4096,
           "struct ScaleArgs { float *x; long n; float alpha; };\n"
           "__device__ void %s(const clcrt::Tile &t, const ScaleArgs &a) {\n"
           "  long i = (long)t.linear * blockDim.x + threadIdx.x;\n"
           "  if (i < a.n) a.x[i] *= a.alpha;\n"
           "}\n",
           fn);
  clcrt_tile_desc d = scale_desc(256);
  d.source = src;
  d.tile_fn = fn;
  g_log[0] = 0;
  clcrt_runtime *rt = rt_new();
  reg(rt, &d);
  clcrt_runtime_destroy(rt);
  ck_assert_msg(strstr(g_log, "not stored in the disk cache") && strstr(g_log, "too long to store"), "%.200s...",
                g_log);
  ck_assert_int_eq(entries_in(g_dir), 0);
  free(src);
}
END_TEST

/* Writes bytes as the disk-cache entry under d's key, its metadata d's own (compiled for sm_90a),
 * except the block's x when block_x is not 0: what a foreign or buggy writer could leave. */
static void plant_entry(clcrt_runtime *rt, const clcrt_tile_desc *d, unsigned block_x, const void *bytes, size_t n) {
  clcrt__build b;
  ck_assert_int_eq(clcrt__build_prepare(rt, d, 0, &b), CLCRT_OK);
  uint8_t key[CLCRT__KEY_BYTES];
  ck_assert(clcrt__cache_key(rt, &b, key));
  clcrt__dc_meta m = {0};
  memcpy(m.key, key, sizeof key);
  m.sched = b.sched, m.grid = b.grid, m.block = b.block, m.cluster = b.cluster, m.smem_bytes = b.smem_bytes;
  m.min_blocks = b.min_blocks;
  if (block_x) m.block.x = block_x;
  m.name = b.name, m.arch = "sm_90a", m.options = "";
  ck_assert_int_eq(clcrt__dc_write(g_dir, &m, bytes, n, NULL, 0, 0, NULL, 0), CLCRT_OK);
  clcrt__build_free(&b);
}

/* An entry stored under a description's key whose metadata disagrees (a forged entry, or a
 * bug in the key) is a miss whose log names the field that differs, with both values: it
 * used to say "holds X for sm_90a, not X" when only the block differed. */
START_TEST(e2e_forged_entry_names_the_difference) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc d = scale_desc(256);
  static const char junk[] = "never read: the metadata is checked first";
  plant_entry(rt, &d, 128, junk, sizeof junk);
  g_log[0] = 0;
  clcrt_kernel *k = reg(rt, &d);
  ck_assert_int_eq(k->from_cache, 0);
  ck_assert_msg(strstr(g_log, "block (128,1,1)") && strstr(g_log, "(256,1,1)") && strstr(g_log, "compiling again"),
                "%s", g_log);
  ck_assert_msg(!strstr(g_log, "not clcrt_steal_scale_tile"), "%s", g_log);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* An entry whose checksum holds but whose cubin is not one (a foreign or buggy writer):
 * a miss that is compiled and replaced, not a registration that fails for ever. */
START_TEST(e2e_unreadable_cubin_is_a_miss) {
  clcrt_runtime *rt = rt_new();
  clcrt_tile_desc d = scale_desc(256);
  static const char junk[] = "this is not an ELF file, but its checksum is right";
  plant_entry(rt, &d, 0, junk, sizeof junk);
  g_log[0] = 0;
  clcrt_kernel *k = reg(rt, &d);
  ck_assert_msg(strstr(g_log, "compiling again"), "%s", g_log);
  ck_assert_int_eq(k->from_cache, 0);
  clcrt_cache_stats s = stats(rt);
  ck_assert_uint_eq(s.misses, 1);
  ck_assert_uint_eq(s.disk_hits, 0);
  clcrt_runtime_destroy(rt);
  /* The entry was replaced by the compiled one. */
  rt = rt_new();
  k = reg(rt, &d);
  ck_assert_int_eq(k->from_cache, 2);
  clcrt_runtime_destroy(rt);
}
END_TEST

static void add_review_tests(TCase *t) {
  tcase_add_test(t, e2e_unreadable_cubin_is_a_miss);
  tcase_add_test(t, desc_key_covers_every_field);
  tcase_add_test(t, content_key_covers_min_blocks);
  tcase_add_test(t, e2e_min_blocks_never_shared);
  tcase_add_test(t, e2e_observed_variant_cached);
  tcase_add_test(t, entry_keeps_min_blocks);
  tcase_add_test(t, fifo_entry_is_a_miss);
  tcase_add_test(t, max_bytes_from_environment);
  tcase_add_test(t, resolve_directory_hostile_environment);
  tcase_add_test(t, e2e_world_writable_directory_refused);
  tcase_add_test(t, e2e_relative_directory_stays_put);
  tcase_add_test(t, e2e_cache_dir_reported);
  tcase_add_test(t, e2e_directory_path_too_long);
  tcase_add_test(t, e2e_cache_dir_too_long_creates_nothing);
  tcase_add_test(t, e2e_long_log_lines_whole);
  tcase_add_test(t, e2e_forged_entry_names_the_difference);
  tcase_add_test(t, e2e_header_edit_in_one_process);
  tcase_add_test(t, e2e_toolkit_headers_cached);
  tcase_add_test(t, e2e_include_digest_vouches);
  tcase_add_test(t, e2e_no_trace_directory);
  tcase_add_test(t, deps_pieces);
  tcase_add_loop_test(t, e2e_header_forms_never_stale, 0, NFORMS);
  tcase_add_test(t, e2e_hostile_paths_still_compile);
}

static Suite *cache_suite(void) {
  Suite *s = suite_create("cache");
  TCase *t = tcase_create("sha256");
  tcase_add_test(t, sha256_fips_vectors);
  tcase_add_test(t, sha256_fields_do_not_run_together);
  suite_add_tcase(s, t);

  t = tcase_create("entries");
  tcase_add_checked_fixture(t, dir_setup, dir_teardown);
  tcase_add_test(t, entry_roundtrip);
  tcase_add_test(t, entry_damage_is_a_miss);
  tcase_add_test(t, evict_least_recently_used);
  tcase_add_test(t, write_respects_cap);
  tcase_add_test(t, clear_and_stale_temporaries);
  tcase_add_test(t, entry_io_out_of_memory);
  tcase_add_test(t, resolve_directory);
  tcase_add_test(t, resolve_directory_from_environment);
  suite_add_tcase(s, t);

  t = tcase_create("register");
  tcase_add_checked_fixture(t, dir_setup, dir_teardown);
  tcase_set_timeout(t, 300);
  add_e2e_tests(t);
  suite_add_tcase(s, t);

  t = tcase_create("review");
  tcase_add_checked_fixture(t, dir_setup, dir_teardown);
  tcase_set_timeout(t, 300);
  add_review_tests(t);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(cache_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
