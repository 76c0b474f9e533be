/*
 * pe_run_detpost.c - graph runner of TFLite_Detection_PostProcess
 * (kernels/detpost/pe_detpost.c, pe_detpost.h), code 114.
 *
 * Inputs: box encodings, class predictions, anchors (float32); outputs:
 * boxes, classes, scores, num detections (float32). Words (PE_DETPOST_WORDS):
 *     num_boxes, box_stride, num_classes_bg, num_classes, max_detections,
 *     max_classes_per_detection, detections_per_class, use_regular_nms,
 *     score threshold, IoU threshold, y / x / h / w scales (float32 bit
 *     patterns), out_rows.
 * Every tensor's element count must match the words; the outputs must not
 * overlap the inputs or each other.
 */
#include "pyembed/pe_graph_internal.h"
#include "pyembed/pe_graph_runners.h"
#include "pyembed/pe_detpost.h"

#define PE_DETPOST_WORDS 15

pe_status pe_graph_run_detection_postprocess(const pe_graph *g, const pe_graph_op *op,
                                             const pe_context *scratch, const pe_context *arena)
{
    const int32_t *w = op->params;
    pe_detpost_params p;
    const float *in[3];
    float *out[4];
    int64_t want_in[3], want_out[4];
    int32_t k;
    if (w == NULL || op->num_params != PE_DETPOST_WORDS || op->num_inputs != 3 || op->num_outputs != 4) {
        return PE_ERR_ARG;
    }
    p.num_boxes = w[0];
    p.box_stride = w[1];
    p.num_classes_bg = w[2];
    p.num_classes = w[3];
    p.max_detections = w[4];
    p.max_classes_per_detection = w[5];
    p.detections_per_class = w[6];
    p.use_regular_nms = w[7];
    p.score_threshold = pe_graph_word_float(w[8]);
    p.iou_threshold = pe_graph_word_float(w[9]);
    p.y_scale = pe_graph_word_float(w[10]);
    p.x_scale = pe_graph_word_float(w[11]);
    p.h_scale = pe_graph_word_float(w[12]);
    p.w_scale = pe_graph_word_float(w[13]);
    p.out_rows = w[14];
    if (pe_detpost_check(&p) != PE_OK) {
        return PE_ERR_ARG;
    }
    want_in[0] = (int64_t)p.num_boxes * p.box_stride;
    want_in[1] = (int64_t)p.num_boxes * p.num_classes_bg;
    want_in[2] = (int64_t)p.num_boxes * 4;
    want_out[0] = (int64_t)p.out_rows * 4;
    want_out[1] = want_out[2] = p.out_rows;
    want_out[3] = 1;
    for (k = 0; k < 3; ++k) {
        const int32_t t = pe_graph_input_index(op, k);
        in[k] = (const float *)pe_graph_input(g, op, k, arena, PE_DT_FLOAT32);
        if (t < 0 || in[k] == NULL || (int64_t)pe_graph_count(g, t) != want_in[k]) {
            return PE_ERR_ARG;
        }
    }
    for (k = 0; k < 4; ++k) {
        const int32_t t = pe_graph_output_index(op, k);
        int32_t j;
        out[k] = (float *)pe_graph_output(g, op, k, arena, PE_DT_FLOAT32);
        if (t < 0 || out[k] == NULL || (int64_t)pe_graph_count(g, t) != want_out[k]) {
            return PE_ERR_ARG;
        }
        for (j = 0; j < 3; ++j) {
            if (pe_graph_f32_overlap(out[k], want_out[k], in[j], want_in[j])) {
                return PE_ERR_ARG;
            }
        }
        for (j = 0; j < k; ++j) {
            if (pe_graph_f32_overlap(out[k], want_out[k], out[j], want_out[j])) {
                return PE_ERR_ARG;
            }
        }
    }
    if (scratch == NULL) {
        return PE_ERR_SCRATCH;
    }
    return pe_detpost_f32(&p, in[0], in[1], in[2], out[0], out[1], out[2], out[3], scratch->buf, scratch->size);
}
