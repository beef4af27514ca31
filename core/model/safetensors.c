/* safetensors.c — maps a .safetensors file and checks its header before anyone reads it.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then data.
 */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t dtype_size(const char *name, st_dtype *out) {
    static const struct {
        const char *name;
        st_dtype dtype;
        size_t size;
    } table[] = {
        {"F32", ST_F32, 4},    {"F16", ST_F16, 2},       {"BF16", ST_BF16, 2},
        {"F64", ST_OTHER, 8},  {"I64", ST_OTHER, 8},     {"I32", ST_OTHER, 4},
        {"I16", ST_OTHER, 2},  {"I8", ST_OTHER, 1},      {"U8", ST_OTHER, 1},
        {"BOOL", ST_OTHER, 1}, {"U16", ST_OTHER, 2},     {"U32", ST_OTHER, 4},
        {"U64", ST_OTHER, 8},  {"F8_E4M3", ST_OTHER, 1}, {"F8_E5M2", ST_OTHER, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            *out = table[i].dtype;
            return table[i].size;
        }
    return 0;
}

static int parse_tensor(st_file *f, const char *name, json_t *entry, st_tensor *t, kr_error *err) {
    if (!json_is_object(entry))
        return kr_fail(err, "%s: header entry '%s' is not an object", f->path, name);
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offs = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2)
        return kr_fail(err, "%s: tensor '%s': header entry needs dtype, shape and data_offsets",
                       f->path, name);
    size_t esize = dtype_size(json_string_value(dtype), &t->dtype);
    if (esize == 0)
        return kr_fail(err, "%s: tensor '%s': unknown dtype '%s'", f->path, name,
                       json_string_value(dtype));
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", json_string_value(dtype));
    if (json_array_size(shape) > ST_MAX_DIMS)
        return kr_fail(err, "%s: tensor '%s': %zu dimensions is too many", f->path, name,
                       json_array_size(shape));
    t->ndim = (int)json_array_size(shape);
    size_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return kr_fail(err, "%s: tensor '%s': shape[%d] is not a non-negative integer", f->path,
                           name, i);
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] != 0 && numel > SIZE_MAX / 16 / (size_t)t->shape[i])
            return kr_fail(err, "%s: tensor '%s': shape is too large", f->path, name);
        numel *= (size_t)t->shape[i];
    }
    t->numel = numel;
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return kr_fail(err, "%s: tensor '%s': data_offsets are not an increasing pair", f->path,
                       name);
    t->begin = (size_t)json_integer_value(b);
    t->end = (size_t)json_integer_value(e);
    if (t->end > f->data_size)
        return kr_fail(err,
                       "%s: tensor '%s': data_offsets [%zu, %zu] run past the end of the data "
                       "(%zu bytes): truncated file or a header that lies",
                       f->path, name, t->begin, t->end, f->data_size);
    if (t->end - t->begin != numel * esize)
        return kr_fail(err,
                       "%s: tensor '%s': data_offsets span %zu bytes, but %s of that shape "
                       "needs %zu",
                       f->path, name, t->end - t->begin, t->dtype_name, numel * esize);
    t->name = strdup(name);
    if (!t->name)
        return kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory reading the header", f->path);
    return 0;
}

static int parse_header(st_file *f, const char *text, size_t len, kr_error *err) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    if (!root)
        return kr_fail(err, "%s: header is not valid JSON: %s (at byte %d)", f->path, jerr.text,
                       jerr.position);
    int rc = -1;
    if (!json_is_object(root)) {
        kr_fail(err, "%s: header is not a JSON object", f->path);
        goto out;
    }
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    if (!f->tensors) {
        kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory reading the header", f->path);
        goto out;
    }
    const char *name;
    json_t *entry;
    json_object_foreach(root, name, entry) {
        if (strcmp(name, "__metadata__") == 0) continue;
        if (parse_tensor(f, name, entry, &f->tensors[f->n_tensors], err) != 0) goto out;
        f->n_tensors++;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int st_open(st_file *f, const char *path, kr_error *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kr_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return kr_fail(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return kr_fail(err, "%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return kr_fail(err, "%s: %lld bytes is too short for a safetensors file", path,
                       (long long)st.st_size);
    }
    f->map_size = (size_t)st.st_size;
    f->map = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        return kr_fail(err, "%s: cannot map: %s", path, strerror(e));
    }
    if (st_parse(f, f->map, f->map_size, path, err) != 0) {
        st_close(f);
        return -1;
    }
    return 0;
}

int st_parse(st_file *f, const void *buf, size_t size, const char *name, kr_error *err) {
    if (name != f->path) snprintf(f->path, sizeof f->path, "%s", name);
    if (size < 8)
        return kr_fail(err, "%s: %zu bytes is too short for a safetensors file", f->path, size);
    const unsigned char *p = buf;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | p[i];
    if (hlen > size - 8)
        return kr_fail(err,
                       "%s: header length %llu exceeds the file size %zu: truncated or not a "
                       "safetensors file",
                       f->path, (unsigned long long)hlen, size);
    f->data = p + 8 + hlen;
    f->data_size = size - 8 - (size_t)hlen;
    return parse_header(f, (const char *)p + 8, (size_t)hlen, err);
}

void st_close(st_file *f) {
    if (f->tensors)
        for (int i = 0; i < f->n_tensors; i++)
            free(f->tensors[i].name);
    free(f->tensors);
    if (f->map) munmap(f->map, f->map_size);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

int st_read_f32(const st_file *f, const st_tensor *t, float *dst, kr_error *err) {
    const unsigned char *src = f->data + t->begin;
    switch (t->dtype) {
    case ST_F32:
        memcpy(dst, src, t->numel * 4); /* little-endian host assumed, as everywhere we run */
        break;
    case ST_F16:
        for (size_t i = 0; i < t->numel; i++) {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
            dst[i] = half_to_float(h);
        }
        break;
    case ST_BF16:
        for (size_t i = 0; i < t->numel; i++) {
            uint32_t bits = (uint32_t)(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            memcpy(&dst[i], &bits, 4);
        }
        break;
    default:
        return kr_fail(err, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", f->path,
                       t->name, t->dtype_name);
    }
    return 0;
}
