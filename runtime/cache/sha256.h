/* SHA-256 (FIPS 180-4), streaming. The compile cache keys and checksums its entries with
 * it. The portable code is the whole algorithm; on x86-64 CPUs with the SHA extensions
 * the block function uses them (chosen once at run time), and the tests check both paths
 * against the FIPS 180-4 vectors. */
#ifndef CLCRT_SHA256_H
#define CLCRT_SHA256_H
#include <stddef.h>
#include <stdint.h>

#define CLCRT__SHA256_BYTES 32

typedef struct clcrt__sha256 {
  uint32_t h[8];
  uint64_t bytes;  /* message length so far */
  uint8_t buf[64]; /* a partial block */
  size_t nbuf;
} clcrt__sha256_ctx;

void clcrt__sha256_init(clcrt__sha256_ctx *c);
void clcrt__sha256_update(clcrt__sha256_ctx *c, const void *data, size_t n);
void clcrt__sha256_final(clcrt__sha256_ctx *c, uint8_t out[CLCRT__SHA256_BYTES]);
/* One shot. */
void clcrt__sha256_once(const void *data, size_t n, uint8_t out[CLCRT__SHA256_BYTES]);

/* Feeds a length-prefixed field (8-byte little-endian length, then the bytes), so that
 * consecutive fields can never run into one another: ("ab","c") and ("a","bc") differ. */
void clcrt__sha256_field(clcrt__sha256_ctx *c, const void *data, size_t n);
/* The same for a C string; NULL hashes differently from "". */
void clcrt__sha256_str(clcrt__sha256_ctx *c, const char *s);

/* Lower-case hex of n bytes into out, which holds 2n+1 characters. */
void clcrt__hex(const uint8_t *in, size_t n, char *out);

/* Test hook: 1 forces the portable block function, 0 restores the automatic choice.
 * Returns 1 when the CPU's SHA extensions are in use (after the call). */
int clcrt__sha256_force_portable(int on);
#endif
