/* config.h — the settings of `kronosd serve`: defaults, then the config file, then flags.
 *
 * Every key is both a line `key = value` of the config file and a flag `--key VALUE` (or
 * `--key=VALUE`); config/kronosd.conf documents them all with their defaults, and
 * `kronosd serve --help` lists them from the same table.
 */
#ifndef KD_CONFIG_H
#define KD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kronos.h"

#define KD_NODE_ID_MAX 32
/* what a node-id may be made of */
#define KD_NODE_ID_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

typedef struct {
    /* model */
    char *model; /* "[ID=]DIR" lines, one a model (repeatable) */
    char *models_dir, *tokenizer, *predictor;
    int max_context;
    char *weights, *kv; /* "f32", "bf16", "int8" (weights only) (kr_precision_parse) */
    char *model_option; /* "ID:KEY=VALUE" lines: one model's own setting (model_options.h) */
    /* network */
    char *host;
    int port;
    char *api_key_file;
    char *admin_key_file;
    int http_threads;
    int connection_timeout; /* seconds idle */
    int read_timeout;       /* seconds from a request line to the request's last byte */
    int max_connections, max_connections_per_ip;
    char *node_id; /* prefix of session ids; NULL until kd_config_load sets the host name */
    size_t max_body_bytes;
    size_t upload_budget; /* request bodies held at once, all connections */
    /* compute */
    int workers;         /* 0: one per online CPU */
    int compute_threads; /* the core's thread pool (0: one per online CPU) */
    int queue_size;      /* requests waiting for a worker or the scheduler */
    int step_tokens, max_batch_rows;
    int light_request_mflop, light_step_percent; /* fair steps (operations.md, Admission) */
    int light_sit_out_steps, light_sit_out_ms;   /* heavy jobs sit out beside a light one */
    int light_wait_percent, light_recent_ms;     /* short steps while light jobs come */
    int key_queue_percent; /* of queue-size: the waiting places one key or address may hold */
    size_t pool_bytes;
    size_t model_memory_bytes; /* weights all models may hold (0: no limit) */
    /* sessions */
    int max_sessions;
    int session_ttl;                  /* seconds */
    int session_min_idle;             /* seconds */
    int max_sessions_per_key;         /* per API key, or per client address without one */
    size_t session_memory_bytes;      /* sessions' memory outside the pool (0: no limit) */
    int session_pool_percent;         /* of pool-bytes that sessions' caches may hold */
    size_t max_session_bytes_per_key; /* one key's sessions, pool and outside (0: no limit) */
    /* durable sessions */
    char *state_dir;            /* NULL: sessions live in memory only */
    char *journal_fsync;        /* "always", "everysec" or "no" */
    size_t journal_rewrite_min; /* the journal is not rewritten below this size */
    /* request limits */
    int max_candles, max_horizon, max_samples;
    int max_request_cost; /* GFLOP */
    int request_timeout;  /* seconds */
    /* lifecycle */
    int shutdown_timeout; /* seconds */
    bool access_log;
    char *log_file;    /* NULL: stderr */
    char *config_file; /* the file read, if any */
} kd_config;

/* Fills *c from the defaults, the --config file (if given) and the flags of argv (argv[0]
 * is the command name). Returns 0 to run, 1 when --help was printed, -1 after a message in
 * err that names the key and where it came from. *c must be freed either way. */
int kd_config_load(kd_config *c, int argc, char **argv, char *err, size_t errlen);
void kd_config_free(kd_config *c);

/* Reads `key = value` lines from f into *c (path names f in messages): a `#` at the start
 * of a line or after whitespace starts a comment, and a value may be in double quotes.
 * 0, or -1 with a message naming the line. (kd_config_load reads --config with this.) */
int kd_config_parse_stream(kd_config *c, FILE *f, const char *path, char *err, size_t errlen);

/* Calls fn for every key whose value differs between a and b, with both values written
 * as in the file; returns how many differ. */
typedef void (*kd_config_change_fn)(void *ctx, const char *key, const char *was, const char *now);
int kd_config_diff(const kd_config *a, const kd_config *b, kd_config_change_fn fn, void *ctx);
/* dst's value of key becomes src's; -1 for an unknown key or out of memory. */
int kd_config_copy_key(kd_config *dst, const kd_config *src, const char *key);

/* The step scheduler's knobs as the core takes them (its callbacks unset): a light- key's 0
 * ("none", "never") is the core's -1, the core's 0 being its default. */
kr_sched_config kd_config_steps(const kd_config *c);

/* The flags with their defaults, for --help. */
void kd_config_usage(FILE *out);

/* For `--name=value` or `--name value` at argv[*i]: copies the name into name[n] and
 * returns the value (NULL if none), advancing *i past a separate value. */
const char *kd_flag_value(int argc, char **argv, int *i, char *name, size_t n);

#endif
