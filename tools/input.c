/* Reading input files (regular files only, with the reason for any refusal) and finding the
 * cubin in them: the file itself, or the one inside a compile-cache entry. A cubin's frame
 * (magic, header tables) is checked from its first bytes and tables before the rest is read,
 * and only the bytes its ELF image spans are read, so a large file that is not a cubin costs
 * a few reads, not its size in memory. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"

/* Opens path if it is a regular file: a FIFO or a device could block for ever or never end. */
static int open_regular(const char *path, int *fd, uint64_t *size, char *err, size_t errlen) {
  *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (*fd < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(*fd, &st) != 0) snprintf(err, errlen, "%s", strerror(errno));
  else if (S_ISDIR(st.st_mode)) snprintf(err, errlen, "is a directory, not a file");
  else if (!S_ISREG(st.st_mode)) snprintf(err, errlen, "is not a regular file");
  else {
    *size = (uint64_t)st.st_size;
    return 0;
  }
  close(*fd);
  *fd = -1;
  return -1;
}

/* Reads up to n bytes from offset off; returns how many it got (fewer when the file is
 * shorter, or shrank while we read), or -1 with errno set. */
static ssize_t read_upto(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

static int fd_read(void *user, uint64_t off, void *buf, size_t len) {
  return read_upto(*(int *)user, buf, len, off) == (ssize_t)len ? 0 : -1;
}

/* Reads the first n bytes of fd into a new buffer. */
static int read_head(int fd, uint64_t n, uint8_t **data, size_t *size, char *err, size_t errlen) {
  uint8_t *buf = malloc(n ? (size_t)n : 1);
  if (!buf) {
    snprintf(err, errlen, "out of memory for %llu bytes", (unsigned long long)n);
    return -1;
  }
  ssize_t got = read_upto(fd, buf, (size_t)n, 0);
  if (got < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    free(buf);
    return -1;
  }
  *data = buf;
  *size = (size_t)got;
  return 0;
}

int tool_read_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen) {
  *data = NULL;
  *size = 0;
  int fd;
  uint64_t n;
  if (open_regular(path, &fd, &n, err, errlen) != 0) return -1;
  int rc = -1;
  if (n > TOOL_MAX_FILE)
    snprintf(err, errlen, "is %llu bytes, more than the %u (1 GiB) this tool reads", (unsigned long long)n,
             TOOL_MAX_FILE);
  else rc = read_head(fd, n, data, size, err, errlen);
  close(fd);
  return rc;
}

int tool_input_load(tool_input *in, const char *path) {
  char *err = in->err;
  size_t errlen = sizeof in->err;
  memset(in, 0, sizeof(*in));
  in->path = path;
  in->dynamic_smem = -1;
  in->entry_sched = -1;
  int fd;
  uint64_t size, want;
  if (open_regular(path, &fd, &size, err, errlen) != 0) return TOOL_BADINPUT;
  uint8_t magic[8];
  ssize_t ml = read_upto(fd, magic, sizeof magic, 0);
  int rc = TOOL_BADINPUT;
  if (ml < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    goto out;
  }
  if (tool_is_cache_entry(magic, (size_t)ml)) {
    /* An entry is validated whole (its checksum covers every byte), so it is read whole. */
    want = size;
    if (want > TOOL_MAX_FILE) {
      snprintf(err, errlen, "a compile-cache entry of %llu bytes, more than the %u (1 GiB) this tool reads",
               (unsigned long long)size, TOOL_MAX_FILE);
      goto out;
    }
  } else {
    /* Refuses a file that is not a cubin, or whose section or program headers run past its
     * end, from its header and tables alone; then reads only the ELF image. */
    if (clcrt__cubin_span(fd_read, &fd, size, &want, err, errlen) != 0) goto out;
    if (want > TOOL_MAX_FILE) {
      snprintf(err, errlen, "its ELF image spans %llu bytes, more than the %u (1 GiB) this tool reads",
               (unsigned long long)want, TOOL_MAX_FILE);
      goto out;
    }
  }
  if (read_head(fd, want, &in->data, &in->size, err, errlen) != 0) goto out;
  close(fd);
  fd = -1;
  in->elf = in->data;
  in->elf_size = in->size;
  if (tool_is_cache_entry(in->data, in->size) && tool_cache_locate(in) != 0) return TOOL_BADINPUT;
  if (clcrt__cubin_parse(in->elf, in->elf_size, &in->cubin, err, errlen) != 0) return TOOL_BADINPUT;
  if (!in->is_cache_entry) in->elf_size = in->cubin.file_bytes;
  rc = TOOL_OK;
out:
  if (fd >= 0) close(fd);
  return rc;
}

void tool_input_free(tool_input *in) {
  /* Parse failures already freed the cubin and zeroed it, so this is safe either way. */
  clcrt__cubin_free(&in->cubin);
  free(in->data);
  in->data = NULL;
}
