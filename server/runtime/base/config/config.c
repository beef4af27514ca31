/* config.c — one table of settings, read from defaults, a config file and flags. */
#include "config.h"
#include "fail.h"
#include "kronos.h"
#include "model_options.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* T_LIST: a string that each setting extends by a line (a repeatable key) */
typedef enum { T_STRING, T_INT, T_BYTES, T_BOOL, T_LIST } key_type;

typedef struct {
    const char *key;
    key_type type;
    size_t offset;
    const char *def; /* NULL: unset */
    long long min, max;
    const char *help;
} key_def;

#define AT(field) offsetof(kd_config, field)
#define GIB       (1LL << 30)

/* The order here is the order of --help and of config/kronosd.conf. */
static const key_def keys[] = {
    {"model", T_LIST, AT(model), NULL, 0, 0,
     "[ID=]DIR: a model directory holding tokenizer/ and predictor/, its id the folder's name "
     "unless given; repeat for several models (the first is the default)"},
    {"models-dir", T_STRING, AT(models_dir), NULL, 0, 0,
     "a directory whose subfolders (each with tokenizer/ and predictor/) are models, named by "
     "their folder, after those of model"},
    {"tokenizer", T_STRING, AT(tokenizer), NULL, 0, 0, "tokenizer directory (instead of model)"},
    {"predictor", T_STRING, AT(predictor), NULL, 0, 0, "predictor directory (instead of model)"},
    {"max-context", T_INT, AT(max_context), "512", 1, 1 << 20,
     "the model's context window (512 or 2048 for released models)"},
    {"weights", T_STRING, AT(weights), "f32", 0, 0,
     "the linear layers' weights: f32, bf16 (half the bytes) or int8 (blocks of 32, a quarter; "
     "opt-in, the numbers move)"},
    {"kv", T_STRING, AT(kv), "f32", 0, 0,
     "the KV cache: f32, or bf16 (half the bytes a position: twice the sessions a pool holds; "
     "opt-in, the numbers move)"},
    {"model-option", T_LIST, AT(model_option), NULL, 0, 0,
     "ID:KEY=VALUE: one model's own max-context, weights or kv over the values above (e.g. "
     "mini:max-context=2048); repeatable, a later line wins"},
    {"host", T_STRING, AT(host), "127.0.0.1", 0, 0, "address to listen on"},
    {"port", T_INT, AT(port), "8080", 0, 65535, "TCP port (0: any free port, logged)"},
    {"api-key-file", T_STRING, AT(api_key_file), NULL, 0, 0,
     "file of API keys, NAME:KEY a line (or one bare key); requests then need "
     "Authorization: Bearer KEY (not /health, /openapi.json, the page at / and /example.csv)"},
    {"admin-key-file", T_STRING, AT(admin_key_file), NULL, 0, 0,
     "file of admin keys, as api-key-file; an admin key is not an API key"},
    {"http-threads", T_INT, AT(http_threads), "2", 1, 64,
     "HTTP threads (parse and answer; never run the model)"},
    {"connection-timeout", T_INT, AT(connection_timeout), "60", 1, 86400,
     "seconds before an idle connection is closed"},
    {"read-timeout", T_INT, AT(read_timeout), "10", 1, 86400,
     "seconds from a request line to the request's last byte (headers and body); "
     "slow senders cannot extend it"},
    {"max-connections", T_INT, AT(max_connections), "1000", 1, 1 << 20,
     "open connections at once (more are refused)"},
    {"max-connections-per-ip", T_INT, AT(max_connections_per_ip), "64", 1, 1 << 20,
     "open connections from one client address"},
    {"node-id", T_STRING, AT(node_id), NULL, 0, 0,
     "this node's name, the prefix of its session ids (default: the host name)"},
    {"max-body-bytes", T_BYTES, AT(max_body_bytes), "8M", 1024, GIB,
     "largest request body (413 above)"},
    {"upload-budget", T_BYTES, AT(upload_budget), "256M", 1 << 20, 1LL << 40,
     "request bodies held at once over all connections, being received or parsed (503 + "
     "Retry-After for a body beyond it)"},
    {"workers", T_INT, AT(workers), "0", 0, 256, "inference threads (0: one per online CPU)"},
    {"compute-threads", T_INT, AT(compute_threads), "0", 0, 256,
     "threads of the core's pool, shared by the workers (0: one per online CPU)"},
    {"step-tokens", T_INT, AT(step_tokens), "96", 1, 1 << 20,
     "prefill, recompute and tokenizer rows per scheduler step and model (an eighth of it "
     "while others of the model decode, fewer while light requests come: light-wait-percent)"},
    {"max-batch-rows", T_INT, AT(max_batch_rows), "512", 1, 1 << 20,
     "decode rows (paths, generations) in the scheduler's steps at once; more wait"},
    {"light-request-mflop", T_INT, AT(light_request_mflop), "20000", 1, 1 << 30,
     "a model job planning at most this many MFLOP (millions) is light (latency-sensitive): it "
     "fills its "
     "window first, and while one runs the others' rows are bounded by light-step-percent"},
    {"light-step-percent", T_INT, AT(light_step_percent), "150", 101, 100000,
     "while a light job runs, a step with the other jobs' prefill and recompute rows takes at "
     "most this percent of its time without them (by the measured step cost)"},
    {"light-sit-out-steps", T_INT, AT(light_sit_out_steps), "8", 0, 1 << 20,
     "while a light job runs, the other jobs sit steps out (no rows), each joining again "
     "after this many steps in a row (0: none sits out) or light-sit-out-ms"},
    {"light-sit-out-ms", T_INT, AT(light_sit_out_ms), "40", 1, 1 << 20,
     "while a light job runs, another job that sits steps out joins one again at the latest "
     "this many milliseconds after its last"},
    {"light-wait-percent", T_INT, AT(light_wait_percent), "50", 1, 100000,
     "while light jobs have come within light-recent-ms, a step without one takes at most this "
     "percent of what a light job takes alone (by the measured step cost): the longest a light "
     "job that comes mid-step waits for it"},
    {"light-recent-ms", T_INT, AT(light_recent_ms), "10000", 0, 1 << 30,
     "how long after a light job started the steps stay short for the next (light-wait-percent; "
     "0: never, every step takes step-tokens)"},
    {"queue-size", T_INT, AT(queue_size), "64", 1, 1 << 20,
     "requests waiting for a worker (503 + Retry-After above)"},
    {"key-queue-percent", T_INT, AT(key_queue_percent), "50", 1, 100,
     "share of queue-size that one API key's (or, without keys, one client address's) model "
     "requests may hold waiting (429 queue_share + Retry-After above; at least one place)"},
    {"pool-bytes", T_BYTES, AT(pool_bytes), "256M", 1024, 1LL << 40,
     "KV cache pool of each model, shared by its sessions and forecasts"},
    {"model-memory-bytes", T_BYTES, AT(model_memory_bytes), "0", 0, 1LL << 50,
     "weight bytes all models may hold (as GET /models counts them): a load over it unloads "
     "idle models least recently used first, else is refused (507); 0: no limit"},
    {"max-sessions", T_INT, AT(max_sessions), "4096", 1, 1 << 24, "sessions held at once"},
    {"session-ttl", T_INT, AT(session_ttl), "600", 1, 1 << 30, "seconds an idle session lives"},
    {"session-min-idle", T_INT, AT(session_min_idle), "60", 0, 1 << 30,
     "seconds a session must be idle before a new one may evict it (429 until then)"},
    {"max-sessions-per-key", T_INT, AT(max_sessions_per_key), "1024", 1, 1 << 24,
     "sessions one API key (or, without a key, one client address) may hold (429 above)"},
    {"session-memory-bytes", T_BYTES, AT(session_memory_bytes), "256M", 0, 1LL << 40,
     "sessions' memory outside the KV pool (their candles, tokens and tokenizer encoder "
     "caches), over all sessions (0: no limit)"},
    {"session-pool-percent", T_INT, AT(session_pool_percent), "75", 1, 100,
     "share of pool-bytes that sessions' KV caches may hold; the rest is kept for forecasts "
     "and generations, so that sessions used within session-min-idle cannot starve them"},
    {"max-session-bytes-per-key", T_BYTES, AT(max_session_bytes_per_key), "0", 0, 1LL << 40,
     "bytes (KV pool and outside) that one API key's (or client address's) sessions may hold "
     "(429 above; 0: no limit)"},
    {"state-dir", T_STRING, AT(state_dir), NULL, 0, 0,
     "directory of the session journal: sessions then survive a restart or a crash "
     "(unset: sessions live in memory only)"},
    {"journal-fsync", T_STRING, AT(journal_fsync), "always", 0, 0,
     "when the journal reaches the disk: always (before each answer), everysec, or no (the "
     "kernel's choice)"},
    {"journal-rewrite-min", T_BYTES, AT(journal_rewrite_min), "64M", 4096, 1LL << 40,
     "the journal is rewritten from the live sessions once it is twice their size and at "
     "least this big"},
    {"max-candles", T_INT, AT(max_candles), "10000", 2, 1 << 24, "candles in one request"},
    {"max-horizon", T_INT, AT(max_horizon), "1024", 1, 1 << 20, "forecast steps in one request"},
    {"max-samples", T_INT, AT(max_samples), "1000", 1, 1 << 20, "sample paths in one forecast"},
    {"max-request-cost", T_INT, AT(max_request_cost), "2000", 1, 1 << 30,
     "GFLOP of model work one request may need (422 too_large above)"},
    {"request-timeout", T_INT, AT(request_timeout), "300", 1, 86400,
     "seconds a request may run or wait before 504 (the field timeout_ms may ask less)"},
    {"shutdown-timeout", T_INT, AT(shutdown_timeout), "30", 0, 86400,
     "seconds to finish requests in flight on SIGTERM"},
    {"access-log", T_BOOL, AT(access_log), "true", 0, 0, "one line per request on stderr"},
    {"log-file", T_STRING, AT(log_file), NULL, 0, 0,
     "append the log to this file instead of stderr (reopened on SIGHUP)"},
};

#define N_KEYS (sizeof keys / sizeof keys[0])

static const key_def *find_key(const char *name) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].key, name) == 0) return &keys[i];
    return NULL;
}

/* Keys that were once valid, and why they are no longer: a config still naming one gets
 * this message rather than "unknown key". */
static const char *retired_key(const char *name) {
    if (strcmp(name, "batching") == 0)
        return "batching was retired: every forecast and generation runs on the step "
               "scheduler, whose answers are the same bytes as a request run alone (for a "
               "comparison, send requests one at a time); remove the key";
    return NULL;
}

/* "256M", "8k", "1G", "1048576": binary multiples. */
static int parse_bytes(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0) return -1;
    long long mul = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0':
        break;
    case 'K':
        mul = 1LL << 10;
        break;
    case 'M':
        mul = 1LL << 20;
        break;
    case 'G':
        mul = 1LL << 30;
        break;
    default:
        return -1;
    }
    if (*end && end[1] != '\0' && strcasecmp(end + 1, "iB") != 0 && strcasecmp(end + 1, "B") != 0)
        return -1;
    if (v > LLONG_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}

static int parse_bool(const char *s, bool *out) {
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(s, no[i]) == 0) return *out = false, 0;
    }
    return -1;
}

/* Sets one key; `where` says where the value came from ("--port", "kronosd.conf:12"). */
static int set_key(kd_config *c, const key_def *k, const char *value, const char *where, char *err,
                   size_t errlen) {
    char *base = (char *)c + k->offset;
    long long v;
    char *end;
    switch (k->type) {
    case T_STRING: {
        char *copy = strdup(value);
        if (!copy) return kd_fail(err, errlen, "%s: out of memory", where);
        free(*(char **)base);
        *(char **)base = copy;
        return 0;
    }
    case T_LIST: {
        const char *old = *(char **)base;
        size_t n = (old ? strlen(old) + 1 : 0) + strlen(value) + 1;
        char *list = malloc(n);
        if (!list) return kd_fail(err, errlen, "%s: out of memory", where);
        snprintf(list, n, "%s%s%s", old ? old : "", old ? "\n" : "", value);
        free(*(char **)base);
        *(char **)base = list;
        return 0;
    }
    case T_BOOL:
        if (parse_bool(value, (bool *)base) < 0)
            return kd_fail(err, errlen, "%s: '%s' is not true or false", where, value);
        return 0;
    case T_INT:
        errno = 0;
        v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < k->min || v > k->max)
            return kd_fail(err, errlen, "%s: '%s' is not an integer in %lld..%lld", where, value,
                           k->min, k->max);
        *(int *)base = (int)v;
        return 0;
    case T_BYTES:
        if (parse_bytes(value, &v) < 0 || v < k->min || v > k->max)
            return kd_fail(err, errlen,
                           "%s: '%s' is not a size in %lld..%lld bytes (suffix K, M, G)", where,
                           value, k->min, k->max);
        *(size_t *)base = (size_t)v;
        return 0;
    }
    return kd_fail(err, errlen, "%s: unknown key type", where);
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Cuts a comment: `#` at the start of the line or after whitespace, so that a value such
 * as `/srv/m#1` keeps its `#`. Inside double quotes nothing is a comment. */
static void cut_comment(char *line) {
    bool quoted = false;
    for (char *p = line; *p; p++) {
        if (*p == '"') quoted = !quoted;
        if (*p == '#' && !quoted && (p == line || isspace((unsigned char)p[-1]))) {
            *p = '\0';
            return;
        }
    }
}

/* A value in double quotes loses them (to keep spaces or a ` #`); else it is as written. */
static int unquote(char **value, const char *where, char *err, size_t errlen) {
    char *v = *value;
    const size_t n = strlen(v);
    if (n == 0 || (v[0] != '"' && v[n - 1] != '"')) return 0;
    if (n < 2 || v[0] != '"' || v[n - 1] != '"' || memchr(v + 1, '"', n - 2))
        return kd_fail(err, errlen, "%s: unbalanced quotes in '%s'", where, v);
    v[n - 1] = '\0';
    *value = v + 1;
    return 0;
}

int kd_config_parse_stream(kd_config *c, FILE *f, const char *path, char *err, size_t errlen) {
    char line[4096], where[PATH_MAX + 32];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (!strchr(line, '\n') && !feof(f)) {
            rc = kd_fail(err, errlen, "%s: line too long", where);
            break;
        }
        cut_comment(line);
        char *s = trim(line);
        if (*s == '\0') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = kd_fail(err, errlen, "%s: expected 'key = value'", where);
            break;
        }
        *eq = '\0';
        const char *name = trim(s);
        char *value = trim(eq + 1);
        const key_def *k = find_key(name);
        if (!k && retired_key(name))
            rc = kd_fail(err, errlen, "%s: %s", where, retired_key(name));
        else if (!k)
            rc = kd_fail(err, errlen, "%s: unknown key '%s' (see kronosd serve --help)", where,
                         name);
        else if ((rc = unquote(&value, where, err, errlen)) == 0)
            rc = set_key(c, k, value, where, err, errlen);
    }
    if (rc == 0 && ferror(f)) rc = kd_fail(err, errlen, "--config %s: read error", path);
    return rc;
}

static int load_file(kd_config *c, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return kd_fail(err, errlen, "--config %s: %s", path, strerror(errno));
    const int rc = kd_config_parse_stream(c, f, path, err, errlen);
    fclose(f);
    return rc;
}

static int set_defaults(kd_config *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].def && set_key(c, &keys[i], keys[i].def, "default", err, errlen) < 0) return -1;
    return 0;
}

const char *kd_flag_value(int argc, char **argv, int *i, char *name, size_t n) {
    const char *eq = strchr(argv[*i], '=');
    if (eq) {
        snprintf(name, n, "%.*s", (int)(eq - argv[*i]), argv[*i]);
        return eq + 1;
    }
    snprintf(name, n, "%s", argv[*i]);
    return *i + 1 < argc ? argv[++*i] : NULL;
}

/* The node id goes into session ids and an nginx map matches it in paths: a short, plain
 * name. By default, the first label of the host name. */
static int check_node_id(kd_config *c, char *err, size_t errlen) {
    if (!c->node_id) {
        char host[256] = "";
        if (gethostname(host, sizeof host - 1) < 0 || !*host) snprintf(host, sizeof host, "node");
        host[strcspn(host, ".")] = '\0';
        if (!(c->node_id = strdup(host))) return kd_fail(err, errlen, "node-id: out of memory");
    }
    const size_t n = strlen(c->node_id);
    if (n == 0 || n > KD_NODE_ID_MAX || strspn(c->node_id, KD_NODE_ID_CHARS) != n)
        return kd_fail(err, errlen,
                       "node-id '%s': expected 1 to %d letters, digits, '_', '.' or '-' (the "
                       "default is the host name; set node-id when that does not fit)",
                       c->node_id, KD_NODE_ID_MAX);
    return 0;
}

static int check(kd_config *c, char *err, size_t errlen) {
    if (check_node_id(c, err, errlen) < 0) return -1;
    if (strcmp(c->journal_fsync, "always") != 0 && strcmp(c->journal_fsync, "everysec") != 0 &&
        strcmp(c->journal_fsync, "no") != 0)
        return kd_fail(err, errlen, "journal-fsync '%s': expected always, everysec or no",
                       c->journal_fsync);
    kr_precision prec;
    kr_error ke = {0};
    if (kr_precision_parse(c->weights, "weights", &prec, &ke) != 0 ||
        kr_kv_precision_parse(c->kv, "kv", &prec, &ke) != 0)
        return kd_fail(err, errlen, "%s", ke.msg);
    if (kd_model_options_check(c->model_option, err, errlen) < 0) return -1;
    if (c->state_dir && !*c->state_dir)
        return kd_fail(err, errlen, "state-dir: empty (leave it unset for no journal)");
    if (c->model && (c->tokenizer || c->predictor))
        return kd_fail(err, errlen, "give model or tokenizer and predictor, not both");
    if (!c->model && !c->models_dir && (!c->tokenizer || !c->predictor))
        return kd_fail(err, errlen,
                       "no model given; use --model DIR, --models-dir DIR or --tokenizer DIR "
                       "--predictor DIR");
    if (!c->model && (!c->tokenizer) != (!c->predictor))
        return kd_fail(err, errlen, "give both tokenizer and predictor, or model");
    return 0;
}

int kd_config_load(kd_config *c, int argc, char **argv, char *err, size_t errlen) {
    char name[64];
    if (set_defaults(c, err, errlen) < 0) return -1;
    /* the file first, wherever --config stands, so that every flag overrides it */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            kd_config_usage(stdout);
            return 1;
        }
        if (strncmp(argv[i], "--config", 8) != 0 || (argv[i][8] && argv[i][8] != '=')) continue;
        const char *value = kd_flag_value(argc, argv, &i, name, sizeof name);
        if (!value) return kd_fail(err, errlen, "--config needs a file");
        free(c->config_file);
        if (!(c->config_file = strdup(value))) return kd_fail(err, errlen, "out of memory");
        if (load_file(c, value, err, errlen) < 0) return -1;
    }
    /* a model given by flags replaces the file's, whichever form either uses */
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0) continue;
        kd_flag_value(argc, argv, &i, name, sizeof name);
        if (strcmp(name, "--model") == 0 || strcmp(name, "--tokenizer") == 0 ||
            strcmp(name, "--predictor") == 0 || strcmp(name, "--models-dir") == 0) {
            /* the file's model-option lines name the file's models */
            free(c->model), free(c->tokenizer), free(c->predictor), free(c->models_dir);
            free(c->model_option);
            c->model = c->tokenizer = c->predictor = c->models_dir = c->model_option = NULL;
            break;
        }
    }
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            return kd_fail(err, errlen, "unexpected argument '%s' (see kronosd serve --help)",
                           argv[i]);
        const char *value = kd_flag_value(argc, argv, &i, name, sizeof name);
        if (strcmp(name, "--config") == 0) continue;
        const key_def *k = find_key(name + 2);
        if (!k && retired_key(name + 2))
            return kd_fail(err, errlen, "%s: %s", name, retired_key(name + 2));
        if (!k) return kd_fail(err, errlen, "unknown option '%s' (see kronosd serve --help)", name);
        if (!value) return kd_fail(err, errlen, "%s needs a value", name);
        if (set_key(c, k, value, name, err, errlen) < 0) return -1;
    }
    return check(c, err, errlen);
}

void kd_config_free(kd_config *c) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].type == T_STRING || keys[i].type == T_LIST) {
            char **p = (char **)((char *)c + keys[i].offset);
            free(*p);
            *p = NULL;
        }
    free(c->config_file);
    c->config_file = NULL;
}

static void format_value(const kd_config *c, const key_def *k, char *out, size_t n) {
    const char *base = (const char *)c + k->offset;
    switch (k->type) {
    case T_STRING:
    case T_LIST:
        snprintf(out, n, "%s", *(char *const *)base ? *(char *const *)base : "(unset)");
        return;
    case T_INT:
        snprintf(out, n, "%d", *(const int *)base);
        return;
    case T_BYTES:
        snprintf(out, n, "%zu", *(const size_t *)base);
        return;
    case T_BOOL:
        snprintf(out, n, "%s", *(const bool *)base ? "true" : "false");
        return;
    }
}

int kd_config_diff(const kd_config *a, const kd_config *b, kd_config_change_fn fn, void *ctx) {
    int changed = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        char va[512], vb[512];
        format_value(a, &keys[i], va, sizeof va);
        format_value(b, &keys[i], vb, sizeof vb);
        if (strcmp(va, vb) != 0) {
            changed++;
            fn(ctx, keys[i].key, va, vb);
        }
    }
    return changed;
}

int kd_config_copy_key(kd_config *dst, const kd_config *src, const char *key) {
    const key_def *k = find_key(key);
    if (!k) return -1;
    const char *from = (const char *)src + k->offset;
    char *to = (char *)dst + k->offset;
    switch (k->type) {
    case T_STRING:
    case T_LIST: {
        const char *v = *(char *const *)from;
        char *copy = v ? strdup(v) : NULL;
        if (v && !copy) return -1;
        free(*(char **)to);
        *(char **)to = copy;
        return 0;
    }
    case T_INT:
        *(int *)to = *(const int *)from;
        return 0;
    case T_BYTES:
        *(size_t *)to = *(const size_t *)from;
        return 0;
    case T_BOOL:
        *(bool *)to = *(const bool *)from;
        return 0;
    }
    return -1;
}

void kd_config_usage(FILE *out) {
    fputs("Usage: kronosd serve (--model [ID=]DIR... | --models-dir DIR | --tokenizer DIR "
          "--predictor DIR) [OPTIONS]\n"
          "\n"
          "Options (each is also a key of the --config file, `key = value`; flags override\n"
          "the file; values with defaults shown):\n"
          "  --config FILE                a config file (see config/kronosd.conf)\n",
          out);
    for (size_t i = 0; i < N_KEYS; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s %s", keys[i].key,
                 keys[i].type == T_STRING  ? "S"
                 : keys[i].type == T_LIST  ? "S (repeatable)"
                 : keys[i].type == T_BYTES ? "SIZE"
                 : keys[i].type == T_BOOL  ? "BOOL"
                                           : "N");
        fprintf(out, "  %-28s %s", flag, keys[i].help);
        if (keys[i].def) fprintf(out, " [%s]", keys[i].def);
        fputc('\n', out);
    }
    fputs("\nSIZE takes K, M or G (binary). SIGTERM or SIGINT drains and exits 0. SIGHUP\n"
          "reopens the log and re-reads the file and flags: api-key-file and admin-key-file\n"
          "(the keys are read again), request limits, read-timeout, request-timeout, "
          "shutdown-timeout, access-log and "
          "log-file\n"
          "apply at once; other keys are logged as needing a restart.\n",
          out);
}

kr_sched_config kd_config_steps(const kd_config *c) {
    return (kr_sched_config){.step_tokens = c->step_tokens,
                             .max_rows = c->max_batch_rows,
                             .light_flops = c->light_request_mflop * 1e6,
                             .light_step_factor = c->light_step_percent / 100.0,
                             .sit_out_steps = c->light_sit_out_steps ? c->light_sit_out_steps : -1,
                             .sit_out_ms = c->light_sit_out_ms,
                             .light_wait = c->light_wait_percent / 100.0,
                             .light_recent_ms = c->light_recent_ms ? c->light_recent_ms : -1};
}
