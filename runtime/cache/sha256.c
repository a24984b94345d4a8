/* SHA-256 after FIPS 180-4, section 6.2. The portable block function is a direct
 * transcription of the standard; the x86 one is the well-known SHA-NI sequence (Intel's
 * "SHA extensions" white paper, as in Linux and OpenSSL), written as a loop over the
 * sixteen four-round groups. Both are checked against the FIPS vectors in
 * tests/test_cache.c. */
#include "sha256.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CLCRT__SHA_X86 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static uint32_t load_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Processes n whole 64-byte blocks. */
static void blocks_portable(uint32_t h[8], const uint8_t *p, size_t n) {
  for (; n; n--, p += 64) {
    uint32_t w[64];
    for (int t = 0; t < 16; t++) w[t] = load_be32(p + 4 * t);
    for (int t = 16; t < 64; t++) {
      uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
      uint32_t S1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = hh + S1 + ch + K[t] + w[t];
      uint32_t S0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = S0 + maj;
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
}

#ifdef CLCRT__SHA_X86
/* The state lives as two registers, ABEF and CDGH, which is what sha256rnds2 expects.
 * Group g does rounds 4g..4g+3; the message schedule runs one group ahead with msg1 and
 * msg2 on a ring of four registers. */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_x86(uint32_t h[8], const uint8_t *p, size_t n) {
  const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128((const __m128i *)&h[0]);
  __m128i s1 = _mm_loadu_si128((const __m128i *)&h[4]);
  tmp = _mm_shuffle_epi32(tmp, 0xB1);       /* CDAB */
  s1 = _mm_shuffle_epi32(s1, 0x1B);         /* EFGH */
  __m128i s0 = _mm_alignr_epi8(tmp, s1, 8); /* ABEF */
  s1 = _mm_blend_epi16(s1, tmp, 0xF0);      /* CDGH */
  for (; n; n--, p += 64) {
    __m128i abef = s0, cdgh = s1, w[4];
    for (int g = 0; g < 16; g++) {
      if (g < 4) w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), mask);
      __m128i m = _mm_add_epi32(w[g & 3], _mm_loadu_si128((const __m128i *)&K[4 * g]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, m);
      if (g >= 3 && g <= 14) {
        __m128i t = _mm_alignr_epi8(w[g & 3], w[(g + 3) & 3], 4);
        w[(g + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[(g + 1) & 3], t), w[g & 3]);
      }
      m = _mm_shuffle_epi32(m, 0x0E);
      s0 = _mm_sha256rnds2_epu32(s0, s1, m);
      if (g >= 1 && g <= 12) w[(g + 3) & 3] = _mm_sha256msg1_epu32(w[(g + 3) & 3], w[g & 3]);
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  tmp = _mm_shuffle_epi32(s0, 0x1B);   /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);    /* DCHG */
  s0 = _mm_blend_epi16(tmp, s1, 0xF0); /* DCBA */
  s1 = _mm_alignr_epi8(s1, tmp, 8);    /* ABEF */
  _mm_storeu_si128((__m128i *)&h[0], s0);
  _mm_storeu_si128((__m128i *)&h[4], s1);
}

static int cpu_has_sha(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & bit_SSSE3) || !(c & bit_SSE4_1)) return 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (b >> 29) & 1; /* CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29] */
}
#endif

typedef void (*blocks_fn)(uint32_t h[8], const uint8_t *p, size_t n);
static blocks_fn g_blocks; /* chosen on first use; a benign race: every thread picks the same */
static int g_force_portable;

static blocks_fn pick(void) {
  blocks_fn f = __atomic_load_n(&g_blocks, __ATOMIC_RELAXED);
  if (f) return f;
  f = blocks_portable;
#ifdef CLCRT__SHA_X86
  if (!__atomic_load_n(&g_force_portable, __ATOMIC_RELAXED) && cpu_has_sha()) f = blocks_x86;
#endif
  __atomic_store_n(&g_blocks, f, __ATOMIC_RELAXED);
  return f;
}

int clcrt__sha256_force_portable(int on) {
  __atomic_store_n(&g_force_portable, on, __ATOMIC_RELAXED);
  __atomic_store_n(&g_blocks, (blocks_fn)0, __ATOMIC_RELAXED);
  return pick() != blocks_portable;
}

void clcrt__sha256_init(clcrt__sha256_ctx *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->bytes = 0;
  c->nbuf = 0;
}

void clcrt__sha256_update(clcrt__sha256_ctx *c, const void *data, size_t n) {
  const uint8_t *p = data;
  blocks_fn blocks = pick();
  c->bytes += n;
  if (c->nbuf) {
    size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
    memcpy(c->buf + c->nbuf, p, take);
    c->nbuf += take, p += take, n -= take;
    if (c->nbuf < 64) return;
    blocks(c->h, c->buf, 1);
    c->nbuf = 0;
  }
  if (n >= 64) {
    blocks(c->h, p, n / 64);
    p += n & ~(size_t)63;
    n &= 63;
  }
  memcpy(c->buf, p, n);
  c->nbuf = n;
}

void clcrt__sha256_final(clcrt__sha256_ctx *c, uint8_t out[CLCRT__SHA256_BYTES]) {
  uint64_t bits = c->bytes * 8;
  uint8_t pad[72] = {0x80};
  size_t npad = (c->nbuf < 56 ? 56 : 120) - c->nbuf; /* up to the last 8 bytes of a block */
  for (int i = 0; i < 8; i++) pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
  clcrt__sha256_update(c, pad, npad + 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (uint8_t)(c->h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
    out[4 * i + 3] = (uint8_t)c->h[i];
  }
}

void clcrt__sha256_once(const void *data, size_t n, uint8_t out[CLCRT__SHA256_BYTES]) {
  clcrt__sha256_ctx c;
  clcrt__sha256_init(&c);
  clcrt__sha256_update(&c, data, n);
  clcrt__sha256_final(&c, out);
}

void clcrt__sha256_field(clcrt__sha256_ctx *c, const void *data, size_t n) {
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)n >> (8 * i));
  clcrt__sha256_update(c, len, sizeof len);
  clcrt__sha256_update(c, data, n);
}

void clcrt__sha256_str(clcrt__sha256_ctx *c, const char *s) {
  static const uint8_t null_marker = 0xff;
  if (!s) {
    /* A length no string can have, so NULL never collides with any string. */
    uint8_t len[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    clcrt__sha256_update(c, len, sizeof len);
    clcrt__sha256_update(c, &null_marker, 1);
    return;
  }
  clcrt__sha256_field(c, s, strlen(s));
}

void clcrt__hex(const uint8_t *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = 0;
}
