/*
 * Test driver: runs a generated model over feature rows and prints every prefix's prediction.
 *
 * Build with -DES_PREFIX=<c prefix> -I<model dir> -I<runtime dir>, plus edgeseq_model.c and
 * edgeseq_runtime.c. Usage:
 *   driver predict ROWS.bin   rows of <prefix>_N_FEATURES float32 (native byte order), features
 *                             in sequence order; prints, per row and stage j = 0..N_STAGES-1 (for a
 *                             linear model prefix j = 0..J), "row j label v0 v1 ..." with %.9g, or
 *                             "row j ERR status" when a push fails. Every commit is printed from the
 *                             runtime's commit hook, so tree stages that need no new group (committed
 *                             inside their predecessor's push) are printed too: build with
 *                             -DES_ON_COMMIT=es_driver_on_commit.
 *   driver sweep ROWS.bin BUDGETS.txt
 *                             per row and budget (one C99 hexadecimal double per line), the anytime
 *                             loop a firmware runs: push groups while es_group_info.cum_cost <= budget;
 *                             prints "row b prefix label v0 v1 ..." (b = the budget's line number)
 *   driver dump               prints the descriptor: names as UTF-8 hex, every float as its bits
 *                             (tree models: every stage's range, depth and readout, every node)
 * Every mode ends with a line "done", so a runner can tell a complete run from a cut-off one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgeseq_select.h"

#ifndef ES_ON_COMMIT
#error "build the driver with -DES_ON_COMMIT=es_driver_on_commit (it prints every commit from the hook)"
#endif

static void print_hex_string(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    if (*u == 0) {
        printf(" -");
    } else {
        printf(" ");
        for (; *u; ++u) {
            printf("%02x", (unsigned)*u);
        }
    }
}

static void print_bits(const float *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        unsigned int bits;
        memcpy(&bits, &v[i], sizeof bits);
        printf(" %08x", bits);
    }
}

static void print_bits64(const double *v, size_t n)
{
    size_t i;
    for (i = 0; i < n; ++i) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        printf(" %08lx%08lx", (unsigned long)(bits >> 32), (unsigned long)(bits & 0xffffffffu));
    }
}

static int dump_trees(const es_trees *t, uint32_t n_out)
{
    uint32_t k;
    const size_t per_stage = (size_t)t->n_state * n_out;
    printf("trees stages %u state %u trees %u nodes %u\n", (unsigned)t->n_stages, (unsigned)t->n_state,
           (unsigned)t->n_trees, (unsigned)t->n_nodes);
    for (k = 0; k < t->n_stages; ++k) {
        printf("stage %u trees %u %u depth %u b", (unsigned)k, (unsigned)t->stage_tree[k],
               (unsigned)t->stage_tree[k + 1u], (unsigned)t->stage_depth[k]);
        print_bits(t->readout_b + (size_t)k * n_out, n_out);
        printf(" w");
        print_bits(t->readout_w + (size_t)k * per_stage, per_stage);
        printf("\n");
    }
    for (k = 0; t->node != NULL && k < t->n_trees; ++k) { /* a code-form model has no node tables */
        printf("tree %u root %u target %u\n", (unsigned)k, (unsigned)t->tree_root[k], (unsigned)t->tree_target[k]);
    }
    for (k = 0; k < t->n_nodes; ++k) {
        const int leaf = t->node[k].right == 0u; /* pre-order: left child = next node */
        printf("node %u feature %d left %u right %u value", (unsigned)k, leaf ? -1 : (int)t->node[k].feature,
               leaf ? 0u : (unsigned)k + 1u, leaf ? 0u : (unsigned)k + (unsigned)t->node[k].right);
        print_bits(&t->node[k].value, 1u);
        printf("\n");
    }
    printf("done\n");
    return 0;
}

static int dump(void)
{
    const es_model *m = &ES_MODEL;
    uint32_t j;
    uint32_t d = 0;
    printf("name");
    print_hex_string(m->name);
    printf("\nlink %d groups %u outputs %u pred %u features %u\n", (int)m->link, (unsigned)m->n_groups,
           (unsigned)m->n_outputs, (unsigned)m->n_pred, (unsigned)m->n_features);
    for (j = 0; j < m->n_groups; ++j) {
        printf("group %u index %u dim %u name", (unsigned)j, (unsigned)m->group_index[j],
               (unsigned)m->group_dim[j]);
        print_hex_string(m->group_name[j]);
        printf("\n");
    }
    for (j = 0; j < m->n_pred; ++j) {
        printf("output %u name", (unsigned)j);
        print_hex_string(m->output_name[j]);
        printf("\n");
    }
    printf("cum_cost");
    print_bits64(m->cum_cost, (size_t)es_n_stages(m));
    printf("\n");
    if (m->kind == ES_KIND_TREES) {
        return dump_trees(m->trees, m->n_outputs);
    }
    for (j = 0; j <= m->n_groups; ++j) {
        if (j > 0) {
            d += m->group_dim[j - 1];
        }
        printf("prefix %u intercept", (unsigned)j);
        print_bits(m->intercept + (size_t)j * m->n_outputs, m->n_outputs);
        printf(" coef");
        if (j > 0) {
            print_bits(m->coef[j], (size_t)d * m->n_outputs);
        }
        printf("\n");
    }
    printf("done\n");
    return 0;
}

static void print_current(const es_state *st, unsigned long row, const char *tag)
{
    float out[ES_N_PRED];
    uint32_t prefix = 0;
    int32_t label = 0;
    size_t p;
    if (es_current(st, out, &prefix, &label) != ES_OK) {
        printf("%lu - ERR current\n", row);
        return;
    }
    printf("%lu%s %u %d", row, tag, (unsigned)prefix, (int)label);
    for (p = 0; p < ES_N_PRED; ++p) {
        printf(" %.9g", (double)out[p]);
    }
    printf("\n");
}

/* es_init, or es_init_code when the model carries its tree stages as code (ES_HAS_TREE_CODE) */
static es_status driver_init(es_state *st, float *work)
{
#if ES_HAS_TREE_CODE
    return es_init_code(st, &ES_TREE_CODE, work, ES_WORK_FLOATS);
#else
    return es_init(st, &ES_MODEL, work, ES_WORK_FLOATS);
#endif
}

/* predict mode: the row being run, and whether commits are printed (not during es_init) */
static unsigned long trace_row = 0;
static int tracing = 0;

void es_driver_on_commit(const es_state *st)
{
    if (tracing) {
        print_current(st, trace_row, "");
    }
}

static int predict(const char *path)
{
    static float work[ES_WORK_FLOATS];
    static float row_values[ES_N_FEATURES + 1u];
    es_state st;
    unsigned long row = 0;
    FILE *f = fopen(path, "rb");
    es_status s = driver_init(&st, work);
    if (f == NULL || s != ES_OK) {
        fprintf(stderr, "driver: cannot open %s or es_init failed (%d)\n", path, (int)s);
        return 2;
    }
    while (fread(row_values, sizeof(float), ES_N_FEATURES, f) == ES_N_FEATURES) {
        es_group_info g;
        size_t off = 0;
        trace_row = row;
        tracing = 1;
        es_reset(&st);
        /* the one-call loop (es_push_next); sweep mode keeps es_next_group + es_push */
        s = es_next_group(&st, &g);
        while (s == ES_OK) {
            const size_t at = off;
            const uint32_t position = g.position;
            off += g.dim;
            s = es_push_next(&st, g.group, row_values + at, g.dim, &g);
            if (s != ES_OK && s != ES_DONE) {
                printf("%lu %u ERR %d\n", row, (unsigned)(position + 1u), (int)s);
                break;
            }
        }
        tracing = 0;
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}

#define MAX_BUDGETS 256

static int sweep(const char *rows_path, const char *budgets_path)
{
    static float work[ES_WORK_FLOATS];
    static float row_values[ES_N_FEATURES + 1u];
    static double budgets[MAX_BUDGETS];
    char line[64], tag[32];
    size_t n_budgets = 0, b;
    unsigned long row = 0;
    es_state st;
    FILE *fb = fopen(budgets_path, "r");
    FILE *f = fopen(rows_path, "rb");
    es_status s = driver_init(&st, work);
    if (f == NULL || fb == NULL || s != ES_OK) {
        fprintf(stderr, "driver: cannot open %s / %s or es_init failed (%d)\n", rows_path, budgets_path, (int)s);
        return 2;
    }
    while (n_budgets < MAX_BUDGETS && fgets(line, sizeof line, fb) != NULL) {
        budgets[n_budgets++] = strtod(line, NULL);
    }
    fclose(fb);
    while (fread(row_values, sizeof(float), ES_N_FEATURES, f) == ES_N_FEATURES) {
        for (b = 0; b < n_budgets; ++b) {
            es_group_info g;
            size_t off = 0;
            es_reset(&st);
            while (es_next_group(&st, &g) == ES_OK && g.cum_cost <= budgets[b]) {
                s = es_push(&st, g.group, row_values + off, g.dim);
                if (s != ES_OK) {
                    printf("%lu %u ERR %d\n", row, (unsigned)(g.position + 1u), (int)s);
                    break;
                }
                off += g.dim;
            }
            sprintf(tag, " %lu", (unsigned long)b);
            print_current(&st, row, tag);
        }
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "dump") == 0) {
        return dump();
    }
    if (argc >= 3 && strcmp(argv[1], "predict") == 0) {
        return predict(argv[2]);
    }
    if (argc >= 4 && strcmp(argv[1], "sweep") == 0) {
        return sweep(argv[2], argv[3]);
    }
    fprintf(stderr, "usage: driver predict ROWS.bin | driver sweep ROWS.bin BUDGETS.txt | driver dump\n");
    return 2;
}
