/* errors.h — the one table from the core's error codes to what the server answers: the
 * HTTP status, the error "code" string of the body, how the message is worded, and the
 * refusal reason that /metrics counts (kronosd_requests_refused_total{reason}) when the
 * code refuses a request before it is queued.
 *
 * Every kr_error_code has a row, the success code (0) too; tests/test_errors.c walks them
 * all. Pure data: no HTTP here (the reply is built by jobs/replies.c). */
#ifndef KD_ERRORS_H
#define KD_ERRORS_H

#include <stdbool.h>
#include <stddef.h>

#include "kronos.h"
#include "metrics.h"

/* The last code of kr_error_code: the table has a row for each of 0 .. KD_LAST_ERROR_CODE. */
#define KD_LAST_ERROR_CODE (KR_E_COUNT - 1)

typedef struct {
    int status;         /* HTTP status */
    const char *code;   /* the body's error "code" */
    kd_refusal refusal; /* the refusal it counts before queueing, or KD_NOT_REFUSED */
    /* the message: "[what: ]lead[the core's message]tail" */
    bool with_what; /* starts with what failed ("forecast", "series[2] forecast") */
    const char *lead;
    bool with_message; /* the core's own message */
    const char *tail;
} kd_error_answer;

/* Every error code an answer can carry, the core's (the rows above) and those the server
 * answers by itself (HTTP, admission, sessions), with its status and what it means: the
 * reference of the API (GET /openapi.json) lists them from here, so a new code is added
 * here too (tests/e2e/openapi.py finds every code the server's sources answer with). */
typedef struct {
    int status;
    const char *code;
    const char *meaning;
} kd_error_kind;
extern const kd_error_kind kd_error_kinds[];
extern const size_t kd_error_kind_count;

/* The row of code; a code outside the enum gets KR_E_FAILED's row. Never NULL. */
const kd_error_answer *kd_error_answer_of(int code);
/* The answer's message for a failure of what (e.g. "forecast") with the core's message
 * msg, into out[n] (cut to fit). Returns out. */
char *kd_error_message(const kd_error_answer *a, const char *what, const char *msg, char *out,
                       size_t n);

#endif
