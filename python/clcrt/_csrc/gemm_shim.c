/* The GEMM example's host side for the Python package: thin calls into examples/gemm/gemm.h,
 * so that clcrt.ops follows whatever plan that header makes without a copy of it in Python.
 * When gemm.h's functions change, this file is the one place to adapt (see shim.h). */
#include <string.h>

#include "shim.h"
#include "user_src.h" /* first: its declaration of user_src must not see the #define below */

/* gemm.h finds its tile source in user_src, the table that programs link from user_src.o
 * (declared in the generated user_src.h). The package ships gemm.cu as a file instead (its own
 * copy, which a user can read), so the table gemm.h reads here is this one, filled by
 * clcrt_py_gemm_set_source. The name is redirected only inside this file; libclcrt itself never
 * reads the table. */
static user_src_file py_user_src[2];
#define user_src py_user_src
#include "gemm.h"
#undef user_src

void clcrt_py_gemm_set_source(const char *src) {
  py_user_src[0].name = src ? "gemm.cu" : NULL;
  py_user_src[0].text = src;
  py_user_src[0].len = src ? strlen(src) : 0;
}

const char *clcrt_py_gemm_variant(int i, unsigned *shape) {
  if (i < 0 || i >= GEMM_NUM_VARIANTS) return NULL;
  const gemm_variant *v = &GEMM_VARIANTS[i];
  if (shape) shape[0] = v->bm, shape[1] = v->bn, shape[2] = v->cm, shape[3] = v->stages, shape[4] = v->epi;
  return v->name;
}

unsigned clcrt_py_gemm_max_groups(void) { return GEMM_MAX_GROUPS; }

/* The variant the plan picks when the caller leaves it (-1): today's default, the first. */
static const gemm_variant *pick(int variant, int *index) {
  if (variant < 0) variant = 0;
  if (variant >= GEMM_NUM_VARIANTS) return NULL;
  *index = variant;
  return &GEMM_VARIANTS[variant];
}

clcrt_status clcrt_py_gemm_register(clcrt_runtime *rt, int variant, int sched, int grouped, clcrt_kernel **out) {
  int i = 0;
  const gemm_variant *v = pick(variant, &i);
  if (!out) return CLCRT_E_INVALID;
  *out = NULL;
  /* gemm_register prints when the source is missing; the package always sets it first. */
  if (!v || !py_user_src[0].text) return CLCRT_E_INVALID;
  return gemm_register(rt, v, (clcrt_sched)sched, grouped != 0, out);
}

static clcrt_status launch_check(const clcrt_py_gemm_launch *out, void *args, size_t cap) {
  if (!out || out->size != sizeof *out || !args || cap < sizeof(gemm_args)) return CLCRT_E_INVALID;
  return CLCRT_OK;
}

clcrt_status clcrt_py_gemm_dense(clcrt_runtime *rt, int variant, int num_sms, uint64_t A, uint64_t B, uint64_t D,
                                 unsigned m, unsigned n, unsigned k, uint64_t ws, uint64_t ctr, void *args,
                                 size_t args_cap, clcrt_py_gemm_launch *out) {
  int i = 0;
  clcrt_status st = launch_check(out, args, args_cap);
  if (st != CLCRT_OK || !pick(variant, &i)) return CLCRT_E_INVALID;
  /* gemm_plan_dense's variant and decomposition; a variant asked for keeps the plan's rule
   * for its decomposition. The same inputs give the same plan, so the call with the
   * workspace matches the one that sized it. */
  gemm_plan p = gemm_plan_dense(m, n, k, gemm_load_align(A, B, k), num_sms);
  if (variant >= 0 && variant != p.variant) {
    p.variant = variant;
    gemm_plan_share(&p, GEMM_SHARE_TAIL, m, n, k, num_sms);
  }
  gemm_args a;
  if ((st = gemm_dense_args(rt, &p, &a, A, B, D, m, n, k, ws, ctr)) != CLCRT_OK) return st;
  const gemm_variant *v = &GEMM_VARIANTS[p.variant];
  clcrt_dim3 t = gemm_dense_tiles(v, &a);
  out->variant = p.variant;
  out->splits = a.sk_units ? a.sk_units / a.sk_tiles : 1;
  out->tiles[0] = t.x, out->tiles[1] = t.y, out->tiles[2] = t.z;
  out->ws_bytes = gemm_ws_bytes(v, &a);
  out->ctr_bytes = gemm_ctr_bytes(v, &a);
  out->args_bytes = sizeof a;
  memcpy(args, &a, sizeof a);
  return CLCRT_OK;
}

clcrt_status clcrt_py_gemm_grouped(clcrt_runtime *rt, int variant, uint64_t A, uint64_t B, uint64_t D,
                                   unsigned total_rows, unsigned n, unsigned k, unsigned groups, uint64_t sizes,
                                   void *args, size_t args_cap, clcrt_py_gemm_launch *out) {
  int i = 0;
  const gemm_variant *v = pick(variant, &i);
  clcrt_status st = launch_check(out, args, args_cap);
  /* gemm_grouped_args prints when the count is out of range; the package checks it first. */
  if (st != CLCRT_OK || !v || groups == 0 || groups > GEMM_MAX_GROUPS) return CLCRT_E_INVALID;
  gemm_args a;
  if ((st = gemm_grouped_args(rt, v, &a, A, B, D, total_rows, n, k, groups, sizes, 0)) != CLCRT_OK) return st;
  clcrt_dim3 t = gemm_grouped_tiles(v, &a);
  out->variant = i;
  out->splits = 1;
  out->tiles[0] = t.x, out->tiles[1] = t.y, out->tiles[2] = t.z;
  out->ws_bytes = out->ctr_bytes = 0;
  out->args_bytes = sizeof a;
  memcpy(args, &a, sizeof a);
  return CLCRT_OK;
}
