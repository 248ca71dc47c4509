/*
 * The int16 stopping driver: runs the firmware loop with per-input stopping (es16_set_stop) over int16
 * feature rows and prints, per row, "row stage label confident", then "done".
 *
 * Build with -DES16_PREFIX=<c prefix> -I<model dir> -I<runtime dir>, edgeseq_model.c (an int16 model
 * exported with --stop-data, so it defines <prefix>_stop_threshold) and edgeseq_runtime_i16.c. Usage:
 *   stop_driver_i16 ROWS.bin   rows of <prefix>_N_FEATURES int16 (native byte order), sequence order
 */
#include <stdio.h>

#include "edgeseq_select_i16.h"

#define ES16_STOP_TABLE ES16_CAT(ES16_PREFIX, _stop_threshold)

int main(int argc, char **argv)
{
    static int16_t x_buf[ES16_N_FEATURES + 1u];
    static int16_t row_values[ES16_N_FEATURES + 1u];
    static int32_t work[ES16_WORK_WORDS];
    es16_state st;
    unsigned long row = 0;
    FILE *f;
    if (argc != 2) {
        fprintf(stderr, "usage: stop_driver_i16 ROWS.bin\n");
        return 2;
    }
    f = fopen(argv[1], "rb");
    if (f == NULL || es16_init(&st, &ES16_MODEL, x_buf, ES16_N_FEATURES, work, ES16_WORK_WORDS) != ES16_OK
        || es16_set_stop(&st, ES16_STOP_TABLE) != ES16_OK) {
        fprintf(stderr, "cannot open the rows or set up the model\n");
        return 1;
    }
    while (fread(row_values, sizeof(int16_t), ES16_N_FEATURES, f) == ES16_N_FEATURES) {
        es16_group_info g;
        uint32_t prefix = 0;
        int32_t label = 0;
        size_t offset = 0;
        es16_status s = es16_reset(&st);
        while (s == ES16_OK && es16_next_group(&st, &g) == ES16_OK) { /* the firmware loop, unchanged */
            s = es16_push(&st, g.group, row_values + offset, g.dim);
            offset += g.dim;
        }
        if (s != ES16_OK || es16_current(&st, NULL, &prefix, &label) != ES16_OK) {
            printf("%lu ERR %d\n", row, (int)s);
        } else {
            printf("%lu %u %d %d\n", row, (unsigned)prefix, (int)label, es16_confident(&st));
        }
        ++row;
    }
    fclose(f);
    printf("done\n");
    return 0;
}
