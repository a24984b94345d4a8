/* The tool's link to the on-disk compile cache (runtime/cache/diskcache.h). The cache's reader
 * is declared weak here so that the tool still builds and reads cubins while the cache is
 * not yet part of the library; the runtime's own compile path references it strongly, so
 * once it exists it is always linked in and these pointers are never NULL. */
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "tool.h"

#pragma weak clcrt__dc_read_meta
#pragma weak clcrt__dc_meta_free
#pragma weak clcrt__dc_foreach
#pragma weak clcrt__dc_usage
#pragma weak clcrt__dc_clear
#pragma weak clcrt__dc_resolve_dir

int tool_cache_available(void) {
  return clcrt__dc_read_meta && clcrt__dc_meta_free && clcrt__dc_foreach && clcrt__dc_usage && clcrt__dc_clear &&
         clcrt__dc_resolve_dir;
}

int tool_is_cache_entry(const uint8_t *data, size_t size) {
  return size >= 8 && memcmp(data, CLCRT__DC_MAGIC, 8) == 0;
}

/* Validates the entry at path (size, lengths, checksum) through the cache's own reader,
 * then points in->elf at its cubin: the cubin sits right before the PTX and the checksum. */
int tool_cache_locate(tool_input *in) {
  if (!tool_cache_available()) {
    snprintf(in->err, sizeof in->err, "a compile-cache entry, but this clcrt was built without the disk cache");
    return -1;
  }
  clcrt__dc_meta m;
  char why[200] = "";
  memset(&m, 0, sizeof m);
  clcrt_status st = clcrt__dc_read_meta(in->path, 1, &m, why, sizeof why);
  if (st != CLCRT_OK) {
    snprintf(in->err, sizeof in->err, "damaged compile-cache entry: %s", *why ? why : clcrt_status_str(st));
    clcrt__dc_meta_free(&m);
    return -1;
  }
  uint64_t tail = (uint64_t)CLCRT__DC_SUM + m.ptx_size;
  /* The file may have changed between the reader's check and ours: check again. */
  if (m.cubin_size == 0 || tail > in->size || m.cubin_size > in->size - tail) {
    snprintf(in->err, sizeof in->err, "compile-cache entry changed while it was read");
    clcrt__dc_meta_free(&m);
    return -1;
  }
  in->elf = in->data + (in->size - tail - m.cubin_size);
  in->elf_size = (size_t)m.cubin_size;
  in->is_cache_entry = 1;
  in->dynamic_smem = (long long)m.smem_bytes;
  in->entry_sched = m.sched;
  clcrt__dc_meta_free(&m);
  return 0;
}
