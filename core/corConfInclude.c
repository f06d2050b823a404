/* SPDX-License-Identifier: Apache-2.0 */
/*
 * include: a configuration in several files (nginx's include, Caddy's
 * import), so that a site, a team or a package drops its routes into
 * conf.d/ without editing the main file. The files a top-level include
 * names (globs beside the file that names them) are read as trees of
 * their own, and the entries of their lists (listen, modules, routes:
 * what the caller names) are moved onto the end of the main tree's lists,
 * in the order read; the schema then reads one tree as if it were one
 * file. Every moved node keeps its file's name and its own line and
 * column, so an error about it, the core's or a module's, names the
 * included file. The included trees are chained behind the main one
 * (their nodes' file names live in them) and freed with it.
 *
 * Any other key of an included file is an error: what the main file
 * says once (limits, log, runtime) would otherwise be said twice, with
 * no order in which one overrides the other that a reader could see.
 */
#include "corConfInt.h"
#include "corConfig.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One include pass, from the main tree down through the files that
 * include others. reading holds the files open now, outermost first,
 * which is what a cycle is found in. */
typedef struct {
    CorConf* root;
    CorConf* last; /* the end of root's chain of files */
    const char* const* lists;
    CorConfErrors* e;
    struct {
        dev_t dev;
        ino_t ino;
        const char* name;
    } reading[COR_CONF_INCLUDE_DEPTH + 1];
    unsigned depth;
    bool whole;
} Includer;

static void includeAll(Includer* in, const CorConf* file);

static bool
isList(const Includer* in, const char* key)
{
    for (size_t i = 0; in->lists[i] != NULL; i++) {
        if (strcmp(in->lists[i], key) == 0) {
            return true;
        }
    }
    return false;
}

/* Hang node at the end of parent's children. */
static bool
childAppend(CorConf* parent, CorConf* node, CorConfErrors* e)
{
    if (parent->count == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        CorConf** items = realloc(parent->items, cap * sizeof(*items));

        if (items == NULL) {
            corConfErrorf(e, node, "out of memory reading the configuration");
            return false;
        }
        parent->items = items;
        parent->cap = cap;
    }
    parent->items[parent->count++] = node;
    return true;
}

/* The value of key in the main tree, not marked as read. */
static CorConf*
rootValue(const Includer* in, const char* key)
{
    for (size_t i = 0; i < in->root->count; i++) {
        if (strcmp(in->root->items[i]->key, key) == 0) {
            return in->root->items[i];
        }
    }
    return NULL;
}

/*
 * Move list's entries onto the end of the main tree's list of that name,
 * or the list itself when the main tree has none. Returns whether list
 * left its tree. A main tree whose value is not a list keeps it: the
 * schema reports that value.
 */
static bool
listMove(Includer* in, CorConf* list)
{
    CorConf* target = rootValue(in, list->key);
    size_t moved = 0;

    if (target == NULL) {
        return childAppend(in->root, list, in->e);
    }
    if (target->kind == COR_CONF_SEQ) {
        while (moved < list->count
               && childAppend(target, list->items[moved], in->e)) {
            moved++;
        }
        if (moved > 0) {
            memmove(list->items, list->items + moved,
                    (list->count - moved) * sizeof(*list->items));
            list->count -= moved;
        }
    }
    return false;
}

/* Move the lists of an included file into the main tree; report any other
 * key but include. */
static void
graft(Includer* in, CorConf* tree)
{
    static const char* const label = "an included file holds";
    size_t kept = 0;

    for (size_t i = 0; i < tree->count; i++) {
        CorConf* value = tree->items[i];
        char hint[160];

        if (isList(in, value->key) && value->kind == COR_CONF_SEQ) {
            if (listMove(in, value)) {
                continue;
            }
        } else if (isList(in, value->key)) {
            corConfErrorf(in->e, value, "%s: expected a list", value->key);
        } else if (strcmp(value->key, "include") != 0) {
            const char* known[8] = { "include" };
            size_t n = 1;

            for (size_t k = 0; in->lists[k] != NULL && n < 7; k++) {
                known[n++] = in->lists[k];
            }
            corConfErrorAt(in->e, value->file, value->keyLine, value->keyColumn,
                           "'%s' is not read from an "
                           "included file, only from %s%s",
                           value->key, in->reading[0].name,
                           corConfSuggest(value->key, known, label, hint,
                                          sizeof(hint)));
        }
        tree->items[kept++] = value;
    }
    tree->count = kept;
}

/* "a.yaml > b.yaml > a.yaml": the files from the one read at level from
 * down to path, for a cycle's message. */
static const char*
chainSay(const Includer* in, unsigned from, const char* path, char* buf,
         size_t size)
{
    size_t len = 0;

    buf[0] = '\0';
    for (unsigned k = from; k <= in->depth && len < size; k++) {
        len += (size_t)snprintf(buf + len, size - len, "%s > ",
                                in->reading[k].name);
    }
    if (len < size) {
        snprintf(buf + len, size - len, "%s", path);
    }
    return buf;
}

/* Whether path may be read below the files being read: not one of them
 * (a cycle), not past the deepest level. Reports why not at at. */
static bool
mayRead(const Includer* in, const CorConf* at, const char* path,
        const struct stat* st)
{
    char chain[512];

    for (unsigned k = 0; k <= in->depth; k++) {
        if (in->reading[k].dev == st->st_dev
            && in->reading[k].ino == st->st_ino) {
            corConfErrorf(in->e, at, "include: %s includes itself (%s)", path,
                          chainSay(in, k, path, chain, sizeof(chain)));
            return false;
        }
    }
    if (in->depth == COR_CONF_INCLUDE_DEPTH) {
        corConfErrorf(in->e, at,
                      "include: %s is more than %d levels of "
                      "include deep (%s)",
                      path, COR_CONF_INCLUDE_DEPTH,
                      chainSay(in, 0, path, chain, sizeof(chain)));
        return false;
    }
    return true;
}

/* Read one included file, graft its lists, then read what it includes. */
static void
includeFile(Includer* in, const CorConf* at, const char* path)
{
    struct stat st;
    CorConf* tree;
    bool whole;

    if (stat(path, &st) != 0) {
        corConfErrorf(in->e, at, "include: cannot read %s: %s", path,
                      strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        corConfErrorf(in->e, at, "include: %s is not a file", path);
        return;
    }
    if (!mayRead(in, at, path, &st)) {
        return;
    }
    tree = corConfLoadFilePartial(path, in->e, &whole);
    if (tree == NULL) {
        return;
    }
    in->last->next = tree;
    in->last = tree;
    if (!whole) {
        /* As for the main file: what follows a syntax error is not read,
         * and the schema would report it missing. */
        in->whole = false;
        return;
    }
    if (tree->kind != COR_CONF_MAP) {
        corConfErrorf(in->e, tree,
                      "expected a mapping such as routes: "
                      "[...] in an included file, got a list");
        return;
    }
    in->depth++;
    in->reading[in->depth].dev = st.st_dev;
    in->reading[in->depth].ino = st.st_ino;
    in->reading[in->depth].name = tree->ownedFile;
    graft(in, tree);
    includeAll(in, tree);
    in->depth--;
}

/* One entry of an include: a glob, beside the file it is written in. A
 * glob that matches nothing is no error (nginx's include, Caddy's
 * import); a name without a wildcard must name a file. */
static void
includeOne(Includer* in, const CorConf* pattern)
{
    char* path;
    glob_t g;
    int rc;

    if (pattern->kind != COR_CONF_SCALAR || pattern->null
        || pattern->text[0] == '\0') {
        corConfErrorf(in->e, pattern,
                      "include: expected a file or a glob "
                      "such as conf.d/*.yaml");
        return;
    }
    path = corConfigPathBeside(pattern->file, pattern->text);
    if (path == NULL) {
        corConfErrorf(in->e, pattern,
                      "out of memory reading the "
                      "configuration");
        return;
    }
    if (strpbrk(pattern->text, "*?[") == NULL) {
        includeFile(in, pattern, path);
        free(path);
        return;
    }
    rc = glob(path, 0, NULL, &g);
    if (rc == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            includeFile(in, pattern, g.gl_pathv[i]);
        }
    } else if (rc != GLOB_NOMATCH) {
        corConfErrorf(in->e, pattern, "include: cannot read %s: %s", path,
                      rc == GLOB_NOSPACE ? "out of memory"
                                         : "a folder cannot be read");
    }
    globfree(&g);
    free(path);
}

/* The files one file's include key names, in order. */
static void
includeAll(Includer* in, const CorConf* file)
{
    const CorConf* include = corConfGet(file, "include");

    if (include == NULL) {
        return;
    }
    if (include->kind != COR_CONF_SEQ) {
        includeOne(in, include);
        return;
    }
    for (size_t i = 0; i < include->count; i++) {
        includeOne(in, include->items[i]);
    }
}

bool
corConfInclude(CorConf* root, const char* const* lists, CorConfErrors* errors)
{
    Includer in = {
        .root = root,
        .last = root,
        .lists = lists,
        .e = errors,
        .whole = true,
    };
    struct stat st;

    if (root->kind != COR_CONF_MAP) {
        return true;
    }
    while (in.last->next != NULL) {
        in.last = in.last->next;
    }
    /* A main file read from memory (a test, the fuzzer) has no inode: no
     * included file can be it. */
    if (stat(root->file, &st) == 0) {
        in.reading[0].dev = st.st_dev;
        in.reading[0].ino = st.st_ino;
    }
    in.reading[0].name = root->file;
    includeAll(&in, root);
    return in.whole;
}

const char*
corConfFileRead(const CorConf* root, size_t i)
{
    while (root != NULL && i > 0) {
        root = root->next;
        i--;
    }
    return root != NULL ? root->file : NULL;
}
