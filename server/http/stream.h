/* stream.h — an answer sent as it is written (text/event-stream): the thread that holds a
 * deferred request starts the stream, writes events as the work goes, and ends it.
 *
 * While nothing is waiting to be sent the connection is suspended (libmicrohttpd's way of
 * not polling a reader that has nothing), and each write resumes it. Once the stream has
 * started, the request belongs to the stream: its writer must not touch the kd_request
 * again, and learns that the client left from kd_stream_closed (the connection was closed
 * and its answer dropped). Thread-safe.
 */
#ifndef KD_STREAM_H
#define KD_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"

typedef struct kd_stream kd_stream;

/* Starts r's answer (r deferred: kd_request_suspend was called) with this status and
 * content type, and Cache-Control: no-cache; NULL when out of memory (r is then untouched,
 * still the caller's to answer). */
kd_stream *kd_reply_stream(kd_request *r, int status, const char *content_type);
/* Queues n bytes to send; -1 when out of memory or the stream is closed. */
int kd_stream_write(kd_stream *s, const char *data, size_t n);
/* Whether the client's connection is gone (nothing written will be read). */
bool kd_stream_closed(kd_stream *s);
/* The last call of the writer: what was written is sent, then the answer ends. */
void kd_stream_end(kd_stream *s);

/* An event of a text/event-stream: "event: <event>\ndata: <data>\n\n" (data: one line). */
int kd_stream_event(kd_stream *s, const char *event, const char *data);

#endif
