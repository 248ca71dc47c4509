/*
 * edgeseq C runtime: the anytime loop for firmware, independent of any particular model.
 *
 * A generated model (edgeseq_model.h/.c from `edgeseq export`) is a `const es_model` in flash.
 * The device computes feature groups in the model's order and pushes each group's values; after
 * every push the prediction of the new prefix is committed. At any moment -- including from an
 * interrupt handler that fires in the middle of a push -- es_current() returns the last committed
 * prediction in O(P) (P = prediction width; independent of the number of features).
 *
 *     static float work[mymodel_WORK_FLOATS];
 *     static es_state st;
 *     es_init(&st, &mymodel_model, work, mymodel_WORK_FLOATS);
 *     es_group_info g;
 *     es_status r = es_next_group(&st, &g);
 *     while (r == ES_OK) {
 *         compute_group(g.group, feats);              // g.dim floats
 *         r = es_push_next(&st, g.group, feats, g.dim, &g);   // push, then name the next group
 *     }
 *     // elsewhere, e.g. in a timer ISR:  es_current(&st, out, &prefix, &label);
 *
 * Constraints: C99, no heap, no mutable globals, no stdio. libm is used only for expf (sigmoid and
 * softmax links; link with -lm). Compile edgeseq_runtime.c with -DES_IDENTITY_ONLY to drop
 * those links and the libm dependency (es_init then rejects non-identity models). Compile it with
 * -DES_LINEAR_ONLY to drop the tree-stage code (es_init then rejects tree models). On Thumb-2 cores
 * (GCC/Clang, not -Os) the copy-and-test of pushed values and the test of a stage's scores are a few
 * lines of inline assembly (two values a step, the same answers); -DES_PORTABLE_C keeps them in C.
 *
 * STATES AND KINDS. A model is a sequence of stages 0..K (docs/c-runtime.md); es_current reports
 * the index of the committed stage (its `prefix` argument). A LINEAR model (kind ES_KIND_LINEAR)
 * has one stage per group: stage j is the affine prefix of the first j groups. A TREE model
 * (ES_KIND_TREES, see TREE STAGES below) has stages that each need zero, one or several new groups.
 *
 * STATE AND RAM. All memory is caller-provided: an es_state (sizeof(es_state) bytes) plus a float
 * work buffer of es_work_floats(model) floats = n_features + n_outputs + 2 * n_pred (+ n_state for a
 * tree model), laid out as [features of the prefix so far | linear-output scratch | two prediction
 * slots | tree state]. The generated
 * header gives this size as the compile-time constant <prefix>_WORK_FLOATS and the total RAM as
 * <prefix>_STATE_RAM_BYTES, so two models of different sizes can share one runtime build.
 *
 * COST OF A PUSH (linear model). Pushing the group that completes prefix j (d_j features so far,
 * P outputs) costs
 *   d_j * P multiply-adds (one dot product per output over every feature of the prefix, float
 *   accumulation in row order; outputs are processed 4 at a time in registers),
 *   d_g copies and bit-pattern finiteness tests (d_g = the group's dimension; for P = 1 they are
 *   fused into the dot product, so they hide in its add latency),
 *   the link: softmax P - 1 expf + P divisions; sigmoid 1 expf + 2 divisions; identity nothing,
 *   n_pred + 3 stores and two release fences to publish (an identity link or a link on read computes
 *   z straight into the unpublished slot: P bit tests, 3 stores and the two fences).
 * The worst case is the last push: n_features * P multiply-adds (<prefix>_MACS_PER_PUSH_MAX).
 * es_current costs n_pred loads/stores plus two counter reads and two acquire fences (no retry
 * when called from an interrupt handler on a single core, see below).
 *
 * INTERRUPT SAFETY AND MEMORY ORDERING. Predictions are committed through a double buffer indexed
 * by a sequence counter `seq` (a seqlock whose "write in progress" state is the unpublished slot):
 * a push computes into the slot that is NOT published (slot (seq + 1) & 1), and only then
 * increments seq, which publishes that slot in one aligned 32-bit store.
 *   writer (es_commit):  store slot (seq+1)&1;  RELEASE (1);  seq = seq + 1;  RELEASE (2)
 *   reader (es_current): b = seq;  ACQUIRE;  copy slot b&1;  ACQUIRE;  a = seq;  retry if a != b
 * Fence (1) makes a slot visible before the counter that publishes it (pairs with the reader's
 * first acquire). Fence (2) makes the new counter visible before any store of the NEXT commit into
 * the slot it just retired -- the slot a reader that loaded the previous seq may still be copying;
 * so a copy that saw any such store also sees the counter change (pairs with the second acquire)
 * and is retried. Without (2) a weakly ordered multi-core CPU (ARMv7-A/v8, POWER) could expose
 * the next commit's slot stores first and the reader would accept a torn copy.
 *  - Single core, reader in an interrupt handler (the firmware case): the handler runs to
 *    completion while the interrupted push is frozen, so seq cannot change during the read; the
 *    published slot is never the one being written; es_current never retries or waits.
 *  - Reader on another thread/core: the writer never waits; the reader retries when a publish
 *    happened during its copy (it then may have been reading a slot being rewritten).
 * Assumptions: an aligned uint32_t load/store is single-copy atomic (true on Cortex-M, RISC-V32/64,
 * x86; 8/16-bit cores, where an interrupt can split the counter's store, are not a target); the
 * counter does not wrap 2^32 times during one es_current call. All shared fields are accessed
 * through volatile lvalues, so the compiler keeps their program order, and the fences are compiler
 * barriers too. Hardware ordering: on one core program order is what an interrupt handler
 * observes. Across cores the fences above do the ordering; they default to __atomic_thread_fence on
 * GCC/Clang (a compiler-only barrier on x86, whose stores and loads are not reordered with each
 * other, and a `dmb` on ARM -- harmless on single-core Cortex-M) and to nothing elsewhere; define
 * ES_FENCE_RELEASE() and ES_FENCE_ACQUIRE() before including this header (and when compiling
 * edgeseq_runtime.c) to plug in your platform's barrier. The tests (SIGALRM handler and a second
 * thread, on x86) cannot expose a missing hardware fence: x86 never reorders stores with stores or
 * loads with loads. The multi-core argument for weakly ordered CPUs rests on this reasoning only.
 *
 * BUDGETS. A prefix is affordable when its cumulative cost is <= the budget, compared exactly. The
 * cumulative costs are stored as IEEE binary64 doubles holding the very values Python computes
 * (the running float64 sum of the costs in sequence order), written by the generator as hexadecimal
 * floating constants, which C99 converts exactly. A comparison of two doubles involves no rounding
 * (even where FLT_EVAL_METHOD evaluates arithmetic in wider precision), so `cum_cost <= budget`
 * gives the same answer here as in Python for every budget, a cumulative cost itself included.
 * Float32 thresholds cannot do that: 0.1 + 0.7 + ... sums that float32 cannot represent round to a
 * neighbour, and budgets next to them would select a different prefix. A float budget converts to
 * double exactly, so firmware may keep its budgets in float. Cost: 8 bytes of flash per prefix and
 * one double comparison per group (a short library call on cores without a double FPU).
 *
 * TREE STAGES (kind ES_KIND_TREES, descriptor es_trees). Stage k owns the trees
 * stage_tree[k] .. stage_tree[k+1]-1 and a readout W_k (n_state x P, row-major), b_k (P). The
 * carried state s (n_state floats in the work buffer) starts at 0 and is updated
 *   s[tree_target[t]] += leaf_t(x)     for t = stage_tree[k], stage_tree[k] + 1, ... (tree order),
 * one float32 addition per tree, in that order; then z = b_k + sum_i s[i] * W_k[i][:] (float32,
 * rows in order, exactly the linear dot product above) and the link. A tree is walked from its root:
 * at a split go to the next node when x[feature] <= value (float32, the comparison of ONNX
 * TreeEnsembleRegressor BRANCH_LEQ and of LightGBM; NaN never reaches it because es_push refuses
 * non-finite values), else `right` nodes on; a leaf (right == 0) adds its `value`. Every step moves
 * forward inside the tree (es_init checks it), so a walk ends whatever the arrays say; a generated
 * model's walk visits at most stage_depth[k] + 1 nodes. On cores other than Cortex-M eight trees are
 * walked in lockstep (ES_TREE_LANES, edgeseq_runtime.c); the leaves are added in tree order either way.
 * In lockstep a walk resting on its leaf keeps stepping in place until the deepest of its eight ends,
 * so there each tree may cost up to the stage's depth in steps (the bounds below count the walk of
 * ES_TREE_LANES=1, the Cortex-M default).
 * docs/c-runtime.md says why this layout was chosen.
 * Group position j belongs to stage group_stage[j]; a push completes that stage when it was the
 * stage's last group (otherwise nothing is committed and es_current keeps the previous stage), and
 * stages that need no new group run right after the previous one in the same push (stage 0 and any
 * such stages right after it run in es_init / es_reset). Every stage is committed through the same
 * double buffer, so an interrupt may observe any of them. es_init validates every index the walk
 * follows (children after their node and inside its tree, features already pushed by the stage,
 * targets inside the state), once, in O(n_nodes); the walk itself then needs no check.
 * COST OF A TREE PUSH: for each stage the push completes, at most sum over its trees of
 * (depth_t + 1) node visits (one compare each) plus n_state * P readout multiply-adds and the link;
 * the generated header states the worst push as <prefix>_NODE_VISITS_PER_PUSH_MAX and
 * <prefix>_MACS_PER_PUSH_MAX, and their sum as <prefix>_WORK_PER_PUSH_MAX. es_current stays O(P).
 * Budgets: es_group_info.cum_cost of a group is the cumulative cost of the stage it belongs to and
 * es_prefix_for_budget returns a stage index (the last k with cum_cost[k] <= budget, as in Python).
 * A stage without new groups must cost 0 (es_init refuses otherwise): it runs in its predecessor's
 * push, so no budget could stop between the two. ES_ERR_OVERFLOW cannot occur for a generated tree
 * model (the generator proves |state| and |z| stay finite); if a hand-made one overflows, the stage
 * is not committed and the sample is over (ES_ERR_FINISHED until es_reset).
 *
 * THREADING. One writer per state (es_init/es_push/es_reset from one context); any number of
 * es_current readers. Enable the reader (e.g. the timer interrupt) only after es_init has returned;
 * from then on es_push and es_reset may run while readers read (es_reset publishes prefix 0 the
 * same way a push publishes its prefix).
 */
#ifndef EDGESEQ_RUNTIME_H
#define EDGESEQ_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when es_model's layout changes; a generated model records the version it was made for. */
#define ES_ABI_VERSION 6u

#include "edgeseq_seqlock.h" /* ES_FENCE_RELEASE/ACQUIRE (overridable), the shared commit and budget rule */
#include "edgeseq_layers.h"  /* the layer-block stage descriptor (ES_KIND_LAYERS) */

typedef enum {
    ES_LINK_IDENTITY = 0, /* regression: prediction = z (P values) */
    ES_LINK_SIGMOID = 1,  /* binary: P = 1, prediction = [p(class 0), p(class 1)] */
    ES_LINK_SOFTMAX = 2,  /* multiclass: prediction = softmax(z), P values */
    /* LINK ON READ (export option c_link="read", CLI --c-link read): the same links, but every stage
       commits its raw scores z (P floats, through the same double-buffered commit) and es_current
       applies the link to the committed z -- the very function a commit applies otherwise, so the
       same bits. A push then pays no expf; es_current pays the link instead: sigmoid 1 expf + 2
       divisions, softmax P - 1 expf + P divisions, whatever the number of stages (label NULL: the
       softmax skips its argmax pass). es_current needs `out` to give a label (ES_ERR_NULL otherwise).
       With per-input stopping on the probability margin (ES_STOP_MARGIN) a commit still computes the
       link once, for the test only; without stopping a commit calls no stop test at all. */
    ES_LINK_SIGMOID_ON_READ = 3,
    ES_LINK_SOFTMAX_ON_READ = 4
} es_link;

typedef enum {
    ES_OK = 0,
    ES_DONE = 1,                /* es_next_group: every group has been pushed */
    ES_STEP = 2,                /* es_next: run the next stage with es_step (layer-block models) */
    ES_ERR_NULL = -1,           /* a required pointer argument is NULL */
    ES_ERR_WRONG_GROUP = -2,    /* es_push: not the group es_next_group names */
    ES_ERR_WRONG_LENGTH = -3,   /* es_push: n differs from the group's dimension */
    ES_ERR_NOT_FINITE = -4,     /* es_push: a value is NaN or +-Inf (nothing is stored) */
    ES_ERR_FINISHED = -5,       /* es_push after the last group (es_reset to start over) */
    ES_ERR_BAD_MODEL = -6,      /* es_init: inconsistent descriptor or other ABI version */
    ES_ERR_BUFFER = -7,         /* es_init: work buffer shorter than es_work_floats(model) */
    ES_ERR_NOT_INIT = -8,       /* the state was not set up by a successful es_init */
    ES_ERR_OVERFLOW = -9,       /* es_push: the prediction overflowed float; prefix not committed */
    ES_ERR_BUDGET = -10,        /* es_prefix_for_budget: the budget is NaN or negative */
    ES_ERR_NEED_PUSH = -11      /* es_step: a group the next stage needs is not pushed yet */
} es_status;

typedef enum {
    ES_KIND_LINEAR = 0, /* stage j = affine prefix of the first j groups (coef, intercept) */
    ES_KIND_TREES = 1,  /* tree increments into a carried state + readout per stage (es_trees) */
    ES_KIND_LAYERS = 2  /* layer blocks: a neural network with one exit per stage (es_layers) */
} es_kind;

/* One tree node, 8 bytes. Each tree's nodes are stored in pre-order from its root: a split's left
   child ("x <= value") is the next node, its right child `right` nodes further on, and a leaf sits
   in place (right == 0), holding its value where a split holds its threshold. So a step of the walk
   is one 8-byte node, one feature load and one compare (see TREE STAGES); the 16-bit fields bound a
   tree model to 65,535 features and a tree to 65,535 nodes. */
typedef struct es_tree_node {
    float value;       /* split: threshold (go to the next node when x[feature] <= value); leaf: the value added */
    uint16_t feature;  /* split: index into the features pushed so far (sequence order); leaf: 0 */
    uint16_t right;    /* split: distance (in nodes, >= 1) from this node to its right child; leaf: 0 */
} es_tree_node;

/* The stages of a tree model (see TREE STAGES). */
typedef struct es_trees {
    uint32_t n_stages;             /* K + 1: stage 0 (the prior) included */
    uint32_t n_state;              /* S: carried state dimension */
    uint32_t n_trees;
    uint32_t n_nodes;
    const uint32_t *group_stage;   /* [n_groups] the stage (1..K) each group position belongs to,
                                      non-decreasing */
    const uint32_t *stage_tree;    /* [n_stages + 1] stage k owns trees stage_tree[k]..stage_tree[k+1]-1;
                                      stage_tree[n_stages] = n_trees */
    const uint32_t *stage_depth;   /* [n_stages] comparisons on the longest path of the stage's trees */
    const float *readout_w;        /* [n_stages x n_state x P] W_k row-major, stage after stage */
    const float *readout_b;        /* [n_stages x P] */
    const uint32_t *tree_root;     /* [n_trees] first node (the root) of each tree, strictly increasing */
    const uint32_t *tree_target;   /* [n_trees] state dimension each tree adds to */
    const es_tree_node *node;      /* [n_nodes] */
} es_trees;

/* TREE STAGES AS CODE (export option c_trees="code"/"auto", CLI --c-trees). The generator may write
   a model's trees as C instead of node tables: per stage one function whose trees are branch chains
   comparing x[feature] <= threshold (thresholds as float literals that read back exactly), each leaf
   added to the state entry of its tree, tree after tree -- the very float32 additions of the table
   walk in the same order, so both forms give the same bits -- then the stage's readout into z, with
   the terms of zero weight left out and weights of one not multiplied (the same bits as the runtime's
   readout; the generator writes every term where that would not hold). A split compares the bit
   pattern of x with the threshold's as one integer compare, which orders finite floats exactly as
   <= does (pushed values are finite). Such a model's es_trees has node,
   tree_root and tree_target NULL and n_nodes 0 (its stage ranges, depths and readouts as usual): es_init
   refuses it (so neither this nor an older runtime can walk tables it does not have); start it with
   es_init_code(&st, &<prefix>_tree_code, work, n), which validates the rest of the model as es_init
   does and ties the functions to it. The code reads only features pushed by its stage and state
   entries inside the state: the generator proves each index before writing it, and the generated
   file asserts the largest of each against the model's sizes at compile time. */
/* stage k's code: adds its trees' leaves to state and writes its readout z = b_k + state W_k (n_outputs
   floats) */
typedef void (*es_tree_stage_fn)(const float *x, float *state, float *z);

typedef struct es_tree_code {
    const struct es_model *model;  /* the model this code was generated with (es_init_code starts it) */
    uint32_t n_stages;             /* must equal the model's */
    const es_tree_stage_fn *stage; /* [n_stages] stage k's function, or NULL for the table walk */
} es_tree_code;

/*
 * A fitted anytime model, normally generated (static const, lives in flash). "Sequence order" is
 * the order in which groups are computed; position k (0-based) completes prefix k + 1.
 */
typedef struct es_model {
    uint32_t abi_version;            /* ES_ABI_VERSION at generation time */
    const char *name;                /* model name (UTF-8) */
    es_link link;
    uint32_t n_groups;               /* J */
    uint32_t n_outputs;              /* P: width of the linear output z */
    uint32_t n_pred;                 /* width of a prediction: P, or 2 for ES_LINK_SIGMOID */
    uint32_t n_features;             /* sum of group_dim: features of the full prefix */
    const uint32_t *group_index;     /* [J] original group index, sequence order */
    const uint32_t *group_dim;       /* [J] dimension of each group, sequence order */
    const double *cum_cost;          /* [n_stages] cumulative cost of stage k (linear: n_stages = J+1,
                                        stage j = prefix j); cum_cost[0] = 0. Double, the exact values
                                        Python compares (see BUDGETS) */
    const float *const *coef;        /* linear: [J+1] coef[j]: d_j x P row-major over the concatenated
                                        features of the first j groups (sequence order);
                                        coef[0] may be NULL (d_0 = 0). Trees: NULL */
    const float *intercept;          /* linear: [(J+1) x P] row-major: intercept of each prefix.
                                        Trees: NULL */
    const char *const *group_name;   /* [J] original group names (UTF-8), sequence order */
    const char *const *output_name;  /* [n_pred] output names or class labels */
    es_kind kind;                    /* which computation the stages do */
    const es_trees *trees;           /* ES_KIND_TREES: the trees and stages; linear: NULL */
    const es_layers *layers;         /* ES_KIND_LAYERS: the layer-block stages; other kinds: NULL */
} es_model;

/* Runtime state. Treat as opaque; fields are public only so it can be allocated statically. */
typedef struct es_state {
    const es_model *model;
    float *x;                /* [n_features] values pushed so far, sequence order */
    float *z;                /* [n_outputs] scratch for the linear output */
    volatile float *slot;    /* [2 * n_pred] the two prediction slots */
    float *tstate;           /* [n_state] tree models: the carried state; NULL for linear models */
    uint32_t next;           /* sequence position of the next group to push (0..J) */
    uint32_t filled;         /* features stored in x so far (d_next) */
    uint32_t stage;          /* tree models: last stage computed (and committed) */
    volatile uint32_t slot_prefix[2];
    volatile int32_t slot_label[2];
    volatile uint32_t seq;   /* publish counter: slot seq & 1 holds the committed prediction */
    uint32_t magic;          /* ES_STATE_MAGIC after a successful es_init */
    const float *stop_threshold; /* [n_stages] es_set_stop's thresholds; NULL: no per-input stopping */
    uint32_t confident;      /* the committed stage passed its stop threshold */
    const es_tree_code *tree_code; /* es_init_code's stage functions; NULL: every stage walks the tables */
    uint32_t stop_statistic; /* es_set_stop_statistic's statistic: ES_STOP_MARGIN or ES_STOP_LOGIT_GAP */
    const es_tree_stage_fn *fast_stage; /* the stage functions when a commit needs no link nor stop test */
} es_state;

typedef struct es_group_info {
    uint32_t position;       /* 0-based position in the sequence (pushing it completes prefix position+1) */
    uint32_t group;          /* original group index: what es_push expects */
    uint32_t dim;            /* number of floats to push */
    double cum_cost;         /* cumulative cost once this group is pushed: start the group only
                                if cum_cost <= budget (the budget rule, see BUDGETS) */
    const char *name;        /* the group's name (UTF-8) */
} es_group_info;

/* Optional commit hook: compile every source with -DES_ON_COMMIT=my_function and define
   void my_function(const es_state *); the runtime calls it (in the writer's context) right after each
   publish -- e.g. to wake a consumer, or to trace every stage (tests/driver.c). */
#ifdef ES_ON_COMMIT
void ES_ON_COMMIT(const es_state *state);
#endif

/* Floats of work buffer a model needs: n_features + n_outputs + 2 * n_pred (+ n_state for a tree
   model); 0 if model is NULL or that sum does not fit size_t (every size the runtime computes is
   overflow-checked). */
size_t es_work_floats(const es_model *model);

/* Number of stages K + 1 (J + 1 for a linear model); 0 if model is NULL or a tree model lacks trees. */
uint32_t es_n_stages(const es_model *model);

/* Validate the model, bind the caller's buffers, commit prefix 0 (the training mean / prior). */
es_status es_init(es_state *state, const es_model *model, float *work, size_t work_len);

/* The group to compute next: ES_OK and *info filled, or ES_DONE after the last group. */
es_status es_next_group(const es_state *state, es_group_info *info);

/* Push the values of `group` (original index, as es_next_group reports): n must equal its
 * dimension and every value must be finite; `values` must not point into the work buffer. On success the new prefix's prediction is committed;
 * on any error the state is unchanged (you may retry with corrected values). */
es_status es_push(es_state *state, uint32_t group, const float *values, size_t n);

/* es_push, then es_next_group, in one call -- the fastest loop (one call, one validation of the state
 * per group):
 *     es_group_info g;
 *     es_status r = es_next_group(&st, &g);
 *     while (r == ES_OK && g.cum_cost <= budget) {
 *         compute_group(g.group, feats);
 *         r = es_push_next(&st, g.group, feats, g.dim, &g);
 *     }
 * It checks and pushes exactly as es_push (the same errors; on an error the state and *next are
 * unchanged). Once the push succeeded it returns what es_next_group would now: ES_OK with *next the
 * next group, or ES_DONE when none is left (every group pushed, or a confident stage after es_set_stop).
 * ES_ERR_NULL when next is NULL (nothing pushed). Cost: es_push's (the copy and bit test of the group's
 * values, the stages it completes, see COST OF A PUSH) plus the five stores of *next. */
es_status es_push_next(es_state *state, uint32_t group, const float *values, size_t n, es_group_info *next);

/* Push every remaining group from one array, in one call: firmware that has the features of the rest of
 * the sample at once (not arriving over time: then the es_push_next loop, which can stop at a budget).
 * `values` holds the remaining groups' values concatenated in sequence order (es_next_group's order,
 * starting at the group it names now); n must be exactly their total width, n_features minus the
 * features pushed so far (the widths left after each position differ, so n also pins where the caller
 * thinks the sample stands). Every stage is committed through the same double-buffered commit as a
 * push commits it, one after another: an interrupt reading es_current during the call sees the last
 * stage completed, as between single pushes; the results are the very bits of the es_push_next loop.
 * With per-input stopping (es_set_stop) the call ends at the first confident stage, where that loop
 * ends (the values after it are not used).
 * Returns ES_DONE (nothing is left to push) on success. Errors, checked once per call: ES_ERR_NULL,
 * ES_ERR_NOT_INIT, ES_ERR_FINISHED (every group pushed), ES_ERR_WRONG_LENGTH, ES_ERR_NOT_FINITE (a
 * value of any group is NaN or +-Inf) -- all before anything is pushed: the state is unchanged.
 * ES_ERR_OVERFLOW: a stage overflowed; the stages before it stay committed (a linear model: the
 * groups before that group stay pushed and es_next_group names it; a tree model: the sample is over,
 * as after a single push). A layer-block model stores the groups and returns ES_DONE; es_step runs its
 * stages. Cost: one validation and one copy-and-test pass over the n values, then the stages' work
 * (COST OF A PUSH) -- no per-group call, checks or es_group_info. */
es_status es_push_all(es_state *state, const float *values, size_t n);

/* Copy the last committed prediction (n_pred floats) into out (a model with its link on read: the
 * committed scores with the link applied, see ES_LINK_SIGMOID_ON_READ). prefix (may be NULL) receives the
 * index of its stage (for a linear model: the number of groups it uses); label (may be NULL) the class index of the FIRST largest probability in
 * the returned prediction for classifiers (so a tie at 0.5 gives 0), or -1 for regression. out
 * may be NULL to read only prefix/label. Safe from an interrupt handler. */
es_status es_current(const es_state *state, float *out, uint32_t *prefix, int32_t *label);

/* PER-INPUT STOPPING (export with --stop-data). es_set_stop(&st, <prefix>_stop_threshold) turns it
 * on (NULL turns it off) and restarts the sample as es_reset does; call it once after es_init. From
 * then on every commit also tests whether the committed stage k is confident: the float32 margin
 * between its two largest probabilities >= threshold[k] (O(n_pred), no allocation, inside the same
 * seqlock commit). Once confident, es_next_group returns ES_DONE, so the firmware loop above ends
 * early without changing shape, and a tree model runs no further stage in that push. es_reset keeps
 * the thresholds. Regression models never stop early. */
es_status es_set_stop(es_state *state, const float *threshold);

/* TREE STAGES AS CODE (see es_tree_code): es_init for a model exported with its tree stages as code
 * (its header defines <prefix>_TREE_CODE 1 and declares <prefix>_tree_code): the model is code->model.
 * ES_ERR_NULL for a NULL pointer, ES_ERR_BAD_MODEL when the table does not fit its model (another
 * stage count, a stage with trees but neither a function nor node tables, not a tree model); otherwise
 * as es_init. es_reset keeps the code; es_init of another model drops it. */
es_status es_init_code(es_state *state, const es_tree_code *code, float *work, size_t work_len);
/* The statistics a stop threshold may apply to (the manifest's stopping.statistic; the generated
 * <prefix>_stop_statistic says which one an export was calibrated on). */
#define ES_STOP_MARGIN 0u    /* "top2_margin": top-two gap of the committed probabilities (es_set_stop) */
#define ES_STOP_LOGIT_GAP 1u /* "logit_gap": top-two gap of the raw scores before the link (|z| for a
                                sigmoid), float32, taken before the link; it does not saturate as a
                                probability margin does near 1 */

/* es_set_stop for either statistic: es_set_stop_statistic(&st, <prefix>_stop_threshold,
 * <prefix>_stop_statistic). ES_ERR_BAD_MODEL for an unknown statistic (nothing changes). Same cost,
 * same commit, same loop as es_set_stop. */
es_status es_set_stop_statistic(es_state *state, const float *threshold, uint32_t statistic);

/* 1 when the committed stage passed its stop threshold (the loop is over), else 0. */
int es_confident(const es_state *state);

/* Forget pushed groups and commit prefix 0 again (start the next sample). */
es_status es_reset(es_state *state);

/* Index of the committed stage without copying the prediction (0..n_stages-1; linear: 0..J). */
uint32_t es_prefix(const es_state *state);

/* The budget rule: *prefix = the last stage j with cum_cost[j] <= budget (cost units; +inf allowed).
 * ES_ERR_BUDGET for NaN or a negative budget (*prefix untouched), ES_ERR_NULL for NULL pointers,
 * ES_ERR_BAD_MODEL for a tree model without its trees.
 * Needs no state: it reads only the model. */
es_status es_prefix_for_budget(const es_model *model, double budget, uint32_t *prefix);

/* LAYER-BLOCK MODELS (ES_KIND_LAYERS, edgeseq_layers.h): es_push only stores a group; es_step runs
 * exactly one stage (never more, so firmware may stop between stages). The loop, for every kind:
 *     es_group_info g;  es_status r;
 *     while ((r = es_next(&st, &g)) == ES_OK || r == ES_STEP) {
 *         if (g.cum_cost > budget) break;                 // the budget rule
 *         if (r == ES_STEP) { if (es_step(&st) != ES_OK) break; }
 *         else { compute_group(g.group, feats); if (es_push(&st, g.group, feats, g.dim) != ES_OK) break; }
 *     }
 * es_next: ES_OK = push the group in *info (as es_next_group), ES_STEP = run stage info->position with
 * es_step (info->group = UINT32_MAX, dim 0, name NULL), ES_DONE = every stage has run; info->cum_cost
 * is the cumulative cost of the stage the action belongs to. For linear and tree models it never says
 * ES_STEP (a push runs their stages) and es_step answers ES_DONE. */
es_status es_next(const es_state *state, es_group_info *info);

/* Run the next stage of a layer-block model and commit its prediction (unless the stage has
 * commit = 0). ES_ERR_NEED_PUSH when a group it needs is not pushed yet, ES_DONE after the last stage,
 * ES_ERR_OVERFLOW when its output is not finite (nothing committed; the sample is over until es_reset).
 * Costs <prefix>_STAGE_MACS[k] multiply-adds plus pooling, ReLU and the link. */
es_status es_step(es_state *state);

#ifdef __cplusplus
}
#endif

#endif /* EDGESEQ_RUNTIME_H */
