/* notify.h — the systemd readiness protocol (sd_notify), without libsystemd.
 *
 * When systemd starts a Type=notify service it sets NOTIFY_SOCKET to a unix datagram socket
 * (a path, or an abstract name written with a leading '@'); the service sends
 * newline-separated VAR=VALUE lines there: READY=1, STOPPING=1, STATUS=... */
#ifndef KD_NOTIFY_H
#define KD_NOTIFY_H

/* Sends `state` to $NOTIFY_SOCKET. 0 when sent or when there is no socket to send to; -1
 * when the send failed (errno set), which a service should log but survive. */
int kd_notify(const char *state);

#endif
