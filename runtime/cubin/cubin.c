/* A bounds-checked cubin reader. Every offset, size and count in the file is treated as
 * hostile: each is checked against the bytes we actually have, with arithmetic that cannot
 * overflow, before anything is read. Nothing here trusts alignment either; multi-byte
 * fields are assembled byte by byte. The facts it relies on are in shared/CUBIN-NOTES.md;
 * anything the notes do not establish is kept raw instead of being given a meaning. */
#include "cubin_read.h"

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

int clcrt__cubin_fail(clcrt__cubin_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->err && c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
  return -1;
}

int clcrt__cubin_oom(clcrt__cubin_ctx *c) {
  c->oom = 1;
  return clcrt__cubin_fail(c, "out of memory while reading the cubin");
}

/* A NUL-terminated string at `off` inside section s, or NULL when it would run off the end. */
static const char *str_at(const clcrt__cubin_ctx *c, const clcrt__cubin_sect *s, uint64_t off) {
  if (s->type == SHT_NOBITS || off >= s->size) return NULL;
  const char *p = (const char *)c->d + s->offset + off;
  return memchr(p, 0, (size_t)(s->size - off)) ? p : NULL;
}

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The compiler's copies for other code paths (Mercury) describe the same kernels again. */
static int is_merc(const clcrt__cubin_sect *s) {
  return starts_with(s->name, ".nv.merc.") || starts_with(s->name, ".nv.capmerc.");
}

static int read_sections(clcrt__cubin_ctx *c, uint64_t shoff, uint64_t shnum, unsigned shstrndx) {
  if (shnum == 0) return clcrt__cubin_fail(c, "the file has no sections");
  if (shoff > c->n || shnum > (c->n - shoff) / 64)
    return clcrt__cubin_fail(c, "the section header table (offset %llu, %llu entries) lies outside the %zu-byte file",
                (unsigned long long)shoff, (unsigned long long)shnum, c->n);
  c->shnum = (size_t)shnum;
  c->sh = clcrt__calloc(c->shnum, sizeof(clcrt__cubin_sect));
  if (!c->sh) return clcrt__cubin_oom(c);
  for (size_t i = 0; i < c->shnum; i++) {
    const uint8_t *h = c->d + shoff + i * 64;
    clcrt__cubin_sect *s = &c->sh[i];
    s->name_off = rd32(h);
    s->type = rd32(h + 4);
    s->offset = rd64(h + 24);
    s->size = rd64(h + 32);
    s->link = rd32(h + 40);
    s->info = rd32(h + 44);
    s->entsize = rd64(h + 56);
    s->name = "";
    if (s->type != SHT_NOBITS && !in_range(c->n, s->offset, s->size))
      return clcrt__cubin_fail(c, "section %zu (offset %llu, %llu bytes) lies outside the %zu-byte file", i,
                  (unsigned long long)s->offset, (unsigned long long)s->size, c->n);
  }
  if (shstrndx >= c->shnum) return clcrt__cubin_fail(c, "the section name table index %u does not exist", shstrndx);
  const clcrt__cubin_sect *names = &c->sh[shstrndx];
  if (names->type == SHT_NOBITS) return clcrt__cubin_fail(c, "the section name table has no contents");
  for (size_t i = 0; i < c->shnum; i++) {
    const char *nm = str_at(c, names, c->sh[i].name_off);
    if (!nm) return clcrt__cubin_fail(c, "section %zu has a name outside the section name table", i);
    c->sh[i].name = nm;
  }
  return 0;
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
  clcrt__cubin_ctx c = {NULL, 0, err, errlen, 0, NULL, 0};
  uint8_t h[64], t[TABLE_CHUNK * 64];
  if (err && errlen) err[0] = 0;
  if (size == 0) return clcrt__cubin_fail(&c, "the file is empty");
  size_t hl = size < sizeof h ? (size_t)size : sizeof h;
  if (rd(user, 0, h, hl)) return clcrt__cubin_fail(&c, "the ELF header could not be read");
  if (hl < 4 || memcmp(h, "\177ELF", 4) != 0) return clcrt__cubin_fail(&c, "not an ELF file (no \\177ELF magic)");
  if (hl < 64) return clcrt__cubin_fail(&c, "the file ends inside the ELF header (%zu of 64 bytes)", hl);
  if (h[4] != 2) return clcrt__cubin_fail(&c, "not a 64-bit ELF file; cubins for sm_50 and later are ELF64");
  if (h[5] != 1) return clcrt__cubin_fail(&c, "not a little-endian ELF file");
  if (rd16(h + 18) != EM_CUDA)
    return clcrt__cubin_fail(&c, "an ELF file, but not for CUDA (e_machine %u, not 190)", rd16(h + 18));
  if (rd16(h + 58) != 64) return clcrt__cubin_fail(&c, "section headers are %u bytes, not 64", rd16(h + 58));
  uint64_t shoff = rd64(h + 40), shnum = rd16(h + 60), phoff = rd64(h + 32), phnum = rd16(h + 56);
  /* Extended numbering: section 0 holds the real section count (sh_size) and, when e_phnum
   * is PN_XNUM, the real program header count (sh_info), as ELF allows. */
  if ((shnum == 0 || phnum == 0xffff) && in_file(size, shoff, 64)) {
    if (rd(user, shoff, t, 64)) return clcrt__cubin_fail(&c, "section 0 could not be read");
    if (shnum == 0) shnum = rd64(t + 32);
    if (phnum == 0xffff) phnum = rd32(t + 44);
  }
  if (shnum == 0) return clcrt__cubin_fail(&c, "the file has no sections");
  if (shoff > size || shnum > (size - shoff) / 64)
    return clcrt__cubin_fail(&c, "the section header table (offset %llu, %llu entries) lies outside the %llu-byte file",
                (unsigned long long)shoff, (unsigned long long)shnum, (unsigned long long)size);
  uint64_t end = shoff + shnum * 64;
  if (end < 64) end = 64;
  for (uint64_t i = 0; i < shnum; i += TABLE_CHUNK) {
    size_t k = shnum - i < TABLE_CHUNK ? (size_t)(shnum - i) : TABLE_CHUNK;
    if (rd(user, shoff + i * 64, t, k * 64)) return clcrt__cubin_fail(&c, "the section header table could not be read");
    for (size_t j = 0; j < k; j++) {
      const uint8_t *e = t + j * 64;
      uint64_t off = rd64(e + 24), sz = rd64(e + 32);
      if (rd32(e + 4) == SHT_NOBITS) continue;
      if (!in_file(size, off, sz))
        return clcrt__cubin_fail(&c, "section %llu (offset %llu, %llu bytes) lies outside the %llu-byte file",
                    (unsigned long long)(i + j), (unsigned long long)off, (unsigned long long)sz,
                    (unsigned long long)size);
      if (off + sz > end) end = off + sz;
    }
  }
  /* Cubins keep their program headers at the very end of the file, so a truncated copy is
   * missing exactly these: refusing them is how a cut-off cubin is told from a whole one. */
  if (phnum) {
    if (rd16(h + 54) != 56) return clcrt__cubin_fail(&c, "program headers are %u bytes, not 56", rd16(h + 54));
    if (phoff > size || phnum > (size - phoff) / 56)
      return clcrt__cubin_fail(&c,
                  "the program header table (offset %llu, %llu entries of 56 bytes) runs past the end of the "
                  "%llu-byte file: it is truncated or damaged",
                  (unsigned long long)phoff, (unsigned long long)phnum, (unsigned long long)size);
    if (phoff + phnum * 56 > end) end = phoff + phnum * 56;
    for (uint64_t i = 0; i < phnum; i += TABLE_CHUNK) {
      size_t k = phnum - i < TABLE_CHUNK ? (size_t)(phnum - i) : TABLE_CHUNK;
      if (rd(user, phoff + i * 56, t, k * 56))
        return clcrt__cubin_fail(&c, "the program header table could not be read");
      for (size_t j = 0; j < k; j++) {
        const uint8_t *e = t + j * 56;
        uint64_t off = rd64(e + 8), sz = rd64(e + 32); /* p_offset, p_filesz */
        if (!in_file(size, off, sz))
          return clcrt__cubin_fail(&c, "segment %llu (offset %llu, %llu bytes) lies outside the %llu-byte file",
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
  const clcrt__cubin_ctx *c = user;
  if (!in_range(c->n, off, len)) return -1;
  memcpy(buf, c->d + off, len);
  return 0;
}

/* The frame first (magic, machine, both header tables against the size); what follows may then
 * read the tables, though it still checks every offset it uses. Then the ABI, the SM and the
 * section headers. */
static int read_frame(clcrt__cubin_ctx *c, clcrt__cubin *out) {
  const uint8_t *d = c->d;
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
    return clcrt__cubin_fail(c, "unknown CUDA ELF ABI (OS/ABI byte 0x%02x, version %d); known: 0x41 v8, 0x33 v7",
                             out->os_abi, out->abi_version);
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
  return 0;
}

/* What the module's sections say of the whole file: Mercury copies, the compatibility section
 * and the notes, and from them the architecture's suffix and name; *symtab is the first
 * symbol table (NULL: none). */
static int read_module(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect **symtab) {
  *symtab = NULL;
  for (size_t i = 0; i < c->shnum; i++) {
    const clcrt__cubin_sect *s = &c->sh[i];
    if (is_merc(s)) {
      out->has_merc = 1;
      continue;
    }
    if (s->type == SHT_SYMTAB && !*symtab) *symtab = s;
    else if (s->type == SHT_NV_COMPAT) clcrt__cubin_compat(c, out, s);
    else if (s->type == SHT_NOTE && clcrt__cubin_notes(c, out, s)) return -1;
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
  return 0;
}

/* Kernel k from its entry symbol e (the i-th; k already counted in out): its name and
 * scheduler, its code and the CLC instructions in it, its .nv.info records and its static
 * shared memory. */
static int read_kernel(clcrt__cubin_ctx *c, clcrt__cubin_kernel *k, const uint8_t *e, size_t i,
                       const clcrt__cubin_sect *strtab) {
  init_kernel(k);
  const char *nm = str_at(c, strtab, rd32(e));
  if (!nm) return clcrt__cubin_fail(c, "symbol %zu has a name outside the string table", i);
  if (!(k->name = clcrt__strdup(nm))) return clcrt__cubin_oom(c);
  k->sched = sched_of(nm);
  unsigned shndx = rd16(e + 6);
  if (shndx == 0 || shndx >= c->shnum || c->sh[shndx].type == SHT_NOBITS)
    return clcrt__cubin_fail(c, "kernel %s points to section %u, which is not a code section", nm, shndx);
  const clcrt__cubin_sect *text = &c->sh[shndx];
  k->text_bytes = text->size;
  k->text_offset = text->offset;
  k->clc_count = clcrt__sass_count_clc(c->d + text->offset, (size_t)text->size, &k->clc_broadcast);
  k->has_clc = k->clc_count > 0;
  for (size_t j = 0; j < c->shnum; j++) {
    const clcrt__cubin_sect *s = &c->sh[j];
    if (is_merc(s) || s->info != shndx) continue;
    if (s->type == SHT_NV_INFO && starts_with(s->name, ".nv.info.")) {
      if (clcrt__cubin_kernel_info(c, k, s, text)) return -1;
    } else if (s->type == SHT_NOBITS && starts_with(s->name, ".nv.shared.") &&
               !starts_with(s->name, ".nv.shared.reserved.")) {
      k->static_smem = s->size;
    }
  }
  return 0;
}

/* sm_90 and later reserve the first 1 KiB of every kernel's shared window for the system
 * (cudaDevAttrReservedSharedMemoryPerBlock); ptxas lays each .nv.shared.<kernel> out after
 * it when the module references .nv.reservedSmem.offset0. Checked: section size = ptxas's
 * "bytes smem" + 1024 on sm_90, sm_90a and sm_100a, for kernels with and without clusters. */
static void mark_reserved_smem(const clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *symtab,
                               const clcrt__cubin_sect *strtab, size_t nsyms) {
  int reserved_sym = 0;
  for (size_t i = 0; i < nsyms && !reserved_sym; i++) {
    const char *nm = str_at(c, strtab, rd32(c->d + symtab->offset + i * 24));
    reserved_sym = nm && strcmp(nm, ".nv.reservedSmem.offset0") == 0;
  }
  for (size_t i = 0; i < out->num_kernels; i++)
    if (reserved_sym && out->kernels[i].static_smem >= 1024) out->kernels[i].reserved_smem = 1024;
}

/* The kernels: every entry function of the symbol table, in symbol order, then what the
 * module-level .nv.info records say of them (keyed by symbol index). */
static int read_kernels(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *symtab) {
  const uint8_t *d = c->d;
  if (symtab->entsize != 24)
    return clcrt__cubin_fail(c, "the symbol table's entries are %llu bytes, not 24",
                             (unsigned long long)symtab->entsize);
  if (symtab->link >= c->shnum)
    return clcrt__cubin_fail(c, "the symbol table names string table %u, which does not exist", symtab->link);
  const clcrt__cubin_sect *strtab = &c->sh[symtab->link];
  size_t nsyms = (size_t)(symtab->size / 24);
  uint32_t *sym_to_kernel = clcrt__malloc(nsyms ? nsyms * sizeof(uint32_t) : 1);
  if (!sym_to_kernel) return clcrt__cubin_oom(c);
  int rc = 0;
  size_t nk = 0;
  for (size_t i = 0; i < nsyms; i++) {
    const uint8_t *e = d + symtab->offset + i * 24;
    sym_to_kernel[i] = UINT32_MAX;
    if ((e[4] & 0xf) == STT_FUNC && (e[4] >> 4) != 0 && (e[5] & STO_CUDA_ENTRY)) sym_to_kernel[i] = (uint32_t)nk++;
  }
  out->kernels = clcrt__calloc(nk ? nk : 1, sizeof(clcrt__cubin_kernel));
  if (!out->kernels) {
    rc = clcrt__cubin_oom(c);
    goto done;
  }
  for (size_t i = 0; i < nsyms; i++) {
    if (sym_to_kernel[i] == UINT32_MAX) continue;
    clcrt__cubin_kernel *k = &out->kernels[out->num_kernels++];
    if ((rc = read_kernel(c, k, d + symtab->offset + i * 24, i, strtab))) goto done;
  }
  mark_reserved_smem(c, out, symtab, strtab, nsyms);
  for (size_t j = 0; j < c->shnum; j++) {
    const clcrt__cubin_sect *s = &c->sh[j];
    if (!is_merc(s) && s->type == SHT_NV_INFO && strcmp(s->name, ".nv.info") == 0 &&
        clcrt__cubin_module_info(c, out, s, sym_to_kernel, nsyms)) {
      rc = -1;
      goto done;
    }
  }
done:
  clcrt__free(sym_to_kernel);
  return rc;
}

static int parse(clcrt__cubin_ctx *c, clcrt__cubin *out) {
  const clcrt__cubin_sect *symtab;
  if (read_frame(c, out) || read_module(c, out, &symtab)) return -1;
  if (!symtab) return 0; /* a cubin without symbols has no kernels to report */
  return read_kernels(c, out, symtab);
}

int clcrt__cubin_parse(const void *data, size_t size, clcrt__cubin *out, char *err, size_t errlen) {
  clcrt__cubin_ctx c = {data, size, err, errlen, 0, NULL, 0};
  if (err && errlen) err[0] = 0;
  if (!out) return clcrt__cubin_fail(&c, "no output given");
  memset(out, 0, sizeof(*out));
  out->toolkit_version = out->virtual_sm = out->compat_a = CLCRT__CUBIN_UNKNOWN;
  if (!data && size) return clcrt__cubin_fail(&c, "no data given");
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
