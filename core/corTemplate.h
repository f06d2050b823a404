/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Templates of the route table: a redirect's Location, a rewrite's new
 * target, a request header's value. Text with placeholders, read once
 * with the configuration and filled in per request:
 *
 *   {scheme}  http or https              {host}   the Host, no port
 *   {path}    the normalized path        {query}  "?" and the query, or ""
 *   {uri}     the target as sent         {client} the client's address
 *   {1}..{9}  the route's regex captures ({0}: the whole match)
 *
 * "{{" and "}}" are a brace. In a URL (escape on) a capture and {path}
 * are percent-encoded where a path would misread them; a header's value
 * takes them as they are, less control bytes.
 */
#ifndef COR_TEMPLATE_H
#define COR_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct CorRequest CorRequest;

typedef enum {
    COR_TPL_TEXT,
    COR_TPL_SCHEME,
    COR_TPL_HOST,
    COR_TPL_PATH,
    COR_TPL_QUERY,
    COR_TPL_URI,
    COR_TPL_CLIENT,
    COR_TPL_CAPTURE
} CorTemplateKind;

typedef struct {
    CorTemplateKind kind;
    const char* text; /* COR_TPL_TEXT: its bytes */
    size_t len;
    unsigned capture; /* COR_TPL_CAPTURE: 0..9 */
} CorTemplatePart;

typedef struct {
    CorTemplatePart* parts;
    unsigned count;
    char* source;        /* the text the parts point into */
    unsigned maxCapture; /* the highest {N} it names; 0: none */
    bool url;            /* escape what fills it, as a URL needs */
} CorTemplate;

/*
 * Read text into t. An unknown placeholder or an unclosed brace is an
 * error: its message (naming the placeholder) into why. Returns 0 or -1.
 */
int corTemplateParse(const char* text, bool url, CorTemplate* t, char* why,
                     size_t whyCap);
void corTemplateFree(CorTemplate* t);

/* t filled in for r, NUL-terminated in r's arena (its length to *lenP);
 * NULL when out of memory. */
char* corTemplateExpand(const CorTemplate* t, CorRequest* r, size_t* lenP);

#endif
