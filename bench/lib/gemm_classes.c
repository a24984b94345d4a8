/* The GEMM benchmark's dense shapes, by class (bench/bench_gemm.c times them):
 *   bench    this benchmark's first 11 shapes;
 *   model    projections of public model layers, M (tokens) from 64 to 16384;
 *   odd      every dimension divisible by no tile;
 *   gemv     M <= 16;
 *   decode   decode projections, M from 1 to 64, of eleven public models (the table names
 *            each layer);
 *   vocab    language-model heads: N the vocabulary, K the hidden size, M from 1 to 3000;
 *   align16  operands at random 16-byte offsets (bgemm_offsets16), as row slices give;
 *   gen      drawn from the run's seed (bgemm_gen), from the sizes real layers have.
 * N x K of a projection is (out x in features) of the checkpoint's config.json on Hugging Face
 * (hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, head_dim,
 * vocab_size); fused projections as serving engines fuse them: qkv = q + k + v rows, gate_up
 * = 2 x intermediate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gemm_bench.h"

const char *const bgemm_classes[] = {"bench", "model", "odd", "gemv", "decode", "vocab", "align16", "gen", NULL};

/* quick: 1 marks the few shapes --quick runs of the class. */
typedef struct table_row {
  const char *cls, *label;
  unsigned m, n, k;
  int quick;
} table_row;
static const table_row TABLE[] = {
    /* bench: the shapes this benchmark had first */
    {"bench", "square", 4096, 4096, 4096, 1},
    {"bench", "square", 8192, 8192, 8192, 0},
    {"bench", "llm", 128, 8192, 8192, 1},
    {"bench", "llm", 128, 28672, 8192, 0},
    {"bench", "llm", 128, 8192, 28672, 0},
    {"bench", "llm", 1024, 8192, 8192, 0},
    {"bench", "llm", 1024, 28672, 8192, 1},
    {"bench", "llm", 1024, 8192, 28672, 0},
    {"bench", "llm", 8192, 8192, 8192, 0},
    {"bench", "llm", 8192, 28672, 8192, 0},
    {"bench", "llm", 8192, 8192, 28672, 0},
    /* model: Llama-3 8B and 70B, DeepSeek-V3 (MLA: q_a, kv_a, q_b, kv_b), Qwen2.5 7B and 72B,
       Mixtral 8x7B's experts */
    {"model", "llama3-8b qkv", 1024, 6144, 4096, 0},
    {"model", "llama3-8b o", 4096, 4096, 4096, 1},
    {"model", "llama3-8b gate_up", 2048, 28672, 4096, 0},
    {"model", "llama3-8b down", 512, 4096, 14336, 0},
    {"model", "llama3-8b down", 16384, 4096, 14336, 0},
    {"model", "llama3-70b qkv", 256, 10240, 8192, 0},
    {"model", "llama3-70b qkv", 4096, 10240, 8192, 0},
    {"model", "llama3-70b o", 2048, 8192, 8192, 0},
    {"model", "llama3-70b gate_up", 512, 57344, 8192, 0},
    {"model", "llama3-70b down", 128, 8192, 28672, 1},
    {"model", "llama3-70b down", 4096, 8192, 28672, 0},
    {"model", "dsv3 q_a", 4096, 1536, 7168, 0},
    {"model", "dsv3 kv_a", 2048, 576, 7168, 0},
    {"model", "dsv3 q_b", 512, 24576, 1536, 0},
    {"model", "dsv3 kv_b", 4096, 32768, 512, 0},
    {"model", "dsv3 o", 1024, 7168, 16384, 0},
    {"model", "dsv3 gate_up", 16384, 36864, 7168, 0},
    {"model", "dsv3 down", 256, 7168, 18432, 0},
    {"model", "qwen2.5-72b gate_up", 1024, 59136, 8192, 0},
    {"model", "qwen2.5-72b down", 2048, 8192, 29568, 0},
    {"model", "qwen2.5-7b qkv", 8192, 4608, 3584, 0},
    {"model", "qwen2.5-7b down", 300, 3584, 18944, 0},
    {"model", "mixtral expert w1", 64, 14336, 4096, 0},
    {"model", "mixtral expert w2", 3000, 4096, 14336, 0},
    /* odd: dimensions that divide by no tile */
    {"odd", "odd", 2999, 5003, 4104, 1},
    {"odd", "odd", 1537, 3011, 2056, 0},
    {"odd", "odd", 5555, 3333, 1112, 0},
    {"odd", "odd", 777, 12289, 4096, 0},
    {"odd", "odd", 4097, 4097, 4096, 0},
    {"odd", "odd", 333, 7777, 2992, 0},
    /* gemv: M <= 16 */
    {"gemv", "llama3-8b gate_up", 1, 28672, 4096, 1},
    {"gemv", "llama3-8b down", 1, 4096, 14336, 0},
    {"gemv", "llama3-70b qkv", 1, 10240, 8192, 0},
    {"gemv", "llama3-70b down", 4, 8192, 28672, 0},
    {"gemv", "dsv3 o", 8, 7168, 16384, 0},
    {"gemv", "qwen2.5-72b gate_up", 16, 59136, 8192, 0},
    {"gemv", "llama3-8b o", 16, 4096, 4096, 0},
    /* decode, M 1..64. Llama-3.1-8B: hidden 4096, intermediate 14336, 32 heads and 8 KV heads
       of 128. */
    {"decode", "llama3.1-8b qkv", 1, 6144, 4096, 0},
    {"decode", "llama3.1-8b o", 8, 4096, 4096, 0},
    {"decode", "llama3.1-8b gate_up", 32, 28672, 4096, 0},
    {"decode", "llama3.1-8b down", 64, 4096, 14336, 0},
    /* Llama-3.1-70B: 8192, 28672, 64 and 8 heads of 128 */
    {"decode", "llama3.1-70b qkv", 16, 10240, 8192, 0},
    {"decode", "llama3.1-70b o", 2, 8192, 8192, 0},
    {"decode", "llama3.1-70b gate_up", 24, 57344, 8192, 0},
    {"decode", "llama3.1-70b down", 48, 8192, 28672, 0},
    /* Mistral-7B (v0.1, v0.3): 4096, 14336, 32 and 8 heads of 128 */
    {"decode", "mistral-7b qkv", 4, 6144, 4096, 0},
    {"decode", "mistral-7b down", 12, 4096, 14336, 0},
    /* Mistral-Nemo-12B: 5120, 14336, 32 and 8 heads of 128 (q is 4096 wide) */
    {"decode", "mistral-nemo qkv", 32, 6144, 5120, 0},
    {"decode", "mistral-nemo o", 1, 5120, 4096, 0},
    {"decode", "mistral-nemo gate_up", 40, 28672, 5120, 0},
    /* Qwen2.5-7B: 3584, 18944, 28 and 4 heads of 128 */
    {"decode", "qwen2.5-7b qkv", 8, 4608, 3584, 1},
    {"decode", "qwen2.5-7b o", 20, 3584, 3584, 0},
    {"decode", "qwen2.5-7b gate_up", 64, 37888, 3584, 0},
    {"decode", "qwen2.5-7b down", 1, 3584, 18944, 0},
    /* Qwen2.5-14B: 5120, 13824, 40 and 8 heads of 128 */
    {"decode", "qwen2.5-14b qkv", 4, 7168, 5120, 0},
    {"decode", "qwen2.5-14b gate_up", 16, 27648, 5120, 0},
    {"decode", "qwen2.5-14b down", 40, 5120, 13824, 0},
    /* Qwen2.5-32B: 5120, 27648, 40 and 8 heads of 128 */
    {"decode", "qwen2.5-32b o", 64, 5120, 5120, 0},
    {"decode", "qwen2.5-32b gate_up", 1, 55296, 5120, 0},
    {"decode", "qwen2.5-32b down", 24, 5120, 27648, 0},
    /* Gemma-2-9B: 3584, 14336, 16 and 8 heads of 256 (q is 4096 wide) */
    {"decode", "gemma2-9b qkv", 2, 8192, 3584, 0},
    {"decode", "gemma2-9b o", 32, 3584, 4096, 0},
    {"decode", "gemma2-9b gate_up", 8, 28672, 3584, 0},
    {"decode", "gemma2-9b down", 56, 3584, 14336, 0},
    /* Gemma-2-27B: 4608, 36864, 32 and 16 heads of 128 */
    {"decode", "gemma2-27b qkv", 48, 8192, 4608, 0},
    {"decode", "gemma2-27b gate_up", 4, 73728, 4608, 1},
    {"decode", "gemma2-27b down", 16, 4608, 36864, 0},
    /* Phi-3-medium: 5120, 17920, 40 and 10 heads of 128 (qkv_proj and gate_up_proj fused in
       the checkpoint) */
    {"decode", "phi3-medium qkv", 1, 7680, 5120, 0},
    {"decode", "phi3-medium gate_up", 32, 35840, 5120, 0},
    {"decode", "phi3-medium down", 8, 5120, 17920, 0},
    /* DeepSeek-V3: 7168; MLA q_lora 1536, kv_lora 512 + rope 64, 128 heads (q 192, kv 256
       wide each), o from 128 x 128; the shared expert's intermediate 2048 */
    {"decode", "dsv3 q_a", 64, 1536, 7168, 0},
    {"decode", "dsv3 kv_a", 4, 576, 7168, 0},
    {"decode", "dsv3 q_b", 16, 24576, 1536, 0},
    {"decode", "dsv3 kv_b", 32, 32768, 512, 0},
    {"decode", "dsv3 o", 1, 7168, 16384, 0},
    {"decode", "dsv3 shared gate_up", 8, 4096, 7168, 0},
    {"decode", "dsv3 shared down", 64, 7168, 2048, 0},
    /* vocab: lm_head, N = vocab_size, K = hidden_size; M 1..3000 (decode batches, and the
       logits of whole prompts: scoring, training) */
    {"vocab", "llama3.1-8b lm_head", 1, 128256, 4096, 1},
    {"vocab", "llama3.1-8b lm_head", 2048, 128256, 4096, 0},
    {"vocab", "llama3.1-70b lm_head", 32, 128256, 8192, 0},
    {"vocab", "qwen2.5-7b lm_head", 8, 152064, 3584, 0},
    {"vocab", "qwen2.5-7b lm_head", 777, 152064, 3584, 1},
    {"vocab", "qwen2.5-14b lm_head", 64, 152064, 5120, 0},
    {"vocab", "qwen3-8b lm_head", 4, 151936, 4096, 0},
    {"vocab", "qwen3-32b lm_head", 300, 151936, 5120, 0},
    {"vocab", "mistral-7b-v0.3 lm_head", 16, 32768, 4096, 0},
    {"vocab", "mistral-7b-v0.1 lm_head", 512, 32000, 4096, 0},
    {"vocab", "mistral-nemo lm_head", 256, 131072, 5120, 0},
    {"vocab", "gemma2-9b lm_head", 1, 256000, 3584, 0},
    {"vocab", "gemma2-9b lm_head", 3000, 256000, 3584, 0},
    {"vocab", "gemma2-27b lm_head", 24, 256000, 4608, 0},
    {"vocab", "phi3-medium lm_head", 128, 32064, 5120, 0},
    {"vocab", "dsv3 lm_head", 2, 129280, 7168, 0},
    {"vocab", "dsv3 lm_head", 1536, 129280, 7168, 0},
    /* align16: the same kinds of shapes, A and B each at a random 16-byte offset */
    {"align16", "square", 4096, 4096, 4096, 1},
    {"align16", "llama3-70b qkv", 4096, 10240, 8192, 0},
    {"align16", "llama3-8b down", 1024, 4096, 14336, 0},
    {"align16", "gemv", 1, 28672, 4096, 0},
    {"align16", "llama3.1-8b qkv", 24, 6144, 4096, 1},
    {"align16", "qwen2.5-7b down", 300, 3584, 18944, 0},
    {"align16", "qwen2.5-7b lm_head", 4, 152064, 3584, 0},
    {"align16", "odd", 777, 12289, 4096, 0},
};
#define TABLE_N ((int)(sizeof TABLE / sizeof TABLE[0]))

/* ---- numbers from a seed ---------------------------------------------------------------- */

static uint64_t mix(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double urand(uint64_t *s) { return (double)(mix(s) >> 11) * (1.0 / 9007199254740992.0); }
/* An integer log-uniform in [lo, hi]. */
static unsigned log_uniform(uint64_t *s, unsigned lo, unsigned hi) {
  unsigned x = (unsigned)floor(exp(log((double)lo) + urand(s) * (log((double)hi + 1.0) - log((double)lo))));
  return x < lo ? lo : x > hi ? hi : x;
}

int bgemm_seed_parse(const char *arg, uint64_t *seed) {
  if (!strcmp(arg, "random")) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t s = ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec) ^ ((uint64_t)getpid() << 40);
    /* Mixed, then kept to 32 bits: a seed someone retypes. */
    *seed = mix(&s) & 0xffffffffull;
    return 1;
  }
  char *end;
  unsigned long long v = strtoull(arg, &end, 0);
  if (!*arg || *end || *arg == '-') return 0;
  *seed = v;
  return 1;
}

/* ---- selection -------------------------------------------------------------------------- */

static int listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
    if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
  return 0;
}

const char *bgemm_classes_check(const char *list, char *bad, size_t n) {
  for (const char *p = list;;) { /* every name, the empty ones ("a,,b", "a,") too */
    const char *e = strchr(p, ',');
    const size_t l = e ? (size_t)(e - p) : strlen(p);
    int known = 0;
    for (int i = 0; bgemm_classes[i]; i++) known |= strlen(bgemm_classes[i]) == l && !strncmp(bgemm_classes[i], p, l);
    if (!known) {
      snprintf(bad, n, "%.*s", (int)l, p);
      return bad;
    }
    if (!e) return NULL;
    p = e + 1;
  }
}

int bgemm_select_bound(unsigned gen) { return TABLE_N + (int)gen; }

int bgemm_select(const char *list, int quick, unsigned gen, uint64_t seed, bgemm_shape *out, int cap) {
  int n = 0;
  for (int i = 0; i < TABLE_N && n < cap; i++)
    if ((!list || listed(list, TABLE[i].cls)) && (!quick || TABLE[i].quick)) {
      const table_row *r = &TABLE[i];
      bgemm_shape *o = &out[n++];
      memset(o, 0, sizeof *o);
      o->cls = r->cls, o->m = r->m, o->n = r->n, o->k = r->k, o->quick = r->quick;
      snprintf(o->label, sizeof o->label, "%s", r->label);
    }
  if (!list || listed(list, "gen")) {
    if ((unsigned)(cap - n) < gen) gen = (unsigned)(cap - n);
    bgemm_gen(seed, gen, out + n);
    n += (int)gen;
  }
  return n;
}

/* ---- the generated class ------------------------------------------------------------------ */

/* Hidden sizes of open models (Llama, Mistral, Qwen, Gemma, Phi, DeepSeek, from 2048 to 8192)
 * and vocabularies (Llama-2/Mistral 32000, Phi-3 32064, Mistral v0.3 32768, Llama-3 128256,
 * DeepSeek-V3 129280, Mistral-Nemo 131072, Qwen3 151936, Qwen2.5 152064, Gemma 256000). */
static const unsigned HIDDEN[] = {2048, 2560, 3072, 3584, 4096, 5120, 7168, 8192};
static const unsigned VOCAB[] = {32000, 32064, 32768, 128256, 129280, 131072, 151936, 152064, 256000};

/* Each shape, independently:
 *   layer   qkv 20%, o 14%, gate_up 20%, up 10%, down 28%, lm_head 8% (the vocab);
 *   hidden  H uniform over HIDDEN;
 *   inter   I = H x f, f uniform in [2.6875, 5.375] (Qwen2.5-14B's 2.7 to Qwen2.5-7B's 5.29),
 *           rounded to a multiple of 128 (half the draws), 64 (35%) or only 8 (15%: odd, as
 *           some models have; K must stay a multiple of 8);
 *   qkv     N = H + 2 x 128 x kv heads, kv heads 2, 4 or 8, or H / 128 (no grouping);
 *   M       a quarter decode sizes, log-uniform in 1..64, the rest log-uniform in 1..16384;
 *           at most 4096 for the lm_head (the logits of a few thousand tokens at once). */
void bgemm_gen(uint64_t seed, unsigned n, bgemm_shape *out) {
  uint64_t s = seed ^ 0x67656e2d636c6173ull;
  for (unsigned i = 0; i < n; i++) {
    bgemm_shape *g = &out[i];
    memset(g, 0, sizeof *g);
    g->cls = "gen";
    const unsigned h = HIDDEN[mix(&s) % (sizeof HIDDEN / sizeof HIDDEN[0])];
    const double f = 2.6875 + urand(&s) * (5.375 - 2.6875), r = urand(&s);
    const unsigned round_to = r < 0.5 ? 128 : r < 0.85 ? 64 : 8;
    const unsigned inter = (unsigned)floor(h * f / round_to + 0.5) * round_to;
    const double kind = urand(&s);
    g->m = urand(&s) < 0.25 ? log_uniform(&s, 1, 64) : log_uniform(&s, 1, 16384);
    if (kind < 0.20) {
      static const unsigned kvh[] = {2, 4, 8, 0};
      unsigned kv = kvh[mix(&s) % 4];
      kv = kv ? kv : h / 128;
      g->n = h + 2 * 128 * kv, g->k = h;
      snprintf(g->label, sizeof g->label, "qkv h%u kv%u", h, kv);
    } else if (kind < 0.34) {
      g->n = h, g->k = h;
      snprintf(g->label, sizeof g->label, "o h%u", h);
    } else if (kind < 0.54) {
      g->n = 2 * inter, g->k = h;
      snprintf(g->label, sizeof g->label, "gate_up h%u i%u", h, inter);
    } else if (kind < 0.64) {
      g->n = inter, g->k = h;
      snprintf(g->label, sizeof g->label, "up h%u i%u", h, inter);
    } else if (kind < 0.92) {
      g->n = h, g->k = inter;
      snprintf(g->label, sizeof g->label, "down h%u i%u", h, inter);
    } else {
      g->n = VOCAB[mix(&s) % (sizeof VOCAB / sizeof VOCAB[0])], g->k = h;
      if (g->m > 4096) g->m = log_uniform(&s, 1, 4096);
      snprintf(g->label, sizeof g->label, "lm_head v%u h%u", g->n, h);
    }
  }
}

/* ---- align16 -------------------------------------------------------------------------------- */

void bgemm_offsets16(uint64_t seed, const bgemm_shape *sh, unsigned *a_off, unsigned *b_off) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the label, then the dimensions */
  for (const char *p = sh->label; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
  h ^= ((uint64_t)sh->m * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)sh->n << 21) ^ ((uint64_t)sh->k << 42);
  uint64_t s = seed ^ mix(&h);
  *a_off = 16u * (unsigned)(mix(&s) % 8);
  *b_off = 16u * (unsigned)(mix(&s) % 8);
}
