/* stream.c — answers sent as they are written (stream.h), on a libmicrohttpd response
 * whose reader suspends the connection while the buffer is empty. */
#include "stream.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct kd_stream {
    pthread_mutex_t mu;
    struct MHD_Connection *conn;
    char *buf;
    size_t len, cap, off; /* bytes [off, len) wait to be sent */
    bool ended;           /* the writer is done */
    bool suspended;       /* the reader found nothing and suspended the connection */
    bool closed;          /* MHD dropped the answer (the connection is gone) */
    int refs;             /* the writer's and the response's */
};

static void release(kd_stream *s) {
    pthread_mutex_lock(&s->mu);
    const int refs = --s->refs;
    pthread_mutex_unlock(&s->mu);
    if (refs) return;
    pthread_mutex_destroy(&s->mu);
    free(s->buf);
    free(s);
}

/* Called with s->mu held: a suspended connection goes on (it has something to send). */
static void wake(kd_stream *s) {
    if (!s->suspended) return;
    s->suspended = false;
    MHD_resume_connection(s->conn);
}

/* MHD's reader: what is buffered, the end, or nothing now (and then the connection is
 * suspended until a write or the end resumes it, so that MHD does not poll the reader). */
static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max) {
    kd_stream *s = cls;
    (void)pos;
    pthread_mutex_lock(&s->mu);
    ssize_t n;
    if (s->off < s->len) {
        const size_t k = s->len - s->off < max ? s->len - s->off : max;
        memcpy(out, s->buf + s->off, k);
        s->off += k;
        if (s->off == s->len) s->off = s->len = 0;
        n = (ssize_t)k;
    } else if (s->ended) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        s->suspended = true;
        MHD_suspend_connection(s->conn);
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* The response is destroyed: sent in full, or its connection closed. */
static void dropped(void *cls) {
    kd_stream *s = cls;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    s->suspended = false;
    pthread_mutex_unlock(&s->mu);
    release(s);
}

kd_stream *kd_reply_stream(kd_request *r, int status, const char *content_type) {
    kd_stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->conn = kd_request_connection(r);
    s->refs = 2;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader, s, dropped);
    if (!resp) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    MHD_add_response_header(resp, "Content-Type", content_type);
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    kd_reply_response(r, status, resp); /* resumes r: MHD now sends it */
    return s;
}

int kd_stream_write(kd_stream *s, const char *data, size_t n) {
    pthread_mutex_lock(&s->mu);
    int rc = s->closed ? -1 : 0;
    if (rc == 0 && s->len + n > s->cap) {
        const size_t cap = (s->len + n) * 2;
        char *b = realloc(s->buf, cap);
        if (b) {
            s->buf = b;
            s->cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0) {
        memcpy(s->buf + s->len, data, n);
        s->len += n;
        wake(s);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int kd_stream_event(kd_stream *s, const char *event, const char *data) {
    const size_t ne = strlen(event), nd = strlen(data);
    char *text = malloc(ne + nd + 16);
    if (!text) return -1;
    memcpy(text, "event: ", 7);
    memcpy(text + 7, event, ne);
    memcpy(text + 7 + ne, "\ndata: ", 7);
    memcpy(text + 14 + ne, data, nd);
    memcpy(text + 14 + ne + nd, "\n\n", 2);
    const int rc = kd_stream_write(s, text, ne + nd + 16);
    free(text);
    return rc;
}

bool kd_stream_closed(kd_stream *s) {
    pthread_mutex_lock(&s->mu);
    const bool closed = s->closed;
    pthread_mutex_unlock(&s->mu);
    return closed;
}

void kd_stream_end(kd_stream *s) {
    pthread_mutex_lock(&s->mu);
    s->ended = true;
    wake(s);
    pthread_mutex_unlock(&s->mu);
    release(s);
}
