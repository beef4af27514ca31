/* framing.c — a request's framing headers (framing.h): the checks that keep two parties
 * from reading where a body ends differently (request smuggling through a proxy). */
#include "framing.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the headers say about the body's framing. */
typedef struct {
    int content_length, transfer_encoding; /* how many of each */
    bool length_ok;                        /* every Content-Length is plain digits */
    const char *coding;                    /* the (last) Transfer-Encoding */
    const char *bad_name;                  /* the first field name that is not a token */
    const char *folded;                    /* the first field continued by an obs-fold */
} framing;

/* libmicrohttpd 0.9.75 takes an obs-fold (a header line that starts with whitespace) as
 * more of the previous field's *name*: "Content-Length: 0\r\n 56" arrives as the name
 * "Content-Length56" with the value "0", moved out of the line it was read in. An
 * unfolded field's name and value stay where they were read, "name\0<OWS>value" in one
 * buffer; a field whose value is not right after its name (and its colon and spaces) was
 * folded. RFC 9112 §5.2: a server must refuse obs-fold or replace it by a space, and
 * libmicrohttpd has done neither. (e2e-edge checks the folds; an MHD that laid headers out
 * otherwise would refuse every request there, not pass folds.) */
static bool was_folded(const char *key, size_t key_size, const char *value) {
    if (!value || value < key + key_size + 1 || value > key + key_size + 1 + 8192) return true;
    if (key[key_size] != '\0') return true;
    for (const char *p = key + key_size + 1; p < value; p++)
        if (*p != ' ' && *p != '\t') return true;
    return false;
}

/* A field name is a token (RFC 9110 §5.1): libmicrohttpd passes on "Content-Length : 5"
 * as the name "Content-Length " rather than refusing it, and a proxy may read it as the
 * length (RFC 9112 §5.1: 400). */
static bool is_token(const char *s) {
    static const char punct[] = "!#$%&'*+-.^_`|~";
    if (!*s) return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              strchr(punct, *s)))
            return false;
    return true;
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size) {
    framing *f = cls;
    (void)kind;
    (void)value_size;
    if (!f->bad_name && !is_token(key)) f->bad_name = key;
    if (!f->folded && was_folded(key, key_size, value)) f->folded = key;
    if (strcasecmp(key, "Content-Length") == 0) {
        f->content_length++;
        if (!value || !*value || strspn(value, "0123456789") != strlen(value)) f->length_ok = false;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        f->transfer_encoding++;
        f->coding = value ? value : "";
    }
    return MHD_YES;
}

int kd_framing_check(struct MHD_Connection *conn, const char **code, char *msg, size_t n) {
    framing f = {.length_ok = true};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, count_framing, &f);
    *code = "bad_framing";
    if (f.folded)
        snprintf(msg, n,
                 "a header line starts with whitespace, continuing the field before it "
                 "(obs-fold, RFC 9112 5.2); send each field on one line");
    else if (f.bad_name)
        snprintf(msg, n,
                 "header field name \"%.64s\" is not a token (whitespace before the colon?)",
                 f.bad_name);
    else if (f.content_length > 1)
        snprintf(msg, n, "Content-Length given %d times; send it once (or use chunked encoding)",
                 f.content_length);
    else if (f.content_length == 1 && !f.length_ok)
        snprintf(msg, n, "Content-Length is not a plain decimal number");
    else if (f.content_length && f.transfer_encoding)
        snprintf(msg, n, "Content-Length and Transfer-Encoding together; send one of them");
    else if (f.transfer_encoding > 1)
        snprintf(msg, n, "Transfer-Encoding given %d times; send it once", f.transfer_encoding);
    else if (f.transfer_encoding && strcasecmp(f.coding, "chunked") != 0) {
        *code = "unsupported_transfer_coding";
        snprintf(msg, n, "Transfer-Encoding: only chunked is supported");
        return 501;
    } else
        return 0;
    return 400;
}
