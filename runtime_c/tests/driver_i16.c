/*
 * Test driver of the integer runtime (edgeseq_runtime_i16.c): runs a generated int16 model over int16
 * feature rows. Small enough for a 16 KB Cortex-M0 (rows are read one at a time).
 *
 * Build with -DES16_PREFIX=<c prefix> -DES16_ON_COMMIT=driver_on_commit -I<model dir> -I<runtime dir>,
 * plus edgeseq_model.c and edgeseq_runtime_i16.c. Usage:
 *   driver_i16 predict ROWS.bin          rows of <prefix>_N_FEATURES int16 (native order), sequence
 *                                        order; prints "row j label v0 v1 ..." at every commit, so for
 *                                        every stage j = 0..K (a tree push may commit several stages)
 *   driver_i16 sweep ROWS.bin BUDGETS.txt per row and budget (a line "HI LO": the two 32-bit halves of
 *                                        the budget's binary64 bit pattern, hex), the firmware loop: push
 *                                        while cum_cost_bits <= budget; prints "row b rule loop label v..."
 *                                        (rule = es16_prefix_for_budget, loop = the prefix reached)
 * Every mode ends with a line "done".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgeseq_select_i16.h"
#define MAX_BUDGETS 128u /* c_int16_run.MAX_BUDGETS */

static int16_t x_buf[ES16_N_FEATURES + 1u];
static int16_t row[ES16_N_FEATURES + 1u];
static int32_t work[ES16_WORK_WORDS];
static int32_t out[ES16_N_PRED];
static es16_state st;
static uint64_t budgets[MAX_BUDGETS];

static int tracing;         /* predict: print every commit of row `traced` */
static unsigned long traced;

static void print_current(unsigned long r, const char *mid);

/* The runtime's commit hook (ES16_ON_COMMIT): runs after every publish. */
void driver_on_commit(const es16_state *s);
void driver_on_commit(const es16_state *s)
{
    if (tracing && s == &st) {
        print_current(traced, "");
    }
}

static void print_current(unsigned long r, const char *mid)
{
    uint32_t prefix = 0u;
    int32_t label = 0;
    uint32_t p;
    if (es16_current(&st, out, &prefix, &label) != ES16_OK) {
        printf("%lu ERR current\n", r);
        exit(4);
    }
    printf("%lu%s %lu %ld", r, mid, (unsigned long)prefix, (long)label);
    for (p = 0u; p < ES16_N_PRED; ++p) {
        printf(" %ld", (long)out[p]);
    }
    printf("\n");
}

/* Push groups while the budget allows (all of them for predict); print every commit when `every`,
   else the final prediction. */
static void run_row(unsigned long r, uint64_t budget, int limited, int every, const char *mid)
{
    es16_group_info g;
    uint32_t filled = 0u;
    tracing = every;
    traced = r;
    if (es16_reset(&st) != ES16_OK) {
        exit(5);
    }
    while (es16_next_group(&st, &g) == ES16_OK && (!limited || g.cum_cost_bits <= budget)) {
        if (es16_push(&st, g.group, row + filled, g.dim) != ES16_OK) {
            printf("%lu ERR push\n", r);
            exit(6);
        }
        filled += g.dim;
    }
    tracing = 0;
    if (!every) {
        print_current(r, mid);
    }
}

int main(int argc, char **argv)
{
    FILE *f;
    unsigned long r = 0u;
    unsigned long n_budgets = 0u;
    int sweep;
    if (argc < 3 || (strcmp(argv[1], "predict") != 0 && strcmp(argv[1], "sweep") != 0)) {
        printf("usage: driver_i16 predict ROWS.bin | sweep ROWS.bin BUDGETS.txt\n");
        return 2;
    }
    sweep = strcmp(argv[1], "sweep") == 0;
    if (es16_init(&st, &ES16_MODEL, x_buf, ES16_N_FEATURES, work, ES16_WORK_WORDS) != ES16_OK) {
        printf("ERR init\n");
        return 3;
    }
    if (sweep) {
        unsigned long hi;
        unsigned long lo;
        FILE *bf = argc > 3 ? fopen(argv[3], "r") : NULL;
        if (bf == NULL) {
            printf("ERR budgets\n");
            return 2;
        }
        while (n_budgets < MAX_BUDGETS && fscanf(bf, "%lx %lx", &hi, &lo) == 2) {
            budgets[n_budgets++] = ((uint64_t)hi << 32) | (uint64_t)lo;
        }
        fclose(bf);
    }
    f = fopen(argv[2], "rb");
    if (f == NULL) {
        printf("ERR rows\n");
        return 2;
    }
    while (fread(row, sizeof(int16_t), ES16_N_FEATURES, f) == ES16_N_FEATURES) {
        if (!sweep) {
            run_row(r, 0u, 0, 1, "");
        } else {
            unsigned long b;
            for (b = 0u; b < n_budgets; ++b) {
                uint32_t rule = 0u;
                char mid[48];
                if (es16_prefix_for_budget(&ES16_MODEL, budgets[b], &rule) != ES16_OK) {
                    printf("%lu %lu ERR budget\n", r, b);
                    continue;
                }
                sprintf(mid, " %lu %lu", b, (unsigned long)rule);
                run_row(r, budgets[b], 1, 0, mid);
            }
        }
        ++r;
    }
    fclose(f);
    printf("done\n");
    return 0;
}
