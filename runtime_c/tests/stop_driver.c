/*
 * Stopping driver: runs the firmware loop with per-input stopping (es_set_stop_statistic) over feature rows and
 * prints, per row, "row stage label confident", then "done".
 *
 * Build with -DES_PREFIX=<c prefix> -I<model dir> -I<runtime dir>, edgeseq_model.c (exported with
 * --stop-data, so it defines <prefix>_stop_threshold) and edgeseq_runtime.c. Usage:
 *   stop_driver ROWS.bin   rows of <prefix>_N_FEATURES float32 (native byte order), sequence order
 *                          (a layer-block model's windowed groups time-major, as its runtime takes them)
 */
#include <stdio.h>

#include "edgeseq_select.h"

#define ES_STOP_TABLE ES_CAT(ES_PREFIX, _stop_threshold)
#define ES_STOP_STATISTIC ES_CAT(ES_PREFIX, _stop_statistic)

int main(int argc, char **argv)
{
    static float work[ES_WORK_FLOATS];
    static float row_values[ES_N_FEATURES + 1u];
    es_state st;
    unsigned long row = 0;
    FILE *f;
    if (argc != 2) {
        fprintf(stderr, "usage: stop_driver ROWS.bin\n");
        return 2;
    }
    f = fopen(argv[1], "rb");
#if ES_HAS_TREE_CODE
    if (f == NULL || es_init_code(&st, &ES_TREE_CODE, work, ES_WORK_FLOATS) != ES_OK
#else
    if (f == NULL || es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS) != ES_OK
#endif
        || es_set_stop_statistic(&st, ES_STOP_TABLE, ES_STOP_STATISTIC) != ES_OK) {
        fprintf(stderr, "cannot open the rows or set up the model\n");
        return 1;
    }
    while (fread(row_values, sizeof(float), ES_N_FEATURES, f) == ES_N_FEATURES) {
        es_group_info g;
        uint32_t prefix = 0;
        int32_t label = 0;
        size_t offset = 0;
        es_status r;
        es_status s = es_reset(&st);
        /* the firmware loop of every kind, unchanged (es_next says ES_STEP only for layer-block models) */
        while (s == ES_OK && ((r = es_next(&st, &g)) == ES_OK || r == ES_STEP)) {
            s = r == ES_STEP ? es_step(&st) : es_push(&st, g.group, row_values + offset, g.dim);
            offset += r == ES_STEP ? 0u : g.dim;
        }
        if (s != ES_OK || es_current(&st, NULL, &prefix, &label) != ES_OK) {
            printf("%lu ERR %d\n", row, (int)s);
        } else {
            printf("%lu %u %d %d\n", row, (unsigned)prefix, (int)label, es_confident(&st));
        }
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}
