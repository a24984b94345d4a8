/* JSON for `inspect --json` and `diff --json`. The schema is documented in docs/tool.md
 * and versioned by its "schema" string: fields are only ever added, never renamed. */
#include <inttypes.h>

#include "tool.h"

void json_str(FILE *f, const char *s) {
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p == '\t') fputs("\\t", f);
    else if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\u%04x", *p); /* bytes from a file are not trusted to be UTF-8 */
    else fputc(*p, f);
  }
  fputc('"', f);
}

void json_int_or_null(FILE *f, long long v, int known) {
  if (known) fprintf(f, "%lld", v);
  else fputs("null", f);
}

void json_dims(FILE *f, const uint32_t d[3]) {
  if (!d[0] && !d[1] && !d[2]) fputs("null", f);
  else fprintf(f, "[%" PRIu32 ", %" PRIu32 ", %" PRIu32 "]", d[0], d[1], d[2]);
}

#define K(v) json_int_or_null(f, (v), (v) != CLCRT__CUBIN_UNKNOWN)

static void json_attrs(FILE *f, const clcrt__cubin_attr *a, size_t n) {
  fputc('[', f);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%s{\"id\": %u, \"format\": %u, ", i ? ", " : "", a[i].id, a[i].format);
    if (a[i].format == 4) {
      fputs("\"bytes\": \"", f);
      for (uint32_t j = 0; j < a[i].len; j++) fprintf(f, "%02x", a[i].bytes[j]);
      fputs("\"}", f);
    } else {
      fprintf(f, "\"value\": %u}", a[i].value);
    }
  }
  fputc(']', f);
}

void json_kernel(FILE *f, const clcrt__cubin_kernel *k, long long dynamic_smem, const char *in) {
  fprintf(f, "{\n%s  \"name\": ", in);
  json_str(f, k->name);
  fprintf(f, ",\n%s  \"sched\": ", in);
  json_str(f, k->sched);
  fprintf(f, ",\n%s  \"registers\": ", in);
  K(k->registers);
  fprintf(f, ",\n%s  \"max_registers\": ", in);
  K(k->max_registers);
  fprintf(f, ",\n%s  \"frame_bytes\": ", in);
  K(k->frame_bytes);
  fprintf(f, ",\n%s  \"min_stack_bytes\": ", in);
  K(k->min_stack_bytes);
  fprintf(f, ",\n%s  \"shared\": {\"static\": %" PRIu64 ", \"reserved\": %" PRIu64 ", \"user\": %" PRIu64
             ", \"dynamic\": ",
          in, k->static_smem, k->reserved_smem, k->static_smem - k->reserved_smem);
  json_int_or_null(f, dynamic_smem, dynamic_smem >= 0);
  fputc('}', f);
  fprintf(f, ",\n%s  \"params\": {\"bytes\": %d, \"count\": %d, \"cbank_offset\": ", in, k->param_bytes, k->num_params);
  K(k->param_offset);
  fprintf(f, "},\n%s  \"cluster\": ", in);
  json_dims(f, k->cluster);
  fprintf(f, ",\n%s  \"explicit_cluster\": %s,\n%s  \"max_cluster_rank\": ", in, k->explicit_cluster ? "true" : "false", in);
  K(k->max_cluster_rank);
  fprintf(f, ",\n%s  \"reqntid\": ", in);
  json_dims(f, k->reqntid);
  fprintf(f, ",\n%s  \"maxntid\": ", in);
  json_dims(f, k->maxntid);
  fprintf(f, ",\n%s  \"mbarriers\": ", in);
  K(k->num_mbarriers);
  fprintf(f, ",\n%s  \"barriers\": ", in);
  K(k->num_barriers);
  fprintf(f, ",\n%s  \"spills\": {\"loads\": ", in);
  K(k->spill_loads);
  fputs(", \"stores\": ", f);
  K(k->spill_stores);
  fputs(", \"load_bytes\": ", f);
  K(k->spill_load_bytes);
  fputs(", \"store_bytes\": ", f);
  K(k->spill_store_bytes);
  fprintf(f, "},\n%s  \"clc\": {\"present\": %s, \"count\": %d, \"broadcast\": %s}", in, k->has_clc ? "true" : "false",
          k->clc_count, k->clc_broadcast ? "true" : "false");
  fprintf(f, ",\n%s  \"reg_reconfig\": %s,\n%s  \"reserved_smem_attr\": %s", in, k->reg_reconfig ? "true" : "false", in,
          k->reserved_smem_attr ? "true" : "false");
  fprintf(f, ",\n%s  \"text_bytes\": %" PRIu64 ",\n%s  \"unknown_attributes\": ", in, k->text_bytes, in);
  json_attrs(f, k->attrs, k->num_attrs);
  fprintf(f, "\n%s}", in);
}

void json_cubin_header(FILE *f, const tool_input *x) {
  const clcrt__cubin *c = &x->cubin;
  char variant[2] = {c->suffix, 0};
  fputs("\"path\": ", f);
  json_str(f, x->path);
  fprintf(f, ", \"kind\": \"%s\", \"arch\": ", x->is_cache_entry ? "cache-entry" : "cubin");
  json_str(f, c->arch);
  fprintf(f, ", \"sm\": %d, \"variant\": ", c->sm);
  json_str(f, variant);
  fprintf(f, ",\n    \"elf\": {\"os_abi\": %d, \"abi_version\": %d, \"e_flags\": \"0x%08" PRIx32 "\"}", c->os_abi,
          c->abi_version, c->e_flags);
  fputs(", \"virtual_sm\": ", f);
  json_int_or_null(f, c->virtual_sm, c->virtual_sm != CLCRT__CUBIN_UNKNOWN);
  fputs(", \"toolkit_version\": ", f);
  json_int_or_null(f, c->toolkit_version, c->toolkit_version != CLCRT__CUBIN_UNKNOWN);
  fputs(",\n    \"producer\": ", f);
  json_str(f, c->producer);
  fputs(", \"tool_options\": ", f);
  json_str(f, c->tool_options);
  fprintf(f, ", \"merc_copies\": %s, \"bytes\": %zu,\n    \"unknown_module_attributes\": ", c->has_merc ? "true" : "false",
          x->elf_size);
  json_attrs(f, c->module_attrs, c->num_module_attrs);
}
