/*
 * For programs that use ONE generated model chosen at build time (drivers, demos, benchmarks):
 * compile with -DES_PREFIX=<c prefix> -I<model dir> and use the generic names below instead of
 * <prefix>_model, <prefix>_WORK_FLOATS, ... Firmware that links several models uses the
 * prefixed names directly.
 */
#ifndef EDGESEQ_SELECT_H
#define EDGESEQ_SELECT_H

#include "edgeseq_model.h"

#ifndef ES_PREFIX
#error "define ES_PREFIX as the C prefix of the generated model (-DES_PREFIX=name)"
#endif

#define ES_CAT2(a, b) a##b
#define ES_CAT(a, b) ES_CAT2(a, b)
#define ES_MODEL ES_CAT(ES_PREFIX, _model)
#define ES_WORK_FLOATS ES_CAT(ES_PREFIX, _WORK_FLOATS)
#define ES_N_FEATURES ES_CAT(ES_PREFIX, _N_FEATURES)
#define ES_N_GROUPS ES_CAT(ES_PREFIX, _N_GROUPS)
#define ES_N_STAGES ES_CAT(ES_PREFIX, _N_STAGES)
#define ES_N_OUTPUTS ES_CAT(ES_PREFIX, _N_OUTPUTS)
#define ES_N_PRED ES_CAT(ES_PREFIX, _N_PRED)
#define ES_STATE_RAM_BYTES ES_CAT(ES_PREFIX, _STATE_RAM_BYTES)
#define ES_MACS_PER_PUSH_MAX ES_CAT(ES_PREFIX, _MACS_PER_PUSH_MAX)
/* 1 inside #if when the model was exported with its tree stages as code (it defines <prefix>_TREE_CODE 1
   and the table <prefix>_tree_code for es_init_code), else 0 */
#define ES_HAS_TREE_CODE ES_CAT(ES_PREFIX, _TREE_CODE)
#define ES_TREE_CODE ES_CAT(ES_PREFIX, _tree_code)

#endif /* EDGESEQ_SELECT_H */
