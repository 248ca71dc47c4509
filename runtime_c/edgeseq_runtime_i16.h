/*
 * edgeseq integer runtime: the anytime loop for cores without an FPU (Cortex-M0/M0+, small RISC-V),
 * for models exported with `edgeseq export --c-dtype int16` (docs/integer-models.md).
 *
 * No float or double type appears in this runtime or in an int16 generated model: features arrive
 * as int16, weights are int16, sums are int32, links are table look-ups and integer divisions, and
 * budgets are compared as the IEEE-754 bit patterns of the float64 costs (uint64; for non-negative
 * doubles, +inf included, the order of the bit patterns is the order of the values, so the rule
 * "last stage with cum_cost <= budget" is decided exactly as Python decides it, with no soft-float).
 *
 *     static int16_t x[mymodel_N_FEATURES];
 *     static int32_t work[mymodel_WORK_WORDS];
 *     static es16_state st;
 *     es16_init(&st, &mymodel_model, x, mymodel_N_FEATURES, work, mymodel_WORK_WORDS);
 *     es16_group_info g;
 *     while (es16_next_group(&st, &g) == ES_OK && g.cum_cost_bits <= budget_bits) {
 *         extract_group_q(g.group, feats);   // g.dim int16: sat16(rint(x * 2^s_i) - O_i), see below
 *         if (es16_push(&st, g.group, feats, g.dim) != ES_OK) break;
 *     }
 *     // elsewhere, e.g. in a timer ISR:  es16_current(&st, out, &prefix, &label);
 *
 * FEATURES. Who quantises: the extractor. Feature i of the full prefix (sequence order) is delivered
 * as x_q = sat16(rint(x * 2^s_i) - O_i), s_i and O_i from the generated <prefix>_feature_shift[] and
 * <prefix>_feature_offset[] (also in manifest.json). An extractor that already computes in fixed
 * point with 2^-s_i resolution subtracts the integer O_i and saturates; nothing else.
 *
 * ARITHMETIC. Prefix j: z_q[p] = intercept[j][p] + sum_i x_q[i] * coef_j[i][p], int16 x int16 products
 * summed in int32. Headroom: |x_q| <= 32768, so every partial sum is bounded by
 * |intercept| + 32768 * sum_i |coef| -- the generator proves that bound <= 2^31 - 1 for every prefix
 * and output, and es16_init checks it again (in 64-bit arithmetic) before accepting a descriptor, so no
 * signed overflow can happen whatever int16 values are pushed. z ~ z_q * 2^-weight_shift[j].
 * Predictions (int32, es16_current):
 *   identity: z_q itself, P values; the real value is z_q * 2^-weight_shift[j] (es16_output_shift);
 *   sigmoid: [p0, p1] in units of 2^-15 (p0 + p1 = 32768); label 1 exactly when z_q > 0;
 *   softmax: P probabilities in units of 2^-15 (rounded quotients, so they sum to 32768 +- P/2);
 *            label = the FIRST index of the largest z_q (integer argmax, no table involved).
 * The link table (int16, in the model) is indexed by |z| (sigmoid) or z_max - z (softmax) in steps of
 * 2^-link_table_shift, saturated at its last entry. A Python simulation (edgeseq.export.quantize) is
 * bit-identical to this file; the tests compare the two on host and emulated Cortex-M0/M3.
 *
 * COST OF A PUSH completing prefix j: d_j * P int16 x int16 -> int32 multiply-adds (one MULS and one
 * ADDS each on ARMv6-M), then the link: sigmoid one table read; softmax P table reads and P 32-bit
 * unsigned divisions (libgcc's __aeabi_uidiv on cores without a divider).
 *
 * Build with -DES16_LINEAR_ONLY to drop the tree-stage code (es16_init then refuses tree models).
 *
 * TREE STAGES (kind ES16_KIND_TREES, descriptor es16_trees; `edgeseq export --c-dtype int16` of an AFR
 * or imported LightGBM model). The stage rules are the float runtime's (edgeseq_runtime.h, TREE STAGES):
 * stage k owns trees stage_tree[k]..stage_tree[k+1]-1, a push completes the stage of its group when it
 * is that stage's last group, group-less stages (cost 0) run in their predecessor's push, every stage
 * is committed, es_current's prefix is the stage index, budgets compare cum_cost_bits per stage. The
 * arithmetic is integer: a split goes to child[0] when (int32_t)x[feature] <= t_q (the generator chose
 * t_q = floor(t * 2^s_i) - O_i, so this is the float split on the dequantised feature); a leaf adds its
 * int32 leaf_q to s[tree_target] (int32; es16_init proves, per dimension, that the sum over its trees of
 * max |leaf_q| is <= 2^31 - 1, so no partial sum overflows); the readout takes u_d = floor(s_d / 2^r_d)
 * (es16_init proves |u_d| <= 32768 from the same bound) and computes z_q = intercept[k] + u @ coef[k]
 * with the linear headroom proof, then the same links. The walk stops after stage_depth[k] compares;
 * es16_init validates every child, feature and target index first. COST OF A TREE PUSH: per stage it
 * completes, at most sum over its trees of (depth + 1) node visits (one int32 compare each) plus
 * n_state * P multiply-adds and the link (<prefix>_NODE_VISITS_PER_PUSH_MAX, _MACS_PER_PUSH_MAX).
 *
 * COMMIT, READS, THREADING: exactly the float runtime's (edgeseq_runtime.h, INTERRUPT SAFETY), through
 * the shared macros of edgeseq_seqlock.h: a push computes into the unpublished slot and publishes it
 * by one counter increment; es16_current may run in an interrupt handler. All memory is the caller's:
 * an es16_state, an int16 feature buffer of n_features and an int32 work buffer of
 * es16_work_words(model) = n_outputs + 2 * n_pred (+ n_state for trees) words. No heap, no stdio, no libm, no globals.
 */
#ifndef EDGESEQ_RUNTIME_I16_H
#define EDGESEQ_RUNTIME_I16_H

#include <stddef.h>
#include <stdint.h>

#include "edgeseq_seqlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when es16_model's layout changes (2: the kind and the tree stages). */
#define ES16_ABI_VERSION 2u

/* Links, status codes: the same values as the float runtime's es_link / es_status. */
#define ES16_LINK_IDENTITY 0u
#define ES16_LINK_SIGMOID 1u
#define ES16_LINK_SOFTMAX 2u

/* Kinds of stage computation (the float runtime's es_kind values). */
#define ES16_KIND_LINEAR 0u
#define ES16_KIND_TREES 1u

typedef enum {
    ES16_OK = 0,
    ES16_DONE = 1,
    ES16_ERR_NULL = -1,
    ES16_ERR_WRONG_GROUP = -2,
    ES16_ERR_WRONG_LENGTH = -3,
    ES16_ERR_FINISHED = -5,
    ES16_ERR_BAD_MODEL = -6,  /* inconsistent descriptor, other ABI version, or the headroom bound fails */
    ES16_ERR_BUFFER = -7,
    ES16_ERR_NOT_INIT = -8,
    ES16_ERR_BUDGET = -10     /* the budget's bit pattern is a NaN or a negative number */
} es16_status;

/* One node of an integer tree. Children are absolute indices into es16_trees.node, after this node,
   inside its tree. */
typedef struct es16_tree_node {
    int32_t feature;    /* split: position among the pushed features; leaf: -1 */
    int32_t value;      /* split: t_q, go to child[0] when (int32_t)x[feature] <= t_q; leaf: leaf_q */
    uint32_t child[2];  /* split: {left, right}; leaf: {0, 0} */
} es16_tree_node;

/* The stages of an integer tree model (see TREE STAGES above). */
typedef struct es16_trees {
    uint32_t n_stages;             /* K + 1: stage 0 (the prior) included */
    uint32_t n_state;              /* state dimensions */
    uint32_t n_trees;
    uint32_t n_nodes;
    const uint32_t *group_stage;   /* [n_groups] the stage (1..K) each group position belongs to */
    const uint32_t *stage_tree;    /* [n_stages + 1] stage k owns trees stage_tree[k]..stage_tree[k+1]-1 */
    const uint32_t *stage_depth;   /* [n_stages] comparisons on the longest path of the stage's trees */
    const uint32_t *tree_root;     /* [n_trees] first node of each tree, strictly increasing */
    const uint32_t *tree_target;   /* [n_trees] state dimension each tree adds to */
    const es16_tree_node *node;    /* [n_nodes] */
    const int32_t *state_shift;    /* [n_state] r_d: u_d = floor(s_d / 2^r_d) enters the readout */
} es16_trees;

typedef struct es16_model {
    uint32_t abi_version;            /* ES16_ABI_VERSION */
    const char *name;
    uint32_t link;                   /* ES16_LINK_* */
    uint32_t n_groups;               /* J */
    uint32_t n_outputs;              /* P */
    uint32_t n_pred;                 /* P, or 2 for sigmoid */
    uint32_t n_features;             /* features of the full prefix */
    const uint32_t *group_index;     /* [J] original group index, sequence order */
    const uint32_t *group_dim;       /* [J] */
    const uint64_t *cum_cost_bits;   /* [n_stages] IEEE-754 binary64 bit patterns of the cumulative costs */
    const int16_t *const *coef;      /* [n_stages] coef[j]: d_j x P row-major (trees: n_state x P); linear
                                        coef[0] may be NULL */
    const int32_t *intercept;        /* [n_stages x P] */
    const int32_t *weight_shift;     /* [n_stages] S_j: z = z_q * 2^-S_j */
    const int16_t *link_table;       /* sigmoid / softmax table; NULL for identity */
    uint32_t link_table_len;
    int32_t link_table_shift;        /* table step 2^-link_table_shift */
    const int32_t *feature_shift;    /* [n_features] s_i (what the extractor needs; not read here) */
    const int32_t *feature_offset;   /* [n_features] O_i */
    const char *const *group_name;   /* [J] */
    const char *const *output_name;  /* [n_pred] */
    uint32_t kind;                   /* ES16_KIND_LINEAR or ES16_KIND_TREES */
    const es16_trees *trees;         /* ES16_KIND_TREES: the trees and stages; linear: NULL */
} es16_model;

/* Runtime state; opaque, public only for static allocation. */
typedef struct es16_state {
    const es16_model *model;
    int16_t *x;               /* [n_features] pushed values, sequence order */
    int32_t *z;               /* [n_outputs] */
    int32_t *tstate;          /* trees: [n_state] the carried state s; linear: NULL */
    volatile int32_t *slot;   /* [2 * n_pred] */
    uint32_t next;
    uint32_t filled;
    uint32_t stage;           /* trees: last stage computed (and committed) */
    volatile uint32_t slot_prefix[2];
    volatile int32_t slot_label[2];
    volatile uint32_t seq;
    uint32_t magic;
    const int32_t *stop_threshold; /* [n_stages] es16_set_stop's thresholds (units of 2^-15); NULL: off */
    uint32_t confident;       /* the committed stage passed its stop threshold */
} es16_state;

typedef struct es16_group_info {
    uint32_t position;
    uint32_t group;
    uint32_t dim;
    uint64_t cum_cost_bits;   /* bit pattern of the cumulative cost once this group is pushed: start it
                                 only if cum_cost_bits <= the budget's bit pattern (budget >= +0.0) */
    const char *name;
} es16_group_info;

/* int32 words of work buffer: n_outputs + 2 * n_pred (+ n_state for trees); 0 if model is NULL or the
   sum overflows. */
size_t es16_work_words(const es16_model *model);

/* Validate the model (sizes, shifts, the int32 headroom bound of every prefix), bind the buffers,
   commit prefix 0. */
es16_status es16_init(es16_state *state, const es16_model *model, int16_t *x, size_t x_len, int32_t *work,
                      size_t work_len);
es16_status es16_next_group(const es16_state *state, es16_group_info *info);
/* Push the group's int16 values (n = its dimension); commits the new prefix. On error nothing changes. */
es16_status es16_push(es16_state *state, uint32_t group, const int16_t *values, size_t n);
/* Copy the last committed prediction (n_pred int32), its prefix and label; safe from an interrupt. */
es16_status es16_current(const es16_state *state, int32_t *out, uint32_t *prefix, int32_t *label);
es16_status es16_reset(es16_state *state);
/* Per-input stopping (export with --stop-data), as es_set_stop in the float runtime: the margin between
   the two largest committed probabilities (units of 2^-15) >= threshold[stage] makes es16_next_group
   return ES16_DONE. Pass <prefix>_stop_threshold (NULL: off); restarts the sample like es16_reset. */
es16_status es16_set_stop(es16_state *state, const int32_t *threshold);
/* 1 when the committed stage passed its stop threshold, else 0. */
int es16_confident(const es16_state *state);
/* The budget rule on bit patterns: *prefix = last j with cum_cost_bits[j] <= budget_bits. budget_bits
   is the binary64 bit pattern of the budget (-0.0 counts as +0.0); NaN or negative: ES16_ERR_BUDGET. */
es16_status es16_prefix_for_budget(const es16_model *model, uint64_t budget_bits, uint32_t *prefix);
/* Number of stages: J + 1 for a linear model, K + 1 for trees; 0 for NULL or a tree model without trees. */
uint32_t es16_n_stages(const es16_model *model);
/* S_j of prefix j (identity models: the real prediction is out * 2^-S_j); 0 for a bad argument. */
int32_t es16_output_shift(const es16_model *model, uint32_t prefix);

#ifdef __cplusplus
}
#endif

#endif /* EDGESEQ_RUNTIME_I16_H */
