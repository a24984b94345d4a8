/* CPU suite for the GEMM pieces (tile maps, tensor maps, stream-K), no GPU or driver needed:
 *   - clcrt_tensor_map_2d (and _l2): every bad argument with its status and message; a compile-only
 *     runtime refuses to encode;
 *   - the tile maps' portable core (nvrtc_src/clcrt_tilemap.cuh, included here as C): the
 *     swizzled raster against a brute-force walk of its definition, the grouped map's group
 *     search and upper bound against a host reference on random group lists (empty groups,
 *     groups smaller than a tile, one group, a thousand tiny groups);
 *   - stream-K (nvrtc_src/clcrt_streamk.cuh) in both orders: every (tile, iteration) covered
 *     once, balanced ranges, pieces in order, distinct slots, unit_of at the 32-bit limits
 *     against a linear search; the fix-up protocol run in random unit orders gives the same
 *     bits; the GEMM's plan (ops/gemm_plan.h): its decompositions' properties and
 *     the choices its table cites; its measured mode on a fake timer (the store's entry used
 *     by a second runtime with no timing, in under a millisecond; damaged entries; no cache);
 *   - the GEMM tile functions (ops/gemm.cu) compile for sm_90a in compile-only
 *     mode, every variant, dense and grouped, under STEAL, STATIC and FIXED, with ptxas
 *     warnings as errors, no stack and no spills (from the cubin), the instructions they
 *     are about in the PTX (wgmma, TMA, multicast, stmatrix, the fix-up's atomic), and the
 *     host mirror of Args laid out
 *     exactly like the device struct (checked by NVRTC with static_asserts);
 *   - the clcrt tool compiles and inspects one of them and reports no spills. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gemm_internal.h" /* the op's internals: variants, plan, Args */
#include "../nvrtc_src/clcrt_tilemap.cuh"
#include "clcrt.h"
#include "clcrt_ops.h"
#include "cubin.h"
#include "internal.h"

static clcrt_runtime *rt_sm90(void) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = "";
  clcrt_runtime *rt = NULL;
  clcrt_status st = clcrt_runtime_create(&rt, &o);
  ck_assert_msg(st == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  return rt;
}

static uint64_t rng_state;
static uint32_t rnd(uint32_t n) { /* uniform-ish in [0, n) */
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return n ? (uint32_t)((rng_state >> 11) % n) : 0;
}

/* ---- clcrt_tensor_map_2d ---- */

typedef struct tm_case {
  const char *what;
  clcrt_dtype dtype;
  unsigned long long base;
  uint64_t rows, cols, stride;
  uint32_t box_rows, box_cols;
  clcrt_swizzle swz;
  clcrt_status want;
  const char *msg;
} tm_case;

#define GOOD_BASE 0x7f0000000000ull
static const tm_case TM_CASES[] = {
    {"dtype", (clcrt_dtype)7, GOOD_BASE, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "dtype 7"},
    {"dtype<0", (clcrt_dtype)-1, GOOD_BASE, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "dtype -1"},
    {"swizzle", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64, (clcrt_swizzle)9, CLCRT_E_INVALID, "swizzle 9"},
    {"base 0", CLCRT_DTYPE_BF16, 0, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "base is 0"},
    {"base align", CLCRT_DTYPE_BF16, GOOD_BASE + 8, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "not 16-byte aligned"},
    {"rows 0", CLCRT_DTYPE_BF16, GOOD_BASE, 0, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "0 rows"},
    {"cols 0", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 0, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "0 cols"},
    {"rows 2^32", CLCRT_DTYPE_BF16, GOOD_BASE, 1ull << 32, 64, 128, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "less than 2^32"},
    {"cols 2^32", CLCRT_DTYPE_U8, GOOD_BASE, 4, 1ull << 32, 1ull << 33, 64, 64, CLCRT_SWIZZLE_NONE, CLCRT_E_INVALID,
     "less than 2^32"},
    {"stride %16", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 60, 120, 64, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "multiple of 8 elements"},
    {"stride 2^40", CLCRT_DTYPE_U8, GOOD_BASE, 4, 64, 1ull << 40, 64, 64, CLCRT_SWIZZLE_NONE, CLCRT_E_INVALID,
     "less than 2^40"},
    {"stride < row", CLCRT_DTYPE_F32, GOOD_BASE, 64, 64, 128, 32, 32, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "less than a row (64 f32 elements = 256 bytes)"},
    {"box rows 0", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 0, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "1..256"},
    {"box rows 257", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 257, 64, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "box 257 rows"},
    {"box cols 0", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 0, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID, "1..256"},
    {"box cols 512", CLCRT_DTYPE_U8, GOOD_BASE, 64, 1024, 1024, 64, 512, CLCRT_SWIZZLE_NONE, CLCRT_E_INVALID,
     "1..256"},
    {"box 16B", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 12, CLCRT_SWIZZLE_NONE, CLCRT_E_INVALID,
     "a multiple of 8"},
    {"span 128", CLCRT_DTYPE_BF16, GOOD_BASE, 64, 256, 512, 64, 128, CLCRT_SWIZZLE_128B, CLCRT_E_INVALID,
     "128-byte swizzle span: at most 64 columns"},
    {"span 64", CLCRT_DTYPE_F32, GOOD_BASE, 64, 64, 256, 64, 32, CLCRT_SWIZZLE_64B, CLCRT_E_INVALID,
     "64-byte swizzle span: at most 16 columns"},
    {"span 32", CLCRT_DTYPE_U8, GOOD_BASE, 64, 64, 64, 64, 48, CLCRT_SWIZZLE_32B, CLCRT_E_INVALID,
     "32-byte swizzle span: at most 32 columns"},
    /* Valid descriptions: only the missing driver stops them. */
    {"valid bf16", CLCRT_DTYPE_BF16, GOOD_BASE, 8192, 8192, 16384, 128, 64, CLCRT_SWIZZLE_128B, CLCRT_E_UNSUPPORTED,
     "compile-only"},
    {"valid edge", CLCRT_DTYPE_BF16, GOOD_BASE, 1, 8, 16, 256, 64, CLCRT_SWIZZLE_128B, CLCRT_E_UNSUPPORTED,
     "compile-only"},
    {"valid f32", CLCRT_DTYPE_F32, GOOD_BASE, 3, 5, 32, 1, 4, CLCRT_SWIZZLE_NONE, CLCRT_E_UNSUPPORTED,
     "compile-only"},
};
#define NUM_TM_CASES ((int)(sizeof TM_CASES / sizeof TM_CASES[0]))

START_TEST(test_tensor_map_args) {
  clcrt_runtime *rt = rt_sm90();
  for (int i = 0; i < NUM_TM_CASES; i++) {
    const tm_case *c = &TM_CASES[i];
    clcrt_tensor_map m;
    memset(&m, 0xab, sizeof m);
    clcrt_status st =
        clcrt_tensor_map_2d(rt, &m, c->dtype, c->base, c->rows, c->cols, c->stride, c->box_rows, c->box_cols, c->swz);
    const char *msg = clcrt_errmsg(rt);
    ck_assert_msg(st == c->want, "%s: got %s, want %s: %s", c->what, clcrt_status_name(st), clcrt_status_name(c->want),
                  msg);
    ck_assert_msg(strstr(msg, c->msg) != NULL, "%s: message lacks \"%s\": %s", c->what, c->msg, msg);
    ck_assert_msg(strstr(msg, "clcrt_tensor_map_2d") != NULL, "%s: message does not name the call: %s", c->what, msg);
    unsigned char poison[sizeof m];
    memset(poison, 0xab, sizeof poison);
    ck_assert_msg(memcmp(&m, poison, sizeof m) == 0, "%s: a failed call must leave *out alone", c->what);
  }
  clcrt_tensor_map m;
  ck_assert_int_eq(clcrt_tensor_map_2d(rt, NULL, CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B),
                   CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "out is NULL"));
  ck_assert_int_eq(clcrt_tensor_map_2d(NULL, &m, CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64, CLCRT_SWIZZLE_128B),
                   CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "rt is NULL"));
  /* clcrt_tensor_map_2d_l2: every promotion passes the checks, one out of range fails first
   * (the runtime is compile-only, so a valid description stops at the missing driver). */
  for (int p = CLCRT_L2_PROMOTION_256B; p <= CLCRT_L2_PROMOTION_128B; p++) {
    ck_assert_int_eq(clcrt_tensor_map_2d_l2(rt, &m, CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64,
                                            CLCRT_SWIZZLE_128B, (clcrt_l2_promotion)p),
                     CLCRT_E_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(clcrt_errmsg(rt), "compile-only"));
  }
  for (int p = -1; p <= 4; p += 5) {
    memset(&m, 0xab, sizeof m);
    ck_assert_int_eq(clcrt_tensor_map_2d_l2(rt, &m, CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64,
                                            CLCRT_SWIZZLE_128B, (clcrt_l2_promotion)p),
                     CLCRT_E_INVALID);
    char want[64];
    snprintf(want, sizeof want, "L2 promotion %d is not a clcrt_l2_promotion", p);
    ck_assert_msg(strstr(clcrt_errmsg(rt), want) != NULL, "promotion %d: %s", p, clcrt_errmsg(rt));
    ck_assert_int_eq(((unsigned char *)&m)[0], 0xab);
  }
  ck_assert_int_eq(clcrt_tensor_map_2d_l2(NULL, &m, CLCRT_DTYPE_BF16, GOOD_BASE, 64, 64, 128, 64, 64,
                                          CLCRT_SWIZZLE_128B, CLCRT_L2_PROMOTION_NONE),
                   CLCRT_E_INVALID);
  ck_assert_ptr_nonnull(strstr(clcrt_errmsg(NULL), "rt is NULL"));
  ck_assert_int_eq(_Alignof(clcrt_tensor_map), 64);
  ck_assert_int_eq(sizeof(clcrt_tensor_map), 128);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- the maps' L2 promotion ---- */

typedef struct enc_rec {
  int n;
  uint64_t base[3];
  uint32_t box_rows[3];
  clcrt_l2_promotion promo[3];
} enc_rec;
static clcrt_status enc_record(void *user, clcrt_runtime *rt, clcrt_tensor_map *out, uint64_t base, uint64_t rows,
                               uint64_t cols, uint64_t pitch_bytes, uint32_t box_rows, uint32_t box_cols,
                               clcrt_l2_promotion promotion) {
  (void)rt, (void)rows, (void)cols, (void)pitch_bytes, (void)box_cols;
  enc_rec *r = user;
  memset(out, 0, sizeof *out);
  if (r->n < 3) r->base[r->n] = base, r->box_rows[r->n] = box_rows, r->promo[r->n] = promotion;
  r->n++;
  return CLCRT_OK;
}

/* A transposed 64-row kernel streams the weights (the caller's B) through the tiles' A without
 * L2 promotion; every other map, and every map of the plain kernels, promotes 256 bytes. Where
 * the part of the tiles' B at the edge loads smaller boxes (GEMM_B_EDGE_ROWS), a third map of
 * the tiles' B in boxes of that height (gemm_map_b_edge). */
START_TEST(test_map_promotion) {
  clcrt_runtime *rt = rt_sm90();
  const uint64_t A = 0x100000, B = 0x40000000, D = 0x80000000;
  static const struct {
    const char *v;
    int trans;
    clcrt_l2_promotion a;
  } cases[] = {{"64x16", 1, CLCRT_L2_PROMOTION_NONE},      {"64x64", 1, CLCRT_L2_PROMOTION_NONE},
               {"64x16", 0, CLCRT_L2_PROMOTION_256B},      {"64x224", 0, CLCRT_L2_PROMOTION_256B},
               {"128x128", 1, CLCRT_L2_PROMOTION_256B},    {"128x256", 0, CLCRT_L2_PROMOTION_256B}};
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gemm_plan p = gemm_plan_dense(4, 6144, 4096, 128, 132, 0);
    p.variant = gemm_variant_find(cases[i].v);
    ck_assert_int_ge(p.variant, 0);
    p.trans = cases[i].trans, p.sk_tiles = 0, p.sk_units = 0, p.shift = 0;
    enc_rec r = {0};
    const gemm_enc enc = {enc_record, &r};
    gemm_args a;
    ck_assert_int_eq(gemm_dense_args_ld(&enc, rt, &p, &a, A, B, D, 4, 6144, 4096, gemm_ld_packed(6144, 4096), 0, 0),
                     CLCRT_OK);
    const gemm_variant *v = gemm_variant_at(p.variant);
    const unsigned brows = cases[i].trans ? 4 : 6144, part = v->bn / v->cm;
    const int sub = brows % part && GEMM_B_EDGE_ROWS(part, brows % part) < part;
    ck_assert_int_eq(r.n, sub ? 3 : 2);
    ck_assert_uint_eq(a.n, brows);
    ck_assert_uint_eq(a.b_sub, sub);
    if (r.n == 3) {
      ck_assert_uint_eq(r.base[2], r.base[1]);
      ck_assert_uint_eq(r.box_rows[2], GEMM_B_EDGE_ROWS(part, brows % part));
      ck_assert_int_eq(r.promo[2], CLCRT_L2_PROMOTION_256B);
    }
    ck_assert_uint_eq(r.base[0], cases[i].trans ? B : A); /* the tiles' A */
    ck_assert_uint_eq(r.box_rows[0], gemm_variant_at(p.variant)->bm);
    ck_assert_msg(r.promo[0] == cases[i].a, "%s%s: A promotion %d", cases[i].v, cases[i].trans ? "t" : "",
                  (int)r.promo[0]);
    ck_assert_int_eq(r.promo[1], CLCRT_L2_PROMOTION_256B);
  }
  /* the default plan of a decode projection takes that path */
  const gemm_plan d = gemm_plan_dense(4, 6144, 4096, 128, 132, 0);
  ck_assert_int_eq(d.trans, 1);
  ck_assert_uint_eq(gemm_variant_at(d.variant)->bm, 64);
  ck_assert_int_eq(gemm_a_promotion(gemm_variant_at(d.variant), 1), CLCRT_L2_PROMOTION_NONE);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* ---- the swizzled raster ---- */

/* The order by its definition: bands of s along the major dimension, in order; inside a
 * band, each position along the minor dimension in turn, the band's h tiles at each. */
static void raster_reference(unsigned tm, unsigned tn, unsigned s, int along_n, unsigned *om, unsigned *on) {
  unsigned major = along_n ? tm : tn, minor = along_n ? tn : tm, t = 0;
  for (unsigned b0 = 0; b0 < major; b0 += s)
    for (unsigned j = 0; j < minor; j++)
      for (unsigned i = b0; i < b0 + s && i < major; i++, t++) {
        om[t] = along_n ? i : j;
        on[t] = along_n ? j : i;
      }
}

START_TEST(test_raster) {
  rng_state = 0x1234567ull;
  static const unsigned swz[] = {0, 1, 2, 3, 4, 8, 16};
  unsigned *om = malloc(4096 * sizeof *om), *on = malloc(4096 * sizeof *on);
  unsigned char *seen = malloc(4096);
  ck_assert(om && on && seen);
  for (int iter = 0; iter < 600; iter++) {
    unsigned tm = 1 + rnd(iter < 300 ? 12 : 64), tn = 1 + rnd(iter < 300 ? 12 : 64);
    unsigned s = swz[rnd(7)];
    int along_n = (int)rnd(2);
    raster_reference(tm, tn, s ? s : 1, along_n, om, on);
    memset(seen, 0, tm * tn);
    for (unsigned t = 0; t < tm * tn; t++) {
      unsigned m, n;
      clcrt_tm_swizzle(t, tm, tn, s, along_n, &m, &n);
      ck_assert_msg(m == om[t] && n == on[t], "tm %u tn %u swizzle %u along_n %d: index %u -> (%u,%u), want (%u,%u)",
                    tm, tn, s, along_n, t, m, n, om[t], on[t]);
      ck_assert(m < tm && n < tn && !seen[m * tn + n]);
      seen[m * tn + n] = 1;
    }
  }
  /* The worked example of the header's comment. */
  static const unsigned want[5][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}, {16, 17, 18, 19}};
  for (unsigned t = 0; t < 20; t++) {
    unsigned m, n;
    clcrt_tm_swizzle(t, 5, 4, 2, 1, &m, &n);
    ck_assert_uint_eq(want[m][n], t);
  }
  free(om), free(on), free(seen);
}
END_TEST

/* ---- the grouped map ---- */

/* One random group list of a kind: 0 mixed (empty groups among others), 1 every group smaller
 * than a tile, 2 one group, 3 a thousand tiny groups, 4 all empty, 5 large skewed groups. */
static unsigned group_list(int kind, unsigned *sizes) {
  unsigned g = 0;
  switch (kind) {
    case 0:
      g = 2 + rnd(40);
      for (unsigned i = 0; i < g; i++) sizes[i] = rnd(3) == 0 ? 0 : rnd(700);
      break;
    case 1:
      g = 1 + rnd(64);
      for (unsigned i = 0; i < g; i++) sizes[i] = 1 + rnd(127);
      break;
    case 2:
      g = 1;
      sizes[0] = 1 + rnd(5000);
      break;
    case 3:
      g = 1000;
      for (unsigned i = 0; i < g; i++) sizes[i] = rnd(4);
      break;
    case 4:
      g = 1 + rnd(10);
      for (unsigned i = 0; i < g; i++) sizes[i] = 0;
      break;
    default:
      g = 8 + rnd(25);
      for (unsigned i = 0; i < g; i++) sizes[i] = rnd(4) == 0 ? 0 : 4096u >> rnd(10);
      break;
  }
  return g;
}

START_TEST(test_grouped_map) {
  rng_state = 0xfeedbeefull + (uint64_t)_i;
  unsigned *sizes = malloc(1024 * sizeof *sizes), *start = malloc(1025 * sizeof *start);
  ck_assert(sizes && start);
  static const unsigned bms[] = {64, 128, 256};
  for (int iter = 0; iter < 200; iter++) {
    int kind = iter % 6;
    unsigned g = group_list(kind, sizes);
    unsigned bm = bms[rnd(3)], cm = 1 + rnd(2), un = 1 + rnd(60);
    /* The prefix sums the device builds (grouped_map_build), made here the plain way. */
    unsigned long long rows = 0;
    start[0] = 0;
    for (unsigned i = 0; i < g; i++) {
      unsigned units = clcrt_tm_group_units(sizes[i], bm, cm, un);
      unsigned want_units = ((sizes[i] + bm - 1) / bm + cm - 1) / cm * un;
      ck_assert_uint_eq(units, want_units);
      start[i + 1] = start[i] + units;
      rows += sizes[i];
    }
    unsigned total = start[g];
    ck_assert_msg(clcrt_tm_group_units_bound(rows, g, bm, cm, un) >= total,
                  "kind %d: bound %llu < %u units (%u groups, bm %u cm %u)", kind,
                  clcrt_tm_group_units_bound(rows, g, bm, cm, un), total, g, bm, cm);
    /* Every unit finds the group that owns it: a linear scan is the reference. */
    for (unsigned u = 0; u < total; u++) {
      unsigned want = 0;
      while (!(start[want] <= u && u < start[want + 1])) want++;
      unsigned got = clcrt_tm_group_find(start, g, u);
      ck_assert_msg(got == want, "kind %d: unit %u in group %u, found %u", kind, u, want, got);
      ck_assert(sizes[got] > 0);
    }
  }
  free(sizes), free(start);
}
END_TEST

/* ---- stream-K ---- */

/* ck_assert in fork mode writes to Check's pipe on every pass; these loops check millions of
 * things, so they abort only on failure. */
#define SK_CHECK(cond, ...)                 \
  do {                                      \
    if (!(cond)) ck_abort_msg(__VA_ARGS__); \
  } while (0)

/* One decomposition checked against its definition, walked the plain way: the shared
 * iterations cut into sk_units ranges of floor(S / U) or one more; every (tile, k-block)
 * covered once; a tile's pieces are the units over it in order; slots distinct and in range. */
static void check_sk(unsigned tiles, unsigned iters, unsigned want_tiles, unsigned want_units, unsigned tail) {
  clcrt_sk s = clcrt_sk_make(tiles, iters, want_tiles, want_units, tail);
  char what[128];
  snprintf(what, sizeof what, "tiles %u iters %u sk_tiles %u sk_units %u tail %u", tiles, iters, want_tiles, want_units,
           tail);
  const unsigned first_shared = tail ? tiles - s.sk_tiles : 0;
  /* clcrt_sk_make's clamps */
  unsigned long long shared = (unsigned long long)s.sk_tiles * s.iters;
  SK_CHECK(s.sk_tiles <= tiles && s.sk_units <= shared, "%s: made %u %u", what, s.sk_tiles, s.sk_units);
  SK_CHECK((s.sk_tiles == 0) == (s.sk_units == 0), "%s: half a decomposition", what);
  if (want_tiles && want_units && tiles) SK_CHECK(s.sk_units > 0, "%s: lost the sharing", what);
  const unsigned units = clcrt_sk_units(&s);
  SK_CHECK(units == s.sk_units + tiles - s.sk_tiles, "%s: %u units", what, units);
  /* Coverage: how often each (tile, k-block) is summed, and which pieces each tile has. */
  unsigned char *seen = calloc((size_t)tiles * s.iters + 1, 1);
  unsigned *pieces_seen = calloc((size_t)tiles + 1, sizeof *pieces_seen);
  unsigned *next_k = calloc((size_t)tiles + 1, sizeof *next_k);
  const unsigned slots = clcrt_sk_slots(&s);
  unsigned char *slot_used = calloc((size_t)slots + 1, 1);
  SK_CHECK(seen && pieces_seen && next_k && slot_used, "out of memory");
  unsigned long long lo = ~0ull, hi = 0;
  for (unsigned u = 0; u < units; u++) {
    unsigned n = clcrt_sk_segments(&s, u);
    SK_CHECK(n >= 1, "%s: unit %u has no segment", what, u);
    const unsigned v = clcrt_sk_shared_unit(&s, u); /* == sk_units: a whole tile's unit */
    /* Order: shared units first (tail 0) or last (tail 1). */
    SK_CHECK((v < s.sk_units) == (tail ? u >= tiles - s.sk_tiles : u < s.sk_units), "%s: unit %u in the wrong place",
             what, u);
    unsigned long long its = 0;
    for (unsigned i = 0; i < n; i++) {
      clcrt_sk_seg g = clcrt_sk_segment(&s, u, i);
      SK_CHECK(g.tile < tiles && g.k0 < g.k1 && g.k1 <= s.iters, "%s: unit %u seg %u: tile %u [%u, %u)", what, u,
                    i, g.tile, g.k0, g.k1);
      if (v >= s.sk_units)
        SK_CHECK(g.k0 == 0 && g.k1 == s.iters && g.pieces == 1 &&
                     (tail ? g.tile < tiles - s.sk_tiles : g.tile >= s.sk_tiles),
                 "%s: whole unit %u on tile %u", what, u, g.tile);
      else
        SK_CHECK(g.tile == first_shared + g.shared && g.shared < s.sk_tiles, "%s: unit %u: tile %u, shared %u", what,
                 u, g.tile, g.shared);
      if (i > 0) SK_CHECK(g.k0 == 0, "%s: unit %u's segment %u starts inside its tile", what, u, i);
      if (i + 1 < n) SK_CHECK(g.k1 == s.iters, "%s: unit %u's segment %u ends inside its tile", what, u, i);
      /* Units over a tile come in iteration order: this segment starts where the last ended. */
      SK_CHECK(g.k0 == next_k[g.tile], "%s: tile %u: unit %u starts at %u, covered to %u", what, g.tile, u, g.k0,
                    next_k[g.tile]);
      next_k[g.tile] = g.k1;
      SK_CHECK(g.piece == pieces_seen[g.tile], "%s: tile %u: unit %u is piece %u, want %u", what, g.tile, u,
                    g.piece, pieces_seen[g.tile]);
      pieces_seen[g.tile]++;
      for (unsigned k = g.k0; k < g.k1; k++) seen[(size_t)g.tile * s.iters + k]++;
      if (g.pieces > 1) {
        SK_CHECK(g.slot < slots && !slot_used[g.slot], "%s: unit %u seg %u: slot %u of %u (used %d)", what, u, i,
                      g.slot, slots, g.slot < slots ? slot_used[g.slot] : -1);
        slot_used[g.slot] = 1;
        SK_CHECK(clcrt_sk_piece_slot(&s, g.shared, g.piece) == g.slot, "%s: tile %u piece %u: slot %u, segment says %u", what,
                 g.tile, g.piece, clcrt_sk_piece_slot(&s, g.shared, g.piece), g.slot);
      }
      its += g.k1 - g.k0;
    }
    if (v < s.sk_units) {
      lo = its < lo ? its : lo, hi = its > hi ? its : hi;
      SK_CHECK(clcrt_sk_begin(&s, v + 1) - clcrt_sk_begin(&s, v) == its, "%s: unit %u: range and segments disagree", what, u);
    }
  }
  if (s.sk_units) SK_CHECK(hi - lo <= 1, "%s: shared units of %llu to %llu iterations", what, lo, hi);
  for (size_t i = 0; i < (size_t)tiles * s.iters; i++)
    SK_CHECK(seen[i] == 1, "%s: tile %zu k-block %zu summed %d times", what, i / s.iters, i % s.iters, seen[i]);
  /* Every segment's `pieces` is the number of units over its tile. */
  for (unsigned u = 0; u < units; u++)
    for (unsigned i = 0, n = clcrt_sk_segments(&s, u); i < n; i++) {
      clcrt_sk_seg g = clcrt_sk_segment(&s, u, i);
      SK_CHECK(g.pieces == pieces_seen[g.tile], "%s: tile %u has %u pieces, unit %u says %u", what, g.tile,
                    pieces_seen[g.tile], u, g.pieces);
    }
  /* unit_of against a linear search. */
  for (unsigned it = 0; s.sk_units && it < shared; it += 1 + it / 97) {
    unsigned want = 0;
    while (want + 1 < s.sk_units && clcrt_sk_begin(&s, want + 1) <= it) want++;
    SK_CHECK(clcrt_sk_unit_of(&s, it) == want, "%s: iteration %u in unit %u, unit_of says %u", what, it, want,
             clcrt_sk_unit_of(&s, it));
  }
  free(seen), free(pieces_seen), free(next_k), free(slot_used);
}

START_TEST(test_streamk_map) {
  rng_state = 0x5717eaull;
  /* Boundaries: one tile, one iteration, one unit per iteration, more units than iterations,
   * units that divide the iterations, no sharing, everything shared, a last wave of one. */
  static const unsigned edge[][4] = {
      {1, 1, 1, 1},     {1, 1, 1, 5},       {1, 64, 1, 64},  {1, 64, 1, 1000}, {7, 3, 7, 21},  {7, 3, 7, 20},
      {5, 8, 0, 9},     {5, 8, 3, 0},       {264, 64, 132 + 132, 132}, {133, 128, 133, 132},
      {132, 64, 132, 132}, {32, 128, 32, 132}, {2, 5, 2, 3}, {300, 7, 300, 132}, {9, 1000, 9, 132},
  };
  for (unsigned i = 0; i < sizeof edge / sizeof edge[0]; i++)
    for (unsigned tail = 0; tail < 2; tail++) check_sk(edge[i][0], edge[i][1], edge[i][2], edge[i][3], tail);
  for (int iter = 0; iter < 400; iter++) {
    unsigned tiles = 1 + rnd(iter < 200 ? 40 : 700), iters = 1 + rnd(iter % 3 ? 150 : 6);
    unsigned sk_tiles = rnd(4) == 0 ? tiles : rnd(tiles + 1), sk_units = rnd(4) == 0 ? 132 : 1 + rnd(300);
    check_sk(tiles, iters, sk_tiles, sk_units, (unsigned)(iter & 1));
  }
  /* The bounds that keep every step in 32 bits: at most 65535 units, fewer than 2^32 shared
   * iterations; at the limits the float estimate of unit_of must still land. */
  clcrt_sk big = clcrt_sk_make(3000000, 4000, 3000000, 2000000, 0);
  SK_CHECK(big.sk_units == 65535 && (unsigned long long)big.sk_tiles * big.iters <= 0xffffffffull,
           "big: %u tiles shared by %u units", big.sk_tiles, big.sk_units);
  unsigned total = big.sk_tiles * big.iters;
  SK_CHECK(clcrt_sk_begin(&big, 65535) == total, "the end of the last unit");
  SK_CHECK(clcrt_sk_unit_of(&big, total - 1) == 65534, "the last iteration's unit: %u", clcrt_sk_unit_of(&big, total - 1));
  for (unsigned u = 1; u < 65535; u += 7) {
    unsigned b = clcrt_sk_begin(&big, u);
    SK_CHECK(clcrt_sk_unit_of(&big, b) == u && clcrt_sk_unit_of(&big, b - 1) == u - 1, "unit %u at %u", u, b);
  }
  check_sk(70000, 3, 70000, 65535, 0);
  check_sk(70000, 3, 1000, 3000, 1);
  clcrt_sk edge32 = clcrt_sk_make(5, 858993459, 5, 1000, 0); /* S = 2^32 - 1 */
  for (unsigned u = 1; u < edge32.sk_units; u++) {
    unsigned b = clcrt_sk_begin(&edge32, u);
    SK_CHECK(b > clcrt_sk_begin(&edge32, u - 1) && clcrt_sk_unit_of(&edge32, b) == u &&
                 clcrt_sk_unit_of(&edge32, b - 1) == u - 1,
             "S = 2^32 - 1: unit %u at %u", u, b);
  }
  SK_CHECK(clcrt_sk_begin(&edge32, 1000) == 0xffffffffu, "S = 2^32 - 1: the end");
}
END_TEST

/* The fix-up protocol run on the CPU as the device runs it, with the units in random orders
 * (any scheduler, any grid): each unit sums its iterations of random terms in fp32, stores
 * its partial in its slot and counts in; the last piece of a tile adds the slots in piece
 * order. The outputs must be the same bits for every order and close to the fp64 sum. */
START_TEST(test_streamk_fixup_order) {
  rng_state = 0xf1c5ull;
  for (int iter = 0; iter < 60; iter++) {
    unsigned tiles = 1 + rnd(30), iters = 1 + rnd(40), sk_tiles = rnd(3) ? tiles : rnd(tiles + 1);
    clcrt_sk s = clcrt_sk_make(tiles, iters, sk_tiles, 1 + rnd(50), (unsigned)(iter & 1));
    unsigned units = clcrt_sk_units(&s), slots = clcrt_sk_slots(&s);
    float *term = malloc(sizeof(float) * tiles * iters), *ws = malloc(sizeof(float) * (slots + 1));
    float *out = malloc(sizeof(float) * tiles), *first = malloc(sizeof(float) * tiles);
    unsigned *ctr = calloc(tiles, sizeof *ctr), *order = malloc(sizeof *order * units);
    SK_CHECK(term && ws && out && first && ctr && order, "out of memory");
    for (unsigned i = 0; i < tiles * iters; i++) term[i] = (float)((int)rnd(2000001) - 1000000) * 1e-3f;
    for (int run = 0; run < 12; run++) {
      for (unsigned u = 0; u < units; u++) order[u] = u;
      for (unsigned u = units; u > 1; u--) { /* a random order of the units */
        unsigned j = rnd(u), t = order[u - 1];
        order[u - 1] = order[j], order[j] = t;
      }
      for (unsigned t = 0; t < tiles; t++) out[t] = NAN;
      for (unsigned q = 0; q < units; q++) {
        unsigned u = order[q];
        for (unsigned i = 0, n = clcrt_sk_segments(&s, u); i < n; i++) {
          clcrt_sk_seg g = clcrt_sk_segment(&s, u, i);
          float acc = 0.0f;
          for (unsigned k = g.k0; k < g.k1; k++) acc += term[g.tile * iters + k];
          if (g.pieces == 1) {
            out[g.tile] = acc;
            continue;
          }
          ws[g.slot] = acc;
          if (++ctr[g.tile] != g.pieces) continue;
          ctr[g.tile] = 0;
          float sum = 0.0f;
          for (unsigned j = 0; j < g.pieces; j++) sum += ws[clcrt_sk_piece_slot(&s, g.shared, j)];
          out[g.tile] = sum;
        }
      }
      for (unsigned t = 0; t < tiles; t++) {
        SK_CHECK(ctr[t] == 0, "tile %u: counter left at %u", t, ctr[t]);
        double ref = 0, mag = 0;
        for (unsigned k = 0; k < iters; k++) ref += term[t * iters + k], mag += fabs(term[t * iters + k]);
        SK_CHECK(fabs(out[t] - ref) <= 1e-5 * mag + 1e-6, "tile %u: %g, fp64 %g", t, out[t], ref);
        if (run == 0)
          first[t] = out[t];
        else
          SK_CHECK(memcmp(&out[t], &first[t], sizeof(float)) == 0, "tile %u: %a in one order, %a in another",
                        t, out[t], first[t]);
      }
    }
    free(term), free(ws), free(out), free(first), free(ctr), free(order);
  }
}
END_TEST

/* ---- the plan ---- */

/* The plan on shapes of every class: the cheapest tile shape and decomposition by the model
 * (none of the others costs less), slices that lie in single tiles (the units that share
 * operands stay at the same k) and come after whole waves, and the choices the calibration
 * sweep measured for its classes (bench/results/gemm-calibration-2026-11-27.md). */
START_TEST(test_plan) {
  static const unsigned shapes[][3] = {
      {4096, 4096, 4096}, {8192, 8192, 8192}, {128, 8192, 8192}, {1024, 6144, 4096}, {1024, 8192, 28672},
      {256, 10240, 8192}, {300, 3584, 18944}, {1, 4096, 14336}, {1, 28672, 4096}, {16, 4096, 4096},
      {2999, 5003, 4104}, {4096, 32768, 512}, {7, 13, 40}, {1, 8, 8}, {16384, 36864, 7168}, {64, 256, 128},
      {24, 6144, 4096}, {777, 152064, 3584}, {3, 2560, 2560}, {65, 4096, 4096},
  };
  const int sms = 132;
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const unsigned m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
    gemm_plan p = gemm_plan_dense_t(m, n, k, 128, sms, 0, 0); /* the normal orientation (test_plan_trans: the other) */
    const gemm_variant *v = gemm_variant_at(p.variant);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(p.sched, CLCRT_SCHED_STEAL);
    ck_assert_int_eq(p.trans, 0);
    ck_assert_int_eq(gemm_variant_find(v->name), p.variant); /* one index per shape */
    ck_assert_msg(p.cost > 0 && p.cost == gemm_plan_cost(&GEMM_MODEL_H100, v, m, n, k, p.sk_tiles, p.sk_units, sms),
                  "%ux%ux%u: the plan's cost is the model's", m, n, k);
    /* A short run the model puts in 2-CTA clusters runs their one-CTA twin (GEMM_C2_SHORT_US):
     * then the cheapest is that cluster; else the plan is the cheapest. */
    const gemm_plan c = gemm_plan_dense_as(m, n, k, 128, sms, 0, 0);
    const gemm_variant *cv = gemm_variant_at(c.variant);
    const int twin = cv->cm == 2 && c.cost < GEMM_C2_SHORT_US && v->cm == 1 && v->bm == cv->bm && v->bn == cv->bn;
    for (int vi = 0; vi < GEMM_ALL_VARIANTS && !twin; vi++) {
      const gemm_variant *w = gemm_plan_candidate(vi);
      if (!w) continue;
      gemm_plan q = p;
      q.variant = vi;
      gemm_plan_share(&q, GEMM_SHARE_TAIL, m, n, k, sms, 0);
      ck_assert_msg(p.cost <= q.cost + 1e-9, "%ux%ux%u: plan %s %.2f us above %s %.2f us", m, n, k, v->name, p.cost,
                    w->name, q.cost);
    }
    const unsigned tiles = gemm_work_tiles(v, m, n), nk = gemm_cdiv(k, GEMM_BK);
    clcrt_sk sk = clcrt_sk_make(tiles, nk, p.sk_tiles, p.sk_units, p.sk_tail);
    ck_assert_msg(sk.sk_tiles == p.sk_tiles && sk.sk_units == p.sk_units, "%ux%ux%u: clamped", m, n, k);
    if (p.sk_units) {
      ck_assert_msg(p.sk_units % p.sk_tiles == 0 && p.sk_units / p.sk_tiles >= 2 &&
                        p.sk_units / p.sk_tiles <= GEMM_SK_MAX_SLICES,
                    "%ux%ux%u: %u units over %u tiles", m, n, k, p.sk_units, p.sk_tiles);
      ck_assert_msg(nk / (p.sk_units / p.sk_tiles) >= GEMM_SK_MIN_KB, "%ux%ux%u: slices under the minimum", m, n, k);
      for (unsigned u = 0; u < clcrt_sk_units(&sk); u++)
        ck_assert_msg(clcrt_sk_segments(&sk, u) == 1, "%ux%ux%u: unit %u spans tiles", m, n, k, u);
      ck_assert_uint_eq(clcrt_sk_slots(&sk), p.sk_units);
      /* The shared tiles are the tail: whole waves of clusters before them. */
      ck_assert_msg((tiles - p.sk_tiles) % ((unsigned)sms / v->cm) == 0, "%ux%ux%u: %u whole tiles", m, n, k,
                    tiles - p.sk_tiles);
    }
    /* What the sweep measured for the classes: a decode or GEMV problem (M <= 64) is fastest in
     * 64-row tiles (every one of its 47 such shapes); large problems in 128-row tiles. */
    if (m <= 64) ck_assert_msg(v->bm == 64, "%ux%ux%u: %s for M <= 64", m, n, k, v->name);
    if (m >= 2048) ck_assert_msg(v->bm == 128, "%ux%ux%u: %s for a large M", m, n, k, v->name);
  }
}
END_TEST

/* The transposed plan (A and B swapped, D^T computed): by the model on problems of
 * GEMM_TRANS_MIN_M rows or more, only where it puts it GEMM_TRANS_GAIN below the normal plan, by
 * rule on fewer rows, never where the caller needs D's rows by row blocks; its decomposition is
 * that of the swapped problem, and its Args are the swapped problem's with trans set. */
START_TEST(test_plan_trans) {
  static const unsigned shapes[][3] = {
      {300, 151936, 5120}, {300, 3584, 18944}, {777, 152064, 3584}, {445, 5120, 17152}, {4096, 4096, 4096},
      {20, 3584, 3584},    {1, 5120, 4096},    {128, 8192, 8192},   {128, 32064, 5120},  {255, 40000, 4096},
      {256, 40000, 4096},  {2999, 5003, 4104}, {259, 3584, 2560},   {16, 4096, 4096},    {8, 28672, 3584},
      {17, 4096, 4096},    {4, 8192, 28672},   {4, 7104, 2048},     {1, 2048, 2048},     {16, 3072, 2048},
      {17, 3072, 2048},    {8, 17024, 2048},
  };
  const int sms = 132;
  int taken = 0;
  for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const unsigned m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
    const gemm_plan p = gemm_plan_dense(m, n, k, 128, sms, 0), nt = gemm_plan_dense_t(m, n, k, 128, sms, 0, 0),
                    t = gemm_plan_dense_as(m, n, k, 128, sms, 0, 1);
    ck_assert_int_eq(nt.trans, 0);
    ck_assert_int_eq(t.trans, 1);
    /* The model's choice from GEMM_TRANS_MIN_M rows; the few-rows rule up to GEMM_TRANS_GEMV_M
     * rows, where the normal plan slices its tiles (or, to GEMM_TRANS_NARROW_M rows, runs them
     * whole at most GEMM_TRANS_NARROW_BN wide), and from there to GEMM_TRANS_SKINNY_M rows where
     * the normal plan slices its tiles or pairs them in clusters: 64-row tiles transposed, block N
     * the narrowest that covers M. */
    const gemm_variant *nv = gemm_variant_at(nt.variant);
    const int gemv =
        (m > GEMM_TRANS_GEMV_M && m <= GEMM_TRANS_SKINNY_M && (nt.sk_units || nv->cm > 1)) ||
        (m <= GEMM_TRANS_GEMV_M && (nt.sk_units || (m <= GEMM_TRANS_NARROW_M && nv->bn <= GEMM_TRANS_NARROW_BN)));
    ck_assert_int_eq(p.trans, (m >= GEMM_TRANS_MIN_M && t.cost * GEMM_TRANS_GAIN < nt.cost) || gemv);
    if (!p.trans) {
      ck_assert(p.variant == nt.variant && p.sk_units == nt.sk_units);
      continue;
    }
    taken++;
    if (gemv) {
      char want[16];
      snprintf(want, sizeof want, "64x%u", gemm_cdiv(m, 16) * 16);
      ck_assert_str_eq(gemm_variant_at(p.variant)->name, want);
    } else {
      ck_assert(p.variant == t.variant && p.sk_tiles == t.sk_tiles && p.sk_units == t.sk_units);
    }
    const gemm_variant *v = gemm_variant_at(p.variant);
    gemm_plan q = p; /* the decomposition is the swapped problem's */
    gemm_plan_share(&q, GEMM_SHARE_TAIL, n, m, k, sms, 0);
    ck_assert(q.sk_tiles == p.sk_tiles && q.sk_units == p.sk_units);
    gemm_args a;
    const uint64_t A = 0x100000, B = 0x40000000, D = 0x80000000;
    ck_assert_int_eq(gemm_dense_args(NULL, &p, &a, A, B, D, m, n, k, 0, 0), CLCRT_OK);
    ck_assert_uint_eq(a.trans, 1);
    ck_assert_uint_eq(a.m, n);
    ck_assert_uint_eq(a.n, m);
    ck_assert_uint_eq(a.ldd, n); /* D keeps its row pitch: the epilogue writes it transposed */
    ck_assert_uint_eq(a.tm, gemm_cdiv(n, v->bm));
    ck_assert_uint_eq(a.tn, gemm_cdiv(m, v->bn));
    ck_assert_uint_eq(a.sk_tiles, p.sk_tiles);
    const char *tn = gemm_variant_name_t(p.variant);
    ck_assert_ptr_nonnull(tn);
    ck_assert_uint_eq(strlen(tn), strlen(v->name) + 1);
    ck_assert_int_eq(tn[strlen(v->name)], 't');
  }
  /* Transposed with one block of columns, the tiles stream the weights from memory: costed so,
   * not at L2's rate (8192 x 128 in 128x128c2 tiles, 32 row clusters: L2 as a normal problem,
   * memory as a transposed one). */
  const gemm_variant *w = gemm_variant_at(gemm_variant_find("128x128c2"));
  ck_assert_double_gt(gemm_plan_cost_t(&GEMM_MODEL_H100, w, 8192, 128, 8192, 0, 0, sms, 1),
                      gemm_plan_cost_t(&GEMM_MODEL_H100, w, 8192, 128, 8192, 0, 0, sms, 0));
  ck_assert_int_ge(taken, 3);
  ck_assert_int_eq(gemm_plan_dense(16, 4096, 4096, 128, sms, 0).trans, 1);   /* a GEMV in slices: 64x16t */
  ck_assert_int_eq(gemm_plan_dense(8, 28672, 3584, 128, sms, 0).trans, 0);   /* whole 64x256 tiles: kept */
  {
    /* Whole normal tiles at most 64 wide, at most 16 rows: 64x16 transposed, whole */
    const gemm_plan a = gemm_plan_dense(4, 7104, 2048, 128, sms, 0), b = gemm_plan_dense(8, 17024, 2048, 128, sms, 0),
                    rows = gemm_plan_dense_t(4, 7104, 2048, 128, sms, 0, 0); /* the caller needs rows */
    ck_assert_uint_eq(rows.sk_units, 0);
    ck_assert_uint_le(gemm_variant_at(rows.variant)->bn, 64);
    ck_assert_int_eq(rows.trans, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&a), "64x16t");
    ck_assert_uint_eq(a.sk_units, 0);
    ck_assert_int_eq(b.trans, 0); /* 64x144 normal tiles: kept */
  }
  {
    /* 17 rows in slices: 64x32 transposed; 65 to 208 rows where the normal plan slices its tiles
     * or pairs them in clusters (64x80t to 64x208t), or runs whole 1-CTA tiles in row blocks the
     * last of which is part empty, where the model with its cover terms says so; not past 208
     * rows, nor where one 128-row block holds every row or no block is part empty */
    const gemm_plan p17 = gemm_plan_dense(17, 4096, 4096, 128, sms, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&p17), "64x32t");
    const gemm_plan p67 = gemm_plan_dense(67, 8192, 28672, 128, sms, 0),
                    p199 = gemm_plan_dense(199, 4096, 14336, 128, sms, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&p67), "64x80t");   /* normal: 64x256 in stream-K slices */
    ck_assert_str_eq(gemm_plan_variant_name(&p199), "64x208t"); /* normal: 64x128c2 */
    ck_assert_int_eq(gemm_plan_dense(250, 4608, 3584, 128, sms, 0).trans, 0); /* 64x144c2, past 208 rows */
    ck_assert_int_eq(gemm_plan_dense_t(67, 8192, 28672, 128, sms, 0, 0).trans, 0); /* rows by row blocks */
    /* whole 64x64 tiles, the second row block of one row */
    const gemm_plan p65 = gemm_plan_dense(65, 4096, 4096, 128, sms, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&p65), "64x80t");
    ck_assert_int_eq(gemm_plan_dense_t(65, 4096, 4096, 128, sms, 0, 0).trans, 0); /* rows by row blocks */
    const gemm_plan p139 = gemm_plan_dense(139, 2048, 9728, 128, sms, 4.8e12); /* 64x48 whole before */
    ck_assert_str_eq(gemm_plan_variant_name(&p139), "64x144t");
    const gemm_plan p93 = gemm_plan_dense(93, 29440, 3072, 128, sms, 4.8e12), /* one 128-row block */
        p128 = gemm_plan_dense(128, 8192, 8192, 128, sms, 4.8e12);             /* no block part empty */
    ck_assert_int_eq(p93.trans, 0);
    ck_assert_uint_eq(gemm_variant_at(p93.variant)->bm, 128);
    ck_assert_int_eq(p128.trans, 0);
    /* Against 128-row tiles the model is asked again with GEMM_COVER_KB_128 where GEMM_COVER_KB
     * declines: 168x17920x4096 (128x144 whole) goes transposed; a transposed plan GEMM_COVER_KB
     * takes keeps its decomposition (143x18432x7168: 64x144t in 3 slices a tile, not 2). */
    const gemm_plan p168 = gemm_plan_dense(168, 17920, 4096, 128, sms, 4.8e12),
                    p143 = gemm_plan_dense(143, 18432, 7168, 128, sms, 4.8e12);
    ck_assert_str_eq(gemm_plan_variant_name(&p168), "64x176t");
    ck_assert_str_eq(gemm_plan_variant_name(&p143), "64x144t");
    ck_assert_uint_eq(p143.sk_tiles, 24);
    ck_assert_uint_eq(p143.sk_units, 72);
    ck_assert(GEMM_COVER_KB_128 < GEMM_COVER_KB);
    /* More than 128 rows: 128-row tiles transposed, whole, where the model with the cover terms
     * costs them lower, their last wave at least half full, and not against 64-row tiles that load
     * both operands on their lines where 128-row ones would not (offsets 16 bytes apart). */
    const gemm_plan p131 = gemm_plan_dense(131, 10112, 3584, 128, sms, 4.8e12), /* 79 tiles: 128x176 before */
        p150 = gemm_plan_dense(150, 28672, 4096, 128, sms, 4.8e12),             /* 224 tiles: 64x160t before */
        p167 = gemm_plan_dense(167, 37888, 3584, 128, sms, 4.8e12),             /* 296 tiles, 32 in the last wave */
        p163 = gemm_plan_dense(163, 2560, 10240, 128, sms, 4.8e12),             /* 20 tiles */
        p127 = gemm_plan_dense(127, 12288, 4096, 128, sms, 4.8e12),             /* one 128-row block */
        p154 = gemm_plan_dense(154, 28672, 3584, 16 | GEMM_ALIGN_APART, sms, 4.8e12),
        p154b = gemm_plan_dense(154, 28672, 3584, 64 | GEMM_ALIGN_APART, sms, 4.8e12);
    ck_assert_str_eq(gemm_plan_variant_name(&p131), "128x144t");
    ck_assert_uint_eq(p131.sk_units, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&p150), "128x160t");
    ck_assert_str_eq(gemm_plan_variant_name(&p167), "64x176t");
    ck_assert(!p163.trans || gemm_variant_at(p163.variant)->bm == 64);
    ck_assert(!p127.trans || gemm_variant_at(p127.variant)->bm == 64);
    ck_assert_str_eq(gemm_plan_variant_name(&p154), "64x160t");
    ck_assert_str_eq(gemm_plan_variant_name(&p154b), "128x160t");
    ck_assert_int_eq(gemm_plan_dense_t(131, 10112, 3584, 128, sms, 4.8e12, 0).trans, 0); /* rows by row blocks */
    /* 65 to 128 rows in 64-row tiles transposed: normal 128-row tiles of one CTA, whole, where
     * the model costs them within GEMM_ONE_BLOCK_KEEP of the transposed plan */
    const gemm_plan p94 = gemm_plan_dense(94, 28672, 4096, 128, sms, 4.8e12),
                    p79 = gemm_plan_dense(79, 14336, 4096, 128, sms, 4.8e12);
    ck_assert_str_eq(gemm_plan_variant_name(&p94), "128x224");
    ck_assert_uint_eq(p94.sk_units, 0);
    ck_assert_int_eq(gemm_plan_dense_t(94, 28672, 4096, 128, sms, 4.8e12, 0).trans, 0);
    ck_assert_str_eq(gemm_plan_variant_name(&p79), "64x80t"); /* 128x112 costs 1.5x: kept */
    /* The cover terms are the rule's alone: the model the other plans use has none. */
    ck_assert(GEMM_MODEL_H100.cover_kb == 0.0 && gemm_model_for(4.8e12).cover_kb == 0.0);
  }
  ck_assert_int_eq(gemm_plan_dense(300, 151936, 5120, 128, sms, 0).trans, 1);
  ck_assert_int_eq(gemm_plan_dense(4096, 4096, 4096, 128, sms, 0).trans, 0);
}
END_TEST

/* The few-rows rule's stream-K over every SM: where whole transposed tiles would cover at most
 * GEMM_SK_SMS_MAX_FILL of the SMs on a run of at least GEMM_SK_SMS_MIN_KB k-blocks an SM (and M
 * is at most GEMM_SK_SMS_MAX_M), every tile is shared, one unit per SM, in order 0 (ranges that
 * cross tiles); elsewhere the model's decomposition stands. The units are a valid stream-K
 * decomposition of the swapped problem. */
START_TEST(test_plan_sk_sms) {
  static const struct { unsigned m, n, k; int sms, all; } cases[] = {
      {16, 4608, 36864, 132, 1}, /* 72 tiles, 314 k-blocks an SM */
      {1, 5120, 24192, 132, 1},  /* 80 tiles (61%) */
      {48, 5120, 23872, 132, 1}, /* 64x48 tiles */
      {49, 5120, 25296, 132, 0}, /* past GEMM_SK_SMS_MAX_M rows: 64x64 tiles whole */
      {16, 4608, 4096, 132, 0},  /* a short run: 35 k-blocks an SM */
      {1, 6144, 24576, 132, 0},  /* 96 tiles (73%) */
      {16, 4608, 36864, 66, 0},  /* on half the SMs the 72 tiles fill them */
      {8, 28672, 3584, 132, 0},  /* normal 64x256 tiles whole: the rule does not apply */
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const unsigned m = cases[i].m, n = cases[i].n, k = cases[i].k;
    const int sms = cases[i].sms;
    const gemm_plan p = gemm_plan_dense(m, n, k, 128, sms, 0);
    const gemm_variant *v = gemm_variant_at(p.variant);
    const unsigned T = gemm_work_tiles(v, n, m), nk = gemm_cdiv(k, GEMM_BK);
    if (cases[i].all) {
      ck_assert_msg(p.trans && p.sk_tiles == T && p.sk_units == (unsigned)sms && p.sk_tail == 0,
                    "%ux%ux%u on %d SMs: %s sk %u/%u tail %u", m, n, k, sms, gemm_plan_variant_name(&p), p.sk_tiles,
                    p.sk_units, p.sk_tail);
      ck_assert_double_lt(T, GEMM_SK_SMS_MAX_FILL * sms);
      ck_assert_uint_ge((uint64_t)T * nk, (uint64_t)GEMM_SK_SMS_MIN_KB * sms);
      const clcrt_sk sk = clcrt_sk_make(T, nk, p.sk_tiles, p.sk_units, p.sk_tail);
      ck_assert_uint_eq(clcrt_sk_units(&sk), (unsigned)sms);
      unsigned covered = 0;
      for (unsigned u = 0; u < (unsigned)sms; u++)
        for (unsigned j = 0, ns = clcrt_sk_segments(&sk, u); j < ns; j++) {
          const clcrt_sk_seg g = clcrt_sk_segment(&sk, u, j);
          ck_assert_uint_lt(g.tile, T);
          covered += g.k1 - g.k0;
        }
      ck_assert_uint_eq(covered, T * nk); /* every k-block of every tile once */
    } else {
      ck_assert_msg(!(p.trans && p.sk_tiles == T && p.sk_units == (unsigned)sms && !p.sk_tail),
                    "%ux%ux%u on %d SMs: stream-K over every SM", m, n, k, sms);
      if (p.trans) {
        gemm_plan q = p;
        gemm_plan_share(&q, GEMM_SHARE_TAIL, n, m, k, sms, 0);
        ck_assert(q.sk_tiles == p.sk_tiles && q.sk_units == p.sk_units);
      }
    }
  }
}
END_TEST

/* The model follows the device's memory: its streaming rate scaled by the peak bandwidth against
 * the H100's it was fitted on; unknown (0) is the H100's, and the scale is bounded. The peak an
 * H200's driver reports (4814 GB/s, 2026-11-28) moves the plans of memory-bound shapes and of no
 * compute-bound one: the 16-row projection 16x24576x1536 goes from 64x256 to 64x192 tiles
 * (measured on that H200: 0.84 -> 1.01 of cuBLAS back to back), the square 4096^3 keeps its
 * plan. */
START_TEST(test_plan_mem_bw) {
  const int sms = 132;
  const double h100 = 2.0 * 2619e6 * (5120 / 8), h200 = 4.814e12;
  ck_assert_double_eq(gemm_model_for(0).bw_mem, GEMM_MODEL_H100.bw_mem);
  ck_assert_double_eq_tol(gemm_model_for(h100).bw_mem, GEMM_MODEL_H100.bw_mem, GEMM_MODEL_H100.bw_mem * 1e-3);
  ck_assert_double_eq_tol(gemm_model_for(h200).bw_mem, GEMM_MODEL_H100.bw_mem * h200 / GEMM_H100_PEAK_BW, 1.0);
  ck_assert_double_eq(gemm_model_for(1e9).bw_mem, GEMM_MODEL_H100.bw_mem * 0.25);
  ck_assert_double_eq(gemm_model_for(1e15).bw_mem, GEMM_MODEL_H100.bw_mem * 4.0);
  ck_assert_double_eq(gemm_model_for(h200).bw_l2, GEMM_MODEL_H100.bw_l2);
  ck_assert_double_eq(gemm_model_for(h200).lat_mem, GEMM_MODEL_H100.lat_mem);
  const gemm_plan a = gemm_plan_dense(16, 24576, 1536, 128, sms, h100), b = gemm_plan_dense(16, 24576, 1536, 128, sms, h200);
  ck_assert_str_eq(gemm_plan_variant_name(&a), "64x256");
  ck_assert_str_eq(gemm_plan_variant_name(&b), "64x192");
  ck_assert_double_lt(b.cost, a.cost);
  const gemm_plan c = gemm_plan_dense(4096, 4096, 4096, 128, sms, h100), d = gemm_plan_dense(4096, 4096, 4096, 128, sms, h200);
  ck_assert_int_eq(c.variant, d.variant);
  ck_assert_uint_eq(c.sk_units, d.sk_units);
  /* The same answer as the H100's where the device's peak is unknown. */
  const gemm_plan e = gemm_plan_dense(16, 24576, 1536, 128, sms, 0);
  ck_assert_int_eq(e.variant, a.variant);
}
END_TEST

/* The shift aligns the operand whose box has the more rows (A's bm, B's bn / cm; B on a tie),
 * for every tile shape; dense runs in 64-row tiles align B and start A's boxes apart
 * (Args.ashift); the args carry both and count the k-block the shift may add; rows at pitches
 * that are not a multiple of 128 bytes are never shifted. */
START_TEST(test_kshift_choice) {
  const uint64_t A = 0x7f0000000000ull + 80, B = 0x7f0000100000ull + 96; /* A +80, B +96 bytes */
  int a_wins = 0, b_wins = 0;
  for (int vi = 0; vi < GEMM_ALL_VARIANTS; vi++) {
    const gemm_variant *v = gemm_variant_at(vi);
    if (!v) continue;
    const int aligns_a = v->bm > v->bn / v->cm;
    a_wins += aligns_a, b_wins += !aligns_a;
    ck_assert_uint_eq(gemm_kshift_v(v, A, B, 4096, 4096), aligns_a ? 40u : 48u);
    ck_assert_uint_eq(gemm_kshift_v(v, A, B, 4104, 4096), 0u); /* A's rows 8208 bytes apart */
    ck_assert_uint_eq(gemm_kshift_v(v, A, B, 4096, 4100), 0u);
    ck_assert_uint_eq(gemm_kshift_v(v, A - 80, B - 96, 4096, 4096), 0u);
    gemm_plan p = {0};
    p.variant = vi, p.shift = 1, p.sched = CLCRT_SCHED_STEAL;
    gemm_args a;
    ck_assert_int_eq(gemm_dense_args(NULL, &p, &a, A, B, 0x1000, 300, 3000, 4096, 0, 0), CLCRT_OK);
    /* Dense runs in 64-row tiles (of one CTA or two) align B and start A's boxes on A's own
     * lines, (80 - 96) mod 128 bytes = 56 columns earlier (gemm_ashift); no other shape does. */
    const int apart = v->bm == 64;
    ck_assert_uint_eq(a.kshift, apart ? 48u : aligns_a ? 40u : 48u);
    ck_assert_uint_eq(a.ashift, apart ? 56u : 0u);
    ck_assert_uint_eq(a.nk, gemm_cdiv(4096 + a.kshift, GEMM_BK));
    if (gemm_trans_ok(v)) {
      p.trans = 1; /* the tiles' A is B (+96), their B is A (+80) */
      ck_assert_int_eq(gemm_dense_args(NULL, &p, &a, A, B, 0x1000, 300, 3000, 4096, 0, 0), CLCRT_OK);
      ck_assert_uint_eq(a.kshift, apart ? 40u : aligns_a ? 48u : 40u);
      ck_assert_uint_eq(a.ashift, apart ? 8u : 0u);
    }
    /* The same offsets: one shift serves both; rows off lines: no shift at all. */
    p.trans = 0;
    ck_assert_int_eq(gemm_dense_args(NULL, &p, &a, A + 16, B, 0x1000, 300, 3000, 4096, 0, 0), CLCRT_OK);
    ck_assert_uint_eq(a.kshift, 48u);
    ck_assert_uint_eq(a.ashift, 0u);
    ck_assert_int_eq(gemm_dense_args_ld(NULL, NULL, &p, &a, A, B, 0x1000, 300, 3000, 4096, (gemm_ld){4104, 4096, 3000},
                                        0, 0),
                     CLCRT_OK);
    ck_assert_uint_eq(a.kshift, 0u);
    ck_assert_uint_eq(a.ashift, 0u);
    p.shift = 0;
    ck_assert_int_eq(gemm_dense_args(NULL, &p, &a, A, B, 0x1000, 300, 3000, 4096, 0, 0), CLCRT_OK);
    ck_assert_uint_eq(a.kshift, 0u);
    ck_assert_uint_eq(a.ashift, 0u);
  }
  ck_assert_uint_eq(gemm_ashift(gemm_variant_at(gemm_variant_find("64x128c2")), A, B, 4096, 4096), 56u);
  ck_assert_uint_eq(gemm_ashift(gemm_variant_at(gemm_variant_find("128x256c2")), A, B, 4096, 4096), 0u);
  ck_assert_uint_eq(gemm_ashift(gemm_variant_at(gemm_variant_find("128x64")), A, B, 4096, 4096), 0u);
  ck_assert_uint_eq(gemm_ashift(gemm_variant_at(gemm_variant_find("64x16")), A, B, 4096, 4096), 56u);
  ck_assert_uint_eq(gemm_ashift(gemm_variant_at(gemm_variant_find("64x16")), A, B, 4096, 4100), 0u);
  ck_assert_int_eq(gemm_kshift_v(gemm_variant_at(gemm_variant_find("64x128c2")), A, B, 4096, 4096), 48); /* tie */
  ck_assert_int_eq(gemm_kshift_v(gemm_variant_at(gemm_variant_find("128x192c2")), A, B, 4096, 4096), 40);
  ck_assert_int_eq(gemm_kshift_v(gemm_variant_at(gemm_variant_find("128x256c2")), A, B, 4096, 4096), 48); /* tie */
  ck_assert_int_eq(gemm_kshift_v(gemm_variant_at(gemm_variant_find("64x176c2")), A, B, 4096, 4096), 48);
  ck_assert_int_gt(a_wins, 0);
  ck_assert_int_gt(b_wins, 0);
}
END_TEST

/* The model as scripts/gemm_fit.py computes it (its copy of gemm_plan_cost, with the constants
 * of gemm_plan.h): the two agree, so that the script's report is about the plan the op makes. */
START_TEST(test_plan_model) {
  static const struct {
    const char *v;
    unsigned m, n, k, sk_tiles, sk_units;
    double us;
  } cases[] = {
      {"128x256", 8192, 8192, 8192, 0, 0, 1703.877648},  {"128x192c2", 4096, 4096, 4096, 0, 0, 268.029500},
      {"64x96", 24, 6144, 4096, 0, 0, 46.502812},        {"64x64", 20, 3584, 16512, 56, 112, 96.504188},
      {"128x128", 300, 3584, 18944, 28, 84, 344.396161}, {"64x224", 1, 28672, 4096, 0, 0, 83.378777},
      {"64x128c2", 1, 7, 40, 0, 0, 11.680125},
      /* deeper rings: 14 and 12 stages counted as 12 past 32 rows, 16 as 8 at 20 rows */
      {"64x48", 64, 5120, 5120, 0, 0, 46.473037},        {"64x64", 48, 8192, 4608, 0, 0, 49.546915},
      {"64x32", 20, 3584, 3584, 0, 0, 41.295938},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const gemm_variant *v = gemm_variant_at(gemm_variant_find(cases[i].v));
    ck_assert_ptr_nonnull(v);
    const double c = gemm_plan_cost(&GEMM_MODEL_H100, v, cases[i].m, cases[i].n, cases[i].k, cases[i].sk_tiles,
                                    cases[i].sk_units, 132);
    ck_assert_msg(fabs(c - cases[i].us) <= 1e-4 * cases[i].us, "%s %ux%ux%u: %.6f us, the script's %.6f", cases[i].v,
                  cases[i].m, cases[i].n, cases[i].k, c, cases[i].us);
  }
}
END_TEST

/* 2-CTA clusters pay c2 per wave where the loads are aligned, not where an operand's rows stay
 * off their lines: 300x3584x18944 (measured both ways on an H200) takes 1-CTA transposed tiles
 * aligned and keeps 2-CTA ones at 16-byte offsets. Where the offsets differ with the rows on
 * their lines, 64-row tiles load both operands on lines (A-shift kernels), and between a 64-row
 * cluster and 64-row tiles of one CTA the plan chooses as where the loads are aligned:
 * 279x3072x2048 (H200) takes the aligned plan's 64x128 there, not 64x144c2. */
START_TEST(test_plan_c2_alignment) {
  ck_assert(gemm_model_for_loads(0, 128).c2 == GEMM_FIT_C2);
  ck_assert(gemm_model_for_loads(0, 64).c2 == 0.0);
  ck_assert(gemm_model_for_loads(0, 64u | GEMM_ALIGN_APART).c2 == 0.0);
  ck_assert(GEMM_FIT_C2 > 0.0);
  const gemm_plan a = gemm_plan_dense(300, 3584, 18944, 128, 132, 4.8e12),
                  u = gemm_plan_dense(300, 3584, 18944, 16, 132, 4.8e12),
                  w = gemm_plan_dense(300, 3584, 18944, 16u | GEMM_ALIGN_APART, 132, 4.8e12);
  ck_assert_int_eq(gemm_variant_at(a.variant)->cm, 1);
  ck_assert_int_eq(gemm_variant_at(u.variant)->cm, 2);
  ck_assert_int_eq(gemm_variant_at(w.variant)->cm, 2);
  const gemm_plan s0 = gemm_plan_dense(279, 3072, 2048, 128, 132, 4.8e12),
                  s1 = gemm_plan_dense(279, 3072, 2048, 16u | GEMM_ALIGN_APART, 132, 4.8e12),
                  s2 = gemm_plan_dense(279, 3072, 2048, 16u, 132, 4.8e12); /* one pitch off its lines */
  ck_assert_str_eq(gemm_plan_variant_name(&s0), "64x128");
  ck_assert_str_eq(gemm_plan_variant_name(&s1), "64x128");
  ck_assert_str_eq(gemm_plan_variant_name(&s2), "64x144c2");
}
END_TEST

/* 64-row tiles in 2-CTA clusters at more than GEMM_C2_ONE_MIN_M rows, up to GEMM_C2_ONE_MAX_M,
 * loads on their lines or offsets apart: the same tiles of one CTA (measured on an H200: the
 * clusters 11-12% slower there). 285x3072x8192 and 393x2048x10944 (public-model layers of the
 * A/B) take 64x144 and 64x128 aligned, with both operands at one offset (the shift aligns both)
 * and at offsets apart; rows off their lines keep the cluster, and so does a run of 600 rows
 * the model puts past GEMM_C2_SHORT_US (test_plan_c2_short). */
START_TEST(test_plan_c2_one) {
  static const struct {
    unsigned m, n, k;
    uint64_t a_off, b_off;
    const char *want;
  } cases[] = {
      {285, 3072, 8192, 0, 0, "64x144"},         {285, 3072, 8192, 16, 16, "64x144"},
      {285, 3072, 8192, 16, 48, "64x144"},       {393, 2048, 10944, 0, 0, "64x128"},
      {393, 2048, 10944, 48, 48, "64x128"},      {600, 3072, 16384, 0, 0, "64x240c2"},
      {215, 5120, 18392, 0, 0, "64x224c2"}, /* K not a multiple of 64: both operands' rows off */
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint64_t A = 0x7f0000000000ull + cases[i].a_off, B = 0x7f0000100000ull + cases[i].b_off;
    const gemm_plan p = gemm_plan_dense(cases[i].m, cases[i].n, cases[i].k, gemm_load_align(A, B, cases[i].k), 132,
                                        4.8e12);
    ck_assert_msg(!strcmp(gemm_plan_variant_name(&p), cases[i].want) && !p.sk_units, "%ux%ux%u @%llu,%llu: %s, not %s",
                  cases[i].m, cases[i].n, cases[i].k, (unsigned long long)cases[i].a_off,
                  (unsigned long long)cases[i].b_off, gemm_plan_variant_name(&p), cases[i].want);
  }
  /* The twin keeps the tile shape and drops the cluster. */
  const gemm_variant *c2 = gemm_variant_at(gemm_variant_find("64x144c2"));
  const gemm_plan t = gemm_plan_twin_one(c2, 285, 3072, 8192, 128, 132, 4.8e12);
  ck_assert_int_eq(gemm_variant_at(t.variant)->bm, 64);
  ck_assert_int_eq(gemm_variant_at(t.variant)->bn, 144);
  ck_assert_int_eq(gemm_variant_at(t.variant)->cm, 1);
  ck_assert(t.cost > 0);
}
END_TEST

/* Short runs in 2-CTA clusters (the model's cost under GEMM_C2_SHORT_US), loads on their lines or
 * at offsets apart: the same tile shape in one CTA each, in the same orientation (measured on an
 * H200: the clusters 1.09-1.17x their twins' time under 70 us). Longer runs, and rows of both
 * operands off their lines, keep the cluster. */
START_TEST(test_plan_c2_short) {
  static const struct {
    unsigned m, n, k;
    uint64_t a_off, b_off;
    const char *was, *want;
  } cases[] = {
      {1123, 4096, 4096, 0, 0, "128x160c2", "128x160"},     {1024, 6144, 4096, 0, 0, "128x192c2", "128x192"},
      {1123, 4096, 4096, 16, 48, "128x160c2", "128x160"},   {2048, 576, 7168, 0, 0, "64x144c2", "64x144"},
      {600, 4096, 10944, 0, 0, "128x160c2t", "128x160t"},   {1180, 4096, 14464, 0, 0, "128x160c2", "128x160c2"},
      {300, 151936, 5120, 0, 0, "128x160c2t", "128x160c2t"},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uint64_t A = 0x7f0000000000ull + cases[i].a_off, B = 0x7f0000100000ull + cases[i].b_off;
    const unsigned align = gemm_load_align(A, B, cases[i].k);
    const gemm_plan p = gemm_plan_dense(cases[i].m, cases[i].n, cases[i].k, align, 132, 4.8e12);
    char name[24];
    snprintf(name, sizeof name, "%s", gemm_plan_variant_name(&p)); /* "...t" where transposed */
    ck_assert_msg(!strcmp(name, cases[i].want) && !p.sk_units, "%ux%ux%u @%llu,%llu: %s, not %s", cases[i].m,
                  cases[i].n, cases[i].k, (unsigned long long)cases[i].a_off, (unsigned long long)cases[i].b_off,
                  name, cases[i].want);
    /* What the model alone picks (the cluster) is what the rule starts from. */
    const gemm_plan c = gemm_plan_dense_sel(cases[i].m, cases[i].n, cases[i].k, align, 132, 4.8e12, p.trans,
                                            GEMM_SEL_ALL);
    snprintf(name, sizeof name, "%s", gemm_plan_variant_name(&c));
    ck_assert_msg(!strcmp(name, cases[i].was), "%ux%ux%u: the model's pick %s, not %s", cases[i].m, cases[i].n,
                  cases[i].k, name, cases[i].was);
    if (strcmp(cases[i].was, cases[i].want)) ck_assert(c.cost < GEMM_C2_SHORT_US && p.cost >= c.cost);
  }
  /* Both operands' rows off their lines (K = 4104): the cluster stays. */
  const gemm_plan off = gemm_plan_dense(1123, 4096, 4104, 16u | GEMM_ALIGN_ROWS_OFF, 132, 4.8e12);
  ck_assert_int_eq(gemm_variant_at(off.variant)->cm, 2);
}
END_TEST

/* Rows of both operands off their lines (K not a multiple of 64, packed): gemm_load_align marks
 * them (GEMM_ALIGN_ROWS_OFF), whatever the bases; one operand's pitch off, or offsets the shift
 * can mend, are not marked. The model loads such rows at GEMM_ROWS_OFF_L2, and 12919x7168x27912
 * (measured on an H200: 128x176c2 0.75 of cuBLAS, 128x256c2 0.98) takes 128x256c2 there. */
START_TEST(test_plan_rows_off) {
  const uint64_t A = 0x7f0000000000ull, B = 0x7f0000100000ull;
  ck_assert_uint_eq(gemm_load_align(A, B, 4096), 128u);
  ck_assert_uint_eq(gemm_load_align(A + 16, B + 48, 4096), 32u | GEMM_ALIGN_APART);
  ck_assert_uint_eq(gemm_load_align(A + 48, B + 48, 4096), 128u); /* the one shift serves both */
  ck_assert_uint_eq(gemm_load_align(A, B, 27912), 16u | GEMM_ALIGN_ROWS_OFF); /* rows of 55824 bytes */
  ck_assert_uint_eq(gemm_load_align(A, B, 4104), 16u | GEMM_ALIGN_ROWS_OFF);
  ck_assert_uint_eq(gemm_load_align(A + 32, B, 4128), 32u | GEMM_ALIGN_ROWS_OFF); /* rows of 8256 bytes */
  ck_assert_uint_eq(gemm_load_align_ld(A, B, 4104, 4096), 16u);                  /* B's rows on lines */
  ck_assert(gemm_model_for_loads(0, 16u | GEMM_ALIGN_ROWS_OFF).bw_l2 == GEMM_ROWS_OFF_L2);
  ck_assert(gemm_model_for_loads(0, 16u).bw_l2 == GEMM_FIT_BW_L2);
  ck_assert(gemm_model_for_loads(0, 16u | GEMM_ALIGN_ROWS_OFF).c2 == 0.0);
  ck_assert(GEMM_ROWS_OFF_L2 < GEMM_FIT_BW_L2);
  const gemm_plan off = gemm_plan_dense(12919, 7168, 27912, 16u | GEMM_ALIGN_ROWS_OFF, 132, 4.8e12),
                  one = gemm_plan_dense(12919, 7168, 27912, 16u, 132, 4.8e12);
  ck_assert_str_eq(gemm_plan_variant_name(&off), "128x256c2");
  ck_assert_str_ne(gemm_plan_variant_name(&one), "128x256c2");
}
END_TEST

/* ---- the measured mode ---- */

/* A timer that needs no GPU: 128x128 with 2 slices wins where it is a candidate, else the
 * plan's own pick; every call counted. */
typedef struct fake_timer {
  unsigned calls;
} fake_timer;
static double fake_time(void *user, const gemm_plan *p) {
  fake_timer *t = user;
  t->calls++;
  const int want = gemm_variant_index("128x128");
  if (p->variant == want && p->sk_units && p->sk_units / p->sk_tiles == 2 && p->sched == CLCRT_SCHED_STEAL) return 1.0;
  return 2.0 + p->variant * 0.01 + (p->sched == CLCRT_SCHED_STATIC ? 0.5 : 0.0);
}

static clcrt_runtime *rt_cache(const char *dir) {
  clcrt_runtime_opts o = CLCRT_RUNTIME_OPTS_INIT;
  o.target_arch = "sm_90a";
  o.cache_dir = dir;
  clcrt_runtime *rt = NULL;
  ck_assert_msg(clcrt_runtime_create(&rt, &o) == CLCRT_OK, "runtime: %s", clcrt_errmsg(rt));
  return rt;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* First call of a class: every candidate timed, the fastest stored; a second runtime (as a
 * second process would be) reads it with no timing, for any M of the class, in well under a
 * millisecond; a damaged entry is measured again; with no disk cache nothing is kept. */
START_TEST(test_measured) {
  char dir[] = "/tmp/clcrt-test-measured-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  const int sms = 132;
  const unsigned m = 256, n = 10240, k = 8192; /* 128x128: 160 tiles, a last wave of 28 */
  clcrt_runtime *rt = rt_cache(dir);
  fake_timer t = {0};
  gemm_plan p;
  unsigned timed = 0;
  int stored = 0;
  ck_assert_int_eq(gemm_plan_measured(rt, m, n, k, 128, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
  gemm_plan cand[GEMM_MEASURE_MAX];
  const int nc = gemm_measure_candidates(m, n, k, 128, sms, 0, cand);
  ck_assert_msg(nc >= 4 && timed == (unsigned)nc && t.calls == timed && stored, "%d candidates, %u timed, stored %d",
                nc, timed, stored);
  ck_assert_str_eq(gemm_variant_at(p.variant)->name, "128x128");
  ck_assert_msg(p.sk_tiles == 28 && p.sk_units == 56 && p.sk_tail == 1, "measured plan: %u/%u tail %u", p.sk_tiles,
                p.sk_units, p.sk_tail);
  /* Generated tile shapes are candidates too: block M 128 here, block M 64 for a decode M. */
  int shapes_seen = 0;
  for (int i = 0; i < nc; i++) shapes_seen += cand[i].variant >= GEMM_NUM_VARIANTS;
  ck_assert_int_ge(shapes_seen, 3); /* the wave heuristic's three, and the model's own pick if generated */
  int sh[3];
  ck_assert_int_eq(gemm_measure_shapes(16, 4096, sms, sh, 3), 3);
  for (int i = 0; i < 3; i++) ck_assert_uint_eq(gemm_variant_at(sh[i])->bm, 64);
  /* 16 x 4096 on 132 SMs: BN 32 gives 128 tiles in one wave, the fullest; BN 16 two waves. */
  ck_assert_uint_eq(gemm_variant_at(sh[0])->bn, 32);
  /* The model's own plan is the first candidate. */
  gemm_plan def = gemm_plan_dense(m, n, k, 128, sms, 0);
  ck_assert(cand[0].variant == def.variant && cand[0].sk_units == def.sk_units);
  clcrt_runtime_destroy(rt);

  /* A second runtime on the same directory: no timing, the same rule, for M in the class. */
  double best = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    rt = rt_cache(dir);
    fake_timer t2 = {0};
    gemm_plan q;
    double t0 = now_ms();
    ck_assert_int_eq(gemm_plan_measured(rt, 200, n, k, 128, sms, fake_time, &t2, &q, &timed, &stored), CLCRT_OK);
    double dt = now_ms() - t0;
    best = dt < best ? dt : best;
    ck_assert_msg(timed == 0 && t2.calls == 0 && stored, "second process: %u timed", timed);
    gemm_plan want = p;
    gemm_measure_rule r = gemm_measure_rule_of(&p);
    ck_assert(gemm_measure_apply(&r, 200, n, k, sms, 0, &want));
    ck_assert_msg(q.variant == want.variant && q.sk_tiles == want.sk_tiles && q.sk_units == want.sk_units &&
                      q.sched == want.sched,
                  "M = 200: %u/%u, want %u/%u", q.sk_tiles, q.sk_units, want.sk_tiles, want.sk_units);
    clcrt_runtime_destroy(rt);
  }
  printf("test_gemm: a stored plan read back in %.3f ms (fastest of 5)\n", best);
  ck_assert_msg(best < 1.0, "a stored plan took %.3f ms", best);

  /* Another class (M = 1024 is not in 256's): measured. */
  rt = rt_cache(dir);
  t.calls = 0;
  ck_assert_int_eq(gemm_plan_measured(rt, 1024, n, k, 128, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
  ck_assert_msg(timed > 0, "another class was not measured");
  /* A damaged entry (a foreign rule) reads as none: measured again, and replaced. */
  char key[96];
  gemm_measure_key(m, n, k, 128, key, sizeof key);
  gemm_measure_rule bad = {0x12345678u, 999u, 77u, 99u};
  ck_assert_int_eq(clcrt_store_put(rt, GEMM_MEASURE_NS, key, &bad, sizeof bad), CLCRT_OK);
  t.calls = 0;
  ck_assert_int_eq(gemm_plan_measured(rt, m, n, k, 128, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
  ck_assert_msg(timed > 0 && stored, "a damaged entry: %u timed, stored %d", timed, stored);
  ck_assert_int_eq(gemm_plan_measured(rt, m, n, k, 128, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
  ck_assert_uint_eq(timed, 0);
  /* Loads at 16-byte offsets are another class. */
  ck_assert_int_eq(gemm_plan_measured(rt, m, n, k, 16, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
  ck_assert_msg(timed > 0, "offset loads shared the aligned class");
  clcrt_runtime_destroy(rt);

  /* No disk cache: no store; every call measures, and still returns the fastest. */
  rt = rt_cache("");
  for (int rep = 0; rep < 2; rep++) {
    ck_assert_int_eq(gemm_plan_measured(rt, m, n, k, 128, sms, fake_time, &t, &p, &timed, &stored), CLCRT_OK);
    ck_assert_msg(timed > 0 && !stored, "no cache: %u timed, stored %d", timed, stored);
    ck_assert_str_eq(gemm_variant_at(p.variant)->name, "128x128");
  }
  clcrt_runtime_destroy(rt);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- the tile functions, compile-only ---- */

static const clcrt_sched SCHEDS[] = {CLCRT_SCHED_STEAL, CLCRT_SCHED_STATIC, CLCRT_SCHED_FIXED};

/* One test per (variant, dense or grouped, scheduler). */
/* A compiled GEMM kernel keeps everything in registers: no stack, and its cubin (one kernel)
 * records no spill. Returns whether the kernel reconfigures its registers (setmaxnreg). */
static int assert_no_spills(const clcrt_kernel *k, const clcrt_kernel_info *info, const char *what) {
  ck_assert_msg(info->stack_bytes == 0, "%s: %d bytes of stack", what, info->stack_bytes);
  const void *cubin;
  size_t size;
  ck_assert_int_eq(clcrt_kernel_cubin(k, &cubin, &size), CLCRT_OK);
  clcrt__cubin c;
  char err[256];
  ck_assert_int_eq(clcrt__cubin_parse(cubin, size, &c, err, sizeof err), 0);
  ck_assert_uint_eq(c.num_kernels, 1);
  ck_assert_msg(c.kernels[0].spill_stores <= 0 && c.kernels[0].spill_loads <= 0, "%s: %d spill stores, %d loads", what,
                c.kernels[0].spill_stores, c.kernels[0].spill_loads);
  const int reconfig = c.kernels[0].reg_reconfig;
  clcrt__cubin_free(&c);
  return reconfig;
}

/* The transposed kernels (GEMM_TRANS: the op swapped A and B and the epilogue writes D^T) of
 * the shapes with the most accumulators and of the narrowest: within the register cap with no
 * stack or spills, the transposed stores in the PTX and the staged epilogue gone. */
START_TEST(test_compile_trans) {
  /* ... and the four the few-rows rule runs by default (64x16t to 64x64t) */
  static const char *const names[] = {"128x256", "128x240c2", "128x160c2", "64x256", "64x16c2",
                                      "64x16",   "64x32",     "64x48",     "64x64"};
  const int vi = gemm_variant_find(names[_i]);
  ck_assert_int_ge(vi, 0);
  const gemm_variant *v = gemm_variant_at(vi);
  clcrt_runtime *rt = rt_sm90();
  clcrt_kernel *k = NULL;
  ck_assert_msg(gemm_register_opt(rt, clcrt_gemm_source(), v, CLCRT_SCHED_STEAL, 0, "-DGEMM_TRANS=1", &k) == CLCRT_OK,
                "%s: %s", v->name, clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  char what[32];
  snprintf(what, sizeof what, "%s transposed", v->name);
  assert_no_spills(k, &info, what);
  /* 168 where 9+ warps share the SM (test_compile); a 64-row CTA has 5 */
  ck_assert_msg(info.registers > 0 && info.registers <= (v->bm == 128 ? 168 : 255), "%s: %d registers", what,
                info.registers);
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  ck_assert_msg(strstr(ptx, "st.global.u16") || strstr(ptx, "st.global.b16"), "%s transposed: no 2-byte stores",
                v->name);
  ck_assert_msg(!strstr(ptx, "stmatrix"), "%s transposed: the staged epilogue is still there", v->name);
  clcrt_runtime_destroy(rt);
}
END_TEST

START_TEST(test_compile) {
  const gemm_variant *v = &GEMM_VARIANTS[_i / 6];
  int grouped = (_i / 3) % 2;
  clcrt_sched sched = SCHEDS[_i % 3];
  clcrt_runtime *rt = rt_sm90();
  clcrt_kernel *k = NULL;
  /* ptxas warnings are errors here: a serialised wgmma (C7510) or an ignored setmaxnreg (C7508)
   * would fail this test with ptxas's own words in the message. */
  clcrt_status st = gemm_register_opt(rt, clcrt_gemm_source(), v, sched, grouped, "--ptxas-options=--warning-as-error", &k);
  ck_assert_msg(st == CLCRT_OK, "%s %s %s: %s", v->name, grouped ? "grouped" : "dense", clcrt__sched_name(sched),
                clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  const char *what = info.name;
  char named[96];
  snprintf(named, sizeof named, "%s %s", what, v->name);
  ck_assert_msg(!assert_no_spills(k, &info, named), "%s: setmaxnreg is not used by design", what);
  /* 9+ warps put three on one SM sub-partition: 16384 / (3 * 32) registers each at most. */
  ck_assert_msg(info.registers > 0 && info.registers <= 168, "%s %s: %d registers", what, v->name, info.registers);
  ck_assert_uint_eq(info.block.x, gemm_threads(v));
  ck_assert_uint_eq(info.cluster.x, v->cm);
  ck_assert_msg(info.static_smem + info.dynamic_smem <= 227 * 1024, "%s: %u + %u bytes of shared memory", what,
                info.static_smem, info.dynamic_smem);

  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  char want[96];
  snprintf(want, sizeof want, "wgmma.mma_async.sync.aligned.m64n%uk16.f32.bf16.bf16", v->bn);
  ck_assert_msg(strstr(ptx, want), "%s: no %s in the PTX", what, want);
  ck_assert_msg(strstr(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"),
                "%s: no TMA load in the PTX", what);
  ck_assert_msg((strstr(ptx, ".multicast::cluster") != NULL) == (v->cm > 1), "%s: multicast in the PTX: want %s", what,
                v->cm > 1 ? "yes" : "no");
  ck_assert_msg(strstr(ptx, "wgmma.wait_group.sync.aligned 1"), "%s: the mainloop must keep a wgmma group in flight",
                what);
  /* The staged epilogue (stmatrix, 16-byte stores) where the variant asks for it; stream-K's
   * fix-up (dense) counts its pieces in with an acq_rel atomic. */
  ck_assert_msg((strstr(ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16") != NULL) == (v->epi != 0),
                "%s %s: stmatrix in the PTX: want %s", what, v->name, v->epi ? "yes" : "no");
  ck_assert_msg((strstr(ptx, "atom.acq_rel.gpu.global.add.u32") != NULL) == !grouped,
                "%s %s: stream-K's fix-up counter in the PTX: want %s", what, v->name, grouped ? "no" : "yes");
  printf("test_gemm: %-28s %-10s %3d registers, %6u bytes shared, cold compile %4.0f ms\n", what, v->name,
         info.registers, info.static_smem + info.dynamic_smem, info.compile_ms);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Tile shapes beyond the measured variants, as the tile function is written for them (block N a
 * multiple of 16, block M 64 or 128, 1- or 2-CTA clusters, the stages that fit): each compiles
 * with no ptxas warning, no stack and no spills, and its PTX has the wgmma of its width. */
static const unsigned SHAPES[][3] = {{128, 16, 1},  {128, 48, 1}, {128, 80, 1},  {128, 96, 2},  {128, 112, 1},
                                     {128, 144, 1}, {128, 176, 2}, {128, 208, 1}, {128, 240, 1}, {64, 16, 1},
                                     {64, 64, 1},   {64, 128, 2},  {64, 192, 1},  {64, 256, 1}, {64, 32, 1},
                                     {64, 48, 2},   {64, 80, 1},   {128, 32, 1}}; /* the last four: deep rings */
START_TEST(test_compile_shapes) {
  gemm_variant v;
  char name[16];
  ck_assert(gemm_variant_make(&v, name, SHAPES[_i][0], SHAPES[_i][1], SHAPES[_i][2]));
  ck_assert_uint_ge(v.stages, 3);
  clcrt_runtime *rt = rt_sm90();
  clcrt_kernel *k = NULL;
  clcrt_status st = gemm_register_opt(rt, clcrt_gemm_source(), &v, CLCRT_SCHED_STEAL, _i % 3 == 2,
                                      "--ptxas-options=--warning-as-error", &k);
  ck_assert_msg(st == CLCRT_OK, "%s: %s", name, clcrt_errmsg(rt));
  clcrt_kernel_info info = CLCRT_KERNEL_INFO_INIT;
  ck_assert_int_eq(clcrt_kernel_info_get(k, &info), CLCRT_OK);
  assert_no_spills(k, &info, name);
  ck_assert_msg(info.static_smem + info.dynamic_smem <= 227 * 1024, "%s: %u + %u bytes of shared memory", name,
                info.static_smem, info.dynamic_smem);
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  char want[96];
  snprintf(want, sizeof want, "wgmma.mma_async.sync.aligned.m64n%uk16.f32.bf16.bf16", v.bn);
  ck_assert_msg(strstr(ptx, want), "%s: no %s in the PTX", name, want);
  ck_assert_msg(strstr(ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16"), "%s: no staged epilogue", name);
  /* Dense 64-row tiles (of one CTA or two) have A-shift kernels (GEMM_ASHIFT, for A's boxes
   * apart from B's): the same rules (no warning, no stack, no spills), and a wgmma with A from
   * registers ("{%r..}, %rd.." after the accumulators) for the slice that straddles two boxes. */
  if (v.bm == 64 && _i % 3 != 2) {
    const int kind = _i % 2 ? GEMM_KIND_ASHIFT_TRANS : GEMM_KIND_ASHIFT;
    clcrt_kernel *kr = NULL;
    st = gemm_register_kind(rt, clcrt_gemm_source(), &v, CLCRT_SCHED_STEAL, kind, "--ptxas-options=--warning-as-error",
                            &kr);
    ck_assert_msg(st == CLCRT_OK, "%s A-shift: %s", name, clcrt_errmsg(rt));
    clcrt_kernel_info ri = CLCRT_KERNEL_INFO_INIT;
    ck_assert_int_eq(clcrt_kernel_info_get(kr, &ri), CLCRT_OK);
    char rname[40];
    snprintf(rname, sizeof rname, "%s A-shift%s", name, _i % 2 ? " transposed" : "");
    assert_no_spills(kr, &ri, rname);
    ck_assert_uint_eq(ri.block.x, gemm_threads(&v));
    const char *rptx = NULL;
    ck_assert_int_eq(clcrt_kernel_ptx(kr, &rptx), CLCRT_OK);
    ck_assert_msg(strstr(rptx, want), "%s: no %s in the PTX", rname, want);
    ck_assert_msg(strstr(rptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") && strstr(rptx, "}, {%r"),
                  "%s: no wgmma with A from registers", rname);
    ck_assert_msg(!strstr(ptx, "}, {%r"), "%s: a wgmma with A from registers outside the A-shift kernel", name);
    printf("test_gemm: shape %-22s %3d registers\n", rname, ri.registers);
  }
  printf("test_gemm: shape %-10s %u stages %3d registers, %6u bytes shared, cold compile %4.0f ms\n", name, v.stages,
         info.registers, info.static_smem + info.dynamic_smem, info.compile_ms);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* Stage counts (gemm_variant_make): as many as fit, up to GEMM_MAX_STAGES, never at the cost of
 * a CTA per SM that 8 stages leave room for; and the stages the model counts. */
START_TEST(test_stage_counts) {
  static const struct {
    unsigned bm, bn, cm, stages, ctas;
  } want[] = {{64, 16, 1, 9, 2},  {64, 32, 1, 16, 1}, {64, 48, 2, 14, 1}, {64, 64, 1, 12, 1},
              {64, 128, 1, 8, 1}, {64, 256, 1, 5, 1}, {128, 16, 1, 11, 1}, {128, 64, 1, 8, 1},
              {128, 128, 2, 6, 1}, {128, 256, 1, 4, 1}};
  for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
    gemm_variant v;
    char name[16];
    ck_assert(gemm_variant_make(&v, name, want[i].bm, want[i].bn, want[i].cm));
    ck_assert_msg(v.stages == want[i].stages && gemm_ctas_per_sm(&v) == want[i].ctas, "%s: %u stages, %u a SM", name,
                  v.stages, gemm_ctas_per_sm(&v));
  }
  for (int i = GEMM_NUM_VARIANTS; i < GEMM_ALL_VARIANTS; i++) {
    const gemm_variant *v = gemm_variant_at(i);
    if (!v) continue;
    ck_assert_uint_le(v->stages, GEMM_MAX_STAGES);
    ck_assert_uint_le(gemm_smem_bytes(v, 1), GEMM_SMEM_CAP);
    gemm_variant d = *v;
    d.stages = v->stages < 8 ? v->stages : 8;
    ck_assert_uint_eq(gemm_ctas_per_sm(v), gemm_ctas_per_sm(&d));
    d.stages = v->stages + 1; /* one more would not fit, or would cost a CTA per SM */
    ck_assert(v->stages == GEMM_MAX_STAGES || gemm_smem_bytes(&d, 1) > GEMM_SMEM_CAP ||
              gemm_ctas_per_sm(&d) < gemm_ctas_per_sm(v));
  }
  const gemm_variant *v = gemm_variant_at(gemm_variant_find("64x32"));
  ck_assert_uint_eq(gemm_plan_stages(v, 32), 8);
  ck_assert_uint_eq(gemm_plan_stages(v, 33), 12);
  ck_assert_uint_eq(gemm_plan_stages(gemm_variant_at(gemm_variant_find("64x112")), 64), 9);
}
END_TEST

/* The host mirror of Args against the device struct. NVRTC has no constant offsetof, so a
 * probe kernel compiled with the tile function stores every offset as a constant, each
 * encoded as value * 1000 + index so that the PTX's immediates name themselves. */
#define NUM_LAYOUT 24

START_TEST(test_args_layout) {
  const unsigned long long host[NUM_LAYOUT] = {
      sizeof(gemm_args),          _Alignof(gemm_args),           offsetof(gemm_args, b),
      offsetof(gemm_args, d),     offsetof(gemm_args, ldd),      offsetof(gemm_args, ws),
      offsetof(gemm_args, ctr),   offsetof(gemm_args, group_sizes), offsetof(gemm_args, m),
      offsetof(gemm_args, n),     offsetof(gemm_args, k),        offsetof(gemm_args, tm),
      offsetof(gemm_args, tn),    offsetof(gemm_args, swizzle),  offsetof(gemm_args, along_n),
      offsetof(gemm_args, nk),    offsetof(gemm_args, kshift),   offsetof(gemm_args, sk_tiles),
      offsetof(gemm_args, sk_units), offsetof(gemm_args, sk_tail), offsetof(gemm_args, groups),
      offsetof(gemm_args, group_rows), offsetof(gemm_args, trans), offsetof(gemm_args, ashift)};
  const char *probe =
      "\nextern \"C\" __global__ void gemm_layout_probe(unsigned long long *out) {\n"
      "  const GemmArgs *p = (const GemmArgs *)0x10000;\n"
      "#define OFF(f) ((unsigned long long)((const char *)&p->f - (const char *)p))\n"
      "#define PUT(i, v) out[i] = (unsigned long long)(v) * 1000ull + i\n"
      "  PUT(0, sizeof(GemmArgs)); PUT(1, alignof(GemmArgs)); PUT(2, OFF(b)); PUT(3, OFF(d)); PUT(4, OFF(ldd));\n"
      "  PUT(5, OFF(ws)); PUT(6, OFF(ctr)); PUT(7, OFF(group_sizes)); PUT(8, OFF(m)); PUT(9, OFF(n));\n"
      "  PUT(10, OFF(k)); PUT(11, OFF(tm)); PUT(12, OFF(tn)); PUT(13, OFF(swizzle)); PUT(14, OFF(along_n));\n"
      "  PUT(15, OFF(nk)); PUT(16, OFF(kshift)); PUT(17, OFF(sk_tiles)); PUT(18, OFF(sk_units));\n"
      "  PUT(19, OFF(sk_tail)); PUT(20, OFF(groups)); PUT(21, OFF(group_rows)); PUT(22, OFF(trans));\n"
      "  PUT(23, OFF(ashift));\n"
      "}\n";
  clcrt_runtime *rt = rt_sm90();
  const char *src = clcrt_gemm_source();
  ck_assert_ptr_nonnull(src);
  char *full = malloc(strlen(src) + strlen(probe) + 1);
  ck_assert_ptr_nonnull(full);
  strcpy(full, src);
  strcat(full, probe);
  clcrt_tile_desc d = CLCRT_TILE_DESC_INIT;
  d.source = full;
  d.tile_fn = "gemm_tile";
  d.args_type = "GemmArgs";
  d.state_type = "GemmState";
  d.prologue_fn = "gemm_prologue";
  d.block = (clcrt_dim3){288, 1, 1};
  d.smem_bytes = gemm_smem_bytes(&GEMM_VARIANTS[0], 0);
  d.sched = CLCRT_SCHED_FIXED;
  clcrt_kernel *k = NULL;
  clcrt_status st = clcrt_register(rt, &d, &k);
  ck_assert_msg(st == CLCRT_OK, "%s", clcrt_errmsg(rt));
  const char *ptx = NULL;
  ck_assert_int_eq(clcrt_kernel_ptx(k, &ptx), CLCRT_OK);
  const char *body = strstr(ptx, ".entry gemm_layout_probe");
  ck_assert_ptr_nonnull(body);
  unsigned long long dev[NUM_LAYOUT];
  int found[NUM_LAYOUT] = {0};
  for (const char *q = strstr(body, "mov.u64"); q; q = strstr(q + 1, "mov.u64")) {
    const char *comma = strchr(q, ',');
    if (!comma) break;
    char *end;
    unsigned long long v = strtoull(comma + 1, &end, 10);
    if (end == comma + 1 || v < 1000) continue; /* not one of the probe's immediates */
    unsigned i = (unsigned)(v % 1000);
    if (i < NUM_LAYOUT) dev[i] = v / 1000, found[i] = 1;
  }
  static const char *names[NUM_LAYOUT] = {"sizeof", "alignof", "b",       "d",        "ldd",      "ws",
                                          "ctr",    "group_sizes", "m",   "n",        "k",        "tm",
                                          "tn",     "swizzle", "along_n", "nk",       "kshift",   "sk_tiles",
                                          "sk_units", "sk_tail", "groups", "group_rows", "trans", "ashift"};
  for (int i = 0; i < NUM_LAYOUT; i++) {
    ck_assert_msg(found[i], "the probe's value for %s is not in the PTX", names[i]);
    ck_assert_msg(dev[i] == host[i], "GemmArgs.%s: device %llu, host mirror gemm_args %llu", names[i], dev[i],
                  host[i]);
  }
  free(full);
  clcrt_runtime_destroy(rt);
}
END_TEST

/* The tool on one GEMM kernel, as a user would check it: compile, then inspect --json. */
START_TEST(test_tool_inspect) {
  const char *tool = getenv("CLCRT_TEST_TOOL");
  if (!tool || !*tool) tool = "build/clcrt";
  if (access(tool, X_OK) != 0) {
    printf("test_gemm: %s not built, tool check skipped\n", tool);
    return;
  }
  char dir[] = "/tmp/clcrt-test-gemm-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char src[128], cubin[128], out[128], cmd[2048];
  snprintf(src, sizeof src, "%s/gemm.cu", dir);
  snprintf(cubin, sizeof cubin, "%s/gemm.cubin", dir);
  snprintf(out, sizeof out, "%s/inspect.json", dir);
  FILE *f = fopen(src, "w");
  ck_assert_ptr_nonnull(f);
  fputs(clcrt_gemm_source(), f);
  fclose(f);
  const gemm_variant *v = &GEMM_VARIANTS[1]; /* 2-CTA clusters: the most registers */
  snprintf(cmd, sizeof cmd,
           "%s compile --arch sm_90a --fn gemm_tile --args GemmArgs --state GemmState --prologue gemm_prologue "
           "--sched steal --block %u --cluster %u --smem %u -X -DGEMM_BM=%u -X -DGEMM_BN=%u -X -DGEMM_CM=%u "
           "-X -DGEMM_STAGES=%u --no-cache -q -o %s %s && %s inspect --json %s > %s",
           tool, gemm_threads(v), v->cm, gemm_smem_bytes(v, 0), v->bm, v->bn, v->cm, v->stages, cubin, src, tool,
           cubin, out);
  int rc = system(cmd);
  ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "failed: %s", cmd);
  f = fopen(out, "r");
  ck_assert_ptr_nonnull(f);
  char buf[16384];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  ck_assert_msg(strstr(buf, "\"spills\": {\"loads\": 0, \"stores\": 0"), "inspect reports spills:\n%s", buf);
  ck_assert_msg(strstr(buf, "clcrt_steal_gemm_tile"), "inspect output lacks the kernel:\n%s", buf);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *gemm_suite(void) {
  Suite *s = suite_create("gemm");
  TCase *tc = tcase_create("host");
  tcase_add_test(tc, test_tensor_map_args);
  tcase_add_test(tc, test_map_promotion);
  tcase_add_test(tc, test_raster);
  tcase_add_loop_test(tc, test_grouped_map, 0, 3);
  tcase_add_test(tc, test_streamk_map);
  tcase_add_test(tc, test_streamk_fixup_order);
  tcase_add_test(tc, test_plan);
  tcase_add_test(tc, test_plan_trans);
  tcase_add_test(tc, test_plan_sk_sms);
  tcase_add_test(tc, test_plan_mem_bw);
  tcase_add_test(tc, test_kshift_choice);
  tcase_add_test(tc, test_plan_rows_off);
  tcase_add_test(tc, test_plan_model);
  tcase_add_test(tc, test_plan_c2_alignment);
  tcase_add_test(tc, test_plan_c2_one);
  tcase_add_test(tc, test_plan_c2_short);
  tcase_add_test(tc, test_stage_counts);
  tcase_add_test(tc, test_measured);
  suite_add_tcase(s, tc);
  TCase *tk = tcase_create("kernels");
  tcase_set_timeout(tk, 240);
  tcase_add_loop_test(tk, test_compile, 0, GEMM_NUM_VARIANTS * 6);
  tcase_add_loop_test(tk, test_compile_trans, 0, 9);
  tcase_add_loop_test(tk, test_compile_shapes, 0, (int)(sizeof SHAPES / sizeof SHAPES[0]));
  tcase_add_test(tk, test_args_layout);
  tcase_add_test(tk, test_tool_inspect);
  suite_add_tcase(s, tk);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(gemm_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
