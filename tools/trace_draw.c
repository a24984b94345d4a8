/* clcrt trace draw: a trace as a timeline picture, PNG (through libpng) or SVG (by hand).
 *
 * SMs run down the side, time runs across; each tile is a rectangle coloured by its
 * cluster, on white, so idle time is blank. Several CTAs share an SM and their tiles
 * overlap in time, so an SM's row is split into lanes: each tile takes the first lane
 * free at its start (interval partitioning in start order), and the number of lanes an SM
 * gets is the most tiles it ran at once (at most MAX_LANES; beyond that tiles share the
 * lane that frees first). Both formats use one layout, so they look alike.
 *
 * Size: the PNG costs one rectangle per tile (a million tiles draw in well under a
 * second). An SVG with up to SVG_EXACT_MAX tiles has one <rect> per tile, with a tooltip;
 * a larger one is rasterised per lane at the picture's width and written as runs of one
 * colour, so its size is bounded by lanes x width, not by the number of tiles. */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_LANES 32
#define SVG_EXACT_MAX 20000

/* 20 colours, strong ones then light ones, so clusters next to each other differ. */
static const uint8_t palette[20][3] = {{31, 119, 180},  {255, 127, 14},  {44, 160, 44},   {214, 39, 40},
                                       {148, 103, 189}, {140, 86, 75},   {227, 119, 194}, {127, 127, 127},
                                       {188, 189, 34},  {23, 190, 207},  {174, 199, 232}, {255, 187, 120},
                                       {152, 223, 138}, {255, 152, 150}, {197, 176, 213}, {196, 156, 148},
                                       {247, 182, 210}, {199, 199, 199}, {219, 219, 141}, {158, 218, 229}};
static const uint8_t ink[3] = {40, 40, 40}, grid[3] = {232, 232, 232}, axis[3] = {110, 110, 110};

typedef struct layout {
  int w, h, s;            /* picture, font scale */
  int px0, px1, py0, py1; /* plot area [px0, px1) x [py0, py1) */
  uint64_t t0, t1;        /* times at px0 and px1 */
  unsigned nsm;           /* rows */
  double row_h;
  uint8_t lanes[CLCRT_TRACE_MAX_SMS];
  uint8_t *lane;        /* each record's lane */
  double step, unit_ns; /* ticks */
  const char *unit;
  int decimals;
  unsigned sm_step; /* label every sm_step-th SM */
  char title[320];
} layout;

static void fmt_time(char *b, size_t n, double ns) {
  if (ns < 1e3) snprintf(b, n, "%.0f ns", ns);
  else if (ns < 1e6) snprintf(b, n, "%.2f µs", ns / 1e3);
  else if (ns < 1e9) snprintf(b, n, "%.3f ms", ns / 1e6);
  else snprintf(b, n, "%.3f s", ns / 1e9);
}

/* Next code point of UTF-8 text: U+00B5 is the one non-ASCII character the font has. */
static unsigned next_cp(const char **p) {
  const unsigned char *u = (const unsigned char *)*p;
  if (u[0] == 0xc2 && u[1] == 0xb5) {
    *p += 2;
    return 0xb5;
  }
  (*p)++;
  return u[0] < 0x80 ? u[0] : '?';
}

static int text_w(const char *t, int s) {
  int n = 0;
  while (*t) next_cp(&t), n++;
  return n ? n * (TOOL_FONT_W + 1) * s - s : 0;
}

/* Lanes, in start order: the first lane free at a tile's start, a new one while there
 * are fewer than MAX_LANES, else the one that frees first. */
static int assign_lanes(const clcrt_trace_record *r, size_t n, layout *L) {
  uint64_t(*end)[MAX_LANES] = calloc(CLCRT_TRACE_MAX_SMS, sizeof *end);
  L->lane = malloc(n ? n : 1);
  if (!end || !L->lane) {
    free(end);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    unsigned sm = r[i].sm, nl = L->lanes[sm], pick = MAX_LANES;
    for (unsigned l = 0; l < nl && pick == MAX_LANES; l++)
      if (end[sm][l] <= r[i].start_ns) pick = l;
    if (pick == MAX_LANES && nl < MAX_LANES) pick = L->lanes[sm]++;
    if (pick == MAX_LANES) {
      pick = 0;
      for (unsigned l = 1; l < MAX_LANES; l++)
        if (end[sm][l] < end[sm][pick]) pick = l;
    }
    if (r[i].end_ns > end[sm][pick]) end[sm][pick] = r[i].end_ns;
    L->lane[i] = (uint8_t)pick;
  }
  free(end);
  return 0;
}

static double x_at(const layout *L, uint64_t t) {
  return L->px0 + (double)(t - L->t0) * (L->px1 - L->px0) / (double)(L->t1 - L->t0);
}

/* Tick i's column (in doubles: i * step may pass 2^64 on a trace that spans most of it). */
static double tick_x(const layout *L, int i) {
  return L->px0 + i * L->step * (L->px1 - L->px0) / (double)(L->t1 - L->t0);
}

/* Pixel rows [*y0, *y1) of an SM's lane; at least one row. */
static void lane_rows(const layout *L, unsigned sm, unsigned lane, int *y0, int *y1) {
  unsigned nl = L->lanes[sm] ? L->lanes[sm] : 1;
  double top = L->py0 + sm * L->row_h, hgt = L->row_h >= 4 ? L->row_h - 1 : L->row_h; /* a gap between SMs */
  *y0 = (int)(top + hgt * lane / nl);
  *y1 = (int)(top + hgt * (lane + 1) / nl);
  if (*y1 <= *y0) *y1 = *y0 + 1;
}

/* Pixel columns [*x0, *x1) a tile touches: every column it covers in part, so that a
 * tile shorter than a pixel still shows and a gap shows only when it is a pixel wide. */
static void tile_cols(const layout *L, const clcrt_trace_record *r, int *x0, int *x1) {
  *x0 = (int)x_at(L, r->start_ns);
  *x1 = (int)ceil(x_at(L, r->end_ns));
  if (*x1 <= *x0) *x1 = *x0 + 1;
}

static int plan(const clcrt_trace *t, const clcrt_trace_summary *sum, const tool_draw_opts *o, layout *L) {
  size_t n;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  memset(L, 0, sizeof *L);
  L->w = o->width;
  L->h = o->height;
  L->s = L->w >= 1400 && L->h >= 500 ? 2 : 1;
  int s = L->s;
  L->nsm = sum->num_sms ? sum->num_sms : 1;
  L->px0 = 4 * s + text_w("SM 1023", s) + 5 * s;
  L->px1 = L->w - 12 * s;
  L->py0 = 4 * s + TOOL_FONT_H * s + 7 * s;
  L->py1 = L->h - (5 * s + TOOL_FONT_H * s + 5 * s);
  L->row_h = (double)(L->py1 - L->py0) / L->nsm;
  if (n) {
    L->t0 = r[0].start_ns;
    for (size_t i = 0; i < n; i++)
      if (r[i].end_ns > L->t1) L->t1 = r[i].end_ns;
  }
  if (o->time_ns && L->t1 - L->t0 < o->time_ns) L->t1 = L->t0 + o->time_ns; /* a shared scale */
  if (L->t1 <= L->t0) L->t1 = L->t0 + 1;
  if (assign_lanes(r, n, L)) return -1;
  /* Ticks 1, 2 or 5 x 10^k apart, about one per 90 pixels of label room. */
  double span = (double)(L->t1 - L->t0);
  int target = (L->px1 - L->px0) / (90 * s);
  if (target < 2) target = 2;
  if (target > 10) target = 10;
  double raw = span / target, p = pow(10, floor(log10(raw))), m = raw / p;
  L->step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  L->unit_ns = L->step >= 1e6 ? 1e6 : L->step >= 1e3 ? 1e3 : 1;
  L->unit = L->unit_ns == 1e6 ? "ms" : L->unit_ns == 1e3 ? "µs" : "ns";
  double rel = L->step / L->unit_ns;
  L->decimals = rel >= 1 ? 0 : (int)ceil(-log10(rel) - 1e-9);
  static const unsigned steps[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
  L->sm_step = 1000;
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
    if (steps[i] * L->row_h >= (TOOL_FONT_H + 3) * s) {
      L->sm_step = steps[i];
      break;
    }
  char span_s[32], tail_s[32];
  fmt_time(span_s, sizeof span_s, sum->span_ns);
  fmt_time(tail_s, sizeof tail_s, sum->tail_ns);
  int k = snprintf(L->title, sizeof L->title,
                   "%llu tile%s on %u SMs, span %s, tail %s (%.1f%%), imbalance %.2f, busy %.1f%%, %llu stolen",
                   sum->tiles, sum->tiles == 1 ? "" : "s", sum->num_sms, span_s, tail_s,
                   sum->span_ns > 0 ? 100 * sum->tail_ns / sum->span_ns : 0.0, sum->imbalance, 100 * sum->busy_mean,
                   sum->steals);
  if (k > 0 && (size_t)k < sizeof L->title && o->run >= 0)
    k += snprintf(L->title + k, sizeof L->title - (size_t)k, ", run %lld", o->run);
  else if (k > 0 && (size_t)k < sizeof L->title && sum->runs > 1)
    k += snprintf(L->title + k, sizeof L->title - (size_t)k, ", %llu runs", sum->runs);
  if (k > 0 && (size_t)k < sizeof L->title && sum->dropped)
    snprintf(L->title + k, sizeof L->title - (size_t)k, ", %llu dropped", sum->dropped);
  return 0;
}

/* A tick's label, in the axis unit, counted from the first tile's start. */
static void tick_label(const layout *L, int i, char *b, size_t n) {
  snprintf(b, n, "%.*f", L->decimals, i * L->step / L->unit_ns);
}

/* ---- PNG ---- */

typedef struct canvas {
  int w, h;
  uint8_t *px;
} canvas;

static void fill(canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
  if (x0 < 0) x0 = 0;
  if (y0 < 0) y0 = 0;
  if (x1 > c->w) x1 = c->w;
  if (y1 > c->h) y1 = c->h;
  for (int y = y0; y < y1; y++) {
    uint8_t *p = c->px + ((size_t)y * c->w + x0) * 3;
    for (int x = x0; x < x1; x++, p += 3) p[0] = rgb[0], p[1] = rgb[1], p[2] = rgb[2];
  }
}

static void text(canvas *c, int x, int y, const char *t, const uint8_t rgb[3], int s) {
  while (*t) {
    const char *const *g = tool_font_glyph(next_cp(&t));
    for (int row = 0; row < TOOL_FONT_H; row++)
      for (int col = 0; col < TOOL_FONT_W; col++)
        if (g[row][col] == '#') fill(c, x + col * s, y + row * s, x + (col + 1) * s, y + (row + 1) * s, rgb);
    x += (TOOL_FONT_W + 1) * s;
  }
}

static int draw_png(const clcrt_trace *t, const layout *L, const char *out, char *err, size_t errlen) {
  size_t n;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  canvas c = {L->w, L->h, malloc((size_t)L->w * L->h * 3)};
  if (!c.px) {
    snprintf(err, errlen, "out of memory for a %dx%d picture", L->w, L->h);
    return TOOL_BADINPUT;
  }
  memset(c.px, 255, (size_t)L->w * L->h * 3);
  int s = L->s;
  char b[64];
  for (int i = 0;; i++) {
    int x = (int)tick_x(L, i);
    if (x >= L->px1) break;
    fill(&c, x, L->py0, x + 1, L->py1, grid);
  }
  for (size_t i = 0; i < n; i++) {
    int x0, x1, y0, y1;
    tile_cols(L, &r[i], &x0, &x1);
    lane_rows(L, r[i].sm, L->lane[i], &y0, &y1);
    const uint8_t *col = palette[r[i].cluster % 20];
    fill(&c, x0, y0, x1, y1, col);
    if (x1 - x0 >= 4) { /* a darker first column tells one tile from the next of the same cluster */
      uint8_t dark[3] = {(uint8_t)(col[0] * 3 / 5), (uint8_t)(col[1] * 3 / 5), (uint8_t)(col[2] * 3 / 5)};
      fill(&c, x0, y0, x0 + 1, y1, dark);
    }
  }
  fill(&c, L->px0 - 1, L->py0, L->px0, L->py1 + 1, axis);
  fill(&c, L->px0 - 1, L->py1, L->px1, L->py1 + 1, axis);
  int unit_x = L->px1 - text_w("time (ms)", s), label_y = L->py1 + 5 * s;
  for (int i = 0;; i++) {
    int x = (int)tick_x(L, i);
    if (x >= L->px1) break;
    fill(&c, x, L->py1, x + 1, L->py1 + 3 * s, axis);
    tick_label(L, i, b, sizeof b);
    int lx = x - text_w(b, s) / 2;
    if (lx + text_w(b, s) < unit_x - 4 * s) text(&c, lx < 0 ? 0 : lx, label_y, b, ink, s);
  }
  snprintf(b, sizeof b, "time (%s)", L->unit);
  text(&c, L->px1 - text_w(b, s), label_y, b, ink, s);
  for (unsigned sm = 0; sm < L->nsm; sm += L->sm_step) {
    snprintf(b, sizeof b, "SM %u", sm);
    int y = (int)(L->py0 + (sm + 0.5) * L->row_h) - TOOL_FONT_H * s / 2;
    text(&c, L->px0 - 4 * s - text_w(b, s), y, b, ink, s);
  }
  text(&c, 4 * s, 4 * s, L->title, ink, s);
  png_image img;
  memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  img.width = (png_uint_32)L->w;
  img.height = (png_uint_32)L->h;
  img.format = PNG_FORMAT_RGB;
  int ok = png_image_write_to_file(&img, out, 0, c.px, (png_int_32)L->w * 3, NULL);
  if (!ok) snprintf(err, errlen, "cannot write the PNG: %s", img.message);
  png_image_free(&img);
  free(c.px);
  return ok ? TOOL_OK : TOOL_BADINPUT;
}

/* ---- SVG ---- */

static void svg_text(FILE *f, double x, double y, const char *anchor, const char *t, int s) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, 9 * s, anchor);
  for (; *t; t++) {
    if (*t == '<') fputs("&lt;", f);
    else if (*t == '>') fputs("&gt;", f);
    else if (*t == '&') fputs("&amp;", f);
    else fputc(*t, f);
  }
  fputs("</text>\n", f);
}

/* Tiles of a big trace: per SM, each lane rasterised at one column per pixel (the colour
 * of the tile drawn last there), written as runs of one colour. */
static int svg_raster(FILE *f, const clcrt_trace_record *r, size_t n, const layout *L) {
  int w = L->px1 - L->px0;
  uint32_t *first = calloc(CLCRT_TRACE_MAX_SMS + 1, sizeof *first);
  uint32_t *order = malloc((n ? n : 1) * sizeof *order);
  uint8_t *row = malloc((size_t)MAX_LANES * w);
  if (!first || !order || !row) {
    free(first), free(order), free(row);
    return -1;
  }
  /* Records grouped by SM, still in start order within each (a counting sort). */
  for (size_t i = 0; i < n; i++) first[r[i].sm + 1]++;
  for (unsigned sm = 0; sm < CLCRT_TRACE_MAX_SMS; sm++) first[sm + 1] += first[sm];
  for (size_t i = 0; i < n; i++) order[first[r[i].sm]++] = (uint32_t)i;
  for (unsigned sm = CLCRT_TRACE_MAX_SMS; sm > 0; sm--) first[sm] = first[sm - 1];
  first[0] = 0;
  for (unsigned sm = 0; sm < L->nsm; sm++) {
    if (first[sm] == first[sm + 1]) continue;
    memset(row, 0, (size_t)MAX_LANES * w);
    for (uint32_t k = first[sm]; k < first[sm + 1]; k++) {
      int x0, x1;
      tile_cols(L, &r[order[k]], &x0, &x1);
      x0 -= L->px0, x1 -= L->px0;
      if (x1 > w) x1 = w;
      if (x0 < 0) x0 = 0;
      memset(row + (size_t)L->lane[order[k]] * w + x0, 1 + r[order[k]].cluster % 20, (size_t)(x1 - x0));
    }
    for (unsigned l = 0; l < L->lanes[sm]; l++) {
      int y0, y1;
      lane_rows(L, sm, l, &y0, &y1);
      const uint8_t *p = row + (size_t)l * w;
      for (int x = 0; x < w;) {
        int e = x + 1;
        while (e < w && p[e] == p[x]) e++;
        if (p[x]) {
          const uint8_t *c = palette[p[x] - 1];
          fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\"/>\n", L->px0 + x, y0,
                  e - x, y1 - y0, c[0], c[1], c[2]);
        }
        x = e;
      }
    }
  }
  free(first), free(order), free(row);
  return 0;
}

static int draw_svg(const clcrt_trace *t, const layout *L, const char *out, char *err, size_t errlen) {
  size_t n;
  const clcrt_trace_record *r = clcrt_trace_records(t, &n);
  FILE *f = fopen(out, "w");
  if (!f) {
    snprintf(err, errlen, "cannot create %s: %s", out, strerror(errno));
    return TOOL_BADINPUT;
  }
  int s = L->s, rc = 0;
  char b[96];
  fprintf(f,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "font-family=\"monospace\" fill=\"#282828\">\n"
          "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
          L->w, L->h, L->w, L->h, L->w, L->h);
  for (int i = 0;; i++) {
    double x = tick_x(L, i);
    if (x >= L->px1) break;
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"1\" height=\"%d\" fill=\"#e8e8e8\"/>\n", x, L->py0, L->py1 - L->py0);
  }
  if (n <= SVG_EXACT_MAX) {
    for (size_t i = 0; i < n; i++) {
      int y0, y1;
      lane_rows(L, r[i].sm, L->lane[i], &y0, &y1);
      double x0 = x_at(L, r[i].start_ns), wd = x_at(L, r[i].end_ns) - x0;
      const uint8_t *c = palette[r[i].cluster % 20];
      fmt_time(b, sizeof b, (double)(r[i].end_ns - r[i].start_ns));
      fprintf(
          f,
          "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"#%02x%02x%02x\" stroke=\"#%02x%02x%02x\" "
          "stroke-width=\"0.3\"><title>tile %llu, unit %u, cluster %u, rank %u, SM %u, run %u%s, %s</title></rect>\n",
          x0, y0, wd < 0.5 ? 0.5 : wd, y1 - y0, c[0], c[1], c[2], c[0] * 3 / 5, c[1] * 3 / 5, c[2] * 3 / 5,
          (unsigned long long)r[i].tile, r[i].unit, r[i].cluster, r[i].cta_rank, r[i].sm, r[i].run,
          r[i].flags & CLCRT_TRACE_STOLEN ? ", stolen" : "", b);
    }
  } else if (svg_raster(f, r, n, L)) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"1\" height=\"%d\" fill=\"#6e6e6e\"/>\n", L->px0 - 1, L->py0,
          L->py1 - L->py0 + 1);
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"1\" fill=\"#6e6e6e\"/>\n", L->px0 - 1, L->py1,
          L->px1 - L->px0 + 1);
  double label_y = L->py1 + 5 * s + TOOL_FONT_H * s;
  int unit_x = L->px1 - text_w("time (ms)", s);
  for (int i = 0;; i++) {
    double x = tick_x(L, i);
    if (x >= L->px1) break;
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"1\" height=\"%d\" fill=\"#6e6e6e\"/>\n", x, L->py1, 3 * s);
    tick_label(L, i, b, sizeof b);
    if (x + text_w(b, s) / 2 < unit_x - 4 * s) svg_text(f, x, label_y, "middle", b, s);
  }
  snprintf(b, sizeof b, "time (%s)", L->unit);
  svg_text(f, L->px1, label_y, "end", b, s);
  for (unsigned sm = 0; sm < L->nsm; sm += L->sm_step) {
    snprintf(b, sizeof b, "SM %u", sm);
    svg_text(f, L->px0 - 4 * s, L->py0 + (sm + 0.5) * L->row_h + 3.5 * s, "end", b, s);
  }
  svg_text(f, 4 * s, 4 * s + TOOL_FONT_H * s, "start", L->title, s);
  fputs("</svg>\n", f);
  int werr = ferror(f);
  if (fclose(f) != 0 || werr) {
    if (!rc) snprintf(err, errlen, "writing %s failed", out);
    rc = -1;
  }
  return rc ? TOOL_BADINPUT : TOOL_OK;
}

int tool_trace_draw(const clcrt_trace *t, const clcrt_trace_summary *s, const tool_draw_opts *o, char *err,
                    size_t errlen) {
  layout *L = calloc(1, sizeof *L);
  if (!L || plan(t, s, o, L)) {
    snprintf(err, errlen, "out of memory");
    free(L);
    return TOOL_BADINPUT;
  }
  int rc = o->svg ? draw_svg(t, L, o->out, err, errlen) : draw_png(t, L, o->out, err, errlen);
  free(L->lane);
  free(L);
  return rc;
}
