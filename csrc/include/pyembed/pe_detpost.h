/*
 * pe_detpost.h - TFLite_Detection_PostProcess (the SSD post-processing custom
 * operator), float32, as TFLite Micro's kernel computes it.
 *
 * Inputs: box encodings [1, N, box_stride] (box_stride >= 4, the first four
 * are the centre-size code y, x, h, w), class predictions [1, N, C1] (C1 =
 * num_classes or num_classes + 1 with a background column 0), anchors
 * [N, 4] (y, x, h, w). Outputs: boxes [1, out_rows, 4] (ymin, xmin, ymax,
 * xmax), classes [1, out_rows], scores [1, out_rows], num detections [1],
 * all float32.
 *
 * Arithmetic (TFLM's): the box decoding runs in double (a division by the
 * scale, C library exp for the height / width) and rounds the centre and
 * half size to float32 before the float32 corner subtraction / addition;
 * the score threshold keeps scores >= it; candidates are ordered by score,
 * ties by anchor index (lower first); a candidate is dropped when its
 * float32 IoU with a kept one exceeds the threshold. Fast NMS ranks anchors
 * by their best class (of the K = min(max_classes_per_detection, classes)
 * best, ties lower class first) and writes K rows per kept anchor at TFLM's
 * row offsets K * e + col (e the running row count); regular NMS runs the
 * single-class NMS per class (detections_per_class each) and merges the
 * results, max_detections rows, the unused ones zero. A decoded box with
 * ymin >= ymax or xmin >= xmax is PE_ERR_ARG (TFLM fails the invocation; a
 * box with NaN corners passes that test, as in TFLM). NaN scores fail the
 * threshold; NaN class scores with K > 1 may rank otherwise than in TFLM
 * (its std::partial_sort), with K = 1 they rank as in TFLM.
 * Rows TFLM leaves unwritten are written as zero here.
 *
 * Build with -ffp-contract=off (a fused multiply-add would change bits).
 */
#ifndef PYEMBED_PE_DETPOST_H
#define PYEMBED_PE_DETPOST_H

#include "pe_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bound on N, classes, max_detections and the other counts (keeps every size query in int32). */
#define PE_DETPOST_MAX_COUNT 65536

typedef struct {
    int32_t num_boxes;          /* N >= 1 */
    int32_t box_stride;         /* box encodings' last dim, >= 4 */
    int32_t num_classes_bg;     /* C1: class predictions' last dim */
    int32_t num_classes;        /* C: C1 - C is 0 or 1 */
    int32_t max_detections;     /* >= 1 */
    int32_t max_classes_per_detection; /* >= 1 (fast NMS) */
    int32_t detections_per_class;      /* >= 1 (regular NMS) */
    int32_t use_regular_nms;    /* 0: fast, 1: regular */
    float score_threshold;
    float iou_threshold;        /* (0, 1] */
    float y_scale, x_scale, h_scale, w_scale;
    int32_t out_rows;           /* rows of the boxes / classes / scores outputs */
} pe_detpost_params;

/* PE_OK when p is consistent (counts in range, enough output rows: fast NMS
 * needs K * K * max_detections rows when K > 1, max_detections when K = 1;
 * regular NMS max_detections), else PE_ERR_ARG. */
pe_status pe_detpost_check(const pe_detpost_params *p);

/* Scratch bytes pe_detpost_f32 needs, or -1 for an inconsistent p. */
int32_t pe_detpost_scratch_size(const pe_detpost_params *p);

/* Run the operator. scratch: at least pe_detpost_scratch_size(p) bytes, 4-byte aligned. */
pe_status pe_detpost_f32(const pe_detpost_params *p, const float *box_enc, const float *class_pred,
                         const float *anchors, float *out_boxes, float *out_classes, float *out_scores,
                         float *out_num, void *scratch, int32_t scratch_size);

#ifdef __cplusplus
}
#endif

#endif
