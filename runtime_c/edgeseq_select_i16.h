/*
 * The int16 counterpart of edgeseq_select.h, for programs that use ONE generated int16 model chosen
 * at build time (drivers, footprint images): compile with -DES16_PREFIX=<c prefix> -I<model dir>
 * and use the generic names below instead of <prefix>_model, <prefix>_N_FEATURES, ...
 */
#ifndef EDGESEQ_SELECT_I16_H
#define EDGESEQ_SELECT_I16_H

#include "edgeseq_model.h"

#ifndef ES16_PREFIX
#error "define ES16_PREFIX as the C prefix of the generated int16 model (-DES16_PREFIX=name)"
#endif

#define ES16_CAT2(a, b) a##b
#define ES16_CAT(a, b) ES16_CAT2(a, b)
#define ES16_MODEL ES16_CAT(ES16_PREFIX, _model)
#define ES16_N_FEATURES ES16_CAT(ES16_PREFIX, _N_FEATURES)
#define ES16_N_PRED ES16_CAT(ES16_PREFIX, _N_PRED)
#define ES16_N_STAGES ES16_CAT(ES16_PREFIX, _N_STAGES)
#define ES16_WORK_WORDS ES16_CAT(ES16_PREFIX, _WORK_WORDS)

#endif /* EDGESEQ_SELECT_I16_H */
