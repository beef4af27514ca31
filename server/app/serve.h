/* serve.h — `kronosd serve`: the daemon's life from start-up to a clean exit. */
#ifndef KD_SERVE_H
#define KD_SERVE_H

/* argv[0] is "serve". Returns the process exit status. */
int kd_serve(int argc, char **argv);

#endif
