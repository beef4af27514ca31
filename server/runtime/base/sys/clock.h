/* clock.h — the one monotonic clock of server/: deadlines, durations and idle times, never a
 * date (a wall clock may step). */
#ifndef KD_CLOCK_H
#define KD_CLOCK_H

/* Seconds since an arbitrary start, monotonic. */
double kd_now_s(void);
/* The same in milliseconds. */
double kd_now_ms(void);

#endif
