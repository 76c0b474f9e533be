/* test_detpost.c - C unit tests of TFLite_Detection_PostProcess (pe_detpost.h): small cases
 * whose boxes decode exactly (zero codes, dyadic anchors), fast and regular NMS, suppression,
 * equal scores (the lower anchor first), TFLM's fast-NMS row offsets with two classes per
 * detection, the empty-box error, the refused parameters and scratch; large random runs on
 * scratch of exactly the queried size (ASan checks every access). Bit-exactness with the TFLM
 * interpreter is tested from Python (tests/test_ops_detpost.py). */
#include <stdlib.h>
#include <string.h>

#include "pe_test.h"
#include "pyembed/pe_detpost.h"

static pe_detpost_params params(int32_t n, int32_t c1, int32_t c, int32_t max_det, int32_t regular)
{
    pe_detpost_params p;
    memset(&p, 0, sizeof(p));
    p.num_boxes = n;
    p.box_stride = 4;
    p.num_classes_bg = c1;
    p.num_classes = c;
    p.max_detections = max_det;
    p.max_classes_per_detection = 1;
    p.detections_per_class = 10;
    p.use_regular_nms = regular;
    p.score_threshold = 0.25f;
    p.iou_threshold = 0.5f;
    p.y_scale = p.x_scale = 10.0f;
    p.h_scale = p.w_scale = 5.0f;
    p.out_rows = max_det;
    return p;
}

/* anchors (y, x, h, w): 0 and 1 the same box, 2 apart, 3 half over 0 */
static const float anchors4[16] = {0.25f, 0.25f, 0.5f, 0.5f, 0.25f, 0.25f, 0.5f, 0.5f,
                                   0.75f, 0.75f, 0.25f, 0.25f, 0.25f, 0.5f, 0.5f, 0.5f};
static const float zero_codes[16] = {0};

static int32_t scratch_words[4096];

static void test_fast_nms(void)
{
    /* background column 0, classes 1..2 */
    const float scores[12] = {0.9f, 0.5f, 0.75f, 0.9f, 0.875f, 0.125f, 0.0f, 0.125f, 0.625f, 0.0f, 0.5f, 0.5f};
    pe_detpost_params p = params(4, 3, 2, 3, 0);
    float boxes[12], cls[3], sc[3], num[1];
    const int32_t need = pe_detpost_scratch_size(&p);
    PE_CHECK(need > 0 && need <= (int32_t)sizeof(scratch_words));
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words, need), PE_OK);
    /* best classes: a0 1 (0.75), a1 0 (0.875), a2 1 (0.625), a3 0 (0.5, tie: class 0 first).
     * order a1, a0, a2, a3: a1 kept, a0 suppressed (IoU 1), a2 kept, a3 (IoU 1/3 with a1) kept */
    PE_CHECK(num[0] == 3.0f);
    PE_CHECK(cls[0] == 0.0f && sc[0] == 0.875f && cls[1] == 1.0f && sc[1] == 0.625f);
    PE_CHECK(cls[2] == 0.0f && sc[2] == 0.5f);
    PE_CHECK(boxes[0] == 0.0f && boxes[1] == 0.0f && boxes[2] == 0.5f && boxes[3] == 0.5f);
    PE_CHECK(boxes[4] == 0.625f && boxes[5] == 0.625f && boxes[6] == 0.875f && boxes[7] == 0.875f);
    PE_CHECK(boxes[8] == 0.0f && boxes[9] == 0.25f && boxes[10] == 0.5f && boxes[11] == 0.75f);
    /* IoU threshold 0.3: a3 (IoU 1/3) goes too; one row left zero */
    p.iou_threshold = 0.3f;
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words, need), PE_OK);
    PE_CHECK(num[0] == 2.0f && sc[2] == 0.0f && cls[2] == 0.0f && boxes[8] == 0.0f && boxes[11] == 0.0f);
}

static void test_equal_scores_lower_anchor_first(void)
{
    const float scores[4] = {0.5f, 0.5f, 0.5f, 0.5f}; /* no background */
    pe_detpost_params p = params(4, 1, 1, 4, 0);
    float boxes[16], cls[4], sc[4], num[1];
    p.iou_threshold = 1.0f;
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    PE_CHECK(num[0] == 4.0f);
    /* rows in anchor order: anchor 2's box is row 2 */
    PE_CHECK(boxes[8] == 0.625f && boxes[4] == 0.0f);
    p.iou_threshold = 0.5f; /* anchor 1 (same box as 0, same score) goes */
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    PE_CHECK(num[0] == 3.0f && boxes[4] == 0.625f && boxes[8] == 0.0f && boxes[9] == 0.25f);
}

static void test_two_classes_per_detection_offsets(void)
{
    /* K = 2: TFLM's rows K * e + col: 0, 3 for the first anchor, 4, 7 for the second */
    const float scores[6] = {0.5f, 0.75f, 0.25f, 0.125f, 0.25f, 0.875f};
    pe_detpost_params p = params(2, 3, 3, 2, 0);
    float boxes[32], cls[8], sc[8], num[1];
    const float anc[8] = {0.25f, 0.25f, 0.5f, 0.5f, 0.75f, 0.75f, 0.25f, 0.25f};
    p.max_classes_per_detection = 2;
    p.score_threshold = 0.0f;
    PE_CHECK_EQ(pe_detpost_check(&p), PE_ERR_ARG); /* 4 rows: TFLM would write row 7 */
    p.out_rows = 8;
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anc, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    PE_CHECK(num[0] == 4.0f);
    /* anchor 1 first (0.875, class 2), then its class 0 (0.125 vs 0.25: class 1 0.25) */
    PE_CHECK(cls[0] == 2.0f && sc[0] == 0.875f && cls[3] == 1.0f && sc[3] == 0.25f);
    PE_CHECK(cls[4] == 1.0f && sc[4] == 0.75f && cls[7] == 0.0f && sc[7] == 0.5f);
    PE_CHECK(sc[1] == 0.0f && sc[2] == 0.0f && sc[5] == 0.0f && sc[6] == 0.0f);
}

static void test_nan_class_scores_stay_in_range(void)
{
    /* K = 2 over classes with NaNs (the fuzzer's find: a NaN ranked first left no second class and
     * the kernel read class -1); every class written must be a real column */
    const float nan = 0.0f / 0.0f;
    const float scores[6] = {nan, 0.5f, nan, 0.75f, nan, nan};
    pe_detpost_params p = params(2, 3, 3, 2, 0);
    float boxes[32], cls[8], sc[8], num[1];
    const float anc[8] = {0.25f, 0.25f, 0.5f, 0.5f, 0.75f, 0.75f, 0.25f, 0.25f};
    int32_t i;
    p.max_classes_per_detection = 2;
    p.score_threshold = 0.0f;
    p.out_rows = 8;
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anc, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    for (i = 0; i < 8; ++i) {
        PE_CHECK(cls[i] >= 0.0f && cls[i] <= 2.0f);
    }
    /* anchor 1: 0.75 (class 0) first; anchor 0's best is NaN, below every threshold: not kept */
    PE_CHECK(num[0] == 2.0f && cls[0] == 0.0f && sc[0] == 0.75f);
}

static void test_regular_nms(void)
{
    const float scores[12] = {0.9f, 0.5f, 0.75f, 0.9f, 0.875f, 0.125f, 0.0f, 0.125f, 0.625f, 0.0f, 0.5f, 0.5f};
    pe_detpost_params p = params(4, 3, 2, 4, 1);
    float boxes[16], cls[4], sc[4], num[1];
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    /* class 0: a1 0.875 (a0 0.5 suppressed), a3 0.5 (IoU 1/3); class 1: a0 0.75, a2 0.625, a3 0.5
     * (IoU 1/3 with a0); merged, 4 best: a1/0 .875, a0/1 .75, a2/1 .625, a3/0 .5 (before a3/1) */
    PE_CHECK(num[0] == 4.0f);
    PE_CHECK(cls[0] == 0.0f && sc[0] == 0.875f && cls[1] == 1.0f && sc[1] == 0.75f);
    PE_CHECK(cls[2] == 1.0f && sc[2] == 0.625f && cls[3] == 0.0f && sc[3] == 0.5f);
    PE_CHECK(boxes[12] == 0.0f && boxes[13] == 0.25f);
    p.detections_per_class = 1; /* one per class: a1/0, a0/1, then zero rows */
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words,
                               (int32_t)sizeof(scratch_words)), PE_OK);
    PE_CHECK(num[0] == 2.0f && sc[0] == 0.875f && sc[1] == 0.75f && sc[2] == 0.0f && boxes[8] == 0.0f);
}

static void test_errors(void)
{
    const float scores[12] = {0};
    pe_detpost_params p = params(4, 3, 2, 3, 0), q;
    float boxes[12], cls[3], sc[3], num[1];
    float anc[16];
    const int32_t need = pe_detpost_scratch_size(&p);
    memcpy(anc, anchors4, sizeof(anc));
    anc[6] = 0.0f; /* anchor 1 of height 0: an empty box, TFLM fails */
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anc, boxes, cls, sc, num, scratch_words, need), PE_ERR_ARG);
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, scratch_words, need - 4),
                PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num, NULL, need), PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_detpost_f32(&p, zero_codes, scores, anchors4, boxes, cls, sc, num,
                               (char *)scratch_words + 2, need), PE_ERR_SCRATCH);
    PE_CHECK_EQ(pe_detpost_f32(&p, NULL, scores, anchors4, boxes, cls, sc, num, scratch_words, need), PE_ERR_ARG);
    q = p;
    q.iou_threshold = 0.0f;
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    q.iou_threshold = 1.5f;
    PE_CHECK_EQ(pe_detpost_scratch_size(&q), -1);
    q = p;
    q.num_classes_bg = 4; /* two more columns than classes */
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    q = p;
    q.box_stride = 3;
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    q = p;
    q.out_rows = 2;
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    q = p;
    q.max_detections = 0;
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    q = p;
    q.use_regular_nms = 2;
    PE_CHECK_EQ(pe_detpost_check(&q), PE_ERR_ARG);
    PE_CHECK_EQ(pe_detpost_check(NULL), PE_ERR_ARG);
}

static uint32_t rng_state = 12345u;

static float frand(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 16777216.0f;
}

/* Large runs on heap scratch / outputs of exactly the queried sizes: ASan sees any overrun. */
static void test_exact_sizes(void)
{
    int32_t regular, k;
    for (regular = 0; regular < 2; ++regular) {
        for (k = 1; k <= 3; ++k) {
            pe_detpost_params p = params(200, 11, 10, 20, regular);
            float *enc = malloc(200 * 4 * sizeof(float)), *sco = malloc(200 * 11 * sizeof(float));
            float *anc = malloc(200 * 4 * sizeof(float)), *boxes, *cls, *sc, num[1];
            void *scr;
            int32_t i, need;
            p.max_classes_per_detection = k;
            p.detections_per_class = 15;
            p.score_threshold = 0.0f;
            p.out_rows = regular ? 20 : k * k * 20;
            need = pe_detpost_scratch_size(&p);
            PE_CHECK(need > 0);
            scr = malloc((size_t)need);
            boxes = malloc((size_t)p.out_rows * 4 * sizeof(float));
            cls = malloc((size_t)p.out_rows * sizeof(float));
            sc = malloc((size_t)p.out_rows * sizeof(float));
            for (i = 0; i < 200 * 4; ++i) {
                enc[i] = frand() - 0.5f;
                anc[i] = (i % 4) < 2 ? frand() : 0.05f + 0.4f * frand();
            }
            for (i = 0; i < 200 * 11; ++i) {
                sco[i] = (float)(int)(frand() * 8.0f) / 8.0f;
            }
            PE_CHECK_EQ(pe_detpost_f32(&p, enc, sco, anc, boxes, cls, sc, num, scr, need), PE_OK);
            PE_CHECK(num[0] >= 1.0f && num[0] <= (float)(regular ? 20 : 20 * k));
            for (i = 1; i < (regular ? (int32_t)num[0] : 0); ++i) {
                PE_CHECK(sc[i] <= sc[i - 1]); /* regular NMS rows by score */
            }
            free(enc);
            free(sco);
            free(anc);
            free(scr);
            free(boxes);
            free(cls);
            free(sc);
        }
    }
}

int main(void)
{
    test_fast_nms();
    test_equal_scores_lower_anchor_first();
    test_two_classes_per_detection_offsets();
    test_regular_nms();
    test_nan_class_scores_stay_in_range();
    test_errors();
    test_exact_sizes();
    return PE_TEST_END("test_detpost");
}
