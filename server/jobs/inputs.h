/* inputs.h — what the model handlers read alike: the limits from the config (built here
 * once), the query string (a CSV body's fields and the answer's format) and a text/csv
 * body's candles. */
#ifndef KD_INPUTS_H
#define KD_INPUTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "forecast_json.h"
#include "http.h"
#include "tokens_json.h"

#define KD_MSG_MAX 512 /* a request error's message */

/* max-candles, max-horizon, max-samples as the forecast parsers take them. */
kd_forecast_limits kd_forecast_limits_of(const kd_app *app);
/* The model's vocabularies and max-candles as the token parsers take them. */
kd_token_limits kd_token_limits_of(const kd_app *app, const kr_model *m);

/* What the query says: the request's fields (for a CSV body) and the answer's format. */
typedef struct {
    json_t *opts;             /* the fields given in the query, as JSON values */
    const char *const *known; /* fields that may come in the query; NULL: none, no format */
    bool csv_in, csv_out, has_format;
    char model[KD_MODEL_ID_MAX + 1]; /* a text/csv body's "model" parameter ("": none) */
    char *err;
    size_t errlen;
} kd_query;

/* Reads the query of r into q (q->known set by the caller); false after replying 400
 * (counted invalid) or 500. On success the caller frees q->opts. */
bool kd_read_query(kd_app *app, kd_request *r, kd_query *q, char *msg, size_t msglen);

/* The model r names (kd_request_model_name), or the default one, set as r's model (its
 * answer names it; r holds it until it ends); NULL after replying 404 model_not_found with
 * the known ids. */
const kd_model *kd_pick_model(kd_app *app, kd_request *r);
/* The model session s is bound to, set as r's model; NULL after refusing 400 when the
 * request names another one. */
const kd_model *kd_session_model_of(kd_app *app, kd_request *r, const kd_session *s);

/* The candles of a text/csv body, between min_count and max_count; -1 with a message. */
int kd_body_csv_candles(const kd_request *r, int min_count, int max_count, kd_owned_candles *out,
                        char *msg, size_t msglen);

#endif
