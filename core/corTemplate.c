/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Templates of the route table (corTemplate.h), read with the
 * configuration into parts (corTemplateExpand.c fills them in).
 */
#include "corTemplate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char* name;
    CorTemplateKind kind;
} placeholders[] = {
    { "scheme", COR_TPL_SCHEME }, { "host", COR_TPL_HOST },
    { "path", COR_TPL_PATH },     { "query", COR_TPL_QUERY },
    { "uri", COR_TPL_URI },       { "client", COR_TPL_CLIENT },
};

/* The placeholder name[0..n) as a part; false when there is none. */
static bool
placeholderOf(const char* name, size_t n, CorTemplatePart* part)
{
    if (n == 1 && name[0] >= '0' && name[0] <= '9') {
        *part = (CorTemplatePart){ .kind = COR_TPL_CAPTURE,
                                   .capture = (unsigned)(name[0] - '0') };
        return true;
    }
    for (size_t i = 0; i < sizeof(placeholders) / sizeof(placeholders[0]);
         i++) {
        if (strlen(placeholders[i].name) == n
            && memcmp(placeholders[i].name, name, n) == 0) {
            *part = (CorTemplatePart){ .kind = placeholders[i].kind };
            return true;
        }
    }
    return false;
}

/* Append the text s[0..n) as a part, joined to a text part before it. */
static void
textAdd(CorTemplate* t, const char* s, size_t n)
{
    CorTemplatePart* last = t->count > 0 ? &t->parts[t->count - 1] : NULL;

    if (n == 0) {
        return;
    }
    if (last != NULL && last->kind == COR_TPL_TEXT
        && last->text + last->len == s) {
        last->len += n;
        return;
    }
    t->parts[t->count++] = (CorTemplatePart){ .kind = COR_TPL_TEXT,
                                              .text = s,
                                              .len = n };
}

int
corTemplateParse(const char* text, bool url, CorTemplate* t, char* why,
                 size_t whyCap)
{
    size_t n = strlen(text);
    char* s;

    *t = (CorTemplate){ .url = url };
    /* At most a part a byte: "{{" and "}}" keep their first brace only,
     * in place, so the source is copied with them squeezed as it goes. */
    t->source = s = malloc(n + 1);
    t->parts = calloc(n + 1, sizeof(*t->parts));
    if (s == NULL || t->parts == NULL) {
        snprintf(why, whyCap, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n;) {
        const char* close;
        CorTemplatePart part;

        if ((text[i] == '{' || text[i] == '}') && text[i + 1] == text[i]) {
            *s = text[i];
            textAdd(t, s++, 1);
            i += 2;
            continue;
        }
        if (text[i] == '}') {
            snprintf(why, whyCap, "a '}' with no '{' (write '}}' for one)");
            return -1;
        }
        if (text[i] != '{') {
            *s = text[i++];
            textAdd(t, s++, 1);
            continue;
        }
        close = strchr(text + i, '}');
        if (close == NULL
            || !placeholderOf(text + i + 1, (size_t)(close - text - i - 1),
                              &part)) {
            snprintf(why, whyCap,
                     "unknown placeholder '%.*s' (known: "
                     "{scheme}, {host}, {path}, {query}, {uri}, {client}, "
                     "{0}..{9}; '{{' for a brace)",
                     close != NULL ? (int)(close - text - i + 1) : (int)(n - i),
                     text + i);
            return -1;
        }
        if (part.kind == COR_TPL_CAPTURE && part.capture > t->maxCapture) {
            t->maxCapture = part.capture;
        }
        t->parts[t->count++] = part;
        i = (size_t)(close - text) + 1;
    }
    return 0;
}

void
corTemplateFree(CorTemplate* t)
{
    free(t->parts);
    free(t->source);
    *t = (CorTemplate){ 0 };
}
