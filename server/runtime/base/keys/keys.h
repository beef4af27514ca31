/* keys.h — a key file (api-key-file, admin-key-file): named bearer keys, and which one a
 * request's token is.
 *
 * The file holds one `NAME:KEY` a line; blank lines and lines starting with '#' are
 * skipped, whitespace around a line, a name and a key is dropped. A file of one line
 * without a ':' (a bare key file) is a single key of the name "default". A
 * name is 1 to KD_KEY_NAME_MAX of [A-Za-z0-9_.-]; a key is 1 to KD_KEY_MAX bytes, none a
 * control character. Refused, with the line's number: a line without a name or a key, a
 * bad name, a key too long (never cut), a name or a key given twice, more than
 * KD_KEYS_MAX keys; and a file that is empty, a directory, or only comments.
 *
 * Each key has an owner, the name the per-client limits and the session table know it by:
 * "key NAME", or for a bare key file's key "key " and a 64-bit digest of the key (the
 * journal keeps owners: a bare key's sessions stay its own as long as the key is the same).
 */
#ifndef KD_KEYS_H
#define KD_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KD_KEY_NAME_MAX  48   /* bytes of a key's name */
#define KD_KEY_MAX       4096 /* bytes of a key */
#define KD_KEYS_MAX      1024 /* keys in one file */
#define KD_KEY_OWNER_MAX 64   /* bytes of a key's owner, "key NAME" */

typedef struct {
    char name[KD_KEY_NAME_MAX + 1];
    char owner[KD_KEY_OWNER_MAX + 1];
    char *secret; /* NUL-terminated */
    size_t len;
    int line;
    int slot; /* the caller's (metrics); -1 until set */
} kd_key;

typedef struct {
    int n;
    bool bare; /* a bare key file: one key, no name given */
    kd_key *keys;
} kd_keys;

/* The keys of the file at path; NULL after a message in err naming `what` (the config key,
 * "api-key-file"), the path and the line. */
kd_keys *kd_keys_read(const char *what, const char *path, char *err, size_t errlen);
/* The keys of text[0..len) (a file's content); the same rules, `where` in the messages. */
kd_keys *kd_keys_parse(const char *text, size_t len, const char *where, char *err, size_t errlen);
void kd_keys_free(kd_keys *k);

/* The key that token[0..len) is, or NULL. Every key is compared whole, in a time that does
 * not depend on how much of any key matched. */
const kd_key *kd_keys_match(const kd_keys *k, const char *token, size_t len);
/* The key named name, or NULL. */
const kd_key *kd_keys_find(const kd_keys *k, const char *name);

#endif
