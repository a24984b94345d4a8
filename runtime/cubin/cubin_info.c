/* The records NVIDIA keeps in a cubin's sections, read as hostile input like the rest of the
 * file (cubin.c): the .nv.info attribute records of each kernel and of the module, the notes,
 * the compatibility section, and the instruction words that hold Cluster Launch Control. */
#include <string.h>

#include "alloc.h"
#include "cubin_read.h"

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

static int attr_push(clcrt__cubin_ctx *c, clcrt__cubin_attr **arr, size_t *n, int fmt, int id, uint16_t x,
                     const uint8_t *p, uint32_t len) {
  /* Growing by one keeps the code simple; records per kernel number in the tens. */
  clcrt__cubin_attr *a = clcrt__realloc(*arr, (*n + 1) * sizeof(**arr));
  if (!a) return clcrt__cubin_oom(c);
  *arr = a;
  clcrt__cubin_attr *r = &a[*n];
  memset(r, 0, sizeof(*r));
  r->format = (uint8_t)fmt;
  r->id = (uint8_t)id;
  r->value = x;
  if (fmt == 4 && len) {
    r->bytes = clcrt__malloc(len);
    if (!r->bytes) return clcrt__cubin_oom(c);
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
static void count_spills(const clcrt__cubin_ctx *c, clcrt__cubin_kernel *k, const clcrt__cubin_sect *text,
                         const uint8_t *p, uint32_t len) {
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

int clcrt__cubin_kernel_info(clcrt__cubin_ctx *c, clcrt__cubin_kernel *k, const clcrt__cubin_sect *info,
                             const clcrt__cubin_sect *text) {
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
      if (x > n - pos)
        return clcrt__cubin_fail(c, "%s: a record (attribute 0x%02x) claims %u bytes, %llu remain", info->name, id, x,
                                 (unsigned long long)(n - pos));
      p = d + pos;
      len = x;
      pos += x;
    } else if (fmt < 1 || fmt > 3) {
      return clcrt__cubin_fail(c, "%s: record format %d is unknown, so the records after it cannot be found",
                               info->name, fmt);
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
int clcrt__cubin_module_info(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *info,
                             const uint32_t *sym_to_kernel, size_t nsyms) {
  const uint8_t *d = c->d + info->offset;
  uint64_t n = info->size, pos = 0;
  while (pos + 4 <= n) {
    int fmt = d[pos], id = d[pos + 1];
    uint16_t x = rd16(d + pos + 2);
    pos += 4;
    const uint8_t *p = NULL;
    if (fmt == 4) {
      if (x > n - pos)
        return clcrt__cubin_fail(c, ".nv.info: a record (attribute 0x%02x) claims %u bytes, %llu remain", id, x,
                                 (unsigned long long)(n - pos));
      p = d + pos;
      pos += x;
    } else if (fmt < 1 || fmt > 3) {
      return clcrt__cubin_fail(c, ".nv.info: record format %d is unknown, so the records after it cannot be found",
                               fmt);
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

void clcrt__cubin_compat(const clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *s) {
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
int clcrt__cubin_notes(clcrt__cubin_ctx *c, clcrt__cubin *out, const clcrt__cubin_sect *s) {
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
      if (o_tool < slen && o_ver < slen && memchr(strs + o_tool, 0, slen - o_tool) &&
          memchr(strs + o_ver, 0, slen - o_ver)) {
        size_t l1 = strlen(strs + o_tool), l2 = strlen(strs + o_ver);
        out->producer = clcrt__malloc(l1 + l2 + 2);
        if (!out->producer) return clcrt__cubin_oom(c);
        memcpy(out->producer, strs + o_tool, l1);
        out->producer[l1] = ' ';
        memcpy(out->producer + l1 + 1, strs + o_ver, l2 + 1);
      }
      if (o_opt < slen && memchr(strs + o_opt, 0, slen - o_opt)) {
        out->tool_options = clcrt__strdup(strs + o_opt);
        if (!out->tool_options) return clcrt__cubin_oom(c);
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
