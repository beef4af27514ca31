/* inputs.c — limits, the query string and CSV bodies (inputs.h). */
#include "inputs.h"

#include <string.h>

#include "candles_csv.h"
#include "json_fields.h"
#include "query_params.h"
#include "submit.h"

kd_forecast_limits kd_forecast_limits_of(const kd_app *app) {
    return (kd_forecast_limits){app->cfg.max_candles, app->cfg.max_horizon, app->cfg.max_samples};
}

kd_token_limits kd_token_limits_of(const kd_app *app) {
    const kr_predictor_config *pc = kr_model_predictor_config(app->model);
    return (kd_token_limits){1 << pc->s1_bits, 1 << pc->s2_bits, app->cfg.max_candles};
}

static int on_query(void *ctx, const char *key, size_t key_len, const char *value,
                    size_t value_len) {
    kd_query *q = ctx;
    char v[KD_QUOTE_MAX * 2];
    if (kd_query_check_bytes(key, key_len, value, value_len, q->err, q->errlen)) return -1;
    if (!strcmp(key, "format") && q->known) {
        if (q->has_format)
            return kd_fail(q->err, q->errlen, "query parameter \"format\": given twice");
        q->has_format = true;
        if (value && (!strcmp(value, "csv") || !strcmp(value, "json"))) {
            q->csv_out = !strcmp(value, "csv");
            return 0;
        }
        kd_quote(value ? value : "", v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"format\": must be csv or json, got \"%s\"", v);
    }
    if (!q->csv_in && q->known) {
        kd_quote(key, v, sizeof v);
        return kd_fail(q->err, q->errlen,
                       "query parameter \"%s\": with a JSON body every field goes in the body; "
                       "query parameters (other than format) are for a text/csv body",
                       v);
    }
    static const char *const none[] = {NULL};
    return kd_query_option(q->opts, key, value, q->known ? q->known : none, q->err, q->errlen);
}

bool kd_read_query(kd_app *app, kd_request *r, kd_query *q, char *msg, size_t msglen) {
    const char *accept = kd_request_header(r, "Accept");
    q->csv_in = kd_request_is_csv(r);
    q->csv_out = q->known && accept && strstr(accept, "text/csv");
    q->err = msg;
    q->errlen = msglen;
    if (!(q->opts = json_object())) {
        kd_reply_error(r, 500, "internal", "out of memory reading the query");
        return false;
    }
    if (kd_request_query_each(r, on_query, q) != 0) {
        json_decref(q->opts);
        q->opts = NULL;
        kd_refuse_invalid(app, r, msg);
        return false;
    }
    return true;
}

int kd_body_csv_candles(const kd_request *r, int min_count, int max_count, kd_candles *out,
                        char *msg, size_t msglen) {
    size_t len = 0;
    const char *body = kd_request_body(r, &len);
    return kd_candles_csv_parse(body ? body : "", len, min_count, max_count, out, msg, msglen);
}
