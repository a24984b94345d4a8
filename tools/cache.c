/* clcrt cache ls | info | clear over the on-disk compile cache (runtime/cache/diskcache.h):
 * the directory is resolved and entries are read, validated and removed by the cache's own
 * code, so the tool and the runtime can never disagree about the format. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "diskcache.h"
#include "alloc.h"
#include "env.h"
#include "store.h"
#include "tool.h"

static const char help[] =
    "usage: clcrt cache ls    [--dir DIR] [--json]\n"
    "       clcrt cache info  [--dir DIR] [ENTRY...]\n"
    "       clcrt cache clear [--dir DIR]\n"
    "\n"
    "The compile cache holds one file per compiled kernel (<key>.clce), and its store folder\n"
    "(store/) the values programs keep with clcrt_store_put (<hash>.clcs). The directory is\n"
    "--dir, else $CLCRT_CACHE_DIR, else $XDG_CACHE_HOME/clcrt, else ~/.cache/clcrt.\n"
    "\n"
    "  ls      one line per entry: key, size, last use, architecture, kernel, scheduler;\n"
    "          then one per store entry: namespace/key, value size, when written, device\n"
    "          scope; damaged entries (which the runtime treats as misses) are marked\n"
    "  info    the directory, entry count and bytes, store entries; with ENTRY (a key, the\n"
    "          first digits of one as ls prints them, or a path), that entry's header and\n"
    "          kernels\n"
    "  clear   delete every entry, store entry and leftover temporary file (nothing else\n"
    "          is touched)\n"
    "  --json  (ls) one JSON document: {\"schema\": \"clcrt-cache-ls-1\", \"dir\", \"entries\",\n"
    "          \"store\"}\n"
    "\n"
    "Exit codes: 0 success (a missing cache directory is an empty cache, unless --dir\n"
    "names it); 2 usage error, or the disk cache is turned off; 3 the --dir directory does\n"
    "not exist, the directory or an entry cannot be read or removed, or a named ENTRY is\n"
    "damaged.\n";

typedef struct ls_state {
  int json;
  size_t n;
} ls_state;

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int ls_visit(void *user, const char *path, const clcrt__dc_meta *m, clcrt_status st, const char *why) {
  ls_state *s = user;
  if (s->json) {
    printf("%s\n  {\"file\": ", s->n ? "," : "");
    json_str(stdout, base_name(path));
    if (m) {
      printf(", \"valid\": true, \"bytes\": %" PRIu64 ", \"last_used\": %lld, \"created\": %lld, \"arch\": ", m->file_size,
             (long long)m->last_used, (long long)m->created);
      json_str(stdout, m->arch);
      printf(", \"kernel\": ");
      json_str(stdout, m->name);
      printf(", \"sched\": \"%s\", \"block\": [%u, %u, %u], \"cluster\": [%u, %u, %u], \"dynamic_smem\": %u, "
             "\"cubin_bytes\": %" PRIu64 ", \"ptx_bytes\": %" PRIu64 ", \"compile_ms\": %.3f}",
             clcrt_sched_name((clcrt_sched)m->sched), m->block.x, m->block.y, m->block.z, m->cluster.x,
             m->cluster.y, m->cluster.z, m->smem_bytes, m->cubin_size, m->ptx_size, m->compile_ms);
    } else {
      printf(", \"valid\": false, \"error\": ");
      json_str(stdout, why && *why ? why : clcrt_status_str(st));
      printf("}");
    }
  } else if (m) {
    char when[32];
    time_t t = (time_t)m->last_used;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    printf("%.16s  %9" PRIu64 "  %s  %-8s %s (%s)\n", base_name(path), m->file_size, when, m->arch, m->name,
           clcrt_sched_name((clcrt_sched)m->sched));
  } else {
    printf("%.16s  DAMAGED: %s\n", base_name(path), why && *why ? why : clcrt_status_str(st));
  }
  s->n++;
  return 0;
}

/* The store's entries (store.h), after the compile cache's. */
typedef struct st_state {
  int json;
  size_t n, damaged;
  unsigned long long bytes;
} st_state;

static int st_visit(void *user, const char *path, const clcrt__st_meta *m, clcrt_status st, const char *why) {
  st_state *s = user;
  if (!m) s->damaged++;
  else s->bytes += m->file_size;
  if (s->json < 0) { /* counting only */
  } else if (s->json) {
    printf("%s\n  {\"file\": ", s->n ? "," : "");
    json_str(stdout, base_name(path));
    if (m) {
      printf(", \"valid\": true, \"ns\": ");
      json_str(stdout, m->ns);
      printf(", \"key\": ");
      json_str(stdout, m->key);
      printf(", \"scope\": ");
      json_str(stdout, m->scope);
      printf(", \"value_bytes\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"written\": %lld}", m->value_size, m->file_size,
             (long long)m->modified);
    } else {
      printf(", \"valid\": false, \"error\": ");
      json_str(stdout, why && *why ? why : clcrt_status_str(st));
      printf("}");
    }
  } else if (m) {
    char when[32];
    time_t t = (time_t)m->modified;
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&t));
    printf("  %s/%s  %" PRIu64 " bytes  %s  %s\n", m->ns, m->key, m->value_size, when, m->scope);
  } else {
    printf("  %.16s  DAMAGED: %s\n", base_name(path), why && *why ? why : clcrt_status_str(st));
  }
  s->n++;
  return 0;
}

/* Lists (json 0 or 1) or counts (json -1) the store's entries into *s. */
static clcrt_status store_walk(const char *dir, st_state *s) {
  char *sdir = clcrt__st_dir(dir);
  if (!sdir) return CLCRT_E_NOMEM;
  clcrt_status st = clcrt__st_foreach(sdir, st_visit, s);
  clcrt__free(sdir);
  return st;
}

static int cache_ls(const char *dir, int json) {
  ls_state s = {json, 0};
  if (json) {
    printf("{\"schema\": \"clcrt-cache-ls-1\", \"dir\": ");
    json_str(stdout, dir);
    printf(", \"entries\": [");
  }
  clcrt_status st = clcrt__dc_foreach(dir, 1, ls_visit, &s);
  st_state ss = {-1, 0, 0, 0};
  clcrt_status sst = store_walk(dir, &ss); /* counted first: the text says how many */
  if (json) {
    printf("\n], \"store\": [");
    ss = (st_state){1, 0, 0, 0};
    if (sst == CLCRT_OK) sst = store_walk(dir, &ss);
    printf("\n]}\n");
  } else {
    if (st == CLCRT_OK && !s.n) printf(ss.n ? "(no compiled kernels in %s)\n" : "(no entries in %s)\n", dir);
    if (sst == CLCRT_OK && ss.n) {
      printf("store: %zu entr%s in %s/%s\n", ss.n, ss.n == 1 ? "y" : "ies", dir, CLCRT__ST_SUBDIR);
      ss = (st_state){0, 0, 0, 0};
      sst = store_walk(dir, &ss);
    }
  }
  if (st != CLCRT_OK || sst != CLCRT_OK) {
    fprintf(stderr, "clcrt cache: %s: %s\n", dir, clcrt_status_str(st != CLCRT_OK ? st : sst));
    return TOOL_BADINPUT;
  }
  return TOOL_OK;
}

static int count_damaged(void *user, const char *path, const clcrt__dc_meta *m, clcrt_status st, const char *why) {
  (void)path, (void)st, (void)why;
  if (!m) ++*(unsigned long *)user;
  return 0;
}

/* The file an `info ENTRY` names: a path when it has a slash; else a file of the cache
 * directory: the name as given, the key with CLCRT__DC_SUFFIX added, or the one entry whose
 * name starts with it (ls prints the first 16 digits of each key, and those are what people
 * copy). NULL with the reason in why (no such entry, or several). */
static char *entry_path(const char *dir, const char *arg, char *why, size_t why_len) {
  size_t l = strlen(dir) + strlen(arg) + sizeof CLCRT__DC_SUFFIX + 2;
  char *path = malloc(l);
  if (!path) {
    snprintf(why, why_len, "out of memory");
    return NULL;
  }
  if (strchr(arg, '/')) {
    snprintf(path, l, "%s", arg);
    return path;
  }
  struct stat st;
  snprintf(path, l, "%s/%s", dir, arg);
  if (stat(path, &st) == 0) return path;
  snprintf(path, l, "%s/%s%s", dir, arg, CLCRT__DC_SUFFIX);
  if (stat(path, &st) == 0) return path;
  free(path);
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(why, why_len, "%s: %s", dir, strerror(errno));
    return NULL;
  }
  char *found = NULL;
  unsigned matches = 0;
  size_t n = strlen(arg), sl = strlen(CLCRT__DC_SUFFIX);
  for (struct dirent *de; n && (de = readdir(d)) != NULL;) {
    size_t dl = strlen(de->d_name);
    if (dl <= sl || strcmp(de->d_name + dl - sl, CLCRT__DC_SUFFIX) || strncmp(de->d_name, arg, n)) continue;
    if (++matches == 1) {
      size_t fl = strlen(dir) + dl + 2;
      if ((found = malloc(fl))) snprintf(found, fl, "%s/%s", dir, de->d_name);
    }
  }
  closedir(d);
  if (matches == 1 && found) return found;
  free(found);
  if (matches > 1)
    snprintf(why, why_len, "%u entries of %s start with %s: give more of the key", matches, dir, arg);
  else if (matches == 1)
    snprintf(why, why_len, "out of memory");
  else
    snprintf(why, why_len, "no entry of %s is %s or starts with it (clcrt cache ls lists them)", dir, arg);
  return NULL;
}

static int cache_info(const char *dir, int argc, char **argv) {
  if (argc == 0) {
    unsigned long entries = 0, damaged = 0;
    unsigned long long bytes = 0;
    clcrt_status st = clcrt__dc_usage(dir, &entries, &bytes);
    if (st == CLCRT_OK) st = clcrt__dc_foreach(dir, 1, count_damaged, &damaged);
    if (st != CLCRT_OK) {
      fprintf(stderr, "clcrt cache: %s: %s\n", dir, clcrt_status_str(st));
      return TOOL_BADINPUT;
    }
    st_state ss = {-1, 0, 0, 0};
    if ((st = store_walk(dir, &ss)) != CLCRT_OK) {
      fprintf(stderr, "clcrt cache: %s/%s: %s\n", dir, CLCRT__ST_SUBDIR, clcrt_status_str(st));
      return TOOL_BADINPUT;
    }
    printf("directory  %s\nentries    %lu (%lu damaged)\nbytes      %llu\nlimit      %llu bytes (CLCRT_CACHE_MAX_BYTES)\n"
           "store      %zu entr%s (%zu damaged), %llu bytes (never evicted)\n",
           dir, entries, damaged, bytes, clcrt__env_get()->cache_max_bytes, ss.n, ss.n == 1 ? "y" : "ies", ss.damaged,
           ss.bytes);
    return TOOL_OK;
  }
  int rc = TOOL_OK;
  for (int i = 0; i < argc; i++) {
    char why[400] = "";
    char *path = entry_path(dir, argv[i], why, sizeof why);
    if (!path) {
      fprintf(stderr, "clcrt cache info: %s\n", why);
      rc = TOOL_BADINPUT;
      continue;
    }
    clcrt__dc_meta m;
    memset(&m, 0, sizeof m);
    clcrt_status st = clcrt__dc_read_meta(path, 1, &m, why, sizeof why);
    if (st != CLCRT_OK) {
      fprintf(stderr, "clcrt: %s: %s\n", path, *why ? why : clcrt_status_str(st));
      rc = TOOL_BADINPUT;
    } else {
      printf("%s\n  kernel     %s\n  arch       %s\n  sched      %s\n  block      %u x %u x %u\n  cluster    %u x %u x %u\n"
             "  dyn. smem  %u bytes\n  NVRTC      %d.%d\n  compiled   in %.3f ms\n  sizes      %" PRIu64
             " bytes file, %" PRIu64 " cubin, %" PRIu64 " PTX\n  options    ",
             path, m.name, m.arch, clcrt_sched_name((clcrt_sched)m.sched), m.block.x, m.block.y, m.block.z,
             m.cluster.x, m.cluster.y, m.cluster.z, m.smem_bytes, m.nvrtc_major, m.nvrtc_minor, m.compile_ms,
             m.file_size, m.cubin_size, m.ptx_size);
      for (const char *o = m.options ? m.options : ""; *o; o++) fputs(*o == '\n' ? " " : (char[2]){*o, 0}, stdout);
      printf("\n");
      tool_input in;
      if (tool_input_load(&in, path) == TOOL_OK)
        for (size_t k = 0; k < in.cubin.num_kernels; k++) {
          const clcrt__cubin_kernel *kk = &in.cubin.kernels[k];
          printf("  resources  %s: %d registers, %d bytes stack, %" PRIu64 " bytes static shared, CLC %s\n", kk->name,
                 kk->registers, kk->frame_bytes, kk->static_smem, kk->has_clc ? "yes" : "no");
        }
      tool_input_free(&in);
    }
    clcrt__dc_meta_free(&m);
    free(path);
  }
  return rc;
}

static int cache_clear(const char *dir) {
  unsigned long removed = 0, sremoved = 0;
  clcrt_status st = clcrt__dc_clear(dir, &removed);
  char *sdir = clcrt__st_dir(dir);
  clcrt_status sst = sdir ? clcrt__st_clear(sdir, &sremoved) : CLCRT_E_NOMEM;
  clcrt__free(sdir);
  if (st != CLCRT_OK || sst != CLCRT_OK) {
    fprintf(stderr, "clcrt cache: %s: %s (%lu entries and %lu store entries removed)\n", dir,
            clcrt_status_str(st != CLCRT_OK ? st : sst), removed, sremoved);
    return TOOL_BADINPUT;
  }
  printf("removed %lu entr%s and %lu store entr%s from %s\n", removed, removed == 1 ? "y" : "ies", sremoved,
         sremoved == 1 ? "y" : "ies", dir);
  return TOOL_OK;
}

int cmd_cache(int argc, char **argv) {
  static const struct option opts[] = {{"dir", required_argument, NULL, 'd'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0, 0, 0, 0}};
  const char *dir_opt = NULL;
  int json = 0, o;
  if (argc < 2) {
    fprintf(stderr, "clcrt cache: expected ls, info or clear\n\n%s", help);
    return TOOL_USAGE;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
    fputs(help, stdout);
    return TOOL_OK;
  }
  if (strcmp(sub, "ls") != 0 && strcmp(sub, "info") != 0 && strcmp(sub, "clear") != 0) {
    fprintf(stderr, "clcrt cache: unknown subcommand '%s'\n\n%s", sub, help);
    return TOOL_USAGE;
  }
  tool_getopt_start();
  argc--, argv++;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (o == 'd') dir_opt = optarg;
    else if (o == 'j') json = 1;
    else if (o == 'h') {
      fputs(help, stdout);
      return TOOL_OK;
    } else {
      fprintf(stderr, "clcrt cache %s: unknown option or missing value: '%s'\n\n%s", sub, argv[optind - 1], help);
      return TOOL_USAGE;
    }
  }
  if (json && strcmp(sub, "ls") != 0) {
    fprintf(stderr, "clcrt cache %s: --json is only for ls\n", sub);
    return TOOL_USAGE;
  }
  if (strcmp(sub, "info") != 0 && optind != argc) {
    fprintf(stderr, "clcrt cache %s: unexpected argument '%s'\n", sub, argv[optind]);
    return TOOL_USAGE;
  }
  if (!tool_cache_available()) {
    fprintf(stderr, "clcrt cache: this clcrt was built without the disk cache (runtime/cache/diskcache.c)\n");
    return TOOL_USAGE;
  }
  char *dir = NULL;
  const char *why = NULL;
  if (dir_opt && !*dir_opt) dir_opt = NULL;
  /* A directory named on the command line must exist: a typo would otherwise read as an
   * empty cache, or a clear that removed nothing, and exit 0. (The directory the runtime
   * would use may well not exist yet; that one is an empty cache.) */
  if (dir_opt) {
    struct stat ds;
    const char *bad = stat(dir_opt, &ds) != 0 ? strerror(errno) : !S_ISDIR(ds.st_mode) ? "not a directory" : NULL;
    if (bad) {
      fprintf(stderr, "clcrt cache %s: --dir %s: %s; name an existing cache directory\n", sub, dir_opt, bad);
      return TOOL_BADINPUT;
    }
  }
  clcrt_status st = clcrt__dc_resolve_dir(dir_opt, &dir, &why);
  if (st != CLCRT_OK || !dir) {
    fprintf(stderr, "clcrt cache: no cache directory: %s\n", why ? why : clcrt_status_str(st));
    return st == CLCRT_E_NOMEM ? TOOL_BADINPUT : TOOL_USAGE;
  }
  int rc = strcmp(sub, "ls") == 0     ? cache_ls(dir, json)
           : strcmp(sub, "info") == 0 ? cache_info(dir, argc - optind, argv + optind)
                                      : cache_clear(dir);
  /* dir came from the library's allocator. */
  clcrt__free(dir);
  return rc;
}
