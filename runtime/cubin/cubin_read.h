/* The cubin reader's internals, shared by its two files: cubin.c checks the ELF frame and reads
 * the sections and the symbols; cubin_info.c reads what NVIDIA keeps in them (the .nv.info
 * attribute records, the notes, the compatibility section, instruction words). Both treat the
 * file as hostile, as cubin.c's opening comment says. */
#ifndef CLCRT_CUBIN_READ_H
#define CLCRT_CUBIN_READ_H
#include <stddef.h>
#include <stdint.h>

#include "cubin.h"

typedef struct clcrt__cubin_sect {
  uint32_t name_off, type, link, info;
  uint64_t offset, size, entsize;
  const char *name; /* points into the file's .shstrtab, NUL-terminated inside it, or "" */
} clcrt__cubin_sect;

/* The file being read, where a failure's message goes, and its section headers. */
typedef struct clcrt__cubin_ctx {
  const uint8_t *d;
  size_t n;
  char *err;
  size_t errlen;
  int oom;
  clcrt__cubin_sect *sh;
  size_t shnum;
} clcrt__cubin_ctx;

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* True when [off, off+len) lies inside a buffer of n bytes; written so that no sum can wrap. */
static inline int in_range(size_t n, uint64_t off, uint64_t len) { return off <= n && len <= n - off; }

/* Writes the message into c's buffer (cubin.c); returns -1. */
int clcrt__cubin_fail(clcrt__cubin_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Marks c out of memory and says so; returns -1. */
int clcrt__cubin_oom(clcrt__cubin_ctx *c);

/* The records of a kernel's .nv.info.<kernel> section into k (text: the kernel's code, for the
 * spill annotations). 0, or -1 with a message. */
int clcrt__cubin_kernel_info(clcrt__cubin_ctx *c, clcrt__cubin_kernel *k, const clcrt__cubin_sect *info,
                             const clcrt__cubin_sect *text);
/* The module-level .nv.info: records keyed by symbol index, into the kernels that
 * sym_to_kernel maps them to, or kept raw. 0, or -1 with a message. */
int clcrt__cubin_module_info(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *info,
                             const uint32_t *sym_to_kernel, size_t nsyms);
/* The compatibility section (SHT_NV_COMPAT): whether the cubin is for an `a` architecture. */
void clcrt__cubin_compat(const clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *s);
/* A note section: the virtual SM and toolkit version, the producing tool and its command line.
 * 0 (a damaged note is ignored), or -1 out of memory. */
int clcrt__cubin_notes(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *s);
#endif
