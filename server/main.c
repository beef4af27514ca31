/* main.c — the kronosd command: a dispatch on the subcommand in argv[1]. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candles_csv.h"
#include "config.h"
#include "evaluate_json.h"
#include "evaluate_series_json.h"
#include "evaluate_text.h"
#include "finetune_cmd.h"
#include "forecast_json.h"
#include "series_json.h"
#include "journal_check.h"
#include "json_out.h"
#include "kronos.h"
#include "model_dirs.h"
#include "model_fingerprint.h"
#include "models.h"
#include "query_params.h"
#include "serve.h"
#include "whole_file.h"

#define EXIT_USAGE          2
#define DEFAULT_MAX_CONTEXT 512

static const char usage_text[] =
    "Usage: kronosd COMMAND [OPTIONS]\n"
    "\n"
    "Commands:\n"
    "  serve        run the HTTP daemon (kronosd serve --help lists its options)\n"
    "  forecast     run one forecast: read a request, print the response JSON\n"
    "  evaluate     run a walk-forward evaluation (POST /evaluate's request and response),\n"
    "               with the same options as forecast; {\"series\": [...], ...} evaluates\n"
    "               many aligned series and prints their cross-sectional scores too;\n"
    "               --table: print the overall scores as a table (the raw model beside\n"
    "               the calibrated one with \"calibration\": \"rolling\") in place of the JSON\n"
    "  finetune     fine-tune a model's predictor on CSV series: kronosd finetune --model\n"
    "               BASE --csv DATA.csv --out DIR [...] (kronosd finetune --help)\n"
    "  journal      check or repair a session journal: kronosd journal check|repair\n"
    "               STATE_DIR [--model DIR | --tokenizer DIR --predictor DIR]\n"
    "               [--max-context N] (the model checks the tokens and the header)\n"
    "  help         show this help (also --help, -h)\n"
    "  --version    print the version\n"
    "\n"
    "kronosd forecast (--model DIR | --tokenizer DIR --predictor DIR)\n"
    "                 [--max-context N] [--weights f32|bf16|int8] [--kv f32|bf16]\n"
    "                 [--compact]\n"
    "                 [--field KEY=VALUE ...]\n"
    "                 [REQUEST.json | CANDLES.csv | -]\n"
    "  --model DIR        a model directory holding tokenizer/ and predictor/\n"
    "  --tokenizer DIR    the tokenizer (config.json + model.safetensors)\n"
    "  --predictor DIR    the predictor (config.json + model.safetensors)\n"
    "  --max-context N    the model's context window (default 512)\n"
    "  --weights f32|bf16|int8 the linear layers' weights as float32 (default: the answer\n"
    "                     that equals upstream), BF16 (half the bytes) or int8 blocks (a\n"
    "                     quarter; the numbers move in both)\n"
    "  --kv f32|bf16      the KV cache as float32 (default) or BF16 (half the bytes)\n"
    "  --compact          print the response on one line\n"
    "  REQUEST.json       the request; '-' or nothing reads stdin\n"
    "  CANDLES.csv        or the candles as CSV (as POST /forecast takes a text/csv body),\n"
    "                     the other fields given as --field KEY=VALUE (as its query\n"
    "                     parameters: --field horizon=24 --field quantiles=0.1,0.9)\n"
    "\n"
    "Request: {\"candles\": {\"timestamps\": [...], \"open\": [...], \"high\": [...],\n"
    "           \"low\": [...], \"close\": [...], \"volume\": [...], \"amount\": [...]},\n"
    "          \"horizon\": P}\n"
    "  candles may also be rows: [{\"timestamp\": ..., \"open\": ..., ...}, ...];\n"
    "  timestamps are ISO 8601 strings or Unix seconds. Optional: future_timestamps,\n"
    "  samples (1), temperature (1.0), top_k (0), top_p (0.9), seed (0), max_context,\n"
    "  use_cache (true), return_paths (false), quantiles (distinct levels in [0, 1]),\n"
    "  normalization ({\"mean\": {\"open\": x, ...}, \"std\": {...}}: pinned statistics).\n"
    "  Many series at once: {\"series\": [{\"candles\": ..., \"future_timestamps\"?: ...},\n"
    "  ...], the other fields shared} prints {\"series\": [one response each]}.\n"
    "  An unknown field is an error naming it (pred_len: use horizon, and so on).\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage error.\n";

/* One line on stderr, prefixed like every message of this program. */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void complain(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("kronosd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- model options, shared by every command that loads a model ----------------------- */

typedef struct {
    const char *model, *tokenizer, *predictor;
    int max_context;
    kr_precision weights, kv;
} model_opts;

/* Parses a positive int option value; -1 if it is not one. */
static int parse_positive(const char *s, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 1 << 30) return -1;
    *out = (int)v;
    return 0;
}

static bool is_model_option(const char *name) {
    return strcmp(name, "--model") == 0 || strcmp(name, "--tokenizer") == 0 ||
           strcmp(name, "--predictor") == 0 || strcmp(name, "--max-context") == 0 ||
           strcmp(name, "--weights") == 0 || strcmp(name, "--kv") == 0;
}

/* Takes a model option (is_model_option(name)) and its value; -1 after a message. */
static int take_model_option(model_opts *o, const char *cmd, const char *name, const char *value) {
    if (strcmp(name, "--model") == 0) {
        o->model = value;
    } else if (strcmp(name, "--tokenizer") == 0) {
        o->tokenizer = value;
    } else if (strcmp(name, "--predictor") == 0) {
        o->predictor = value;
    } else if (strcmp(name, "--weights") == 0) {
        kr_error err = {0};
        if (kr_precision_parse(value, "--weights", &o->weights, &err) != 0) {
            complain("%s: %s", cmd, err.msg);
            return -1;
        }
    } else if (strcmp(name, "--kv") == 0) {
        kr_error err = {0};
        if (kr_kv_precision_parse(value, "--kv", &o->kv, &err) != 0) {
            complain("%s: %s", cmd, err.msg);
            return -1;
        }
    } else if (parse_positive(value, &o->max_context) < 0) {
        complain("%s: --max-context: '%s' is not a positive integer", cmd, value);
        return -1;
    }
    return 0;
}

static int check_model_opts(const model_opts *o, const char *cmd) {
    if (o->model && (o->tokenizer || o->predictor)) {
        complain("%s: give --model or --tokenizer and --predictor, not both", cmd);
        return -1;
    }
    if (!o->model && (!o->tokenizer || !o->predictor)) {
        complain("%s: no model given; use --model DIR or --tokenizer DIR --predictor DIR", cmd);
        return -1;
    }
    return 0;
}

/* Loads the model the options name; NULL after a message on stderr. */
static kr_model *load_model(const model_opts *o) {
    kr_error err = {0};
    kr_model *m = kd_model_open(o->model, o->tokenizer, o->predictor, o->max_context, o->weights,
                                o->kv, &err);
    if (!m) complain("cannot load model: %s", err.msg);
    return m;
}

/* ---- forecast ------------------------------------------------------------------------ */

#define MAX_FIELDS 32

typedef struct {
    model_opts model;
    const char *request; /* NULL or "-": stdin */
    bool compact;
    bool table;                     /* evaluate: the overall scores as a text table */
    const char *fields[MAX_FIELDS]; /* "KEY=VALUE": a CSV request's other fields */
    int n_fields;
} forecast_opts;

/* 0 to run, 1 when help was printed, -1 on a usage error (message printed). */
static int parse_forecast_args(int argc, char **argv, const char *cmd, forecast_opts *o) {
    bool only_files = false;
    char name[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || strcmp(a, "-") == 0) {
            if (o->request) {
                complain("%s: more than one request given ('%s', '%s')", cmd, o->request, a);
                return -1;
            }
            o->request = a;
        } else if (strcmp(a, "--") == 0) {
            only_files = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 1;
        } else if (strcmp(a, "--compact") == 0) {
            o->compact = true;
        } else if (strcmp(a, "--table") == 0 && strcmp(cmd, "evaluate") == 0) {
            o->table = true;
        } else {
            const char *value = kd_flag_value(argc, argv, &i, name, sizeof name);
            if (strcmp(name, "--compact") == 0) { /* only "--compact=..." gets here */
                complain("%s: --compact takes no value", cmd);
                return -1;
            }
            if (strcmp(name, "--field") == 0) {
                if (!value || !strchr(value, '=') || value[0] == '=') {
                    complain("%s: --field takes KEY=VALUE, got '%s'", cmd, value ? value : "");
                    return -1;
                }
                if (o->n_fields == MAX_FIELDS) {
                    complain("%s: more than %d --field options", cmd, MAX_FIELDS);
                    return -1;
                }
                o->fields[o->n_fields++] = value;
                continue;
            }
            if (!is_model_option(name)) {
                complain("%s: unknown option '%s' (see kronosd --help)", cmd, name);
                return -1;
            }
            if (!value) {
                complain("%s: %s needs a value", cmd, name);
                return -1;
            }
            if (take_model_option(&o->model, cmd, name, value) < 0) return -1;
        }
    }
    return check_model_opts(&o->model, cmd);
}

/* A request as read: JSON, or candles as CSV with the --field options as a JSON object
 * (the query parameters of a text/csv body). */
typedef struct {
    json_t *body; /* a JSON request, or NULL */
    kd_owned_candles candles;
    json_t *options; /* with candles */
} request_text;

/* The whole of path (NULL or "-": stdin), NUL-terminated; NULL after a message. */
static char *read_all(const char *path, const char *name, size_t *len) {
    const bool from_stdin = !path || strcmp(path, "-") == 0;
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        complain("%s: %s", name, strerror(errno));
        return NULL;
    }
    char *buf = kd_read_stream(f, len);
    if (!buf) complain("%s: %s", name, errno == ENOMEM ? "out of memory" : strerror(errno));
    if (!from_stdin) fclose(f);
    return buf;
}

/* Reads the request: JSON when it starts with '{', else CSV candles with o's fields (known:
 * the command's field names). -1 after a message on stderr. */
static int read_request(const forecast_opts *o, const char *const *known, request_text *out) {
    const char *name = !o->request || strcmp(o->request, "-") == 0 ? "stdin" : o->request;
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *text = read_all(o->request, name, &len);
    if (!text) return -1;
    size_t lead = strspn(text, " \t\r\n");
    int rc = -1;
    char msg[512];
    if (text[lead] == '{') {
        json_error_t je;
        if (o->n_fields > 0)
            complain("%s: --field is for a CSV request; a JSON request holds its fields", name);
        else if (!(out->body = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je)))
            complain("%s: line %d column %d: %s", name, je.line, je.column, je.text);
        else
            rc = 0;
        free(text);
        return rc;
    }
    if (!(out->options = json_object())) {
        complain("out of memory reading the request");
    } else if (kd_candles_csv_parse(text, len, 2, kd_forecast_default_limits.max_candles,
                                    &out->candles, msg, sizeof msg) < 0) {
        complain("%s: %s", name, msg);
    } else {
        rc = 0;
        for (int i = 0; rc == 0 && i < o->n_fields; i++) {
            char key[64];
            const char *eq = strchr(o->fields[i], '=');
            snprintf(key, sizeof key, "%.*s", (int)(eq - o->fields[i]), o->fields[i]);
            if (kd_query_option(out->options, key, eq + 1, known, msg, sizeof msg) < 0) {
                complain("--field %s: %s", o->fields[i], msg);
                rc = -1;
            }
        }
    }
    free(text);
    return rc;
}

static void request_text_free(request_text *t) {
    json_decref(t->body);
    json_decref(t->options);
    kd_candles_free(&t->candles);
}

/* The request's text once parsed (rc: the parser's), freed; false after the parser's
 * message. */
static bool request_parsed(request_text *t, int rc, const char *msg) {
    request_text_free(t);
    if (rc) complain("request: %s", msg);
    return rc == 0;
}

/* A command that reads a request (forecast, evaluate): its name, its field names, and what
 * it does with a request of many series or of one: each parses the request (which it frees)
 * before the slower model load, against the same window, then answers; its exit code. */
typedef struct {
    const char *name;
    const char *const *(*known)(void);
    int (*series)(const forecast_opts *o, request_text *t);
    int (*one)(const forecast_opts *o, request_text *t);
} request_command;

/* cmd on the arguments and the request they name; the exit code, after a message or the help
 * when they name none. */
static int run_request_command(int argc, char **argv, const request_command *cmd) {
    forecast_opts o = {.model = {.max_context = DEFAULT_MAX_CONTEXT}};
    const int parsed = parse_forecast_args(argc, argv, cmd->name, &o);
    if (parsed != 0) return parsed > 0 ? EXIT_SUCCESS : EXIT_USAGE;
    if (!o.request && isatty(STDIN_FILENO)) {
        complain("%s: no request given (a file, or '-' for stdin)", cmd->name);
        return EXIT_USAGE;
    }
    request_text t;
    if (read_request(&o, cmd->known(), &t) < 0) {
        request_text_free(&t);
        return EXIT_FAILURE;
    }
    return t.body && kd_is_series_request(t.body) ? cmd->series(&o, &t) : cmd->one(&o, &t);
}

/* Prints the response, naming its model as the server's answers do (kd_model_tag_json), with
 * a trailing newline; -1 if stdout failed. */
static int print_response(json_t *resp, const model_opts *mo, bool compact) {
    char id[KD_MODEL_ID_MAX + 1], hash[65], err[512];
    if (kd_model_dirs_tag(mo->model, mo->tokenizer, mo->predictor, id, hash, err, sizeof err) < 0) {
        complain("the model's hash: %s", err);
        return -1;
    }
    char *text =
        kd_model_tag_json(resp, id, hash) < 0 ? NULL : kd_json_dumps(resp, compact ? 0 : 2);
    if (!text) {
        complain("out of memory writing the response");
        return -1;
    }
    const int bad =
        fputs(text, stdout) == EOF || fputc('\n', stdout) == EOF || fflush(stdout) == EOF;
    free(text);
    if (bad) {
        complain("stdout: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The model's identifier as the server's (its fingerprint in hex), which a calibration
 * object names; -1 after complaining. */
static int model_id(const kr_model *m, char id[24]) {
    uint64_t fp = 0;
    char desc[512];
    kr_error err = {0};
    if (kd_model_fingerprint(m, "model", &fp, desc, sizeof desc, &err) < 0) {
        complain("the model's fingerprint: %s", err.msg);
        return -1;
    }
    snprintf(id, 24, "%016llx", (unsigned long long)fp);
    return 0;
}

/* A request's calibration object (if any) checked against the model and the request. */
static int check_calibration(const kr_model *m, const kd_forecast_input *in) {
    char id[24];
    kr_error err = {0};
    if (!in->calibration) return 0;
    if (model_id(m, id) < 0) return -1;
    const kr_forecast_request *q = &in->req;
    if (kr_calibration_check(in->calibration, &err) < 0 ||
        kr_calibration_match(in->calibration, id, q->horizon, q->samples, q->quantiles,
                             q->n_quantiles, &err) < 0) {
        complain("request: %s", err.msg);
        return -1;
    }
    return 0;
}

/* Runs the parsed request on a loaded model and prints the result. */
static int forecast_and_print(const kr_model *m, const model_opts *mo, const kd_forecast_input *in,
                              bool compact) {
    kr_forecast_result res;
    kr_error err = {0};
    memset(&res, 0, sizeof res);
    if (check_calibration(m, in) < 0) return -1;
    if (kr_forecast(m, NULL, &in->req, &res, &err) < 0) {
        complain("forecast failed: %s", err.msg);
        return -1;
    }
    json_t *resp = kd_forecast_response_json(in, &res);
    int rc = -1;
    if (!resp)
        complain("out of memory writing the response");
    else
        rc = print_response(resp, mo, compact);
    json_decref(resp);
    kr_forecast_result_free(&res);
    return rc;
}

/* Many series: computed together (kr_forecast_batch), printed as one list. */
static int series_and_print(const kr_model *m, const model_opts *mo, const kd_forecast_input *in,
                            int n, bool compact) {
    kr_forecast_result *res = calloc((size_t)n, sizeof *res);
    kr_error *errs = calloc((size_t)n, sizeof *errs);
    const kr_forecast_request **reqs = malloc((size_t)n * sizeof *reqs);
    int rc = -1;
    if (!res || !errs || !reqs) {
        complain("out of memory for %d series", n);
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (check_calibration(m, &in[i]) < 0) goto out;
    for (int i = 0; i < n; i++)
        reqs[i] = &in[i].req;
    kr_forecast_batch(m, NULL, reqs, n, res, errs);
    int failed = -1;
    for (int i = 0; i < n && failed < 0; i++)
        if (errs[i].code) failed = i;
    if (failed >= 0) {
        complain("forecast failed: series[%d]: %s", failed, errs[failed].msg);
    } else {
        json_t *resp = kd_series_response_json(in, res, n);
        if (!resp)
            complain("out of memory writing the response");
        else
            rc = print_response(resp, mo, compact);
        json_decref(resp);
    }
    for (int i = 0; i < n; i++)
        if (!errs[i].code) kr_forecast_result_free(&res[i]);
out:
    free(res);
    free(errs);
    free(reqs);
    return rc;
}

static int forecast_series(const forecast_opts *o, request_text *t) {
    char msg[512];
    kd_forecast_input *ins;
    int n;
    if (!request_parsed(
            t,
            kd_series_request_parse(t->body, o->model.max_context, NULL, &ins, &n, msg, sizeof msg),
            msg))
        return EXIT_FAILURE;
    kr_model *m = load_model(&o->model);
    const int rc =
        m && series_and_print(m, &o->model, ins, n, o->compact) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
    kr_model_free(m);
    kd_series_inputs_free(ins, n);
    return rc;
}

static int forecast_one(const forecast_opts *o, request_text *t) {
    char msg[512];
    kd_forecast_input in;
    if (!request_parsed(
            t,
            t->body
                ? kd_forecast_request_parse(t->body, o->model.max_context, &in, msg, sizeof msg)
                : kd_forecast_request_with_candles(t->options, &t->candles, o->model.max_context,
                                                   NULL, &in, msg, sizeof msg),
            msg))
        return EXIT_FAILURE;
    kr_model *m = load_model(&o->model);
    const int rc =
        m && forecast_and_print(m, &o->model, &in, o->compact) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
    kr_model_free(m);
    kd_forecast_input_free(&in);
    return rc;
}

/* ---- evaluate ------------------------------------------------------------------------ */

/* Many aligned series (evaluate_series_json.h): every plan and the alignment checked before
 * any model work, each series evaluated in turn (kr_evaluate), then the cross-section,
 * printed as POST /evaluate answers them. */
static int evaluate_series_and_print(const kr_model *m, const model_opts *mo,
                                     const kd_evaluate_series_input *s, bool compact) {
    const int n = s->n;
    kr_evaluate_plan *plans = calloc((size_t)n, sizeof *plans);
    kr_evaluate_request *reqs = calloc((size_t)n, sizeof *reqs);
    kr_evaluation *evs = calloc((size_t)n, sizeof *evs);
    kr_cross_section cs = {0};
    kr_error err = {0};
    int done = 0, rc = -1;
    char id[24];
    if (!plans || !reqs || !evs) {
        complain("out of memory for %d series", n);
        goto out;
    }
    if (model_id(m, id) < 0) goto out;
    for (int i = 0; i < n; i++) {
        reqs[i] = s->in[i].req;
        reqs[i].model_id = id; /* a fitted calibration names it, a given one matches */
        if (kr_evaluate_plan_make(m, &reqs[i], &plans[i], &err) < 0) {
            complain("request: series[%d].%s", i, err.msg);
            goto out;
        }
    }
    if (kr_cross_section_check(reqs, plans, n, s->top_k, &err) < 0) {
        complain("request: %s", err.msg);
        goto out;
    }
    for (; done < n; done++)
        if (kr_evaluate(m, NULL, &reqs[done], &evs[done], &err) < 0) {
            complain("evaluate failed: series[%d]: %s", done, err.msg);
            goto out;
        }
    if (kr_cross_section_score(evs, n, s->top_k, &cs, &err) < 0) {
        complain("evaluate failed: %s", err.msg);
        goto out;
    }
    json_t *resp = kd_evaluate_series_response_json(s, plans, evs, &cs);
    if (!resp)
        complain("out of memory writing the response");
    else if (print_response(resp, mo, compact) == 0)
        rc = 0;
    json_decref(resp);
out:
    for (int i = 0; i < done; i++)
        kr_evaluation_free(&evs[i]);
    kr_cross_section_free(&cs);
    free(plans);
    free(reqs);
    free(evs);
    return rc;
}

static int evaluate_series(const forecast_opts *o, request_text *t) {
    char msg[512];
    kd_evaluate_series_input set;
    if (!request_parsed(t, kd_evaluate_series_parse(t->body, NULL, &set, msg, sizeof msg), msg))
        return EXIT_FAILURE;
    kr_model *m = load_model(&o->model);
    const int rc = m && evaluate_series_and_print(m, &o->model, &set, o->compact) == 0
                       ? EXIT_SUCCESS
                       : EXIT_FAILURE;
    kr_model_free(m);
    kd_evaluate_series_input_free(&set);
    return rc;
}

/* A walk-forward evaluation (evaluate_json.h): every origin's forecast at once on one
 * scheduler (kr_evaluate), the scores printed as POST /evaluate answers them. */
static int evaluate_one(const forecast_opts *o, request_text *t) {
    char msg[512];
    kd_evaluate_input in;
    if (!request_parsed(t,
                        t->body ? kd_evaluate_request_parse(t->body, NULL, &in, msg, sizeof msg)
                                : kd_evaluate_request_with_candles(t->options, &t->candles, NULL,
                                                                   &in, msg, sizeof msg),
                        msg))
        return EXIT_FAILURE;
    kr_model *m = load_model(&o->model);
    int rc = EXIT_FAILURE;
    char id[24];
    if (m && model_id(m, id) < 0) {
        kr_model_free(m);
        m = NULL;
    }
    in.req.model_id = id;
    kr_evaluate_plan plan;
    kr_evaluation ev;
    kr_error err = {0};
    if (m && kr_evaluate_plan_make(m, &in.req, &plan, &err) == 0 &&
        kr_evaluate(m, NULL, &in.req, &ev, &err) == 0) {
        json_t *resp = kd_evaluate_response_json(&in, &plan, &ev);
        char *table = resp && o->table ? kd_evaluate_table(resp) : NULL;
        if (!resp || (o->table && !table))
            complain("out of memory writing the response");
        else if (table ? fputs(table, stdout) != EOF && fflush(stdout) == 0
                       : print_response(resp, &o->model, o->compact) == 0)
            rc = EXIT_SUCCESS;
        free(table);
        json_decref(resp);
        kr_evaluation_free(&ev);
    } else if (m) {
        complain("evaluate failed: %s", err.msg);
    }
    kr_model_free(m);
    kd_evaluate_input_free(&in);
    return rc;
}

/* ---- help, version, dispatch ------------------------------------------------------- */

/* ---- journal ------------------------------------------------------------------------- */

/* kronosd journal check|repair STATE_DIR [model options]: exit 0 when nothing is wrong (or
 * it was repaired), 1 when check found problems or the journal could not be read. */
static int cmd_journal(int argc, char **argv) {
    static const char usage[] = "usage: kronosd journal check|repair STATE_DIR [--model DIR | "
                                "--tokenizer DIR --predictor DIR] [--max-context N]";
    if (argc < 3 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "repair") != 0)) {
        complain("%s", usage);
        return EXIT_USAGE;
    }
    model_opts mo = {.max_context = DEFAULT_MAX_CONTEXT};
    for (int i = 3; i < argc; i += 2) {
        if (!is_model_option(argv[i]) || i + 1 >= argc) {
            complain("journal: unknown option or missing value '%s' (%s)", argv[i], usage);
            return EXIT_USAGE;
        }
        if (take_model_option(&mo, "journal", argv[i], argv[i + 1]) < 0) return EXIT_USAGE;
    }
    const bool with_model = mo.model || mo.tokenizer || mo.predictor;
    if (with_model && check_model_opts(&mo, "journal") < 0) return EXIT_USAGE;
    kr_model *m = with_model ? load_model(&mo) : NULL;
    if (with_model && !m) return 1;
    kd_journal_check_opts o = {.dir = argv[2], .repair = argv[1][0] == 'r', .m = m, .out = stdout};
    char desc[512], err[1024];
    kr_error ke = {0};
    if (m && kd_model_fingerprint(m, mo.model ? mo.model : mo.predictor, &o.fingerprint, desc,
                                  sizeof desc, &ke) < 0) {
        complain("journal: the model's fingerprint: %s", ke.msg);
        kr_model_free(m);
        return 1;
    }
    o.model = desc;
    const int rc = kd_journal_check(&o, err, sizeof err);
    if (rc < 0) complain("journal: %s", err);
    kr_model_free(m);
    return rc == 0 ? 0 : 1;
}

static int cmd_help(int argc, char **argv) {
    (void)argc, (void)argv;
    fputs(usage_text, stdout);
    return EXIT_SUCCESS;
}

static int cmd_version(int argc, char **argv) {
    (void)argc, (void)argv;
    printf("kronosd %s (jansson %s)\n", KR_VERSION, JANSSON_VERSION);
    return EXIT_SUCCESS;
}

typedef int (*command_fn)(int argc, char **argv);

static const request_command forecast_command = {"forecast", kd_forecast_option_names,
                                                 forecast_series, forecast_one};
static const request_command evaluate_command = {"evaluate", kd_evaluate_option_names,
                                                 evaluate_series, evaluate_one};

/* A new subcommand is one line here: a function, or a command that reads a request. */
static const struct {
    const char *name;
    command_fn run;
    const request_command *request;
} commands[] = {
    /* clang-format off */
    {"serve",     kd_serve,        NULL},
    {"forecast",  NULL,            &forecast_command},
    {"evaluate",  NULL,            &evaluate_command},
    {"journal",   cmd_journal,     NULL},
    {"finetune",  kd_finetune_cmd, NULL},
    {"help",      cmd_help,        NULL},
    {"--help",    cmd_help,        NULL},
    {"-h",        cmd_help,        NULL},
    {"--version", cmd_version,     NULL},
    {"version",   cmd_version,     NULL},
    /* clang-format on */
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run ? commands[i].run(argc - 1, argv + 1)
                                   : run_request_command(argc - 1, argv + 1, commands[i].request);
    complain("unknown command '%s' (see kronosd --help)", argv[1]);
    return EXIT_USAGE;
}
