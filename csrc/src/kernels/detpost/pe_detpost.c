/*
 * pe_detpost.c - TFLite_Detection_PostProcess in float32 (pe_detpost.h).
 * Compiled with -ffp-contract=off: every float32 / double operation is
 * rounded on its own, as in TFLM's kernel.
 */
#include <math.h>
#include <string.h>

#include "pyembed/pe_detpost.h"

static int32_t min_i32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* K: classes ranked per anchor by fast NMS. */
static int32_t per_anchor(const pe_detpost_params *p)
{
    return min_i32(p->max_classes_per_detection, p->num_classes);
}

/* Output rows the run writes (fast NMS: TFLM's offsets K * e + col reach K * K * kept - 1). */
static int64_t rows_needed(const pe_detpost_params *p)
{
    int64_t k, s;
    if (p->use_regular_nms) {
        return p->max_detections;
    }
    k = per_anchor(p);
    s = min_i32(p->num_boxes, p->max_detections);
    return k * k * s;
}

static int in_range(int32_t v)
{
    return v >= 1 && v <= PE_DETPOST_MAX_COUNT;
}

pe_status pe_detpost_check(const pe_detpost_params *p)
{
    if (p == NULL || !in_range(p->num_boxes) || !in_range(p->num_classes) || !in_range(p->max_detections) ||
        !in_range(p->max_classes_per_detection) || !in_range(p->detections_per_class) ||
        p->box_stride < 4 || p->box_stride > PE_DETPOST_MAX_COUNT || (p->use_regular_nms != 0 && p->use_regular_nms != 1) ||
        (p->num_classes_bg != p->num_classes && p->num_classes_bg != p->num_classes + 1)) {
        return PE_ERR_ARG;
    }
    /* the threshold test is written so that a NaN fails it */
    if (!(p->iou_threshold > 0.0f && p->iou_threshold <= 1.0f)) {
        return PE_ERR_ARG;
    }
    if (p->out_rows < 1 || p->out_rows > PE_DETPOST_MAX_COUNT * 4 || (int64_t)p->out_rows < rows_needed(p)) {
        return PE_ERR_ARG;
    }
    return PE_OK;
}

/* Words (4 bytes) of each scratch part. */
typedef struct {
    int64_t decoded, score_buf, keep_scores, keep_idx, order, tmp, selected, active;
    int64_t class_idx;                        /* fast NMS: N * K */
    int64_t merged_idx, merged_scores, top_idx, top_scores; /* regular NMS: M each */
} detpost_layout;

static int64_t merged_size(const pe_detpost_params *p)
{
    return (int64_t)p->max_detections + min_i32(p->detections_per_class, p->num_boxes);
}

static int64_t layout_words(const pe_detpost_params *p, detpost_layout *l)
{
    const int64_t n = p->num_boxes;
    memset(l, 0, sizeof(*l));
    l->decoded = 4 * n;
    l->score_buf = l->keep_scores = l->keep_idx = l->order = l->tmp = l->selected = l->active = n;
    if (p->use_regular_nms) {
        l->merged_idx = l->merged_scores = l->top_idx = l->top_scores = merged_size(p);
    } else {
        l->class_idx = n * per_anchor(p);
    }
    return l->decoded + 7 * n + l->class_idx + l->merged_idx + l->merged_scores + l->top_idx + l->top_scores;
}

int32_t pe_detpost_scratch_size(const pe_detpost_params *p)
{
    detpost_layout l;
    int64_t words;
    if (pe_detpost_check(p) != PE_OK) {
        return -1;
    }
    words = layout_words(p, &l);
    if (words > INT32_MAX / 4) {
        return -1;
    }
    return (int32_t)(words * 4);
}

/* Centre-size decoding of every box into (ymin, xmin, ymax, xmax); PE_ERR_ARG when a box is empty. */
static pe_status decode_boxes(const pe_detpost_params *p, const float *enc, const float *anchors, float *out)
{
    const double sy = (double)p->y_scale, sx = (double)p->x_scale;
    const double sh = (double)p->h_scale, sw = (double)p->w_scale;
    int32_t i;
    int ok = 1;
    for (i = 0; i < p->num_boxes; ++i) {
        const float *e = enc + (int64_t)i * p->box_stride;
        const float *a = anchors + (int64_t)i * 4;
        /* anchor: y, x, h, w; code: y, x, h, w */
        const float yc = (float)((double)e[0] / sy * (double)a[2] + (double)a[0]);
        const float xc = (float)((double)e[1] / sx * (double)a[3] + (double)a[1]);
        const float hh = (float)(0.5 * exp((double)e[2] / sh) * (double)a[2]);
        const float hw = (float)(0.5 * exp((double)e[3] / sw) * (double)a[3]);
        float *b = out + (int64_t)i * 4;
        b[0] = yc - hh;
        b[1] = xc - hw;
        b[2] = yc + hh;
        b[3] = xc + hw;
        /* TFLM's test: a box with NaN corners passes it (and then meets no IoU above the threshold) */
        if (b[0] >= b[2] || b[1] >= b[3]) {
            ok = 0;
        }
    }
    return ok ? PE_OK : PE_ERR_ARG;
}

/* TFLM's std::max / std::min on floats: the first argument unless the other compares beyond it. */
static float fmax_first(float a, float b)
{
    return (a < b) ? b : a;
}

static float fmin_first(float a, float b)
{
    return (b < a) ? b : a;
}

static float iou(const float *boxes, int32_t i, int32_t j)
{
    const float *bi = boxes + (int64_t)i * 4, *bj = boxes + (int64_t)j * 4;
    const float area_i = (bi[2] - bi[0]) * (bi[3] - bi[1]);
    const float area_j = (bj[2] - bj[0]) * (bj[3] - bj[1]);
    float ih, iw, inter;
    if (area_i <= 0.0f || area_j <= 0.0f) {
        return 0.0f;
    }
    ih = fmax_first(fmin_first(bi[2], bj[2]) - fmax_first(bi[0], bj[0]), 0.0f);
    iw = fmax_first(fmin_first(bi[3], bj[3]) - fmax_first(bi[1], bj[1]), 0.0f);
    inter = ih * iw;
    return inter / (area_i + area_j - inter);
}

/* Stable sort of positions 0..n-1 by v descending (bottom-up merge; equal values keep their order).
 * The values are never NaN here (they passed the >= threshold test). */
static void stable_desc_order(const float *v, int32_t n, int32_t *order, int32_t *tmp)
{
    int32_t width, i;
    for (i = 0; i < n; ++i) {
        order[i] = i;
    }
    for (width = 1; width < n; width *= 2) {
        int32_t lo;
        for (lo = 0; lo < n; lo += 2 * width) {
            const int32_t mid = min_i32(lo + width, n), hi = min_i32(lo + 2 * width, n);
            int32_t a = lo, b = mid, k = lo;
            while (k < hi) {
                if (a >= mid || (b < hi && v[order[b]] > v[order[a]])) {
                    tmp[k++] = order[b++];
                } else {
                    tmp[k++] = order[a++];
                }
            }
        }
        memcpy(order, tmp, (size_t)n * sizeof(int32_t));
        if (width > n / 2) {
            break;
        }
    }
}

/* The k best positions of v[0..n) into idx, best first (k <= n): value descending, equal values
 * lower position first. An insertion into the bounded list, so idx always holds k distinct
 * positions in [0, n), whatever the values (NaNs included: where they land is not necessarily
 * where TFLM's std::partial_sort puts them, its comparison being no order with NaNs). */
static void partial_desc(const float *v, int32_t n, int32_t k, int32_t *idx)
{
    int32_t j, len = 0;
    for (j = 0; j < n; ++j) {
        int32_t pos = 0, m;
        while (pos < len && !(v[j] > v[idx[pos]])) {
            ++pos;
        }
        if (pos >= k) {
            continue;
        }
        m = len < k ? len : k - 1;
        for (; m > pos; --m) {
            idx[m] = idx[m - 1];
        }
        idx[pos] = j;
        if (len < k) {
            ++len;
        }
    }
}

typedef struct {
    const pe_detpost_params *p;
    const float *boxes; /* decoded */
    float *keep_scores;
    int32_t *keep_idx, *order, *tmp, *active;
} nms_work;

/* Single-class NMS of scores[0..N): the kept anchors, best first, at most max_out, into selected. */
static int32_t nms_single(const nms_work *w, const float *scores, int32_t max_out, int32_t *selected)
{
    const pe_detpost_params *p = w->p;
    int32_t i, j, kept = 0, n_sel = 0, n_active, out_size;
    for (i = 0; i < p->num_boxes; ++i) {
        if (scores[i] >= p->score_threshold) {
            w->keep_scores[kept] = scores[i];
            w->keep_idx[kept] = i;
            ++kept;
        }
    }
    stable_desc_order(w->keep_scores, kept, w->order, w->tmp);
    out_size = min_i32(kept, max_out);
    n_active = kept;
    for (i = 0; i < kept; ++i) {
        w->active[i] = 1;
    }
    for (i = 0; i < kept; ++i) {
        int32_t bi;
        if (n_active == 0 || n_sel >= out_size) {
            break;
        }
        if (!w->active[i]) {
            continue;
        }
        bi = w->keep_idx[w->order[i]];
        selected[n_sel++] = bi;
        w->active[i] = 0;
        --n_active;
        for (j = i + 1; j < kept; ++j) {
            if (w->active[j] && iou(w->boxes, bi, w->keep_idx[w->order[j]]) > p->iou_threshold) {
                w->active[j] = 0;
                --n_active;
            }
        }
    }
    return n_sel;
}

static void put_row(const float *boxes, int32_t anchor, float cls, float score, int32_t row,
                    float *ob, float *oc, float *os)
{
    memcpy(ob + (int64_t)row * 4, boxes + (int64_t)anchor * 4, 4 * sizeof(float));
    oc[row] = cls;
    os[row] = score;
}

static void run_fast(const nms_work *w, const float *pred, float *max_scores, int32_t *class_idx,
                     int32_t *selected, float *ob, float *oc, float *os, float *onum)
{
    const pe_detpost_params *p = w->p;
    const int32_t k = per_anchor(p), off = p->num_classes_bg - p->num_classes;
    int32_t row, n_sel, i, col, e = 0;
    for (row = 0; row < p->num_boxes; ++row) {
        const float *s = pred + (int64_t)row * p->num_classes_bg + off;
        int32_t *ci = class_idx + (int64_t)row * k;
        partial_desc(s, p->num_classes, k, ci);
        max_scores[row] = s[ci[0]];
    }
    n_sel = nms_single(w, max_scores, p->max_detections, selected);
    for (i = 0; i < n_sel; ++i) {
        const int32_t a = selected[i];
        const float *s = pred + (int64_t)a * p->num_classes_bg + off;
        const int32_t *ci = class_idx + (int64_t)a * k;
        for (col = 0; col < k; ++col) {
            /* TFLM's row: K * (rows written so far) + col (checked to fit by pe_detpost_check) */
            put_row(w->boxes, a, (float)ci[col], s[ci[col]], k * e + col, ob, oc, os);
            ++e;
        }
    }
    onum[0] = (float)e;
}

static void run_regular(const nms_work *w, const float *pred, float *class_scores, int32_t *selected,
                        int32_t *merged_idx, float *merged_scores, int32_t *top_idx, float *top_scores,
                        float *ob, float *oc, float *os, float *onum)
{
    const pe_detpost_params *p = w->p;
    const int32_t c1 = p->num_classes_bg, off = c1 - p->num_classes;
    int32_t col, row, i, n_sorted = 0;
    for (col = 0; col < p->num_classes; ++col) {
        int32_t n_sel, n, k;
        for (row = 0; row < p->num_boxes; ++row) {
            class_scores[row] = pred[(int64_t)row * c1 + col + off];
        }
        n_sel = nms_single(w, class_scores, p->detections_per_class, selected);
        n = n_sorted;
        for (i = 0; i < n_sel; ++i) {
            merged_idx[n] = selected[i] * c1 + col + off;
            merged_scores[n] = class_scores[selected[i]];
            ++n;
        }
        k = min_i32(n, p->max_detections);
        partial_desc(merged_scores, n, k, top_idx);
        for (i = 0; i < k; ++i) {
            top_scores[i] = merged_scores[top_idx[i]];
            top_idx[i] = merged_idx[top_idx[i]];
        }
        memcpy(merged_idx, top_idx, (size_t)k * sizeof(int32_t));
        memcpy(merged_scores, top_scores, (size_t)k * sizeof(float));
        n_sorted = k;
    }
    for (i = 0; i < n_sorted; ++i) {
        const int32_t anchor = merged_idx[i] / c1;
        put_row(w->boxes, anchor, (float)(merged_idx[i] - anchor * c1 - off), merged_scores[i], i, ob, oc, os);
    }
    onum[0] = (float)n_sorted;
}

pe_status pe_detpost_f32(const pe_detpost_params *p, const float *box_enc, const float *class_pred,
                         const float *anchors, float *out_boxes, float *out_classes, float *out_scores,
                         float *out_num, void *scratch, int32_t scratch_size)
{
    detpost_layout l;
    nms_work w;
    int32_t *base;
    float *decoded, *score_buf;
    int32_t *selected, *cursor;
    pe_status st;
    int32_t need = pe_detpost_scratch_size(p);
    if (need < 0 || box_enc == NULL || class_pred == NULL || anchors == NULL || out_boxes == NULL ||
        out_classes == NULL || out_scores == NULL || out_num == NULL) {
        return PE_ERR_ARG;
    }
    if (scratch == NULL || scratch_size < need || ((uintptr_t)scratch & 3u) != 0) {
        return PE_ERR_SCRATCH;
    }
    (void)layout_words(p, &l);
    base = (int32_t *)scratch;
    cursor = base;
    decoded = (float *)(void *)cursor;
    cursor += l.decoded;
    score_buf = (float *)(void *)cursor;
    cursor += l.score_buf;
    w.p = p;
    w.boxes = decoded;
    w.keep_scores = (float *)(void *)cursor;
    cursor += l.keep_scores;
    w.keep_idx = cursor;
    cursor += l.keep_idx;
    w.order = cursor;
    cursor += l.order;
    w.tmp = cursor;
    cursor += l.tmp;
    w.active = cursor;
    cursor += l.active;
    selected = cursor;
    cursor += l.selected;

    /* rows TFLM leaves as they were are zero here */
    memset(out_boxes, 0, (size_t)p->out_rows * 4 * sizeof(float));
    memset(out_classes, 0, (size_t)p->out_rows * sizeof(float));
    memset(out_scores, 0, (size_t)p->out_rows * sizeof(float));
    out_num[0] = 0.0f;
    st = decode_boxes(p, box_enc, anchors, decoded);
    if (st != PE_OK) {
        return st;
    }
    if (p->use_regular_nms) {
        int32_t *merged_idx = cursor;
        float *merged_scores = (float *)(void *)(cursor + l.merged_idx);
        int32_t *top_idx = cursor + l.merged_idx + l.merged_scores;
        float *top_scores = (float *)(void *)(top_idx + l.top_idx);
        run_regular(&w, class_pred, score_buf, selected, merged_idx, merged_scores, top_idx, top_scores,
                    out_boxes, out_classes, out_scores, out_num);
    } else {
        run_fast(&w, class_pred, score_buf, cursor, selected, out_boxes, out_classes, out_scores, out_num);
    }
    return PE_OK;
}
