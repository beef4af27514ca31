/* finetune_store.c — the checkpoints of earlier fine-tuning runs under the jobs' folder
 * (finetune_store.h): loaded again as models at start, their jobs listed from finetune.json,
 * and what an unfinished run left behind removed. */
#include "finetune_store.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void kd_ft_remove_tree(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) == 0) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static bool has(const char *dir, const char *name, bool want_dir) {
    char path[1400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* one run's folder: registered as a model of its name, its job listed */
static void restore_one(kd_app *app, const char *dir, const char *name, kd_ft_found found,
                        void *ctx) {
    char msg[768], path[1400];
    const kd_model *md = NULL;
    kd_model_add_result rc =
        kd_models_add(&app->models, &app->cfg, name, dir, NULL, &md, msg, sizeof msg);
    if (rc == KD_MODEL_ADD_OK) {
        kd_log("finetune: model %s loaded from %s: hash %s", md->id, dir, md->hash);
        kd_models_release(&app->models, md); /* the registry keeps it listed */
    }
    if (rc != KD_MODEL_ADD_OK && rc != KD_MODEL_ADD_EXISTS) {
        kd_log("finetune: %s not loaded: %s", dir, msg);
        return;
    }
    snprintf(path, sizeof path, "%s/finetune.json", dir);
    json_error_t je;
    json_t *rep = json_load_file(path, 0, &je);
    const char *job = json_string_value(json_object_get(rep, "job"));
    if (job)
        found(ctx, job, name, rep);
    else
        json_decref(rep); /* a run of kronosd finetune put here: a model, no job */
}

void kd_ft_restore(kd_app *app, const char *root, kd_ft_found found, void *ctx) {
    struct dirent **names;
    int n = scandir(root, &names, NULL, by_name);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        size_t len = strlen(name);
        char dir[1300];
        snprintf(dir, sizeof dir, "%s/%s", root, name);
        if (name[0] == '.' && len > 9 && !strcmp(name + len - 8, ".partial"))
            kd_ft_remove_tree(dir); /* a run the daemon's end cut short */
        else if (name[0] != '.' && has(dir, "tokenizer", true) && has(dir, "predictor", true) &&
                 has(dir, "finetune.json", false))
            restore_one(app, dir, name, found, ctx);
        free(names[i]);
    }
    if (n >= 0) free(names);
}
