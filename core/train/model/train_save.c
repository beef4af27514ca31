/* train_save.c — a trained predictor written in the released layout: DIR/config.json (the
 * one it was loaded with) and DIR/model.safetensors (every tensor it was loaded with, by
 * name, float ones as float32, integer buffers as they were, the header padded to 8 bytes),
 * which upstream's from_pretrained and kronosd's loader both read. */
#include "train_model.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int by_name(const void *a, const void *b) {
    return strcmp((*(const tr_tensor *const *)a)->name, (*(const tr_tensor *const *)b)->name);
}

static char *header(const tr_tensor *const *v, int n) {
    json_t *root = json_object();
    size_t off = 0;
    for (int i = 0; root && i < n; i++) {
        json_t *shape = json_array();
        for (int k = 0; k < v[i]->ndim && k < ST_DIMS; k++)
            json_array_append_new(shape, json_integer(v[i]->shape[k]));
        size_t end = off + (v[i]->raw ? v[i]->raw_bytes : v[i]->n * sizeof(float));
        json_object_set_new(root, v[i]->name,
                            json_pack("{s:s, s:o, s:[I,I]}", "dtype", v[i]->dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off, (json_int_t)end));
        off = end;
    }
    json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "pt"));
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return s;
}

static int write_tensors(const kr_train_model *m, const char *path, kr_error *err) {
    const tr_tensor **v = malloc((size_t)m->n * sizeof *v);
    if (!v) return kr_fail_code(err, KR_E_NO_MEMORY, "%s: out of memory", path);
    for (int i = 0; i < m->n; i++)
        v[i] = &m->t[i];
    qsort(v, (size_t)m->n, sizeof *v, by_name);
    char *hdr = header(v, m->n);
    FILE *f = hdr ? fopen(path, "wb") : NULL;
    int rc = -1;
    if (!f) {
        kr_fail(err, "%s: cannot write it (%s)", path, hdr ? strerror(errno) : "out of memory");
        goto out;
    }
    size_t len = strlen(hdr), padded = (len + 7) / 8 * 8;
    unsigned char le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (unsigned char)(padded >> (8 * i));
    bool ok = fwrite(le, 1, 8, f) == 8 && fwrite(hdr, 1, len, f) == len;
    for (size_t i = len; ok && i < padded; i++)
        ok = fputc(' ', f) != EOF;
    for (int i = 0; ok && i < m->n; i++) /* float32 little-endian, as the host stores it */
        ok = v[i]->raw ? fwrite(v[i]->raw, 1, v[i]->raw_bytes, f) == v[i]->raw_bytes
                       : fwrite(v[i]->w, sizeof(float), v[i]->n, f) == v[i]->n;
    if (fclose(f) != 0) ok = false;
    rc = ok ? 0 : kr_fail(err, "%s: write failed (%s)", path, strerror(errno));
out:
    free(hdr);
    free(v);
    return rc;
}

int kr_train_save(const kr_train_model *m, const char *dir, kr_error *err) {
    char path[1100];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return kr_fail(err, "%s: cannot create the folder (%s)", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (json_dump_file(m->config, path, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15)))
        return kr_fail(err, "%s: cannot write it (%s)", path, strerror(errno));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    return write_tensors(m, path, err);
}
