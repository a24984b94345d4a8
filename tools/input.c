/* Reading input files (whole regular files only, with the reason for any refusal) and
 * finding the cubin in them: the file itself, or the one inside a compile-cache entry. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

int tool_read_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen) {
  *data = NULL;
  *size = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    close(fd);
    return -1;
  }
  /* A FIFO or a device could block forever or never end: only regular files are read. */
  if (S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "is a directory, not a file");
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "is not a regular file");
    close(fd);
    return -1;
  }
  if ((unsigned long long)st.st_size > TOOL_MAX_FILE) {
    snprintf(err, errlen, "is %lld bytes, more than the %u this tool reads", (long long)st.st_size, TOOL_MAX_FILE);
    close(fd);
    return -1;
  }
  size_t n = (size_t)st.st_size, got = 0;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) {
    snprintf(err, errlen, "out of memory");
    close(fd);
    return -1;
  }
  /* The file may shrink while we read it; we keep what was there. */
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      snprintf(err, errlen, "%s", strerror(errno));
      free(buf);
      close(fd);
      return -1;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  close(fd);
  *data = buf;
  *size = got;
  return 0;
}

int tool_input_load(tool_input *in, const char *path) {
  char *err = in->err;
  size_t errlen = sizeof in->err;
  memset(in, 0, sizeof(*in));
  in->path = path;
  in->dynamic_smem = -1;
  in->entry_sched = -1;
  if (tool_read_file(path, &in->data, &in->size, err, errlen) != 0) return TOOL_BADINPUT;
  in->elf = in->data;
  in->elf_size = in->size;
  if (tool_is_cache_entry(in->data, in->size) && tool_cache_locate(in) != 0) return TOOL_BADINPUT;
  int rc = clcrt__cubin_parse(in->elf, in->elf_size, &in->cubin, err, errlen);
  if (rc != 0) return TOOL_BADINPUT;
  if (!in->is_cache_entry) in->elf_size = in->cubin.file_bytes;
  return TOOL_OK;
}

void tool_input_free(tool_input *in) {
  /* Parse failures already freed the cubin and zeroed it, so this is safe either way. */
  clcrt__cubin_free(&in->cubin);
  free(in->data);
  in->data = NULL;
}
