/* errors.c — the table of errors.h: each core error code's answer. */
#include "errors.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Indexed by the code; row KR_OK is success. */
static const kd_error_answer answers[KD_LAST_ERROR_CODE + 1] = {
    /* clang-format off */
    [KR_OK]               = {200, "ok",                KD_NOT_REFUSED,       false, "", false, ""},
    [KR_E_FAILED]         = {422, "unprocessable",     KD_NOT_REFUSED,       true,  "", true,  ""},
    [KR_E_POOL_EXHAUSTED] = {503, "pool_exhausted",    KD_REFUSED_BUSY,      true,
                             "the KV cache pool is in use by requests in flight; retry: ", true, ""},
    [KR_E_CAPACITY]       = {422, "context_overflow",  KD_REFUSED_TOO_LARGE, true,  "", true,  ""},
    [KR_E_INVALID]        = {400, "invalid_request",   KD_REFUSED_INVALID,   false, "", true,  ""},
    [KR_E_TOO_LARGE]      = {422, "too_large",         KD_REFUSED_TOO_LARGE, false, "", true,  ""},
    [KR_E_NO_MEMORY]      = {500, "internal",          KD_NOT_REFUSED,       true,  "", true,  ""},
    [KR_E_CANCELLED]      = {499, "client_closed",     KD_NOT_REFUSED,       true,
                             "the client closed the connection", false, ""},
    [KR_E_DEADLINE]       = {504, "deadline_exceeded", KD_NOT_REFUSED,       true,  "", true,
                             " (timeout_ms or request-timeout)"},
    /* clang-format on */
};

const kd_error_kind kd_error_kinds[] = {
    /* clang-format off */
    {400, "invalid_request",      "a field or parameter breaks a rule (the message names it), "
                                  "including an unknown one"},
    {400, "invalid_json",         "the body is not JSON (the message gives line and column)"},
    {400, "wrong_session_kind",   "a token session given candles, or a candle session given "
                                  "to /generate"},
    {400, "bad_framing",          "a body length two parties could read differently (repeated "
                                  "or non-numeric Content-Length, with Transfer-Encoding, "
                                  "whitespace before a colon, an obs-fold); the connection is "
                                  "closed"},
    {401, "unauthorized",         "no or a wrong Authorization: Bearer key (an admin key is "
                                  "no API key)"},
    {404, "not_found",            "no such route"},
    {404, "model_not_found",      "no model of the id a request's \"model\" field names; the "
                                  "message lists the models (GET /models), or says the "
                                  "session's model is gone"},
    {404, "session_not_found",    "no such session, or another API key's; the message says "
                                  "whether it expired, was evicted or deleted (to its own key)"},
    {404, "job_not_found",        "no fine-tuning job of that id (GET /finetune lists them)"},
    {405, "method_not_allowed",   "the route does not take this method (Allow lists those it "
                                  "takes)"},
    {409, "session_busy",         "the session serves another request"},
    {409, "model_exists",         "POST /models or POST /finetune with the id of a loaded model "
                                  "(or, for POST /finetune, of another job's or a folder's)"},
    {409, "job_finished",         "DELETE /finetune/{job} of a job that has ended"},
    {409, "model_in_use",         "DELETE /models/{id} of the default model, or of a model "
                                  "live sessions are bound to (the message counts them)"},
    {413, "body_too_large",       "the body is over max-body-bytes"},
    {415, "unsupported_media_type", "a text/csv body where only JSON is taken"},
    {422, "context_overflow",     "a session would grow past max_context"},
    {422, "too_large",            "a request that can never fit: its KV cache over the whole "
                                  "pool or its compute over max-request-cost (no Retry-After)"},
    {422, "no_context",           "max_new_tokens > 0 with no tokens to generate from"},
    {422, "pool_too_small",       "a generation whose cache could not fit even the empty pool"},
    {422, "model_load_failed",    "POST /models: the folder's model did not load (the "
                                  "loader's message); nothing changed"},
    {422, "unprocessable",        "a valid request the model cannot serve (e.g. a column whose "
                                  "float32 statistics overflow)"},
    {429, "too_many_sessions",    "max-sessions held and none idle long enough to evict; "
                                  "Retry-After"},
    {429, "session_limit",        "this API key name (or client address) holds "
                                  "max-sessions-per-key sessions"},
    {429, "queue_share",          "this API key's (or client address's) model requests hold its "
                                  "share of the queue (key-queue-percent of queue-size); "
                                  "Retry-After"},
    {429, "session_bytes_limit",  "this API key's (or client address's) sessions hold "
                                  "max-session-bytes-per-key bytes; Retry-After"},
    {429, "finetune_busy",        "POST /finetune while 4 fine-tuning jobs are queued or "
                                  "running; Retry-After"},
    {499, "client_closed",        "the client left before the answer (logged, never received)"},
    {500, "internal",             "out of memory or a broken invariant"},
    {500, "journal_failed",       "the session's change could not be written to the journal "
                                  "(state-dir): the message says what became of the session "
                                  "(as it was, as a restart brings it back)"},
    {501, "unsupported_transfer_coding", "a Transfer-Encoding other than chunked"},
    {503, "starting",             "the model is loading; Retry-After"},
    {503, "draining",             "the server is shutting down (SIGTERM); Retry-After"},
    {503, "overloaded",           "queue-size requests already wait; Retry-After estimated from "
                                  "the work queued"},
    {503, "pool_exhausted",       "the KV pool is in use by requests in flight; retry"},
    {503, "no_room",              "the session memory budgets are held by sessions used within "
                                  "session-min-idle; Retry-After"},
    {503, "uploads_busy",         "the bodies being received hold upload-budget bytes; "
                                  "Retry-After"},
    {504, "deadline_exceeded",    "the request's deadline (timeout_ms or request-timeout) passed"},
    {507, "model_memory_exceeded", "POST /models over model-memory-bytes with no idle model "
                                   "left to unload (the message gives the need and the budget)"},
    /* clang-format on */
};
const size_t kd_error_kind_count = sizeof kd_error_kinds / sizeof kd_error_kinds[0];

const kd_error_answer *kd_error_answer_of(int code) {
    if (code < 0 || code > KD_LAST_ERROR_CODE || !answers[code].code) return &answers[KR_E_FAILED];
    return &answers[code];
}

char *kd_error_message(const kd_error_answer *a, const char *what, const char *msg, char *out,
                       size_t n) {
    /* the core may have named the same thing ("forecast: the deadline passed") */
    const size_t w = strlen(what);
    const bool named = a->with_message && !strncmp(msg, what, w) && !strncmp(msg + w, ": ", 2);
    const bool with_what = a->with_what && !named;
    snprintf(out, n, "%s%s%s%s%s", with_what ? what : "", with_what ? ": " : "", a->lead,
             a->with_message ? msg : "", a->tail);
    return out;
}
