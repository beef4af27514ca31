/* safetensors.h — a read-only view of one .safetensors file (mapped, header parsed). */
#ifndef KR_SAFETENSORS_H
#define KR_SAFETENSORS_H

#include "kronos.h"

#define ST_MAX_DIMS 8

typedef enum { ST_F32, ST_F16, ST_BF16, ST_OTHER } st_dtype;

typedef struct {
    char *name;
    char dtype_name[16];
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    size_t begin, end; /* byte offsets into the data section */
} st_tensor;

typedef struct {
    char path[1024];
    void *map;
    size_t map_size;
    const unsigned char *data; /* the data section, after the header */
    size_t data_size;
    st_tensor *tensors;
    int n_tensors;
} st_file;

/* Maps `path` and validates its header: every offset within the file, every size
 * consistent with dtype and shape. */
int st_open(st_file *f, const char *path, kr_error *err);
/* Validates the header of a whole file already in memory, buf[size] (which must outlive f;
 * st_open maps and calls this; the fuzzer calls it directly). name is for messages. */
int st_parse(st_file *f, const void *buf, size_t size, const char *name, kr_error *err);
void st_close(st_file *f);
const st_tensor *st_find(const st_file *f, const char *name);
/* Converts a float tensor (F32, F16 or BF16) into dst[numel]. */
int st_read_f32(const st_file *f, const st_tensor *t, float *dst, kr_error *err);

#endif
