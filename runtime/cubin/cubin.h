/* A bounds-checked reader for CUDA cubins (ELF, EM_CUDA), shared by the runtime (kernel
 * info in compile-only mode) and the clcrt tool. It never reads outside [data, data+size)
 * and never trusts a count or offset from the file. See ../shared CUBIN-NOTES for the format. */
#ifndef CLCRT_CUBIN_H
#define CLCRT_CUBIN_H
#include <stddef.h>
#include <stdint.h>

#define CLCRT__CUBIN_UNKNOWN (-1) /* a field the cubin does not record */

typedef struct clcrt__cubin_kernel {
  char *name;              /* the entry symbol's name */
  int registers;           /* REGCOUNT, or CLCRT__CUBIN_UNKNOWN */
  int frame_bytes;         /* FRAME_SIZE */
  int min_stack_bytes;     /* MIN_STACK_SIZE */
  uint64_t static_smem;    /* size of .nv.shared.<kernel> */
  uint64_t reserved_smem;  /* the compiler's reserved shared memory (.nv.shared.reserved.*) */
  int param_bytes;         /* CBANK_PARAM_SIZE / sum of KPARAM_INFO */
  int num_params;
  uint32_t cluster[3];     /* CTA_PER_CLUSTER; zeros when not set */
  int explicit_cluster;    /* EXPLICIT_CLUSTER present */
  uint32_t reqntid[3];     /* REQNTID; zeros when not set */
  uint32_t maxntid[3];     /* MAX_THREADS; zeros when not set */
  int num_mbarriers;       /* NUM_MBARRIERS or CLCRT__CUBIN_UNKNOWN */
  int num_barriers;        /* NUM_BARRIERS or CLCRT__CUBIN_UNKNOWN */
  int spill_loads, spill_stores; /* from ANNOTATIONS where recorded, else CLCRT__CUBIN_UNKNOWN */
  int has_clc;             /* UGETNEXTWORKID found in the kernel's instructions */
  int clc_broadcast;       /* ...in its .BROADCAST (multicast) form */
  uint64_t text_bytes;     /* size of .text.<kernel> */
  const char *sched;       /* "clc", "steal", "static", "fixed" from a clcrt_<sched>_ name, else NULL */
  /* Added for the clcrt tool; everything above keeps its meaning. */
  int max_registers;       /* MAXREG_COUNT (the -maxrregcount ceiling), or CLCRT__CUBIN_UNKNOWN */
  int param_offset;        /* where the parameters start in constant bank 0 (PARAM_CBANK), or UNKNOWN */
  int max_cluster_rank;    /* MAX_CLUSTER_RANK, or CLCRT__CUBIN_UNKNOWN */
  int reg_reconfig;        /* REG_RECONFIG present: the kernel uses setmaxnreg */
  int reserved_smem_attr;  /* RESERVED_SMEM_USED present */
  int spill_load_bytes, spill_store_bytes; /* bytes moved by the spill LDL/STL, or UNKNOWN */
  int clc_count;           /* how many UGETNEXTWORKID instructions */
  uint64_t text_offset;    /* file offset of .text.<kernel>, for tools that slice the code */
  int param0_bytes;        /* size of parameter 0 (a clcrt kernel's Args), or CLCRT__CUBIN_UNKNOWN */
  size_t num_attrs;        /* .nv.info.<kernel> records this parser does not decode, kept raw */
  struct clcrt__cubin_attr *attrs;
} clcrt__cubin_kernel;

/* One EIATTR record kept as it was in the file: format 1-3 carry `value`, format 4 carries
 * `len` payload bytes. Ids are never given names they have not been checked to have. */
typedef struct clcrt__cubin_attr {
  uint8_t format, id;
  uint16_t value;
  uint32_t len;
  uint8_t *bytes;          /* len bytes (format 4), else NULL */
} clcrt__cubin_attr;

typedef struct clcrt__cubin {
  int sm;                  /* e.g. 90, 100 */
  char suffix;             /* 'a', 'f' or 0 */
  int abi_version;         /* ELF OS/ABI version byte: 7 or 8 */
  uint32_t e_flags;
  int toolkit_version;     /* from .note.nv.cuinfo (130 = 13.0), or CLCRT__CUBIN_UNKNOWN */
  char arch[16];           /* "sm_90a" */
  size_t num_kernels;
  clcrt__cubin_kernel *kernels;
  /* Added for the clcrt tool. */
  int virtual_sm;          /* from .note.nv.cuinfo, or CLCRT__CUBIN_UNKNOWN */
  int os_abi;              /* ELF OS/ABI byte: 0x41 (ABI v8) or 0x33 (ABI v7) */
  int compat_a;            /* .nv.compat says `a` (1), says not (0), or has no say (UNKNOWN) */
  char *producer;          /* .note.nv.tkinfo tool and version, e.g. "ptxas Cuda compilation tools, ...", or NULL */
  char *tool_options;      /* .note.nv.tkinfo command line, e.g. "-arch sm_90a -m 64", or NULL */
  int has_merc;            /* the file carries .nv.merc.* / .nv.capmerc.* copies (ignored) */
  size_t num_module_attrs; /* module .nv.info records this parser does not decode */
  clcrt__cubin_attr *module_attrs;
  size_t file_bytes;       /* how many bytes the ELF image spans (header, section and program header
                              tables, sections, segments), <= size; clcrt__cubin_span's answer */
} clcrt__cubin;

/* The name CUBIN-NOTES gives an EIATTR id (checked on CUDA 13 cubins), or NULL. */
const char *clcrt__eiattr_name(int id);

/* Parses a cubin. Returns 0 and fills *out (free with clcrt__cubin_free), or -1 with a
 * sentence in err (always NUL-terminated) saying what is wrong with the file; -2 when an
 * allocation failed. */
int clcrt__cubin_parse(const void *data, size_t size, clcrt__cubin *out, char *err, size_t errlen);
void clcrt__cubin_free(clcrt__cubin *c);

/* Reads len bytes at offset off of the file into buf. Returns 0, or -1 when it cannot. */
typedef int (*clcrt__cubin_read_fn)(void *user, uint64_t off, void *buf, size_t len);

/* Checks the frame of a cubin of file_size bytes before anything else of it is read: the ELF
 * magic, class, byte order and machine, then that the section header table, every section,
 * the program header table and every segment lie inside the file. Reads only the 64-byte
 * header and the two tables, through rd, a few KiB at a time. On success *span gets how many
 * bytes the ELF image spans (<= file_size; bytes after it are not part of the cubin). So a
 * tool can refuse a file that is not a cubin, or whose headers run past its end, without
 * reading it whole, and then read no more than the image. clcrt__cubin_parse makes the same
 * check first. Returns 0, or -1 with a sentence in err (always NUL-terminated), or -2 when an
 * allocation failed. */
int clcrt__cubin_span(clcrt__cubin_read_fn rd, void *user, uint64_t file_size, uint64_t *span, char *err,
                      size_t errlen);

/* Scans the instruction words of one text section for UGETNEXTWORKID; returns 1 found,
 * 0 not. *broadcast set to 1 if any found instance is the .BROADCAST form. */
int clcrt__sass_has_clc(const void *text, size_t size, int *broadcast);
/* The same scan, returning how many instances it found. */
int clcrt__sass_count_clc(const void *text, size_t size, int *broadcast);
#endif
