/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the configuration tree, shared by the loader (corConf.c),
 * the getters (corConfGet.c) and include (corConfInclude.c). Never
 * included from outside them.
 */
#ifndef COR_CONF_INT_H
#define COR_CONF_INT_H

#include "corConf.h"

struct CorConf {
    CorConfKind kind;
    bool used; /* got by a reader; the one field readers change */
    bool null; /* a plain scalar that is empty, ~ or null */
    unsigned line;
    unsigned column;
    char* key; /* in a mapping: its key, else NULL */
    unsigned keyLine;
    unsigned keyColumn;
    char* text;      /* a scalar's text, NUL-terminated */
    CorConf** items; /* a container's children */
    size_t count;
    size_t cap;
    char** asked; /* a mapping's keys a reader looked for, absent */
    size_t askedCount;
    const char* file; /* the root's copy of the name */
    char* ownedFile;  /* set on the root only */
    CorConf* next;    /* a root: the next file include read, freed with it */
};

/* How much of a value an error message quotes. */
#define QUOTE_MAX 64

/* An error at a mark (file NULL: no mark). */
void corConfErrorAt(CorConfErrors* e, const char* file, unsigned line,
                    unsigned column, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Copy text into buf for a message, shortened with "..." when long. */
const char* corConfQuote(const char* text, char* buf, size_t size);

#endif /* COR_CONF_INT_H */
