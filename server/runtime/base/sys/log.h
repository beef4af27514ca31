/* log.h — one line per event on stderr, where systemd's journal or a terminal picks it up. */
#ifndef KD_LOG_H
#define KD_LOG_H

/* "2024-06-18T11:15:00.123Z kronosd: <message>"; one write, so lines never interleave. */
void kd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
