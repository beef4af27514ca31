/* intake.h — how a model request is read, once, on the HTTP thread: its query (a text/csv
 * body's fields and the answer's format), its body (JSON, or text/csv candles), the model it
 * names, picked, and the limits from the config; for /forecast, the whole request built
 * into the core's inputs. Nothing read here replies: what is wrong comes back as one
 * kd_refused (http.h), which the submit path answers (submit.h). The kd_read_query family
 * at the end answers as it reads, for the routes that take no job of the forecast kind. */
#ifndef KD_INTAKE_H
#define KD_INTAKE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "app.h"
#include "evaluate_series_json.h"
#include "forecast_json.h"
#include "http.h"
#include "tokens_json.h"

#define KD_MSG_MAX 512 /* a request error's message */

/* max-candles, max-horizon, max-samples as the forecast parsers take them. */
kd_forecast_limits kd_forecast_limits_of(const kd_app *app);

/* What the query says: the request's fields (for a CSV body) and the answer's format. */
typedef struct {
    json_t *opts;             /* the fields given in the query, as JSON values */
    const char *const *known; /* fields that may come in the query; NULL: none, no format */
    bool csv_in, csv_out, has_format;
    char model[KD_MODEL_ID_MAX + 1]; /* a text/csv body's "model" parameter ("": none) */
    char *err;
    size_t errlen;
} kd_query;

/* A model request as read: its query, its body and the model it runs on. */
typedef struct {
    kd_query q;
    const char *known[32]; /* "format" and the fields the query may carry (q.known) */
    json_t *body;          /* a JSON body, parsed once (NULL: a text/csv body) */
    const char *text;      /* the raw body: a text/csv body's candles (len bytes) */
    size_t len;
    bool stream;        /* the answer asked as text/event-stream */
    const kd_model *md; /* the model picked, set as r's model (r holds it) */
    kd_refused refused; /* status 0: not refused */
} kd_intake;

/* Sets refused to 400 invalid_request, counted invalid, with msg (NULL: the message
 * already written in refused->msg). */
void kd_refused_set_invalid(kd_refused *refused, const char *msg);

/* Reads r's query (fields: the request's fields but candles, that a text/csv body's query
 * may carry; json_only: NULL, or the message refusing an answer asked as CSV), its body
 * and the model it names (or the default one), set as r's model (its answer names it). -1
 * with in->refused. Either way, kd_intake_end ends it. */
int kd_intake_read(kd_app *app, kd_request *r, const char *const *fields, const char *json_only,
                   kd_intake *in);
void kd_intake_end(kd_intake *in);
/* The candles of a text/csv body, between min_count and max_count; -1 with in->refused. */
int kd_intake_csv_candles(kd_intake *in, int min_count, int max_count, kd_owned_candles *out);

/* How a forecast is answered. */
typedef enum {
    KD_ANSWER_JSON,   /* one /forecast response */
    KD_ANSWER_CSV,    /* the same as text/csv */
    KD_ANSWER_SERIES, /* {"series": [...]} */
} kd_forecast_answer;

/* A /forecast request built: the core's inputs of its n forecasts (one, or a "series"
 * request's), how they are answered and the model they run on. */
typedef struct {
    kd_forecast_input *in; /* [n], malloc'd (kd_series_inputs_free); NULL when refused */
    int n;
    kd_forecast_answer answer;
    const kd_model *md;
    kd_refused refused; /* status 0: not refused */
} kd_forecast_intake;

/* POST /forecast's request read and built; -1 with fi->refused (nothing then held). */
int kd_intake_forecast(kd_app *app, kd_request *r, kd_forecast_intake *fi);

/* A /evaluate request built: one evaluation, or a "series" request's (series_form), how it
 * is answered and the model it runs on. */
typedef struct {
    kd_evaluate_series_input set; /* its inputs (kd_evaluate_series_input_free); empty when
                                     refused */
    bool series_form, stream;
    const kd_model *md;
    kd_refused refused; /* status 0: not refused */
} kd_evaluate_intake;

/* POST /evaluate's request read and built; -1 with ei->refused (nothing then held). */
int kd_intake_evaluate(kd_app *app, kd_request *r, kd_evaluate_intake *ei);

/* ---- for the routes that answer as they read -------------------------------------------- */

/* Reads the query of r into q (q->known set by the caller); false after replying 400
 * (counted invalid) or 500. On success the caller frees q->opts. */
bool kd_read_query(kd_app *app, kd_request *r, kd_query *q, char *msg, size_t msglen);
/* The body as a JSON object, or NULL after replying (400 or 415) and counting it invalid. */
json_t *kd_model_request_json(kd_app *app, kd_request *r);

/* The body of a token route (/generate, /detokenize) as a JSON object, the model it names
 * (kd_pick_model) in *md and that model's vocabularies and max-candles as the token parsers
 * take them in *lim; NULL after replying (400, 415 or 404). */
json_t *kd_token_request_json(kd_app *app, kd_request *r, const kd_model **md,
                              kd_token_limits *lim);

/* The model r names (kd_request_model_name), or the default one, set as r's model;
 * NULL after replying 404 model_not_found with the known ids. */
const kd_model *kd_pick_model(kd_app *app, kd_request *r);
/* The model session s is bound to, set as r's model; NULL after refusing 400 when the
 * request names another one. */
const kd_model *kd_session_model_of(kd_app *app, kd_request *r, const kd_session *s);

/* The candles of a text/csv body, between min_count and max_count; -1 with a message. */
int kd_body_csv_candles(const kd_request *r, int min_count, int max_count, kd_owned_candles *out,
                        char *msg, size_t msglen);

#endif
