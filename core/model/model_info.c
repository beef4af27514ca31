/* model_info.c — what a loaded model says of itself (model.h): its configs, context,
 * parameter counts and precision modes. loader.c builds the model; this only reads it. */
#include "model.h"

const kr_tokenizer_config *kr_model_tokenizer_config(const kr_model *m) {
    return &m->tc;
}
const kr_predictor_config *kr_model_predictor_config(const kr_model *m) {
    return &m->pc;
}
int kr_model_max_context(const kr_model *m) {
    return m->max_context;
}
size_t kr_model_param_count(const kr_model *m) {
    return m->n_params;
}
kr_precision kr_model_weights(const kr_model *m) {
    return m->weights;
}
kr_precision kr_model_kv(const kr_model *m) {
    return m->kv;
}
size_t kr_model_tokenizer_param_count(const kr_model *m) {
    return m->n_tok_params;
}
