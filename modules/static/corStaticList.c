/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A folder's listing (`autoindex`), for a folder without its index file:
 * HTML by default, JSON for a client whose Accept names
 * application/json. Names are the folder's entries, sorted, a folder's
 * with its '/', those starting with '.' left out unless the root serves
 * them; each escaped for where it goes (an href is percent-encoded, the
 * text HTML-escaped, JSON's string escaped), since a file name may hold
 * any byte but '/' and NUL.
 */
#include "corStaticInt.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A listing this long is cut: a folder of millions of files must not
 * cost one answer that much memory. */
#define LIST_MAX 10000

typedef struct {
    char* text;
    size_t len;
    size_t cap;
    bool failed;
} Out;

static void
put(Out* o, const char* s, size_t n)
{
    if (o->failed) {
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = 2 * (o->len + n + 1);
        char* grown = realloc(o->text, cap);

        if (grown == NULL) {
            o->failed = true;
            return;
        }
        o->text = grown;
        o->cap = cap;
    }
    memcpy(o->text + o->len, s, n);
    o->len += n;
}

static void
puts0(Out* o, const char* s)
{
    put(o, s, strlen(s));
}

static void
putHref(Out* o, const char* name)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char* p = (const unsigned char*)name; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
            || (*p >= '0' && *p <= '9') || strchr("-._~/", *p) != NULL) {
            put(o, (const char*)p, 1);
        } else {
            char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };

            put(o, e, 3);
        }
    }
}

static void
putHtml(Out* o, const char* name)
{
    for (const char* p = name; *p; p++) {
        switch (*p) {
        case '<':
            puts0(o, "&lt;");
            break;
        case '>':
            puts0(o, "&gt;");
            break;
        case '&':
            puts0(o, "&amp;");
            break;
        case '"':
            puts0(o, "&quot;");
            break;
        case '\'':
            puts0(o, "&#39;");
            break;
        default:
            put(o, p, 1);
            break;
        }
    }
}

static void
putJson(Out* o, const char* name)
{
    char e[8];

    for (const unsigned char* p = (const unsigned char*)name; *p; p++) {
        if (*p == '"' || *p == '\\') {
            e[0] = '\\';
            e[1] = (char)*p;
            put(o, e, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(e, sizeof(e), "\\u%04x", *p);
            put(o, e, 6);
        } else {
            put(o, (const char*)p, 1);
        }
    }
}

static int
nameCompare(const void* a, const void* b)
{
    return strcmp(*(char* const*)a, *(char* const*)b);
}

/* The entries of the open folder fd (which it takes), a folder's with a
 * '/' after it, sorted; their count to *countP. NULL when out of memory
 * or unreadable. */
static char**
namesRead(int fd, bool dotfiles, unsigned* countP)
{
    DIR* dir = fdopendir(fd);
    char** names = NULL;
    unsigned count = 0;
    struct dirent* d;

    if (dir == NULL) {
        close(fd);
        return NULL;
    }
    names = calloc(LIST_MAX, sizeof(*names));
    while (names != NULL && count < LIST_MAX && (d = readdir(dir)) != NULL) {
        bool folder = d->d_type == DT_DIR;

        if (d->d_name[0] == '.'
            && (!dotfiles || strcmp(d->d_name, ".") == 0
                || strcmp(d->d_name, "..") == 0)) {
            continue;
        }
        if (asprintf(&names[count], "%s%s", d->d_name, folder ? "/" : "") < 0) {
            break;
        }
        count++;
    }
    closedir(dir);
    if (names != NULL) {
        qsort(names, count, sizeof(*names), nameCompare);
    }
    *countP = count;
    return names;
}

static void
htmlWrite(Out* o, CorRequest* r, char** names, unsigned count)
{
    char* path = corRequestAlloc(r, r->pathLen + 1);

    if (path == NULL) {
        o->failed = true;
        return;
    }
    memcpy(path, r->path, r->pathLen);
    path[r->pathLen] = '\0';
    puts0(o, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>"
             "Index of ");
    putHtml(o, path);
    puts0(o, "</title></head>\n<body><h1>Index of ");
    putHtml(o, path);
    puts0(o, "</h1>\n<ul>\n<li><a href=\"../\">../</a></li>\n");
    for (unsigned i = 0; i < count; i++) {
        puts0(o, "<li><a href=\"");
        putHref(o, names[i]);
        puts0(o, "\">");
        putHtml(o, names[i]);
        puts0(o, "</a></li>\n");
    }
    puts0(o, "</ul></body></html>\n");
}

static void
jsonWrite(Out* o, char** names, unsigned count)
{
    puts0(o, "[");
    for (unsigned i = 0; i < count; i++) {
        size_t len = strlen(names[i]);
        bool folder = len > 0 && names[i][len - 1] == '/';

        puts0(o, i > 0 ? ",\n{\"name\":\"" : "\n{\"name\":\"");
        names[i][len - folder] = '\0';
        putJson(o, names[i]);
        puts0(o,
              folder ? "\",\"type\":\"directory\"}" : "\",\"type\":\"file\"}");
    }
    puts0(o, "\n]\n");
}

void
corStaticListAnswer(CorRequest* r, const StaticRoot* root, const char* rel)
{
    const CorHeader* accept = corRequestHeader(r, "Accept");
    bool json = accept != NULL
                && memmem(accept->value, accept->valueLen, "application/json",
                          16)
                       != NULL;
    int fd = corStaticOpen(root, rel);
    unsigned count = 0;
    char** names = fd >= 0 ? namesRead(fd, root->dotfiles, &count) : NULL;
    Out o = { 0 };

    if (names == NULL) {
        corRespondStatic(r, fd == -EXDEV ? 403 : 500, "text/plain",
                         "cannot list\n", 12);
        return;
    }
    if (json) {
        jsonWrite(&o, names, count);
    } else {
        htmlWrite(&o, r, names, count);
    }
    for (unsigned i = 0; i < count; i++) {
        free(names[i]);
    }
    free(names);
    corResponseHeader(r, "Vary", "Accept");
    if (o.failed) {
        corRespondStatic(r, 500, "text/plain", "no memory\n", 10);
    } else {
        corRespond(r, 200,
                   json ? "application/json" : "text/html; charset=utf-8",
                   o.text, o.len);
    }
    free(o.text);
}
