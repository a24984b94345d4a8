/* The persistent store (clcrt_store_put / clcrt_store_get, runtime/cache/store.c), tested like
 * the compile cache: round trips, absent keys, namespaces, device scopes (compile-only
 * architectures, and devices on a fake driver that differ in name or SM count), damaged,
 * truncated and forged entries, processes racing on one key, a read-only directory, no disk
 * cache, bad arguments, every allocation failing in turn, and the `clcrt cache` commands over
 * the store. Every test gets a fresh directory from mkdtemp. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clcrt.h"
#include "common/fake_driver.h"
#include "driver.h"
#include "store.h"

/* ---- helpers ---------------------------------------------------------------------- */

static char g_dir[256], g_store[600];

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
  (void)s, (void)flag, (void)f;
  chmod(p, 0700);
  return remove(p);
}
static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/clcrt-store-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(g_dir));
  snprintf(g_store, sizeof g_store, "%s/store", g_dir);
}
static void teardown(void) {
  clcrt__alloc_fail_after(0);
  chmod(g_dir, 0700);
  nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static clcrt_runtime *rt_arch(const char *dir, const char *arch) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = arch;
  o.cache_dir = dir;
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  return rt;
}
static clcrt_runtime *rt_in(const char *dir) { return rt_arch(dir, "sm_90a"); }

static void has(const char *text, const char *what) {
  ck_assert_msg(text && strstr(text, what), "expected \"%s\" in: %.2000s", what, text ? text : "(null)");
}

/* The one entry file in the store folder (tests that wrote a single entry). */
static void entry_path(char *out, size_t n) {
  char cmd[1000];
  snprintf(cmd, sizeof cmd, "ls %s/*.clcs", g_store);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_nonnull(fgets(out, (int)n, p));
  out[strcspn(out, "\n")] = 0;
  pclose(p);
}
static int count_entries(void) {
  char cmd[1000];
  snprintf(cmd, sizeof cmd, "ls %s 2>/dev/null | grep -c 'clcs$'", g_store);
  FILE *p = popen(cmd, "r");
  int n = -1;
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(fscanf(p, "%d", &n), 1);
  pclose(p);
  return n;
}
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *d = malloc(len ? (size_t)len : 1);
  *n = fread(d, 1, (size_t)len, f);
  fclose(f);
  return d;
}
static void spit(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(d, 1, n, f), n);
  fclose(f);
}

static void get_eq(clcrt_runtime *rt, const char *ns, const char *key, const void *want, size_t wn) {
  unsigned char buf[CLCRT_STORE_MAX_VALUE];
  size_t n = 12345;
  clcrt_status st = clcrt_store_get(rt, ns, key, buf, sizeof buf, &n);
  ck_assert_msg(st == CLCRT_OK, "get %s/%s: %s: %s", ns, key, clcrt_status_name(st), clcrt_errmsg(rt));
  ck_assert_uint_eq(n, wn);
  ck_assert(wn == 0 || memcmp(buf, want, wn) == 0);
}
static void get_missing(clcrt_runtime *rt, const char *ns, const char *key) {
  unsigned char buf[64];
  size_t n = 12345;
  clcrt_status st = clcrt_store_get(rt, ns, key, buf, sizeof buf, &n);
  ck_assert_msg(st == CLCRT_E_NOT_FOUND, "get %s/%s: %s", ns, key, clcrt_status_name(st));
  ck_assert_uint_eq(n, 0);
}

/* ---- round trips -------------------------------------------------------------------- */

START_TEST(round_trip) {
  clcrt_runtime *rt = rt_in(g_dir);
  const char plan[] = "128x256 steal splits=1";
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "4096x8192x8192:a16", plan, sizeof plan), CLCRT_OK);
  get_eq(rt, "gemm", "4096x8192x8192:a16", plan, sizeof plan);
  ck_assert_int_eq(count_entries(), 1);
  /* Another process reads it: a new runtime here, and a child process. */
  clcrt_runtime *rt2 = rt_in(g_dir);
  get_eq(rt2, "gemm", "4096x8192x8192:a16", plan, sizeof plan);
  pid_t pid = fork();
  if (pid == 0) {
    clcrt_runtime *r = NULL;
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = "sm_90a", o.cache_dir = g_dir;
    char buf[64];
    size_t n = 0;
    int ok = clcrt_runtime_create(&r, &o) == CLCRT_OK &&
             clcrt_store_get(r, "gemm", "4096x8192x8192:a16", buf, sizeof buf, &n) == CLCRT_OK && n == sizeof plan &&
             memcmp(buf, plan, n) == 0;
    clcrt_runtime_destroy(r);
    _exit(ok ? 0 : 1);
  }
  int ws;
  ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
  ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  /* A put replaces; an empty value and the largest one round-trip. */
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "4096x8192x8192:a16", "x", 1), CLCRT_OK);
  get_eq(rt2, "gemm", "4096x8192x8192:a16", "x", 1);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "empty", NULL, 0), CLCRT_OK);
  get_eq(rt, "gemm", "empty", NULL, 0);
  size_t n = 99;
  ck_assert_int_eq(clcrt_store_get(rt, "gemm", "empty", NULL, 0, &n), CLCRT_OK);
  ck_assert_uint_eq(n, 0);
  unsigned char *big = malloc(CLCRT_STORE_MAX_VALUE);
  for (size_t i = 0; i < CLCRT_STORE_MAX_VALUE; i++) big[i] = (unsigned char)(i * 7 + 3);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "big", big, CLCRT_STORE_MAX_VALUE), CLCRT_OK);
  get_eq(rt2, "gemm", "big", big, CLCRT_STORE_MAX_VALUE);
  /* Asking for the size first: too small a cap is E_INVALID with the size needed. */
  n = 0;
  ck_assert_int_eq(clcrt_store_get(rt, "gemm", "big", NULL, 0, &n), CLCRT_E_INVALID);
  ck_assert_uint_eq(n, CLCRT_STORE_MAX_VALUE);
  has(clcrt_errmsg(rt), "more than cap");
  unsigned char small[16];
  ck_assert_int_eq(clcrt_store_get(rt, "gemm", "big", small, sizeof small, &n), CLCRT_E_INVALID);
  ck_assert_uint_eq(n, CLCRT_STORE_MAX_VALUE);
  ck_assert_int_eq(clcrt_store_get(rt, "gemm", "big", big, CLCRT_STORE_MAX_VALUE, NULL), CLCRT_OK); /* size NULL */
  /* Names at the limit, with spaces and UTF-8 bytes. */
  char longest[CLCRT_STORE_MAX_NAME + 1];
  memset(longest, 'k', CLCRT_STORE_MAX_NAME);
  longest[CLCRT_STORE_MAX_NAME] = 0;
  ck_assert_int_eq(clcrt_store_put(rt, longest, longest, "v", 1), CLCRT_OK);
  get_eq(rt2, longest, longest, "v", 1);
  ck_assert_int_eq(clcrt_store_put(rt, "ns with spaces", "M=4096 \xc3\x97 N", "w", 1), CLCRT_OK);
  get_eq(rt2, "ns with spaces", "M=4096 \xc3\x97 N", "w", 1);
  free(big);
  clcrt_runtime_destroy(rt2);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(absent_key) {
  clcrt_runtime *rt = rt_in(g_dir);
  get_missing(rt, "gemm", "nothing"); /* no store folder yet */
  has(clcrt_errmsg(rt), "no entry gemm/nothing for this device (sm_90a)");
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "something", "1", 1), CLCRT_OK);
  get_missing(rt, "gemm", "nothing");
  get_missing(rt, "gemm", "somethin");
  get_missing(rt, "gemm", "something ");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(namespaces_apart) {
  clcrt_runtime *rt = rt_in(g_dir);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "k", "A", 1), CLCRT_OK);
  ck_assert_int_eq(clcrt_store_put(rt, "attn", "k", "BB", 2), CLCRT_OK);
  ck_assert_int_eq(clcrt_store_put(rt, "gem", "mk", "CCC", 3), CLCRT_OK); /* the same bytes joined */
  get_eq(rt, "gemm", "k", "A", 1);
  get_eq(rt, "attn", "k", "BB", 2);
  get_eq(rt, "gem", "mk", "CCC", 3);
  get_missing(rt, "conv", "k");
  ck_assert_int_eq(count_entries(), 3);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- device scope ------------------------------------------------------------------- */

/* The fake driver (tests/common/fake_driver.h) with one device whose name and SM count the
 * test sets. */
static char g_fake_name[64] = "NVIDIA H100 80GB HBM3";
static int g_fake_sms = 132;
static clcrt__driver g_fake;

static CUresult CUDAAPI f_version(int *v) { *v = CUDA_VERSION; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_error_name(CUresult r, const char **s) {
  (void)r;
  *s = "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_attr(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9
       : a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT   ? g_fake_sms
       : a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN ? 232448
       : a == CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH ? 1
                                                  : 0;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_name(char *s, int n, CUdevice d) {
  (void)d;
  snprintf(s, (size_t)n, "%s", g_fake_name);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI f_name_fails(char *s, int n, CUdevice d) {
  (void)s, (void)n, (void)d;
  return CUDA_ERROR_INVALID_DEVICE;
}

static void use_fake_driver(void) {
  fake_driver_base(&g_fake);
  g_fake.cuDriverGetVersion = f_version;
  g_fake.cuGetErrorName = f_error_name;
  g_fake.cuGetErrorString = f_error_name;
  g_fake.cuDeviceGetAttribute = f_attr;
  g_fake.cuDeviceGetName = f_name;
  clcrt__driver_override(&g_fake);
}

static clcrt_runtime *rt_device(const char *dir) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.cache_dir = dir;
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "device runtime on the fake driver: %s", clcrt_errmsg(rt));
  return rt;
}

START_TEST(other_device_scope) {
  /* Device runtimes would start NVRTC on a thread, and nothing here compiles. The environment
   * is read once per process, so before the first runtime. */
  setenv("CLCRT_WARMUP", "0", 1);
  /* Compile-only runtimes: the architecture is the scope. */
  clcrt_runtime *a = rt_arch(g_dir, "sm_90a"), *b = rt_arch(g_dir, "sm_100a");
  ck_assert_int_eq(clcrt_store_put(a, "gemm", "plan", "hopper", 6), CLCRT_OK);
  get_missing(b, "gemm", "plan");
  ck_assert_int_eq(clcrt_store_put(b, "gemm", "plan", "blackwell", 9), CLCRT_OK);
  get_eq(a, "gemm", "plan", "hopper", 6);
  get_eq(b, "gemm", "plan", "blackwell", 9);
  clcrt_runtime_destroy(a);
  clcrt_runtime_destroy(b);
  /* Devices: the same architecture with another name or SM count is another scope, and a
   * compile-only sm_90a runtime is not the sm_90a device either. */
  use_fake_driver();
  clcrt_runtime *h100 = rt_device(g_dir);
  ck_assert_int_eq(clcrt_store_put(h100, "gemm", "plan", "132 SMs", 7), CLCRT_OK);
  get_eq(h100, "gemm", "plan", "132 SMs", 7);
  clcrt_runtime_destroy(h100);
  g_fake_sms = 114; /* an H100 PCIe */
  clcrt_runtime *pcie = rt_device(g_dir);
  get_missing(pcie, "gemm", "plan");
  has(clcrt_errmsg(pcie), "sm_90a|NVIDIA H100 80GB HBM3|114");
  ck_assert_int_eq(clcrt_store_put(pcie, "gemm", "plan", "114 SMs", 7), CLCRT_OK);
  clcrt_runtime_destroy(pcie);
  g_fake_sms = 132;
  snprintf(g_fake_name, sizeof g_fake_name, "NVIDIA H200");
  clcrt_runtime *h200 = rt_device(g_dir);
  get_missing(h200, "gemm", "plan");
  clcrt_runtime_destroy(h200);
  snprintf(g_fake_name, sizeof g_fake_name, "NVIDIA H100 80GB HBM3");
  h100 = rt_device(g_dir);
  get_eq(h100, "gemm", "plan", "132 SMs", 7);
  /* A driver that cannot name the device: an error that says why, never another scope. */
  g_fake.cuDeviceGetName = f_name_fails;
  size_t n;
  char buf[16];
  ck_assert_int_eq(clcrt_store_get(h100, "gemm", "plan", buf, sizeof buf, &n), CLCRT_E_CUDA);
  has(clcrt_errmsg(h100), "cuDeviceGetName failed");
  ck_assert_int_eq(clcrt_store_put(h100, "gemm", "plan", "x", 1), CLCRT_E_CUDA);
  g_fake.cuDeviceGetName = f_name;
  clcrt_runtime_destroy(h100);
  clcrt_runtime *co = rt_in(g_dir);
  get_eq(co, "gemm", "plan", "hopper", 6);
  clcrt_runtime_destroy(co);
  clcrt__driver_override(NULL);
}
END_TEST

/* ---- damaged entries ------------------------------------------------------------------ */

/* After a damaged entry reads as not found, it is gone and a put works again. */
static void damaged_then_fixed(clcrt_runtime *rt, const char *path) {
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "was damaged");
  ck_assert_msg(access(path, F_OK) != 0, "the damaged entry %s is still there", path);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "fresh", 5), CLCRT_OK);
  get_eq(rt, "gemm", "plan", "fresh", 5);
}

START_TEST(damaged_truncated_forged) {
  clcrt_runtime *rt = rt_in(g_dir);
  const char value[] = "a plan worth keeping";
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", value, sizeof value), CLCRT_OK);
  char path[600];
  entry_path(path, sizeof path);
  size_t n;
  unsigned char *good = slurp(path, &n), *bad = malloc(n);
  ck_assert_ptr_nonnull(good);
  /* Every truncation, down to an empty file. */
  for (size_t l = 0; l < n; l++) {
    spit(path, good, l);
    get_missing(rt, "gemm", "plan");
    has(clcrt_errmsg(rt), "was damaged");
    ck_assert_int_eq(access(path, F_OK), -1); /* removed */
  }
  /* Every byte flipped, one at a time. */
  for (size_t i = 0; i < n; i++) {
    memcpy(bad, good, n);
    bad[i] ^= 0x20;
    spit(path, bad, n);
    get_missing(rt, "gemm", "plan");
    ck_assert_int_eq(access(path, F_OK), -1);
  }
  /* Trailing garbage. */
  unsigned char *longer = malloc(n + 7);
  memcpy(longer, good, n);
  memset(longer + n, 'x', 7);
  spit(path, longer, n + 7);
  damaged_then_fixed(rt, path);
  free(longer);
  /* Forged: another entry's file (a whole, valid entry) under this entry's name. */
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "other", "theirs", 6), CLCRT_OK);
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "cd %s && for f in *.clcs; do [ %s/$f = %s ] || cp $f %s; done", g_store, g_store, path,
           path);
  ck_assert_int_eq(system(cmd), 0);
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "not the hash of its names");
  get_eq(rt, "gemm", "other", "theirs", 6);
  /* Forged: a whole entry with the right names whose checksum was recomputed after its length
   * field was changed is still refused (the size no longer matches). */
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", value, sizeof value), CLCRT_OK);
  free(good);
  good = slurp(path, &n);
  good[24] ^= 1; /* value length */
  spit(path, good, n);
  damaged_then_fixed(rt, path);
  /* Not a regular file under the entry's name: a directory, a FIFO (no hang), a symlink
   * to a file of zeros, a sparse file of 1 GiB (refused unread). */
  unlink(path);
  ck_assert_int_eq(mkdir(path, 0700), 0);
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "not a regular file");
  rmdir(path);
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "not a regular file");
  unlink(path);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 1l << 30), 0);
  close(fd);
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "too large to be an entry");
  ck_assert_int_eq(access(path, F_OK), -1);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "again", 5), CLCRT_OK);
  get_eq(rt, "gemm", "plan", "again", 5);
  free(good);
  free(bad);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- racing processes --------------------------------------------------------------------- */

/* Writer w's value number s: its length and every byte follow from (w, s), so a reader can
 * tell a whole value from a torn one. */
static size_t race_len(unsigned w, unsigned s) { return 16 + (w * 7919u + s * 104729u) % (CLCRT_STORE_MAX_VALUE - 16); }
static void race_fill(unsigned char *b, unsigned w, unsigned s) {
  size_t n = race_len(w, s);
  memcpy(b, &w, 4), memcpy(b + 4, &s, 4);
  for (size_t i = 8; i < n; i++) b[i] = (unsigned char)(w * 31 + s * 17 + i);
}

START_TEST(racing_processes) {
  enum { WRITERS = 4, READERS = 4, WRITES = 150 };
  clcrt_runtime *rt = rt_in(g_dir);
  ck_assert_int_eq(clcrt_store_put(rt, "race", "key", "seed", 4), CLCRT_OK);
  clcrt_runtime_destroy(rt);
  pid_t pids[WRITERS + READERS];
  for (unsigned p = 0; p < WRITERS + READERS; p++) {
    pids[p] = fork();
    ck_assert_int_ge(pids[p], 0);
    if (pids[p]) continue;
    clcrt_runtime *r = NULL;
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = "sm_90a", o.cache_dir = g_dir;
    if (clcrt_runtime_create(&r, &o) != CLCRT_OK) _exit(10);
    unsigned char *b = malloc(CLCRT_STORE_MAX_VALUE), *want = malloc(CLCRT_STORE_MAX_VALUE);
    int rc = 0;
    if (p < WRITERS) {
      for (unsigned s = 0; s < WRITES && !rc; s++) {
        race_fill(b, p, s);
        if (clcrt_store_put(r, "race", "key", b, race_len(p, s)) != CLCRT_OK) rc = 11;
      }
    } else {
      /* Read until the writers are done (the parent kills us then) or something is wrong. */
      for (unsigned long it = 0; !rc; it++) {
        size_t n = 0;
        clcrt_status st = clcrt_store_get(r, "race", "key", b, CLCRT_STORE_MAX_VALUE, &n);
        if (st != CLCRT_OK) rc = 12; /* never missing, never damaged */
        else if (n == 4) rc = memcmp(b, "seed", 4) ? 13 : 0;
        else {
          unsigned w, s;
          memcpy(&w, b, 4), memcpy(&s, b + 4, 4);
          if (n < 8 || w >= WRITERS || s >= WRITES || n != race_len(w, s)) rc = 14;
          else {
            race_fill(want, w, s);
            if (memcmp(b, want, n) != 0) rc = 15; /* torn */
          }
        }
        if (rc) fprintf(stderr, "reader %u: %s after %lu reads\n", p, clcrt_errmsg(r), it);
      }
    }
    clcrt_runtime_destroy(r);
    _exit(rc);
  }
  int failed = 0;
  for (unsigned p = 0; p < WRITERS; p++) {
    int ws;
    ck_assert_int_eq(waitpid(pids[p], &ws, 0), pids[p]);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws)) failed = 1;
  }
  /* Readers that found a problem have exited with its code; the rest are still reading. */
  for (unsigned p = WRITERS; p < WRITERS + READERS; p++) {
    int ws;
    if (waitpid(pids[p], &ws, WNOHANG) == pids[p]) {
      ck_assert_msg(0, "reader %u stopped: exit %d", p, WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    }
    kill(pids[p], SIGKILL);
    waitpid(pids[p], &ws, 0);
  }
  ck_assert_msg(!failed, "a writer failed");
  ck_assert_int_eq(count_entries(), 1);
  /* No temporary files left behind. */
  char cmd[1000];
  snprintf(cmd, sizeof cmd, "ls -A %s | grep -q '^\\.tmp-'", g_store);
  ck_assert_int_ne(system(cmd), 0);
}
END_TEST

/* ---- directories ---------------------------------------------------------------------- */

START_TEST(read_only_directory) {
  /* Root writes through mode bits: as root, the test becomes nobody for the rest of its
   * (forked) process, in a directory nobody owns. */
  if (geteuid() == 0) {
    if (chown(g_dir, 65534, 65534) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
      fprintf(stderr, "test_store: read_only_directory skipped: cannot become an unprivileged user\n");
      return;
    }
  }
  char cache[400];
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  snprintf(g_store, sizeof g_store, "%s/store", cache);
  clcrt_runtime *rt = rt_in(cache);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "kept", 4), CLCRT_OK);
  clcrt_runtime_destroy(rt);
  ck_assert_int_eq(chmod(g_store, 0500), 0);
  ck_assert_int_eq(chmod(cache, 0500), 0);
  rt = rt_in(cache);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "new", 3), CLCRT_E_IO);
  has(clcrt_errmsg(rt), "clcrt_store_put: cannot create a file in");
  has(clcrt_errmsg(rt), "Permission denied");
  get_eq(rt, "gemm", "plan", "kept", 4); /* reads still work */
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "other", "new", 3), CLCRT_E_IO);
  get_missing(rt, "gemm", "other");
  clcrt_runtime_destroy(rt);
  /* A cache directory without a store folder, which cannot be made. */
  chmod(g_store, 0700);
  rt = rt_in(cache);
  char p[1000];
  snprintf(p, sizeof p, "rm -rf %s", g_store);
  chmod(cache, 0700);
  ck_assert_int_eq(system(p), 0);
  chmod(cache, 0500);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "x", 1), CLCRT_E_IO);
  has(clcrt_errmsg(rt), "cannot create");
  get_missing(rt, "gemm", "plan");
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(no_disk_cache) {
  /* CLCRT_CACHE_DIR="" in a fresh process: the environment is read once per process, so this
   * comes before any runtime of this test's own. */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CLCRT_CACHE_DIR", "", 1);
    clcrt_runtime *r = NULL;
    clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
    o.target_arch = "sm_90a";
    size_t n;
    char b[4];
    int ok = clcrt_runtime_create(&r, &o) == CLCRT_OK &&
             clcrt_store_put(r, "gemm", "plan", "x", 1) == CLCRT_E_UNSUPPORTED &&
             strstr(clcrt_errmsg(r), "CLCRT_CACHE_DIR") &&
             clcrt_store_get(r, "gemm", "plan", b, sizeof b, &n) == CLCRT_E_NOT_FOUND &&
             strstr(clcrt_errmsg(r), "no disk cache");
    clcrt_runtime_destroy(r);
    _exit(ok ? 0 : 1);
  }
  int ws;
  ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
  ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  /* opts.cache_dir = "": off. */
  clcrt_runtime *rt = rt_in("");
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "plan", "x", 1), CLCRT_E_UNSUPPORTED);
  has(clcrt_errmsg(rt), "no disk cache");
  get_missing(rt, "gemm", "plan");
  has(clcrt_errmsg(rt), "no disk cache");
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- arguments ---------------------------------------------------------------------- */

START_TEST(bad_arguments) {
  clcrt_runtime *rt = rt_in(g_dir);
  char b[8], longer[CLCRT_STORE_MAX_NAME + 2];
  memset(longer, 'k', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  size_t n;
  ck_assert_int_eq(clcrt_store_put(NULL, "a", "b", "x", 1), CLCRT_E_INVALID);
  has(clcrt_errmsg(NULL), "rt is NULL");
  ck_assert_int_eq(clcrt_store_get(NULL, "a", "b", b, sizeof b, &n), CLCRT_E_INVALID);
  static const struct {
    const char *ns, *key, *msg;
  } bad[] = {
      {NULL, "k", "namespace is NULL"},        {"n", NULL, "key is NULL"},
      {"", "k", "namespace is empty"},         {"n", "", "key is empty"},
      {"a/b", "k", "namespace contains '/'"},  {"n", "../etc", "key contains '/'"},
      {"n", "tab\there", "control character"}, {"n\n", "k", "control character"},
      {"n", "del\x7f", "control character"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ck_assert_int_eq(clcrt_store_put(rt, bad[i].ns, bad[i].key, "x", 1), CLCRT_E_INVALID);
    has(clcrt_errmsg(rt), bad[i].msg);
    ck_assert_int_eq(clcrt_store_get(rt, bad[i].ns, bad[i].key, b, sizeof b, &n), CLCRT_E_INVALID);
    has(clcrt_errmsg(rt), bad[i].msg);
  }
  ck_assert_int_eq(clcrt_store_put(rt, longer, "k", "x", 1), CLCRT_E_INVALID);
  has(clcrt_errmsg(rt), "longer than CLCRT_STORE_MAX_NAME");
  ck_assert_int_eq(clcrt_store_get(rt, "n", longer, b, sizeof b, &n), CLCRT_E_INVALID);
  ck_assert_int_eq(clcrt_store_put(rt, "n", "k", NULL, 1), CLCRT_E_INVALID);
  has(clcrt_errmsg(rt), "value is NULL");
  ck_assert_int_eq(clcrt_store_get(rt, "n", "k", NULL, 4, &n), CLCRT_E_INVALID);
  unsigned char *big = calloc(1, CLCRT_STORE_MAX_VALUE + 1);
  ck_assert_int_eq(clcrt_store_put(rt, "n", "k", big, CLCRT_STORE_MAX_VALUE + 1), CLCRT_E_INVALID);
  has(clcrt_errmsg(rt), "more than CLCRT_STORE_MAX_VALUE (65536)");
  ck_assert_int_eq(clcrt_store_put(rt, "n", "k", big, (size_t)-1), CLCRT_E_INVALID);
  free(big);
  ck_assert_int_eq(access(g_store, F_OK), -1); /* nothing above wrote */
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Every allocation fails in turn: each call ends in OK or E_NOMEM with a message, leaks
 * nothing (the ASan build checks), and the store is whole afterwards. */
START_TEST(allocation_failures) {
  clcrt_runtime *rt = rt_in(g_dir);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "seed", "0", 1), CLCRT_OK);
  int saw_put = 0, saw_get = 0, done_put = 0, done_get = 0;
  for (long i = 1; i < 50 && !(done_put && done_get); i++) {
    char v[32];
    snprintf(v, sizeof v, "value %ld", i);
    clcrt__alloc_fail_after(i);
    clcrt_status st = clcrt_store_put(rt, "gemm", "plan", v, strlen(v));
    clcrt__alloc_fail_after(0);
    ck_assert_msg(st == CLCRT_OK || st == CLCRT_E_NOMEM, "put with allocation %ld failing: %s", i,
                  clcrt_status_name(st));
    if (st == CLCRT_E_NOMEM) saw_put = 1, has(clcrt_errmsg(rt), "out of memory");
    else done_put = 1;
    if (st == CLCRT_OK) get_eq(rt, "gemm", "plan", v, strlen(v));
    char b[32];
    size_t n;
    clcrt__alloc_fail_after(i);
    st = clcrt_store_get(rt, "gemm", "seed", b, sizeof b, &n);
    clcrt__alloc_fail_after(0);
    ck_assert_msg(st == CLCRT_OK || st == CLCRT_E_NOMEM, "get with allocation %ld failing: %s", i,
                  clcrt_status_name(st));
    if (st == CLCRT_E_NOMEM) saw_get = 1;
    else done_get = 1;
  }
  ck_assert(saw_put && saw_get && done_put && done_get);
  get_eq(rt, "gemm", "seed", "0", 1); /* a failed get never removed a whole entry */
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- the clcrt tool over the store -------------------------------------------------------- */

static char *run_tool(const char *args, int *rc) {
  const char *t = getenv("CLCRT_TEST_TOOL");
  char cmd[2000], out[600];
  snprintf(out, sizeof out, "%s.out", g_dir);
  snprintf(cmd, sizeof cmd, "CLCRT_CACHE_DIR=%s %s %s > %s 2>&1", g_dir, t && *t ? t : "build/clcrt", args, out);
  int st = system(cmd);
  ck_assert(WIFEXITED(st));
  *rc = WEXITSTATUS(st);
  size_t n;
  char *text = (char *)slurp(out, &n);
  ck_assert_ptr_nonnull(text);
  text = realloc(text, n + 1);
  text[n] = 0;
  unlink(out);
  return text;
}

START_TEST(tool_lists_and_clears) {
  clcrt_runtime *rt = rt_in(g_dir);
  ck_assert_int_eq(clcrt_store_put(rt, "gemm", "4096x4096x4096", "plan A", 6), CLCRT_OK);
  ck_assert_int_eq(clcrt_store_put(rt, "attn", "causal-128", "plan B!", 7), CLCRT_OK);
  clcrt_runtime_destroy(rt);
  int rc;
  char *t = run_tool("cache ls", &rc);
  ck_assert_int_eq(rc, 0);
  has(t, "store: 2 entries");
  has(t, "gemm/4096x4096x4096  6 bytes");
  has(t, "attn/causal-128  7 bytes");
  has(t, "sm_90a");
  free(t);
  t = run_tool("cache ls --json", &rc);
  ck_assert_int_eq(rc, 0);
  has(t, "\"store\": [");
  has(t, "\"ns\": \"gemm\", \"key\": \"4096x4096x4096\", \"scope\": \"sm_90a\", \"value_bytes\": 6");
  free(t);
  if (system("command -v python3 >/dev/null 2>&1") == 0) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "CLCRT_CACHE_DIR=%s %s cache ls --json | python3 -c 'import json,sys; d=json.load(sys.stdin); "
             "assert len(d[\"store\"]) == 2'",
             g_dir, getenv("CLCRT_TEST_TOOL") ? getenv("CLCRT_TEST_TOOL") : "build/clcrt");
    ck_assert_int_eq(system(cmd), 0);
  }
  t = run_tool("cache info", &rc);
  ck_assert_int_eq(rc, 0);
  has(t, "store      2 entries (0 damaged)");
  free(t);
  /* A damaged store entry is shown as such. */
  char cmd[800];
  snprintf(cmd, sizeof cmd, "f=$(ls %s/*.clcs | head -1); printf XX | dd of=$f bs=1 seek=50 conv=notrunc 2>/dev/null",
           g_store);
  ck_assert_int_eq(system(cmd), 0);
  t = run_tool("cache ls", &rc);
  ck_assert_int_eq(rc, 0);
  has(t, "DAMAGED: checksum mismatch");
  free(t);
  t = run_tool("cache clear", &rc);
  ck_assert_int_eq(rc, 0);
  has(t, "and 2 store entries");
  free(t);
  ck_assert_int_eq(count_entries(), 0);
  t = run_tool("cache ls", &rc);
  has(t, "no entries");
  free(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("store");
  TCase *t = tcase_create("store");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 120);
  tcase_add_test(t, round_trip);
  tcase_add_test(t, absent_key);
  tcase_add_test(t, namespaces_apart);
  tcase_add_test(t, other_device_scope);
  tcase_add_test(t, damaged_truncated_forged);
  tcase_add_test(t, racing_processes);
  tcase_add_test(t, read_only_directory);
  tcase_add_test(t, no_disk_cache);
  tcase_add_test(t, bad_arguments);
  tcase_add_test(t, allocation_failures);
  tcase_add_test(t, tool_lists_and_clears);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_FORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
