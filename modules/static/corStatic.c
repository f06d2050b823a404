/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modules/static: files from folders. Each root of the YAML is a handler
 * that routes name:
 *
 *     modules:
 *       - load: static
 *         open_file_cache: 1000          (entries; 0: none)
 *         open_file_cache_valid: 1s      (then opened by its path again)
 *         types: { ".wasm": application/wasm }
 *         roots:
 *           - name: site
 *             root: /srv/www             (relative: to the config's folder)
 *             index: index.html          ("": no index)
 *             symlinks: beneath          (beneath | follow)
 *             fallback: /index.html      (for a path that names nothing)
 *             expires: 1h                (Cache-Control: max-age=3600)
 *             dotfiles: deny             (deny | allow)
 *             autoindex: false           (list a folder without index)
 *             precompressed: off         (NAME.zst, .br, .gz for NAME)
 *     routes:
 *       - { match: "GET /s/...", handler: site, strip_prefix: /s }
 *
 * What a request gets is corStaticServe's (corStaticServe.c); docs/
 * configuration.md and docs/modules.md say it for users. The handler is a
 * coroutine: a multipart answer's writes wait for the client (a worker
 * where coroutines are off, the same source). Opening a file and reading
 * it are the disk's, done on the thread that serves, as nginx does
 * without its thread pools; the open-file cache spares the walk.
 */
#include "corStaticInt.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The roots; the core's (corModuleRecordsRead), from init to exit. */
static StaticRoot* roots;
static unsigned rootCount;

/* The handler of every root: the one r was routed to serves it. */
static void
serve(CorRequest* r)
{
    corStaticServe(r, corRequestHandlerArg(r));
}

/* ---- Configuration ------------------------------------------------------- */

/* path made absolute: a relative one is taken from the folder of the
 * file that says it, as the core takes pid_file. NULL without memory. */
static char*
pathAbsolute(const char* path, const CorConf* at)
{
    const char* file = corConfFile(at);
    const char* slash = file != NULL ? strrchr(file, '/') : NULL;
    char cwd[PATH_MAX];
    char* out;

    if (path[0] == '/') {
        return strdup(path);
    }
    if (slash != NULL && file[0] == '/') {
        return asprintf(&out, "%.*s/%s", (int)(slash - file), file, path) < 0
                   ? NULL
                   : out;
    }
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        return NULL;
    }
    if (slash != NULL) {
        return asprintf(&out, "%s/%.*s/%s", cwd, (int)(slash - file), file,
                        path)
                       < 0
                   ? NULL
                   : out;
    }
    return asprintf(&out, "%s/%s", cwd, path) < 0 ? NULL : out;
}

/* The folder of a root: present, and a folder now (a typo is an error at
 * its line, not a 404 at every request). */
static int
folderRead(CorModule* m, const CorConf* entry, StaticRoot* root)
{
    const char* path = corConfString(entry, "root", NULL, corModuleErrors(m));
    struct stat st;

    if (path == NULL || path[0] == '\0') {
        corModuleError(m, entry,
                       "roots: a root (the folder to serve) is "
                       "needed");
        return -1;
    }
    root->path = pathAbsolute(path, corConfGet(entry, "root"));
    if (root->path == NULL) {
        corModuleError(m, entry, "no memory");
        return -1;
    }
    if (stat(root->path, &st) != 0) {
        corModuleError(m, corConfGet(entry, "root"), "root: '%s': %s",
                       root->path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        corModuleError(m, corConfGet(entry, "root"),
                       "root: '%s' is not a "
                       "folder",
                       root->path);
        return -1;
    }
    return 0;
}

/* index and symlinks of a root. */
static int
choicesRead(CorModule* m, const CorConf* entry, StaticRoot* root)
{
    CorConfErrors* e = corModuleErrors(m);
    const char* index = corConfString(entry, "index", "index.html", e);
    const char* links = corConfString(entry, "symlinks", "beneath", e);
    int rc = 0;

    if (strchr(index, '/') != NULL || strcmp(index, ".") == 0
        || strcmp(index, "..") == 0) {
        corModuleError(m, corConfGet(entry, "index"),
                       "index: a file name "
                       "(no '/'), or \"\" for none, got '%s'",
                       index);
        rc = -1;
    } else if (index[0] != '\0' && (root->index = strdup(index)) == NULL) {
        rc = -1;
    }
    if (strcmp(links, "follow") == 0 || strcmp(links, "beneath") == 0) {
        root->follow = links[0] == 'f';
    } else {
        corModuleError(m, corConfGet(entry, "symlinks"),
                       "symlinks: expected "
                       "beneath (those that stay under the root) or follow "
                       "(any), got '%s'",
                       links);
        rc = -1;
    }
    return rc;
}

/* fallback, expires, dotfiles, autoindex and precompressed of a root. */
static int
servingRead(CorModule* m, const CorConf* entry, StaticRoot* root)
{
    CorConfErrors* e = corModuleErrors(m);
    const char* fallback = corConfString(entry, "fallback", NULL, e);
    const char* dotfiles = corConfString(entry, "dotfiles", "deny", e);
    uint64_t expiresMs = corConfDurationMs(entry, "expires", 0, 0,
                                           10ull * 365 * 86400 * 1000, e);
    int rc = 0;

    if (fallback != NULL
        && (fallback[0] != '/' || fallback[1] == '\0'
            || strstr(fallback, "/.") != NULL)) {
        corModuleError(m, corConfGet(entry, "fallback"),
                       "fallback: a file "
                       "under the root, such as /index.html, got '%s'",
                       fallback);
        rc = -1;
    } else if (fallback != NULL
               && (root->fallback = strdup(fallback + 1)) == NULL) {
        rc = -1;
    }
    if (expiresMs > 0
        && asprintf(&root->cacheControl, "max-age=%llu",
                    (unsigned long long)(expiresMs / 1000))
               < 0) {
        root->cacheControl = NULL;
        rc = -1;
    }
    if (strcmp(dotfiles, "allow") != 0 && strcmp(dotfiles, "deny") != 0) {
        corModuleError(m, corConfGet(entry, "dotfiles"),
                       "dotfiles: expected "
                       "deny (a name starting with '.' is 404) or allow, got "
                       "'%s'",
                       dotfiles);
        rc = -1;
    }
    root->dotfiles = strcmp(dotfiles, "allow") == 0;
    root->autoindex = corConfBool(entry, "autoindex", false, e);
    root->precompressed = corConfBool(entry, "precompressed", false, e);
    return rc;
}

/* One root of the list, registered as a handler; every part is read
 * whatever an earlier one said, so cor -t reports each mistake at once. */
static int
rootRead(CorModule* m, const CorConf* entry, void* record, unsigned index)
{
    static const char* const keys[] = {
        "name",    "root",     "index",     "symlinks",      "fallback",
        "expires", "dotfiles", "autoindex", "precompressed", NULL
    };
    CorConfErrors* e = corModuleErrors(m);
    const char* name = corConfString(entry, "name", NULL, e);
    StaticRoot* root = record;
    unsigned before = e->count;
    char where[32];
    int rc = 0;

    root->id = index;
    if (name == NULL || name[0] == '\0') {
        corModuleError(m, entry,
                       "roots[%u]: a name (the handler routes "
                       "name) is needed",
                       index);
        rc = -1;
    } else if ((root->name = strdup(name)) == NULL) {
        rc = -1;
    }
    rc |= folderRead(m, entry, root);
    rc |= choicesRead(m, entry, root);
    rc |= servingRead(m, entry, root);
    snprintf(where, sizeof(where), "roots[%u]", index);
    corConfUnknownKeys(entry, where, keys, e);
    if (rc != 0 || e->count != before) {
        return -1;
    }
    return corHandlerAdd(m, &(CorHandler){ .name = root->name,
                                           .serve = serve,
                                           .run = COR_RUN_COROUTINE,
                                           .arg = root });
}

/* types: { ".ext": type/subtype }. */
static int
typesRead(CorModule* m, const CorConf* conf)
{
    const CorConf* map = corConfMap(conf, "types", corModuleErrors(m));
    int rc = 0;

    for (size_t i = 0; i < corConfCount(map); i++) {
        const char* ext = corConfKeyAt(map, i);
        const char* type = corConfText(corConfAt(map, i));

        if (ext[0] != '.' || ext[1] == '\0' || strchr(ext, '/') != NULL) {
            corModuleError(m, corConfAt(map, i),
                           "types: an extension with "
                           "its dot, such as \".wasm\", got '%s'",
                           ext);
            rc = -1;
        } else if (type == NULL || strchr(type, '/') == NULL
                   || strpbrk(type, "\r\n") != NULL) {
            corModuleError(m, corConfAt(map, i),
                           "types: '%s': a media "
                           "type, such as application/wasm",
                           ext);
            rc = -1;
        } else if (corStaticMimeAdd(ext, type) != 0) {
            rc = -1;
        }
    }
    return rc;
}

static void
rootFree(void* record)
{
    StaticRoot* root = record;

    free(root->name);
    free(root->path);
    free(root->index);
    free(root->fallback);
    free(root->cacheControl);
}

/* The roots are freed after it (the core's, corModuleRecordsRead). */
static void
staticExit(CorModule* m)
{
    (void)m;
    corStaticCacheFree();
    corStaticMimeFree();
}

static int
staticInit(CorModule* m, const CorConf* conf)
{
    CorConfErrors* e = corModuleErrors(m);
    int rc = 0;

    corStaticSettings.cacheEntries = (unsigned)corConfInt(conf,
                                                          "open_file_cache",
                                                          1000, 0, 1000000, e);
    corStaticSettings.cacheValidMs = corConfDurationMs(conf,
                                                       "open_file_cache_valid",
                                                       1000, 0, 3600000, e);
    rc |= typesRead(m, conf);
    if (corStaticMimeSystemLoad("/etc/mime.types") != 0) {
        corLog(COR_LOG_WARN, "static: /etc/mime.types cannot be read: the "
                             "built-in media types only");
    }
    if (corStaticCacheInit() != 0) {
        corModuleError(m, conf, "no memory");
        return -1;
    }
    roots = corModuleRecordsRead(m, conf, "roots", "name, root...",
                                 sizeof(StaticRoot), rootRead, rootFree,
                                 &rootCount);
    return roots == NULL ? -1 : rc;
}

COR_MODULE(static, .init = staticInit, .exit = staticExit);
