/* A bounds-checked cubin reader. Every offset, size and count in the file is treated as
 * hostile: each is checked against the bytes we actually have, with arithmetic that cannot
 * overflow, before anything is read. Nothing here trusts alignment either; multi-byte
 * fields are assembled byte by byte. The facts it relies on are in shared/CUBIN-NOTES.md;
 * anything the notes do not establish is kept raw instead of being given a meaning. */
#include "cubin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define EM_CUDA 190
#define SHT_SYMTAB 2
#define SHT_NOTE 7
#define SHT_NOBITS 8
#define SHT_NV_INFO 0x70000000u
#define SHT_NV_COMPAT 0x70000086u
#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10
#define SHN_XINDEX 0xffff

/* Attribute ids from CUBIN-NOTES. */
enum {
  EI_MAX_THREADS = 0x05, EI_PARAM_CBANK = 0x0a, EI_REQNTID = 0x10, EI_FRAME_SIZE = 0x11,
  EI_MIN_STACK_SIZE = 0x12, EI_KPARAM_INFO = 0x17, EI_CBANK_PARAM_SIZE = 0x19, EI_MAXREG_COUNT = 0x1b,
  EI_EXIT_INSTR_OFFSETS = 0x1c, EI_REGCOUNT = 0x2f, EI_CUDA_API_VERSION = 0x37, EI_NUM_MBARRIERS = 0x38,
  EI_CTA_PER_CLUSTER = 0x3d, EI_EXPLICIT_CLUSTER = 0x3e, EI_MAX_CLUSTER_RANK = 0x3f,
  EI_RESERVED_SMEM_USED = 0x41, EI_NUM_BARRIERS = 0x4c, EI_REG_RECONFIG = 0x54, EI_ANNOTATIONS = 0x55
};

/* Not in CUBIN-NOTES, so not named and kept raw: the record NVRTC 13.0 writes instead of
 * KPARAM_INFO for a kernel with a large parameter (seen with 16 and 20 KB Args, not with
 * 4 KB): u32 index, u16 ordinal, u16 offset, then the size as a whole u32 (checked against
 * both parameters of clcrt kernels). Only the size of parameter 0 is read from it. */
enum { EI_LARGE_KPARAM = 0x45 };

const char *clcrt__eiattr_name(int id) {
  switch (id) {
    case EI_MAX_THREADS: return "MAX_THREADS";
    case EI_PARAM_CBANK: return "PARAM_CBANK";
    case EI_REQNTID: return "REQNTID";
    case EI_FRAME_SIZE: return "FRAME_SIZE";
    case EI_MIN_STACK_SIZE: return "MIN_STACK_SIZE";
    case EI_KPARAM_INFO: return "KPARAM_INFO";
    case EI_CBANK_PARAM_SIZE: return "CBANK_PARAM_SIZE";
    case EI_MAXREG_COUNT: return "MAXREG_COUNT";
    case EI_EXIT_INSTR_OFFSETS: return "EXIT_INSTR_OFFSETS";
    case EI_REGCOUNT: return "REGCOUNT";
    case EI_CUDA_API_VERSION: return "CUDA_API_VERSION";
    case EI_NUM_MBARRIERS: return "NUM_MBARRIERS";
    case EI_CTA_PER_CLUSTER: return "CTA_PER_CLUSTER";
    case EI_EXPLICIT_CLUSTER: return "EXPLICIT_CLUSTER";
    case EI_MAX_CLUSTER_RANK: return "MAX_CLUSTER_RANK";
    case EI_RESERVED_SMEM_USED: return "RESERVED_SMEM_USED";
    case EI_NUM_BARRIERS: return "NUM_BARRIERS";
    case EI_REG_RECONFIG: return "REG_RECONFIG";
    case EI_ANNOTATIONS: return "ANNOTATIONS";
    default: return NULL;
  }
}

typedef struct sect {
  uint32_t name_off, type, link, info;
  uint64_t offset, size, entsize;
  const char *name; /* points into the file's .shstrtab, NUL-terminated inside it, or "" */
} sect;

typedef struct ctx {
  const uint8_t *d;
  size_t n;
  char *err;
  size_t errlen;
  int oom;
  sect *sh;
  size_t shnum;
} ctx;

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* True when [off, off+len) lies inside a buffer of n bytes; written so that no sum can wrap. */
static int in_range(size_t n, uint64_t off, uint64_t len) { return off <= n && len <= n - off; }

static int fail(ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->err && c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
  return -1;
}

static int oom(ctx *c) {
  c->oom = 1;
  return fail(c, "out of memory while reading the cubin");
}

/* A NUL-terminated string at `off` inside section s, or NULL when it would run off the end. */
static const char *str_at(const ctx *c, const sect *s, uint64_t off) {
  if (s->type == SHT_NOBITS || off >= s->size) return NULL;
  const char *p = (const char *)c->d + s->offset + off;
  return memchr(p, 0, (size_t)(s->size - off)) ? p : NULL;
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The compiler's copies for other code paths (Mercury) describe the same kernels again. */
static int is_merc(const sect *s) { return starts_with(s->name, ".nv.merc.") || starts_with(s->name, ".nv.capmerc."); }

static int read_sections(ctx *c, uint64_t shoff, uint64_t shnum, unsigned shstrndx) {
  if (shnum == 0) return fail(c, "the file has no sections");
  if (shoff > c->n || shnum > (c->n - shoff) / 64)
    return fail(c, "the section header table (offset %llu, %llu entries) lies outside the %zu-byte file",
                (unsigned long long)shoff, (unsigned long long)shnum, c->n);
  c->shnum = (size_t)shnum;
  c->sh = clcrt__calloc(c->shnum, sizeof(sect));
  if (!c->sh) return oom(c);
  for (size_t i = 0; i < c->shnum; i++) {
    const uint8_t *h = c->d + shoff + i * 64;
    sect *s = &c->sh[i];
    s->name_off = rd32(h);
    s->type = rd32(h + 4);
    s->offset = rd64(h + 24);
    s->size = rd64(h + 32);
    s->link = rd32(h + 40);
    s->info = rd32(h + 44);
    s->entsize = rd64(h + 56);
    s->name = "";
    if (s->type != SHT_NOBITS && !in_range(c->n, s->offset, s->size))
      return fail(c, "section %zu (offset %llu, %llu bytes) lies outside the %zu-byte file", i,
                  (unsigned long long)s->offset, (unsigned long long)s->size, c->n);
  }
  if (shstrndx >= c->shnum) return fail(c, "the section name table index %u does not exist", shstrndx);
  const sect *names = &c->sh[shstrndx];
  if (names->type == SHT_NOBITS) return fail(c, "the section name table has no contents");
  for (size_t i = 0; i < c->shnum; i++) {
    const char *nm = str_at(c, names, c->sh[i].name_off);
    if (!nm) return fail(c, "section %zu has a name outside the section name table", i);
    c->sh[i].name = nm;
  }
  return 0;
}

static int attr_push(ctx *c, clcrt__cubin_attr **arr, size_t *n, int fmt, int id, uint16_t x, const uint8_t *p,
                     uint32_t len) {
  /* Growing by one keeps the code simple; records per kernel number in the tens. */
  clcrt__cubin_attr *a = clcrt__realloc(*arr, (*n + 1) * sizeof(**arr));
  if (!a) return oom(c);
  *arr = a;
  clcrt__cubin_attr *r = &a[*n];
  memset(r, 0, sizeof(*r));
  r->format = (uint8_t)fmt;
  r->id = (uint8_t)id;
  r->value = x;
  if (fmt == 4 && len) {
    r->bytes = clcrt__malloc(len);
    if (!r->bytes) return oom(c);
    memcpy(r->bytes, p, len);
    r->len = len;
  }
  (*n)++;
  return 0;
}

/* Counts the spill instructions that ANNOTATIONS (kind 1) marks. The opcode and width
 * fields were checked against ptxas -v's spill byte counts on sm_90a and sm_100a cubins:
 * LDL has (lo & 0xfff) == 0x983, STL 0x387, and bits 9-11 of hi give the width (4: 32,
 * 5: 64, 6: 128 bits). Anything else leaves the byte counts unknown rather than guessed. */
static void count_spills(const ctx *c, clcrt__cubin_kernel *k, const sect *text, const uint8_t *p, uint32_t len) {
  int loads = 0, stores = 0, lb = 0, sb = 0, known = 1;
  for (uint32_t i = 0; i + 8 <= len; i += 8) {
    uint32_t kind = rd32(p + i), off = rd32(p + i + 4);
    if (kind != 1) continue;
    if (!text || off % 16 || !in_range((size_t)text->size, off, 16)) {
      known = 0;
      continue;
    }
    const uint8_t *ins = c->d + text->offset + off;
    uint64_t lo = rd64(ins), hi = rd64(ins + 8);
    unsigned w = (unsigned)(hi >> 9) & 7;
    int bytes = w == 4 ? 4 : w == 5 ? 8 : w == 6 ? 16 : 0;
    if (!bytes) known = 0;
    if ((lo & 0xfff) == 0x983) {
      loads++;
      lb += bytes;
    } else if ((lo & 0xfff) == 0x387) {
      stores++;
      sb += bytes;
    } else {
      known = 0;
    }
    if (loads > (1 << 24) || stores > (1 << 24)) break; /* a file cannot hold more; keeps ints sane */
  }
  k->spill_loads = loads;
  k->spill_stores = stores;
  k->spill_load_bytes = known ? lb : CLCRT__CUBIN_UNKNOWN;
  k->spill_store_bytes = known ? sb : CLCRT__CUBIN_UNKNOWN;
}

static void dims(uint32_t out[3], const uint8_t *p, uint32_t len) {
  for (int i = 0; i < 3; i++) out[i] = (uint32_t)(i * 4 + 4) <= len ? rd32(p + i * 4) : 0;
}

static int clamp_int(uint64_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

static int kernel_info(ctx *c, clcrt__cubin_kernel *k, const sect *info, const sect *text) {
  const uint8_t *d = c->d + info->offset;
  uint64_t n = info->size, pos = 0;
  int saw_annotations = 0;
  uint64_t kparam_bytes = 0;
  int cbank_size = CLCRT__CUBIN_UNKNOWN;
  while (pos + 4 <= n) {
    int fmt = d[pos], id = d[pos + 1];
    uint16_t x = rd16(d + pos + 2);
    pos += 4;
    const uint8_t *p = NULL;
    uint32_t len = 0;
    if (fmt == 4) {
      if (x > n - pos) return fail(c, "%s: a record (attribute 0x%02x) claims %u bytes, %llu remain", info->name, id, x,
                                   (unsigned long long)(n - pos));
      p = d + pos;
      len = x;
      pos += x;
    } else if (fmt < 1 || fmt > 3) {
      return fail(c, "%s: record format %d is unknown, so the records after it cannot be found", info->name, fmt);
    }
    switch (fmt == 4 ? id : -id) {
      case EI_MAX_THREADS: dims(k->maxntid, p, len); break;
      case EI_REQNTID: dims(k->reqntid, p, len); break;
      case EI_CTA_PER_CLUSTER: dims(k->cluster, p, len); break;
      case -EI_EXPLICIT_CLUSTER: k->explicit_cluster = 1; break;
      case EI_MAX_CLUSTER_RANK:
        if (len >= 4) k->max_cluster_rank = clamp_int(rd32(p));
        break;
      case EI_PARAM_CBANK:
        if (len >= 8) k->param_offset = (int)(rd32(p + 4) & 0xffff);
        break;
      case EI_KPARAM_INFO:
        if (len >= 12) {
          k->num_params++;
          kparam_bytes += rd32(p + 8) >> 18;
          if (rd16(p + 4) == 0) k->param0_bytes = (int)(rd32(p + 8) >> 18);
        }
        break;
      case EI_LARGE_KPARAM:
        if (len >= 12 && rd16(p + 4) == 0) k->param0_bytes = clamp_int(rd32(p + 8));
        if (attr_push(c, &k->attrs, &k->num_attrs, fmt, id, x, p, len)) return -1;
        break;
      case -EI_CBANK_PARAM_SIZE: cbank_size = x; break;
      case -EI_MAXREG_COUNT: k->max_registers = x; break;
      case -EI_NUM_MBARRIERS: k->num_mbarriers = x; break;
      case -EI_NUM_BARRIERS: k->num_barriers = x & 0xff; break;
      case -EI_RESERVED_SMEM_USED: k->reserved_smem_attr = 1; break;
      case -EI_REG_RECONFIG: k->reg_reconfig = 1; break;
      case EI_ANNOTATIONS:
        saw_annotations = 1;
        count_spills(c, k, text, p, len);
        break;
      case EI_EXIT_INSTR_OFFSETS:
      case EI_CUDA_API_VERSION: break; /* understood, and not needed by anything we report */
      default:
        if (attr_push(c, &k->attrs, &k->num_attrs, fmt, id, x, p, len)) return -1;
    }
  }
  k->param_bytes = cbank_size != CLCRT__CUBIN_UNKNOWN ? cbank_size : k->num_params ? clamp_int(kparam_bytes) : 0;
  if (!saw_annotations) k->spill_loads = k->spill_stores = k->spill_load_bytes = k->spill_store_bytes = 0;
  return 0;
}

/* Module-level .nv.info: records keyed by symbol index. */
static int module_info(ctx *c, clcrt__cubin *out, const sect *info, const uint32_t *sym_to_kernel, size_t nsyms) {
  const uint8_t *d = c->d + info->offset;
  uint64_t n = info->size, pos = 0;
  while (pos + 4 <= n) {
    int fmt = d[pos], id = d[pos + 1];
    uint16_t x = rd16(d + pos + 2);
    pos += 4;
    const uint8_t *p = NULL;
    if (fmt == 4) {
      if (x > n - pos) return fail(c, ".nv.info: a record (attribute 0x%02x) claims %u bytes, %llu remain", id, x,
                                   (unsigned long long)(n - pos));
      p = d + pos;
      pos += x;
    } else if (fmt < 1 || fmt > 3) {
      return fail(c, ".nv.info: record format %d is unknown, so the records after it cannot be found", fmt);
    }
    if (fmt == 4 && x >= 8 && (id == EI_REGCOUNT || id == EI_FRAME_SIZE || id == EI_MIN_STACK_SIZE)) {
      uint32_t sym = rd32(p), val = rd32(p + 4);
      if (sym < nsyms && sym_to_kernel[sym] != UINT32_MAX) {
        clcrt__cubin_kernel *k = &out->kernels[sym_to_kernel[sym]];
        if (id == EI_REGCOUNT) k->registers = clamp_int(val);
        else if (id == EI_FRAME_SIZE) k->frame_bytes = clamp_int(val);
        else k->min_stack_bytes = clamp_int(val);
      }
      continue; /* records about non-entry functions are not reported */
    }
    if (attr_push(c, &out->module_attrs, &out->num_module_attrs, fmt, id, x, p, fmt == 4 ? x : 0)) return -1;
  }
  return 0;
}

static void parse_compat(const ctx *c, clcrt__cubin *out, const sect *s) {
  const uint8_t *d = c->d + s->offset;
  uint64_t pos = 0;
  while (pos + 4 <= s->size) {
    int fmt = d[pos], id = d[pos + 1];
    uint16_t x = rd16(d + pos + 2);
    pos += 4;
    if (fmt == 4) {
      if (x > s->size - pos) return;
      pos += x;
    } else if (fmt == 2 && id == 9) {
      out->compat_a = (x & 0xff) == 1;
    } else if (fmt < 1 || fmt > 3) {
      return;
    }
  }
}

/* NVIDIA notes: cuinfo (type 1000) gives the virtual SM and the toolkit version; tkinfo
 * (type 2000) gives the producing tool and its command line. */
static int parse_notes(ctx *c, clcrt__cubin *out, const sect *s) {
  const uint8_t *d = c->d + s->offset;
  uint64_t n = s->size, pos = 0;
  while (n - pos >= 12) {
    uint32_t namesz = rd32(d + pos), descsz = rd32(d + pos + 4), type = rd32(d + pos + 8);
    pos += 12;
    uint64_t nameal = ((uint64_t)namesz + 3) & ~(uint64_t)3, descal = ((uint64_t)descsz + 3) & ~(uint64_t)3;
    if (nameal > n - pos || descsz > n - pos - nameal) return 0; /* a damaged note is ignored, not fatal */
    int nvidia = namesz == 12 && memcmp(d + pos, "NVIDIA Corp", 12) == 0;
    const uint8_t *desc = d + pos + nameal;
    if (nvidia && type == 1000 && descsz >= 8) {
      out->virtual_sm = rd16(desc + 2);
      out->toolkit_version = clamp_int(rd32(desc + 4));
    } else if (nvidia && type == 2000 && descsz > 24 && rd32(desc) == 2 && !out->producer && !out->tool_options) {
      /* Only the first tool-info note counts; a second one must not replace (and leak) it. */
      const char *strs = (const char *)desc + 24;
      size_t slen = descsz - 24;
      uint32_t o_tool = rd32(desc + 8), o_ver = rd32(desc + 12), o_opt = rd32(desc + 20);
      if (o_tool < slen && o_ver < slen && memchr(strs + o_tool, 0, slen - o_tool) && memchr(strs + o_ver, 0, slen - o_ver)) {
        size_t l1 = strlen(strs + o_tool), l2 = strlen(strs + o_ver);
        out->producer = clcrt__malloc(l1 + l2 + 2);
        if (!out->producer) return oom(c);
        memcpy(out->producer, strs + o_tool, l1);
        out->producer[l1] = ' ';
        memcpy(out->producer + l1 + 1, strs + o_ver, l2 + 1);
      }
      if (o_opt < slen && memchr(strs + o_opt, 0, slen - o_opt)) {
        out->tool_options = clcrt__strdup(strs + o_opt);
        if (!out->tool_options) return oom(c);
      }
    }
    if (descal > n - pos - nameal) break;
    pos += nameal + descal;
  }
  return 0;
}

int clcrt__sass_count_clc(const void *text, size_t size, int *broadcast) {
  const uint8_t *p = text;
  int found = 0, bc = 0;
  for (size_t i = 0; p && size >= 16 && i <= size - 16; i += 16) {
    uint64_t lo = rd64(p + i), hi = rd64(p + i + 8);
    if ((lo & 0xfff) == 0x3ca && (hi >> 27 & 1)) {
      found++;
      if (hi >> 8 & 1) bc = 1;
    }
  }
  if (broadcast) *broadcast = bc;
  return found;
}

int clcrt__sass_has_clc(const void *text, size_t size, int *broadcast) {
  return clcrt__sass_count_clc(text, size, broadcast) > 0;
}

static const char *sched_of(const char *name) {
  static const char *const scheds[] = {"clc", "steal", "static", "fixed"};
  if (!starts_with(name, "clcrt_")) return NULL;
  for (size_t i = 0; i < sizeof scheds / sizeof *scheds; i++) {
    size_t l = strlen(scheds[i]);
    if (strncmp(name + 6, scheds[i], l) == 0 && name[6 + l] == '_' && name[7 + l]) return scheds[i];
  }
  return NULL;
}

static void init_kernel(clcrt__cubin_kernel *k) {
  k->registers = k->frame_bytes = k->min_stack_bytes = CLCRT__CUBIN_UNKNOWN;
  k->num_mbarriers = k->num_barriers = CLCRT__CUBIN_UNKNOWN;
  k->spill_loads = k->spill_stores = k->spill_load_bytes = k->spill_store_bytes = CLCRT__CUBIN_UNKNOWN;
  k->max_registers = k->param_offset = k->max_cluster_rank = k->param0_bytes = CLCRT__CUBIN_UNKNOWN;
}

/* The frame check (cubin.h). Tables are read TABLE_CHUNK entries at a time, so a file that
 * claims millions of sections costs time in proportion to its size but no memory. */
#define TABLE_CHUNK 64

static int in_file(uint64_t size, uint64_t off, uint64_t len) { return off <= size && len <= size - off; }

int clcrt__cubin_span(clcrt__cubin_read_fn rd, void *user, uint64_t size, uint64_t *span, char *err,
                      size_t errlen) {
  ctx c = {NULL, 0, err, errlen, 0, NULL, 0};
  uint8_t h[64], t[TABLE_CHUNK * 64];
  if (err && errlen) err[0] = 0;
  if (size == 0) return fail(&c, "the file is empty");
  size_t hl = size < sizeof h ? (size_t)size : sizeof h;
  if (rd(user, 0, h, hl)) return fail(&c, "the ELF header could not be read");
  if (hl < 4 || memcmp(h, "\177ELF", 4) != 0) return fail(&c, "not an ELF file (no \\177ELF magic)");
  if (hl < 64) return fail(&c, "the file ends inside the ELF header (%zu of 64 bytes)", hl);
  if (h[4] != 2) return fail(&c, "not a 64-bit ELF file; cubins for sm_50 and later are ELF64");
  if (h[5] != 1) return fail(&c, "not a little-endian ELF file");
  if (rd16(h + 18) != EM_CUDA) return fail(&c, "an ELF file, but not for CUDA (e_machine %u, not 190)", rd16(h + 18));
  if (rd16(h + 58) != 64) return fail(&c, "section headers are %u bytes, not 64", rd16(h + 58));
  uint64_t shoff = rd64(h + 40), shnum = rd16(h + 60), phoff = rd64(h + 32), phnum = rd16(h + 56);
  /* Extended numbering: section 0 holds the real section count (sh_size) and, when e_phnum
   * is PN_XNUM, the real program header count (sh_info), as ELF allows. */
  if ((shnum == 0 || phnum == 0xffff) && in_file(size, shoff, 64)) {
    if (rd(user, shoff, t, 64)) return fail(&c, "section 0 could not be read");
    if (shnum == 0) shnum = rd64(t + 32);
    if (phnum == 0xffff) phnum = rd32(t + 44);
  }
  if (shnum == 0) return fail(&c, "the file has no sections");
  if (shoff > size || shnum > (size - shoff) / 64)
    return fail(&c, "the section header table (offset %llu, %llu entries) lies outside the %llu-byte file",
                (unsigned long long)shoff, (unsigned long long)shnum, (unsigned long long)size);
  uint64_t end = shoff + shnum * 64;
  if (end < 64) end = 64;
  for (uint64_t i = 0; i < shnum; i += TABLE_CHUNK) {
    size_t k = shnum - i < TABLE_CHUNK ? (size_t)(shnum - i) : TABLE_CHUNK;
    if (rd(user, shoff + i * 64, t, k * 64)) return fail(&c, "the section header table could not be read");
    for (size_t j = 0; j < k; j++) {
      const uint8_t *e = t + j * 64;
      uint64_t off = rd64(e + 24), sz = rd64(e + 32);
      if (rd32(e + 4) == SHT_NOBITS) continue;
      if (!in_file(size, off, sz))
        return fail(&c, "section %llu (offset %llu, %llu bytes) lies outside the %llu-byte file",
                    (unsigned long long)(i + j), (unsigned long long)off, (unsigned long long)sz,
                    (unsigned long long)size);
      if (off + sz > end) end = off + sz;
    }
  }
  /* Cubins keep their program headers at the very end of the file, so a truncated copy is
   * missing exactly these: refusing them is how a cut-off cubin is told from a whole one. */
  if (phnum) {
    if (rd16(h + 54) != 56) return fail(&c, "program headers are %u bytes, not 56", rd16(h + 54));
    if (phoff > size || phnum > (size - phoff) / 56)
      return fail(&c,
                  "the program header table (offset %llu, %llu entries of 56 bytes) runs past the end of the "
                  "%llu-byte file: it is truncated or damaged",
                  (unsigned long long)phoff, (unsigned long long)phnum, (unsigned long long)size);
    if (phoff + phnum * 56 > end) end = phoff + phnum * 56;
    for (uint64_t i = 0; i < phnum; i += TABLE_CHUNK) {
      size_t k = phnum - i < TABLE_CHUNK ? (size_t)(phnum - i) : TABLE_CHUNK;
      if (rd(user, phoff + i * 56, t, k * 56)) return fail(&c, "the program header table could not be read");
      for (size_t j = 0; j < k; j++) {
        const uint8_t *e = t + j * 56;
        uint64_t off = rd64(e + 8), sz = rd64(e + 32); /* p_offset, p_filesz */
        if (!in_file(size, off, sz))
          return fail(&c, "segment %llu (offset %llu, %llu bytes) lies outside the %llu-byte file",
                      (unsigned long long)(i + j), (unsigned long long)off, (unsigned long long)sz,
                      (unsigned long long)size);
        if (off + sz > end) end = off + sz;
      }
    }
  }
  *span = end;
  return 0;
}

static int mem_read(void *user, uint64_t off, void *buf, size_t len) {
  const ctx *c = user;
  if (!in_range(c->n, off, len)) return -1;
  memcpy(buf, c->d + off, len);
  return 0;
}

static int parse(ctx *c, clcrt__cubin *out) {
  const uint8_t *d = c->d;
  /* The frame first (magic, machine, both header tables against the size); what follows may
   * then read the tables, though it still checks every offset it uses. */
  uint64_t span;
  if (clcrt__cubin_span(mem_read, c, c->n, &span, c->err, c->errlen)) return -1;
  out->os_abi = d[7];
  out->abi_version = d[8];
  out->e_flags = rd32(d + 48);
  if (out->os_abi == 0x41) {
    out->sm = (int)(out->e_flags >> 8 & 0xff);
  } else if (out->os_abi == 0x33) {
    out->sm = (int)(out->e_flags & 0xff);
    if (out->e_flags & 0x800) out->suffix = 'a';
  } else {
    return fail(c, "unknown CUDA ELF ABI (OS/ABI byte 0x%02x, version %d); known: 0x41 v8, 0x33 v7", out->os_abi,
                out->abi_version);
  }
  uint64_t shoff = rd64(d + 40), shnum = rd16(d + 60);
  unsigned shstrndx = rd16(d + 62);
  /* Extended numbering: the real counts live in section 0, as ELF allows. */
  if ((shnum == 0 || shstrndx == SHN_XINDEX) && in_range(c->n, shoff, 64)) {
    if (shnum == 0) shnum = rd64(d + shoff + 32);
    if (shstrndx == SHN_XINDEX) shstrndx = rd32(d + shoff + 40);
  }
  if (read_sections(c, shoff, shnum, shstrndx)) return -1;
  out->file_bytes = (size_t)span;

  const sect *symtab = NULL;
  for (size_t i = 0; i < c->shnum; i++) {
    const sect *s = &c->sh[i];
    if (is_merc(s)) {
      out->has_merc = 1;
      continue;
    }
    if (s->type == SHT_SYMTAB && !symtab) symtab = s;
    else if (s->type == SHT_NV_COMPAT) parse_compat(c, out, s);
    else if (s->type == SHT_NOTE && parse_notes(c, out, s)) return -1;
  }
  if (out->os_abi == 0x41 && out->compat_a == 1) out->suffix = 'a';
  if (!out->suffix && out->tool_options) {
    /* `f` is only visible in the command line that produced the file. */
    char want[24];
    snprintf(want, sizeof want, "sm_%df", out->sm);
    const char *hit = strstr(out->tool_options, want);
    if (hit && (hit[strlen(want)] == ' ' || hit[strlen(want)] == 0)) out->suffix = 'f';
  }
  snprintf(out->arch, sizeof out->arch, "sm_%d%s", out->sm, out->suffix == 'a' ? "a" : out->suffix == 'f' ? "f" : "");
  if (!symtab) return 0; /* a cubin without symbols has no kernels to report */

  if (symtab->entsize != 24) return fail(c, "the symbol table's entries are %llu bytes, not 24", (unsigned long long)symtab->entsize);
  if (symtab->link >= c->shnum) return fail(c, "the symbol table names string table %u, which does not exist", symtab->link);
  const sect *strtab = &c->sh[symtab->link];
  size_t nsyms = (size_t)(symtab->size / 24);
  uint32_t *sym_to_kernel = clcrt__malloc(nsyms ? nsyms * sizeof(uint32_t) : 1);
  if (!sym_to_kernel) return oom(c);
  int rc = 0;
  size_t nk = 0;
  for (size_t i = 0; i < nsyms; i++) {
    const uint8_t *e = d + symtab->offset + i * 24;
    sym_to_kernel[i] = UINT32_MAX;
    if ((e[4] & 0xf) == STT_FUNC && (e[4] >> 4) != 0 && (e[5] & STO_CUDA_ENTRY)) sym_to_kernel[i] = (uint32_t)nk++;
  }
  out->kernels = clcrt__calloc(nk ? nk : 1, sizeof(clcrt__cubin_kernel));
  if (!out->kernels) {
    rc = oom(c);
    goto done;
  }
  for (size_t i = 0; i < nsyms; i++) {
    if (sym_to_kernel[i] == UINT32_MAX) continue;
    const uint8_t *e = d + symtab->offset + i * 24;
    clcrt__cubin_kernel *k = &out->kernels[out->num_kernels++];
    init_kernel(k);
    const char *nm = str_at(c, strtab, rd32(e));
    if (!nm) {
      rc = fail(c, "symbol %zu has a name outside the string table", i);
      goto done;
    }
    if (!(k->name = clcrt__strdup(nm))) {
      rc = oom(c);
      goto done;
    }
    k->sched = sched_of(nm);
    unsigned shndx = rd16(e + 6);
    if (shndx == 0 || shndx >= c->shnum || c->sh[shndx].type == SHT_NOBITS) {
      rc = fail(c, "kernel %s points to section %u, which is not a code section", nm, shndx);
      goto done;
    }
    const sect *text = &c->sh[shndx];
    k->text_bytes = text->size;
    k->text_offset = text->offset;
    k->clc_count = clcrt__sass_count_clc(d + text->offset, (size_t)text->size, &k->clc_broadcast);
    k->has_clc = k->clc_count > 0;
    for (size_t j = 0; j < c->shnum; j++) {
      const sect *s = &c->sh[j];
      if (is_merc(s) || s->info != shndx) continue;
      if (s->type == SHT_NV_INFO && starts_with(s->name, ".nv.info.")) {
        if (kernel_info(c, k, s, text)) {
          rc = -1;
          goto done;
        }
      } else if (s->type == SHT_NOBITS && starts_with(s->name, ".nv.shared.") &&
                 !starts_with(s->name, ".nv.shared.reserved.")) {
        k->static_smem = s->size;
      }
    }
  }
  /* sm_90 and later reserve the first 1 KiB of every kernel's shared window for the system
   * (cudaDevAttrReservedSharedMemoryPerBlock); ptxas lays each .nv.shared.<kernel> out after
   * it when the module references .nv.reservedSmem.offset0. Checked: section size = ptxas's
   * "bytes smem" + 1024 on sm_90, sm_90a and sm_100a, for kernels with and without clusters. */
  int reserved_sym = 0;
  for (size_t i = 0; i < nsyms && !reserved_sym; i++) {
    const char *nm = str_at(c, strtab, rd32(d + symtab->offset + i * 24));
    reserved_sym = nm && strcmp(nm, ".nv.reservedSmem.offset0") == 0;
  }
  for (size_t i = 0; i < out->num_kernels; i++)
    if (reserved_sym && out->kernels[i].static_smem >= 1024) out->kernels[i].reserved_smem = 1024;
  for (size_t j = 0; j < c->shnum; j++) {
    const sect *s = &c->sh[j];
    if (!is_merc(s) && s->type == SHT_NV_INFO && strcmp(s->name, ".nv.info") == 0 &&
        module_info(c, out, s, sym_to_kernel, nsyms)) {
      rc = -1;
      goto done;
    }
  }
done:
  clcrt__free(sym_to_kernel);
  return rc;
}

int clcrt__cubin_parse(const void *data, size_t size, clcrt__cubin *out, char *err, size_t errlen) {
  ctx c = {data, size, err, errlen, 0, NULL, 0};
  if (err && errlen) err[0] = 0;
  if (!out) return fail(&c, "no output given");
  memset(out, 0, sizeof(*out));
  out->toolkit_version = out->virtual_sm = out->compat_a = CLCRT__CUBIN_UNKNOWN;
  if (!data && size) return fail(&c, "no data given");
  int rc = parse(&c, out);
  clcrt__free(c.sh);
  if (rc) {
    clcrt__cubin_free(out);
    return c.oom ? -2 : -1;
  }
  return 0;
}

static void free_attrs(clcrt__cubin_attr *a, size_t n) {
  for (size_t i = 0; i < n; i++) clcrt__free(a[i].bytes);
  clcrt__free(a);
}

void clcrt__cubin_free(clcrt__cubin *c) {
  if (!c) return;
  for (size_t i = 0; i < c->num_kernels; i++) {
    clcrt__free(c->kernels[i].name);
    free_attrs(c->kernels[i].attrs, c->kernels[i].num_attrs);
  }
  clcrt__free(c->kernels);
  free_attrs(c->module_attrs, c->num_module_attrs);
  clcrt__free(c->producer);
  clcrt__free(c->tool_options);
  memset(c, 0, sizeof(*c));
}
