/* whole_file.h — reading a file or a stream whole into memory (requests, candle files,
 * checkpoints to copy). */
#ifndef KD_WHOLE_FILE_H
#define KD_WHOLE_FILE_H

#include <stddef.h>
#include <stdio.h>

/* The rest of f, NUL-terminated (len without it), or NULL (errno says why). f stays open. */
char *kd_read_stream(FILE *f, size_t *len);
/* The whole file at path, as kd_read_stream. */
char *kd_read_file(const char *path, size_t *len);

#endif
