/* The cubin parser (runtime/cubin/): fields checked against ptxas's own report and the
 * ELF facts in CUBIN-NOTES, then hostile inputs. Cubins are made at test time by nvcc
 * (tests/cubin_fixtures.h); two are also committed in tests/data. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cubin.h"
#include "cubin_fixtures.h"

static unsigned char *load(const char *name, size_t *n) {
  unsigned char *d = slurp(fixture_path(name, "cubin"), n);
  ck_assert_msg(d != NULL, "fixture %s is missing", name);
  return d;
}

static clcrt__cubin parse_ok(const char *name) {
  size_t n;
  unsigned char *d = load(name, &n);
  clcrt__cubin c;
  char err[256];
  int rc = clcrt__cubin_parse(d, n, &c, err, sizeof err);
  ck_assert_msg(rc == 0, "%s: %s", name, err);
  free(d);
  return c;
}

static const clcrt__cubin_kernel *kernel(const clcrt__cubin *c, const char *name) {
  for (size_t i = 0; i < c->num_kernels; i++)
    if (strcmp(c->kernels[i].name, name) == 0) return &c->kernels[i];
  ck_abort_msg("kernel %s not found", name);
  return NULL;
}

START_TEST(arch_from_header_and_compat) {
  static const struct {
    const char *fx, *arch;
    int sm;
    char suffix;
    uint32_t flags;
  } want[] = {
      {"cluster_90a", "sm_90a", 90, 'a', 0x06005a04},   {"cluster_90", "sm_90", 90, 0, 0x06005a04},
      {"cluster_100a", "sm_100a", 100, 'a', 0x06006402}, {"cluster_100f", "sm_100f", 100, 'f', 0x06006402},
      {"clc_100a", "sm_100a", 100, 'a', 0x06006402},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    clcrt__cubin c = parse_ok(want[i].fx);
    ck_assert_str_eq(c.arch, want[i].arch);
    ck_assert_int_eq(c.sm, want[i].sm);
    ck_assert_int_eq(c.suffix, want[i].suffix);
    ck_assert_uint_eq(c.e_flags, want[i].flags);
    ck_assert_int_eq(c.abi_version, 8);
    ck_assert_int_eq(c.os_abi, 0x41);
    ck_assert_int_eq(c.toolkit_version, 130);
    ck_assert_int_eq(c.virtual_sm, want[i].sm);
    ck_assert_ptr_nonnull(c.producer);
    ck_assert_ptr_nonnull(strstr(c.producer, "ptxas"));
    clcrt__cubin_free(&c);
  }
}
END_TEST

/* CUDA 13 only writes ABI v8, so the v7 encoding is checked on a v8 cubin rewritten the
 * way older toolkits wrote it: OS/ABI 0x33, version 7, SM in the low byte, 0x800 for `a`. */
START_TEST(abi_v7_encoding) {
  size_t n;
  unsigned char *d = load("cluster_90", &n);
  d[7] = 0x33;
  d[8] = 7;
  uint32_t flags = 0x5a | 0x800;
  memcpy(d + 48, &flags, 4);
  clcrt__cubin c;
  char err[256];
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
  ck_assert_str_eq(c.arch, "sm_90a");
  ck_assert_int_eq(c.abi_version, 7);
  clcrt__cubin_free(&c);
  flags = 0x5a;
  memcpy(d + 48, &flags, 4);
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
  ck_assert_str_eq(c.arch, "sm_90");
  clcrt__cubin_free(&c);
  d[7] = 0x42;
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "ABI"));
  free(d);
}
END_TEST

/* Every kernel of every fixture against ptxas -v: registers, stack frame, spill bytes, and
 * shared memory (ptxas counts the kernel's part; the reserved 1 KiB comes on top). */
START_TEST(fields_match_ptxas) {
  int checked = 0;
  for (size_t i = 0; i < NUM_FIXTURES; i++) {
    clcrt__cubin c = parse_ok(fixtures[i].name);
    ck_assert_uint_gt(c.num_kernels, 0);
    for (size_t k = 0; k < c.num_kernels; k++) {
      const clcrt__cubin_kernel *kk = &c.kernels[k];
      ptxas_report r = ptxas_for(fixtures[i].name, kk->name);
      ck_assert_msg(r.found, "%s: no ptxas report for %s", fixtures[i].name, kk->name);
      ck_assert_int_eq(kk->registers, r.registers);
      ck_assert_int_eq(kk->frame_bytes, r.stack_frame);
      ck_assert_int_eq(kk->spill_store_bytes, r.spill_stores);
      ck_assert_int_eq(kk->spill_load_bytes, r.spill_loads);
      ck_assert_int_eq((int)(kk->static_smem - kk->reserved_smem), r.smem);
      ck_assert(kk->reserved_smem == 0 || kk->reserved_smem == 1024);
      checked++;
    }
    clcrt__cubin_free(&c);
  }
  ck_assert_int_eq(checked, 13);
}
END_TEST

START_TEST(cluster_block_params_mbarriers) {
  const char *fx[] = {"cluster_90a", "cluster_100a"};
  for (int i = 0; i < 2; i++) {
    clcrt__cubin c = parse_ok(fx[i]);
    ck_assert_uint_eq(c.num_kernels, 2); /* the sm_100a .nv.merc copies are not counted */
    ck_assert_int_eq(c.has_merc, i == 1);
    const clcrt__cubin_kernel *k = kernel(&c, "cluster_kernel");
    ck_assert_uint_eq(k->cluster[0], 2);
    ck_assert_uint_eq(k->cluster[1], 2);
    ck_assert_uint_eq(k->cluster[2], 1);
    ck_assert_int_eq(k->explicit_cluster, 1);
    ck_assert_uint_eq(k->maxntid[0], 256);
    ck_assert_uint_eq(k->reqntid[0], 0);
    ck_assert_int_eq(k->num_mbarriers, 1);
    ck_assert_int_eq(k->param_bytes, 40);
    ck_assert_int_eq(k->num_params, 1);
    ck_assert_int_eq(k->param0_bytes, 40);
    ck_assert_int_eq(k->param_offset, i == 0 ? 0x210 : 0x380);
    ck_assert_uint_eq(k->static_smem, 4104 + 1024);
    ck_assert_uint_eq(k->reserved_smem, 1024);
    ck_assert_int_eq(k->has_clc, 0);
    ck_assert_ptr_null(k->sched);
    const clcrt__cubin_kernel *p = kernel(&c, "plain_kernel");
    ck_assert_uint_eq(p->cluster[0], 0);
    ck_assert_int_eq(p->explicit_cluster, 0);
    ck_assert_int_eq(p->param_bytes, 12);
    ck_assert_int_eq(p->num_params, 2);
    ck_assert_int_eq(p->param0_bytes, 8); /* float *x, before int n */
    ck_assert_uint_eq(p->static_smem, 0);
    ck_assert_int_eq(p->num_mbarriers, CLCRT__CUBIN_UNKNOWN);
    clcrt__cubin_free(&c);
  }
}
END_TEST

START_TEST(clc_instruction_found) {
  clcrt__cubin c = parse_ok("clc_100a");
  const clcrt__cubin_kernel *m = kernel(&c, "clc_multicast"), *s = kernel(&c, "clc_selfcast");
  ck_assert_int_eq(m->has_clc, 1);
  ck_assert_int_eq(m->clc_count, 1);
  ck_assert_int_eq(m->clc_broadcast, 1);
  ck_assert_uint_eq(m->cluster[0], 2);
  ck_assert_int_eq(s->has_clc, 1);
  ck_assert_int_eq(s->clc_broadcast, 0);
  clcrt__cubin_free(&c);
  /* No other fixture has the instruction. */
  for (size_t i = 0; i < NUM_FIXTURES; i++) {
    if (strcmp(fixtures[i].src, "clc.cu") == 0) continue;
    c = parse_ok(fixtures[i].name);
    for (size_t k = 0; k < c.num_kernels; k++) ck_assert_int_eq(c.kernels[k].has_clc, 0);
    clcrt__cubin_free(&c);
  }
  /* The committed copy (CUDA 13.0) says the same. */
  size_t n;
  char path[1200];
  snprintf(path, sizeof path, "%s/clc_100a.cubin", data_dir());
  unsigned char *d = slurp(path, &n);
  ck_assert_ptr_nonnull(d);
  char err[256];
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
  ck_assert_int_eq(kernel(&c, "clc_multicast")->clc_broadcast, 1);
  clcrt__cubin_free(&c);
  free(d);
}
END_TEST

START_TEST(sass_scan_words) {
  uint8_t w[48] = {0};
  int bc = 7;
  ck_assert_int_eq(clcrt__sass_has_clc(w, sizeof w, &bc), 0);
  ck_assert_int_eq(bc, 0);
  w[16] = 0xca; /* lo = 0x3ca */
  w[17] = 0x03;
  ck_assert_int_eq(clcrt__sass_has_clc(w, sizeof w, &bc), 0); /* bit 27 of hi missing */
  w[16 + 8 + 3] = 0x08;                                       /* bit 27 of hi */
  ck_assert_int_eq(clcrt__sass_has_clc(w, sizeof w, &bc), 1);
  ck_assert_int_eq(bc, 0);
  w[16 + 8 + 1] = 0x01; /* bit 8 of hi: .BROADCAST */
  ck_assert_int_eq(clcrt__sass_count_clc(w, sizeof w, &bc), 1);
  ck_assert_int_eq(bc, 1);
  ck_assert_int_eq(clcrt__sass_has_clc(w, 31, NULL), 0); /* only whole instructions count */
  ck_assert_int_eq(clcrt__sass_has_clc(NULL, 0, NULL), 0);
  w[17] = 0x04; /* another opcode: 0x4ca */
  ck_assert_int_eq(clcrt__sass_has_clc(w, sizeof w, NULL), 0);
}
END_TEST

START_TEST(spills_counted) {
  clcrt__cubin c = parse_ok("spill_90a");
  const clcrt__cubin_kernel *k = kernel(&c, "spill_kernel");
  ck_assert_int_eq(k->registers, 32);
  ck_assert_int_eq(k->max_registers, 32);
  ck_assert_int_gt(k->spill_loads, 0);
  ck_assert_int_gt(k->spill_stores, 0);
  ck_assert_int_gt(k->frame_bytes, 0);
  clcrt__cubin_free(&c);
  c = parse_ok("nospill_90a");
  k = kernel(&c, "spill_kernel");
  ck_assert_int_eq(k->spill_loads, 0);
  ck_assert_int_eq(k->spill_store_bytes, 0);
  ck_assert_int_gt(k->registers, 32);
  clcrt__cubin_free(&c);
}
END_TEST

/* Records this parser does not decode are kept as they were, never named. */
START_TEST(unknown_attributes_raw) {
  size_t n;
  unsigned char *d = load("cluster_90a", &n);
  clcrt__cubin c;
  char err[256];
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
  const clcrt__cubin_kernel *k = kernel(&c, "plain_kernel");
  int saw50 = 0;
  for (size_t i = 0; i < k->num_attrs; i++) {
    ck_assert_ptr_null(clcrt__eiattr_name(k->attrs[i].id));
    if (k->attrs[i].id == 0x50) saw50 = k->attrs[i].format == 3;
  }
  ck_assert(saw50);
  clcrt__cubin_free(&c);
  /* Rename every CUDA_API_VERSION record (04 37 04 00 82 00 00 00) to an unused id. */
  int patched = 0;
  for (size_t i = 0; i + 8 <= n; i++)
    if (memcmp(d + i, "\x04\x37\x04\x00\x82\x00\x00\x00", 8) == 0) d[i + 1] = 0xee, patched++;
  ck_assert_int_ge(patched, 2);
  ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
  k = kernel(&c, "cluster_kernel");
  int found = 0;
  for (size_t i = 0; i < k->num_attrs; i++)
    if (k->attrs[i].id == 0xee) {
      found = 1;
      ck_assert_int_eq(k->attrs[i].format, 4);
      ck_assert_uint_eq(k->attrs[i].len, 4);
      ck_assert_int_eq(k->attrs[i].bytes[0], 0x82);
    }
  ck_assert(found);
  clcrt__cubin_free(&c);
  free(d);
}
END_TEST

/* A parse of exactly these bytes, in a buffer of exactly that size, so that ASan sees any
 * read past the end. Returns the parser's result; failures must come with a sentence. */
static int parse_exact(const unsigned char *src, size_t n) {
  unsigned char *b = malloc(n ? n : 1);
  memcpy(b, src, n);
  clcrt__cubin c;
  char err[256] = "x";
  int rc = clcrt__cubin_parse(n ? b : NULL, n, &c, err, sizeof err);
  if (rc == 0) {
    ck_assert_uint_le(c.file_bytes, n);
    clcrt__cubin_free(&c);
  } else {
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(err[0] != 0, "no message for a failure");
  }
  free(b);
  return rc;
}

/* Every cut of a real cubin, down to one byte short of whole, is refused: cubins keep their
 * program headers at the very end, so the last cuts lose only those (they once parsed, and
 * `clcrt inspect` accepted 9198-9471 bytes of a 9472-byte cubin). */
START_TEST(truncated_at_every_length) {
  static const char *const fx[] = {"cluster_90a", "cluster_100a", "clc_100a", "nospill_90a"};
  for (size_t f = 0; f < sizeof fx / sizeof *fx; f++) {
    size_t n;
    unsigned char *d = load(fx[f], &n);
    for (size_t l = 0; l < n; l++) ck_assert_msg(parse_exact(d, l) == -1, "%s cut to %zu of %zu bytes parsed", fx[f], l, n);
    clcrt__cubin c;
    char err[256];
    ck_assert_int_eq(clcrt__cubin_parse(d, n, &c, err, sizeof err), 0);
    ck_assert_uint_eq(c.file_bytes, n); /* headers, sections and segments end where the file does */
    clcrt__cubin_free(&c);
    free(d);
  }
}
END_TEST

/* A reader over a buffer that counts what clcrt__cubin_span asks for. */
typedef struct counting {
  const unsigned char *d;
  size_t n;
  uint64_t bytes, max_end;
  int calls;
} counting;

static int count_read(void *user, uint64_t off, void *buf, size_t len) {
  counting *c = user;
  c->calls++;
  c->bytes += len;
  if (off + len > c->max_end) c->max_end = off + len;
  /* Bytes past the buffer read as zeros: a sparse tail of a much larger file. */
  memset(buf, 0, len);
  if (off < c->n) memcpy(buf, c->d + off, len < c->n - off ? len : c->n - off);
  return 0;
}

/* The frame check reads the header and the two tables and nothing else, answers the image's
 * extent for a file padded far past it, and refuses every size too small for the tables. */
START_TEST(span_reads_only_the_frame) {
  size_t n;
  unsigned char *d = load("cluster_100a", &n);
  uint64_t shoff, phoff;
  uint16_t shnum, phnum;
  memcpy(&phoff, d + 32, 8), memcpy(&shoff, d + 40, 8), memcpy(&phnum, d + 56, 2), memcpy(&shnum, d + 60, 2);
  char err[256];
  uint64_t span = 0;
  counting c = {d, n, 0, 0, 0};
  ck_assert_int_eq(clcrt__cubin_span(count_read, &c, n, &span, err, sizeof err), 0);
  ck_assert_uint_eq(span, n);
  ck_assert_uint_eq(c.bytes, 64 + (uint64_t)shnum * 64 + (uint64_t)phnum * 56);
  /* 900 MB of zeros after the cubin: still its own extent, still only the frame read. */
  memset(&c, 0, sizeof c), c.d = d, c.n = n;
  ck_assert_int_eq(clcrt__cubin_span(count_read, &c, 900ull << 20, &span, err, sizeof err), 0);
  ck_assert_uint_eq(span, n);
  ck_assert_uint_le(c.max_end, n);
  /* 900 MB of zeros with no cubin: one read of the header, refused at the magic. */
  unsigned char zero[1] = {0};
  memset(&c, 0, sizeof c), c.d = zero, c.n = 1;
  ck_assert_int_eq(clcrt__cubin_span(count_read, &c, 900ull << 20, &span, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "not an ELF file"));
  ck_assert_int_eq(c.calls, 1);
  ck_assert_uint_eq(c.bytes, 64);
  /* Every size short of the whole file is refused, naming what runs past its end. */
  for (uint64_t l = 0; l < n; l++) {
    memset(&c, 0, sizeof c), c.d = d, c.n = n;
    err[0] = 0;
    ck_assert_msg(clcrt__cubin_span(count_read, &c, l, &span, err, sizeof err) == -1, "size %llu accepted",
                  (unsigned long long)l);
    ck_assert(err[0] != 0);
    if (l >= phoff && l > shoff + shnum * 64u) ck_assert_ptr_nonnull(strstr(err, "program header table"));
  }
  free(d);
}
END_TEST

static int failing_read(void *user, uint64_t off, void *buf, size_t len) {
  (void)user, (void)off, (void)buf, (void)len;
  return -1;
}

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

START_TEST(program_header_table_checked) {
  size_t n;
  unsigned char *d = load("cluster_90a", &n), *m = malloc(n);
  uint64_t phoff;
  uint16_t phnum;
  memcpy(&phoff, d + 32, 8), memcpy(&phnum, d + 56, 2);
  char err[256];
  clcrt__cubin c;
  uint64_t span;
  ck_assert_int_eq(clcrt__cubin_span(failing_read, NULL, n, &span, err, sizeof err), -1);
  ck_assert(err[0] != 0);
  static const uint64_t huge[] = {~0ull, ~0ull - 55, 1ull << 63, 0xffffffffull, 0};
  for (size_t h = 0; h < sizeof huge / sizeof *huge; h++) {
    memcpy(m, d, n);
    put64(m + 32, huge[h] ? huge[h] : n - 1); /* e_phoff */
    ck_assert_int_eq(clcrt__cubin_parse(m, n, &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "program header table"));
    for (unsigned p = 0; p < phnum; p++) {
      memcpy(m, d, n);
      put64(m + phoff + p * 56 + 8, huge[h] ? huge[h] : n); /* p_offset */
      put64(m + phoff + p * 56 + 32, 1);                      /* p_filesz */
      ck_assert_int_eq(clcrt__cubin_parse(m, n, &c, err, sizeof err), -1);
      ck_assert_ptr_nonnull(strstr(err, "segment"));
      memcpy(m, d, n);
      put64(m + phoff + p * 56 + 32, huge[h] ? huge[h] : n + 1); /* p_filesz */
      ck_assert_int_eq(parse_exact(m, n), -1);
    }
  }
  static const uint16_t sizes[] = {0, 32, 64, 0xffff};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    memcpy(m, d, n);
    put16(m + 54, sizes[i]); /* e_phentsize */
    ck_assert_int_eq(clcrt__cubin_parse(m, n, &c, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "program headers are"));
  }
  memcpy(m, d, n);
  put16(m + 56, 0xfff0); /* e_phnum: far more than the file holds */
  ck_assert_int_eq(parse_exact(m, n), -1);
  /* No program headers at all (relocatable cubins have none): parses, and the image ends
   * with its last section or the section header table. */
  memcpy(m, d, n);
  put16(m + 56, 0);
  ck_assert_int_eq(clcrt__cubin_parse(m, n, &c, err, sizeof err), 0);
  ck_assert_uint_le(c.file_bytes, phoff);
  clcrt__cubin_free(&c);
  free(m);
  free(d);
}
END_TEST

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

START_TEST(random_byte_flips) {
  const char *fx[] = {"cluster_90a", "clc_100a", "spill_90a"};
  for (int f = 0; f < 3; f++) {
    size_t n;
    unsigned char *d = load(fx[f], &n), *m = malloc(n);
    for (int it = 0; it < 3000; it++) {
      memcpy(m, d, n);
      int flips = 1 + (int)(next() % 8);
      for (int j = 0; j < flips; j++) m[next() % n] ^= (unsigned char)(1u << (next() % 8));
      parse_exact(m, n);
    }
    /* Whole words replaced by extreme values, where offsets and counts live. */
    for (int it = 0; it < 3000; it++) {
      memcpy(m, d, n);
      size_t at = (next() % (n / 4)) * 4;
      uint32_t v = (uint32_t[]){0xffffffffu, 0x80000000u, 0x7fffffffu, 0, (uint32_t)n, (uint32_t)n - 1}[next() % 6];
      memcpy(m + at, &v, 4);
      parse_exact(m, n);
    }
    free(m);
    free(d);
  }
}
END_TEST

START_TEST(absurd_offsets_and_counts) {
  size_t n;
  unsigned char *d = load("cluster_90a", &n), *m = malloc(n);
  uint64_t shoff;
  memcpy(&shoff, d + 40, 8);
  uint16_t shnum;
  memcpy(&shnum, d + 60, 2);
  static const uint64_t huge[] = {~0ull, ~0ull - 63, 1ull << 63, 0xffffffffull, 0x7fffffffffffffffull};
  for (size_t h = 0; h < sizeof huge / sizeof *huge; h++) {
    memcpy(m, d, n);
    put64(m + 40, huge[h]); /* e_shoff */
    ck_assert_int_eq(parse_exact(m, n), -1);
    for (unsigned s = 0; s < shnum; s++) {
      memcpy(m, d, n);
      put64(m + shoff + s * 64 + 24, huge[h]); /* sh_offset */
      parse_exact(m, n);
      memcpy(m, d, n);
      put64(m + shoff + s * 64 + 32, huge[h]); /* sh_size */
      parse_exact(m, n);
      memcpy(m, d, n);
      put64(m + shoff + s * 64 + 56, huge[h]); /* sh_entsize */
      parse_exact(m, n);
      memcpy(m, d, n);
      memset(m + shoff + s * 64 + 40, 0xff, 8); /* sh_link, sh_info */
      parse_exact(m, n);
      memcpy(m, d, n);
      memset(m + shoff + s * 64, 0xff, 4); /* sh_name */
      ck_assert_int_eq(parse_exact(m, n), -1);
    }
  }
  static const uint16_t counts[] = {0, 0xffff, 0xff00, 1000};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    memcpy(m, d, n);
    put16(m + 60, counts[i]); /* e_shnum */
    ck_assert_int_eq(parse_exact(m, n), -1);
    memcpy(m, d, n);
    put16(m + 62, counts[i]); /* e_shstrndx */
    parse_exact(m, n);
    memcpy(m, d, n);
    put16(m + 58, counts[i]); /* e_shentsize */
    ck_assert_int_eq(parse_exact(m, n), -1);
  }
  free(m);
  free(d);
}
END_TEST

START_TEST(not_a_cubin) {
  char err[256];
  clcrt__cubin c;
  ck_assert_int_eq(clcrt__cubin_parse(NULL, 0, &c, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "empty"));
  ck_assert_int_eq(parse_exact((const unsigned char *)"hello, world\n", 13), -1);
  ck_assert_int_eq(parse_exact((const unsigned char *)"\177EL", 3), -1);
  unsigned char h[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x41, 8};
  h[18] = 190;
  ck_assert_int_eq(parse_exact(h, 40), -1); /* ends inside the header */
  ck_assert_int_eq(parse_exact(h, 64), -1); /* no sections */
  h[4] = 1;
  ck_assert_int_eq(clcrt__cubin_parse(h, 64, &c, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "64-bit"));
  h[4] = 2, h[5] = 2;
  ck_assert_int_eq(clcrt__cubin_parse(h, 64, &c, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "little-endian"));
  h[5] = 1, h[18] = 62; /* x86-64 */
  ck_assert_int_eq(clcrt__cubin_parse(h, 64, &c, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "CUDA"));
  /* A tiny error buffer is still NUL-terminated. */
  char small[8];
  ck_assert_int_eq(clcrt__cubin_parse("xx", 2, &c, small, sizeof small), -1);
  ck_assert_uint_lt(strlen(small), sizeof small);
  ck_assert_int_eq(clcrt__cubin_parse("xx", 2, &c, NULL, 0), -1);
}
END_TEST

/* Every allocation the parser makes fails in turn: -2, nothing leaked (the ASan build
 * checks leaks), and a later parse still works. */
START_TEST(allocation_failures) {
  size_t n;
  unsigned char *d = load("clc_100a", &n);
  clcrt__cubin c;
  char err[256];
  int saw_oom = 0;
  for (long i = 1; i < 200; i++) {
    clcrt__alloc_fail_after(i);
    int rc = clcrt__cubin_parse(d, n, &c, err, sizeof err);
    clcrt__alloc_fail_after(0);
    ck_assert(rc == 0 || rc == -2);
    if (rc == 0) {
      clcrt__cubin_free(&c);
      break;
    }
    saw_oom = 1;
  }
  ck_assert(saw_oom);
  free(d);
}
END_TEST

/* Inputs the fuzzer once found trouble with (tests/data/fuzz-*.bin): each must parse or
 * fail cleanly, and leak nothing (the ASan build checks). fuzz-leak-two-tkinfo.bin has
 * two tool-info notes, which once leaked the first note's command line. */
START_TEST(fuzz_findings_stay_fixed) {
  static const char *const files[] = {"fuzz-leak-two-tkinfo.bin"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[1200];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", data_dir(), files[i]);
    unsigned char *d = slurp(path, &n);
    ck_assert_msg(d != NULL, "%s is missing", path);
    parse_exact(d, n);
    free(d);
  }
}
END_TEST

int main(void) {
  if (fixtures_make() != 0) {
    fprintf(stderr, "test_cubin: could not make the test cubins (nvcc needed)\n");
    return 1;
  }
  Suite *s = suite_create("cubin");
  TCase *t = tcase_create("parse");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, arch_from_header_and_compat);
  tcase_add_test(t, abi_v7_encoding);
  tcase_add_test(t, fields_match_ptxas);
  tcase_add_test(t, cluster_block_params_mbarriers);
  tcase_add_test(t, clc_instruction_found);
  tcase_add_test(t, sass_scan_words);
  tcase_add_test(t, spills_counted);
  tcase_add_test(t, unknown_attributes_raw);
  suite_add_tcase(s, t);
  TCase *h = tcase_create("hostile");
  tcase_set_timeout(h, 300);
  tcase_add_test(h, truncated_at_every_length);
  tcase_add_test(h, span_reads_only_the_frame);
  tcase_add_test(h, program_header_table_checked);
  tcase_add_test(h, random_byte_flips);
  tcase_add_test(h, absurd_offsets_and_counts);
  tcase_add_test(h, not_a_cubin);
  tcase_add_test(h, allocation_failures);
  tcase_add_test(h, fuzz_findings_stay_fixed);
  suite_add_tcase(s, h);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_FORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
