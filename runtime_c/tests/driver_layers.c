/*
 * Test driver for layer-block models (ES_KIND_LAYERS): runs the es_next / es_push / es_step loop over
 * feature rows. Build with -DES_PREFIX=<c prefix> -I<model dir> -I<runtime dir>, plus edgeseq_model.c
 * and edgeseq_runtime.c. Rows are <prefix>_N_FEATURES float32 (native byte order) in the order the C
 * runtime takes them (groups in sequence order, windowed groups time-major). Usage:
 *   driver_layers steps ROWS.bin   every action of the full loop; per row:
 *       "row 0 S 0 prefix label v0 .. |"          the prior, after es_reset
 *       "row a P prefix"                          after a push (a = action index, prefix = committed stage)
 *       "row a S k prefix label v0 .. | z0 .."    after es_step ran stage k: the committed prediction
 *                                                 and the stage's own exit z (committed or not)
 *       "row a E status"                          a call failed
 *   driver_layers sweep ROWS.bin BUDGETS.txt
 *       per row and budget (one C99 hexadecimal double per line), the firmware loop "act while
 *       es_next's cum_cost <= budget"; prints "row b prefix label v0 .. | rule" where rule is
 *       es_prefix_for_budget's answer
 * Every mode ends with a line "done".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgeseq_select.h"

static void print_current(const es_state *st)
{
    float out[ES_N_PRED];
    uint32_t prefix = 0;
    int32_t label = 0;
    size_t p;
    if (es_current(st, out, &prefix, &label) != ES_OK) {
        printf(" ERR");
        return;
    }
    printf(" %u %d", (unsigned)prefix, (int)label);
    for (p = 0; p < ES_N_PRED; ++p) {
        printf(" %.9g", (double)out[p]);
    }
}

static int steps(const char *path)
{
    static float work[ES_WORK_FLOATS];
    static float row_values[ES_N_FEATURES + 1u];
    es_state st;
    unsigned long row = 0;
    FILE *f = fopen(path, "rb");
    es_status s = es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS);
    if (f == NULL || s != ES_OK) {
        fprintf(stderr, "driver_layers: cannot open %s or es_init failed (%d)\n", path, (int)s);
        return 2;
    }
    while (fread(row_values, sizeof(float), ES_N_FEATURES, f) == ES_N_FEATURES) {
        es_group_info g;
        size_t off = 0;
        unsigned a = 0;
        es_status r;
        es_reset(&st);
        printf("%lu 0 S 0", row); /* the prior, committed by es_reset */
        print_current(&st);
        printf(" |\n");
        while ((r = es_next(&st, &g)) == ES_OK || r == ES_STEP) {
            ++a;
            if (r == ES_STEP) {
                uint32_t p;
                s = es_step(&st);
                if (s != ES_OK) {
                    printf("%lu %u E %d\n", row, a, (int)s);
                    break;
                }
                printf("%lu %u S %u", row, a, (unsigned)g.position);
                print_current(&st);
                printf(" |");
                for (p = 0; p < ES_N_OUTPUTS; ++p) {
                    printf(" %.9g", (double)st.z[p]);
                }
                printf("\n");
            } else {
                s = es_push(&st, g.group, row_values + off, g.dim);
                if (s != ES_OK) {
                    printf("%lu %u E %d\n", row, a, (int)s);
                    break;
                }
                off += g.dim;
                printf("%lu %u P %u\n", row, a, (unsigned)es_prefix(&st));
            }
        }
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}

#define MAX_BUDGETS 512

static int sweep(const char *rows_path, const char *budgets_path)
{
    static float work[ES_WORK_FLOATS];
    static float row_values[ES_N_FEATURES + 1u];
    static double budgets[MAX_BUDGETS];
    char line[64];
    size_t n_budgets = 0, b;
    unsigned long row = 0;
    es_state st;
    FILE *fb = fopen(budgets_path, "r");
    FILE *f = fopen(rows_path, "rb");
    es_status s = es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS);
    if (f == NULL || fb == NULL || s != ES_OK) {
        fprintf(stderr, "driver_layers: cannot open %s / %s or es_init failed (%d)\n", rows_path, budgets_path,
                (int)s);
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
            uint32_t rule = 0;
            es_status r;
            es_reset(&st);
            while (((r = es_next(&st, &g)) == ES_OK || r == ES_STEP) && g.cum_cost <= budgets[b]) {
                s = r == ES_STEP ? es_step(&st) : es_push(&st, g.group, row_values + off, g.dim);
                if (s != ES_OK) {
                    printf("%lu %lu E %d\n", row, (unsigned long)b, (int)s);
                    break;
                }
                off += r == ES_STEP ? 0u : g.dim;
            }
            printf("%lu %lu", row, (unsigned long)b);
            print_current(&st);
            s = es_prefix_for_budget(&ES_MODEL, budgets[b], &rule);
            printf(" | %d %u\n", (int)s, (unsigned)rule);
        }
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "steps") == 0) {
        return steps(argv[2]);
    }
    if (argc >= 4 && strcmp(argv[1], "sweep") == 0) {
        return sweep(argv[2], argv[3]);
    }
    fprintf(stderr, "usage: driver_layers steps ROWS.bin | driver_layers sweep ROWS.bin BUDGETS.txt\n");
    return 2;
}
