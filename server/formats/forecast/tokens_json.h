/* tokens_json.h — the token-level requests and responses: /generate, /tokenize, /detokenize.
 *
 * A token is a pair [s1, s2]; its time stamp is given either as a timestamp (ISO 8601 or
 * Unix seconds, read as the wall clock written, like forecast candles) or as
 * [minute, hour, weekday, day, month] (Monday = 0). Timestamps follow /forecast's rules
 * (forecast_json.h): increasing as instants, future_timestamps after the last timestamp.
 *
 * /generate: {"session"?: id, "tokens"?: [[s1, s2], ...],
 *             "timestamps": [...] | "stamps": [[m, h, wd, d, mo], ...]   (one per token),
 *             "max_new_tokens"?: 0,
 *             "future_timestamps": [...] | "future_stamps": [...]       (max_new_tokens),
 *             "temperature"?: 1.0, "top_k"?: 0, "top_p"?: 0.9, "seed"?: 0}
 * /tokenize:   {"candles": CANDLES}   (as in forecast_json.h, one candle or more; or the
 *              candles as a text/csv body, candles_csv.h)
 * /detokenize: {"tokens": [[s1, s2], ...], "mean": [6 numbers], "std": [6 numbers]}
 *
 * Unknown fields are errors naming them, as everywhere.
 */
#ifndef KD_TOKENS_JSON_H
#define KD_TOKENS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kronos.h"

#define KD_SESSION_ARG_MAX 104 /* room for an id (sessions.h) and then some, for the 404 */

/* What the model and the settings allow. */
typedef struct {
    int s1_vocab, s2_vocab; /* 2^s1_bits, 2^s2_bits */
    int max_tokens;         /* tokens in one request (max-candles) */
} kd_token_limits;

typedef struct {
    bool has_session;
    char session[KD_SESSION_ARG_MAX + 1];
    int n_append;
    int32_t *s1, *s2;     /* [n_append] */
    kr_stamp *stamps;     /* [n_append] */
    int n_new;            /* max_new_tokens */
    kr_stamp *new_stamps; /* [n_new] */
    kr_sampling sampling;
    uint64_t seed;
    long long timeout_ms; /* the server's deadline for it; 0: request-timeout */
} kd_generate_input;

/* 0, or -1 with a message naming the field. *in must be freed either way. */
int kd_generate_request_parse(const json_t *body, const kd_token_limits *lim, kd_generate_input *in,
                              char *err, size_t errlen);
void kd_generate_input_free(kd_generate_input *in);
/* POST /sessions/{id}/generate: the session named by the path; a body naming another one
 * is refused. 0, or -1 with a message. */
int kd_generate_set_session(kd_generate_input *in, const char *id, char *err, size_t errlen);

typedef struct {
    int n;
    int32_t *s1, *s2;
    float mean[KR_D_IN], std[KR_D_IN];
} kd_detokenize_input;

int kd_detokenize_request_parse(const json_t *body, const kd_token_limits *lim,
                                kd_detokenize_input *in, char *err, size_t errlen);
void kd_detokenize_input_free(kd_detokenize_input *in);

/* [[s1, s2], ...], or NULL when out of memory. */
json_t *kd_tokens_json(const int32_t *s1, const int32_t *s2, int n);
/* {"tokens": [...], "mean": [6], "std": [6]} */
json_t *kd_tokenize_response_json(const int32_t *s1, const int32_t *s2, int n,
                                  const float mean[KR_D_IN], const float std[KR_D_IN]);
/* {"candles": {"open": [n], ..., "amount": [n]}} from out[KR_D_IN][n] */
json_t *kd_detokenize_response_json(const double *out, int n);

#endif
