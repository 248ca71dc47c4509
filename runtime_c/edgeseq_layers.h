/*
 * edgeseq C runtime, layer-block stages (kind ES_KIND_LAYERS): the descriptor of an anytime neural
 * network, one stage per exit. Included by edgeseq_runtime.h; the stage execution is in
 * edgeseq_layers_run.h, which edgeseq_runtime.c includes (so the float runtime stays one source file).
 *
 * STAGES. Stage 0 is the prior (z = c_0). Stage k >= 1 computes, from the state s_{k-1} of the previous
 * stage (width n_state_in, or nothing when n_state_in = 0: the first stage and every reset stage) and
 * the features pushed so far,
 *     h = relu(b + W s_{k-1} + sum over injections U_i u_i),     z = c + V h,    s_k = h,
 * then the link, and publishes z through the same double buffer as the other kinds -- unless the stage
 * has commit = 0 (an ensemble member whose exit did not beat the committed ones): it still runs (later
 * stages read its state) but es_current keeps the last committed prediction. Weights are row-major
 * [out][in]: W is [width][n_state_in], U_i is [width][n_in], V is [n_outputs][width], so every output
 * is one contiguous dot product.
 *
 * INJECTIONS. u_i is either the n_in features of one pushed group (conv == NULL; `offset` is the
 * group's first feature among those pushed so far, sequence order) or the output of a conv branch
 * over a windowed group: relu(conv1d), optionally max- or average-pooled over non-overlapping windows
 * of pool_size positions (a trailing partial window dropped), flattened filter-major
 * (u[f * pooled + p]). A WINDOWED GROUP IS PUSHED TIME-MAJOR (NWC): value[t * channels + c] for
 * t < length, c < channels -- the order a streaming sensor delivers samples, so firmware can fill the
 * window as it arrives. (The Python model and the ONNX graphs take the same group channel-major,
 * column c * length + t; the exporter transposes the weights, and a flat injection over a windowed
 * group gets its U columns permuted the same way.) The convolution is direct, with no im2col copy:
 *     a[f][l] = b[f] + sum_{j < kernel * channels} w[f][j] * x[offset + l * stride * channels + j],
 * with w laid out [filters][kernel][channels] so that one output is one contiguous dot product.
 *
 * WORK BUFFER (es_work_floats): n_features + n_outputs + 2 * n_pred (as for the other kinds) plus
 * 2 * n_state (two ping-pong state buffers: stage k writes buffer k & 1 and reads the other) plus
 * n_scratch (the largest pooled conv output). The generated header gives the sum as
 * <prefix>_WORK_FLOATS, the multiply-adds of each stage as <prefix>_STAGE_MACS[k] (the same count
 * Python's stage_macs reports: conv, dense block and head; pooling, ReLU and the link not counted)
 * and the largest as <prefix>_MACS_PER_STEP_MAX.
 *
 * CALLS. es_push only stores (and checks) a group's values; es_step runs exactly ONE stage, so
 * firmware can stop between any two stages; es_next names what to do next (push a group, or step),
 * with the cumulative cost of the stage that action belongs to -- the budget rule is "do it only if
 * that cost <= budget". es_prefix_for_budget returns the last COMMITTING stage whose cumulative cost
 * is <= the budget, as Python does. A stage may read any group pushed by the time it runs: es_init
 * proves every offset, width and conv shape against the features pushed by then, so es_step reads
 * only inside the buffers.
 *
 * DTYPE. Every stage says its arithmetic (dtype); this runtime runs ES_DTYPE_F32 and refuses others,
 * so integer (int8/int16) stages can be added with their own weight type and scale later.
 */
#ifndef EDGESEQ_LAYERS_H
#define EDGESEQ_LAYERS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ES_DTYPE_F32 = 0 /* float32 weights and arithmetic (the only one this runtime runs) */
} es_dtype;

typedef enum {
    ES_POOL_NONE = 0, /* pool_size must be 1 */
    ES_POOL_MAX = 1,
    ES_POOL_AVG = 2
} es_pool;

/* relu(conv1d) + pooling over a windowed group pushed time-major (see INJECTIONS) */
typedef struct es_conv1d {
    uint32_t channels;  /* C */
    uint32_t length;    /* L: time steps of the window (the group's dim is C * L) */
    uint32_t kernel;    /* taps, <= length */
    uint32_t stride;    /* >= 1 */
    uint32_t filters;   /* F */
    uint32_t pool;      /* es_pool */
    uint32_t pool_size; /* >= 1 (1 with ES_POOL_NONE) */
    const float *w;     /* [filters][kernel][channels] */
    const float *b;     /* [filters] */
} es_conv1d;

/* one term U u of a dense block */
typedef struct es_inject {
    uint32_t offset;        /* first feature of the group among the features pushed (sequence order) */
    uint32_t n_in;          /* width of u: the group's dim, or filters * pooled length with a conv */
    const es_conv1d *conv;  /* NULL: u is the group's features */
    const float *u;         /* [width][n_in] */
} es_inject;

typedef struct es_layer_stage {
    uint32_t width;          /* H: hidden width, the carried state after this stage (0 for stage 0) */
    uint32_t n_state_in;     /* width of the state read (the previous stage's), 0 = ignore the state */
    uint32_t n_inject;
    uint32_t commit;         /* 1: publish the exit; 0: run it for its state only */
    uint32_t dtype;          /* es_dtype of the weights and arithmetic */
    const float *w;          /* [width][n_state_in], NULL when n_state_in = 0 */
    const es_inject *inject; /* [n_inject] */
    const float *b;          /* [width] */
    const float *v;          /* [n_outputs][width] head */
    const float *c;          /* [n_outputs] head bias (stage 0: the prior) */
} es_layer_stage;

typedef struct es_layers {
    uint32_t n_stages;                /* K + 1 */
    uint32_t n_state;                 /* the largest width: each ping-pong buffer's size */
    uint32_t n_scratch;               /* the largest pooled conv output (0 without conv branches) */
    const uint32_t *group_stage;      /* [n_groups] the stage (1..K) that first needs each group
                                         position, non-decreasing */
    const es_layer_stage *stage;      /* [n_stages] */
} es_layers;

#ifdef __cplusplus
}
#endif

#endif /* EDGESEQ_LAYERS_H */
