/* replies.c — the shared answers of replies.h. */
#include "replies.h"

#include "calib_online_json.h"

#include <stdio.h>
#include <string.h>

#include "forecast_json.h"
#include "log.h"

void kd_reply_core_error(kd_request *r, const char *what, const kr_error *e) {
    const kd_error_answer *a = kd_error_answer_of((int)e->code);
    char msg[KR_ERR_MAX + 256];
    kd_reply_error(r, a->status, a->code, "%s", kd_error_message(a, what, e->msg, msg, sizeof msg));
}

void kd_reply_session_error(kd_request *r, kd_session_status st, const char *msg) {
    static const struct {
        int status;
        const char *code;
    } map[] = {
        [KD_SESSION_NOT_FOUND] = {404, "session_not_found"},
        [KD_SESSION_BUSY] = {409, "session_busy"},
        [KD_SESSION_FULL] = {429, "too_many_sessions"},
        [KD_SESSION_OWNER_LIMIT] = {429, "session_limit"},
        [KD_SESSION_BYTES_LIMIT] = {429, "session_bytes_limit"},
        [KD_SESSION_NO_ROOM] = {503, "no_room"},
        [KD_SESSION_NOT_KEPT] = {500, "journal_failed"},
        [KD_SESSION_ERROR] = {500, "internal"},
    };
    kd_reply_error(r, map[st].status, map[st].code, "%s", msg);
}

bool kd_path_session(const char *path, char *id, size_t n) {
    static const char prefix[] = "/sessions/", suffix[] = "/generate";
    const size_t len = strlen(path), pre = sizeof prefix - 1, suf = sizeof suffix - 1;
    if (len <= pre + suf || strncmp(path, prefix, pre) != 0 ||
        strcmp(path + len - suf, suffix) != 0)
        return false;
    const size_t id_len = len - pre - suf;
    if (memchr(path + pre, '/', id_len)) return false; /* one path segment */
    snprintf(id, n, "%.*s", (int)id_len, path + pre);
    return true;
}

void kd_path_session_id(const char *path, char *id, size_t n) {
    const char *p = path + strlen("/sessions/");
    size_t len = strcspn(p, "/");
    if (len >= n) len = n - 1;
    memcpy(id, p, len);
    id[len] = '\0';
}

json_t *kd_session_timestamp_json(const kd_session_extra *e) {
    return e->last_timestamp_text[0] ? json_string(e->last_timestamp_text)
                                     : json_integer((json_int_t)e->last_timestamp);
}

int kd_session_extra_json(json_t *o, const kd_session_info *info) {
    const kd_session_extra *e = &info->extra;
    if (e->calibrated &&
        json_object_set_new(o, "calibration",
                            kd_calib_online_json(&e->calib, e->calib_from_object)) < 0)
        return -1;
    return json_object_set_new(o, "normalization", kd_normalization_json(e->mean, e->std)) < 0 ||
                   json_object_set_new(o, "last_timestamp", kd_session_timestamp_json(e)) < 0
               ? -1
               : 0;
}

void kd_reply_journal_failed(kd_request *r, const char *outcome, const char *why) {
    kd_log("%s", why);
    kd_reply_error(r, 500, "journal_failed", "%s: %s", outcome, why);
}
