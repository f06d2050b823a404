/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration tree: a YAML file read with libyaml's event parser into
 * nodes that keep their file:line:column, and the error messages that name
 * them. The typed getters are in corConfGet.c.
 *
 * The event parser rather than libyaml's document loader: it hands us each
 * key with its own mark (the document API keeps only node marks and has
 * already merged duplicate keys into one mapping by then), and it lets us
 * refuse anchors, aliases and tags where they appear. A config has no use
 * for those; each makes the file harder to read than the lines it saves.
 * Duplicate keys are refused because YAML readers differ on which one wins.
 */
#include "corConfInt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

/* ---- Messages ------------------------------------------------------------ */

static bool
errorsReserve(CorConfErrors* e, size_t more)
{
    size_t cap = e->cap ? e->cap : 256;
    char* text;

    if (e->len + more + 1 <= e->cap) {
        return true;
    }
    while (cap < e->len + more + 1) {
        cap *= 2;
    }
    text = realloc(e->text, cap);
    if (text == NULL) {
        return false;
    }
    e->text = text;
    e->cap = cap;
    return true;
}

/* Append one message with an optional mark (file NULL: none; line 0: the
 * file alone). Control characters are escaped so that a scalar quoted in a
 * message cannot break the one-error-per-line form. */
static void
errorAtv(CorConfErrors* e, const char* file, unsigned line, unsigned column,
         const char* fmt, va_list ap)
{
    char small[512];
    char* msg = small;
    int n;
    va_list copy;

    e->count++;
    va_copy(copy, ap);
    n = vsnprintf(small, sizeof(small), fmt, copy);
    va_end(copy);
    if (n < 0) {
        return;
    }
    if ((size_t)n >= sizeof(small)) {
        msg = malloc((size_t)n + 1);
        if (msg == NULL) {
            return;
        }
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
    }
    /* The prefix, then at most two bytes for each byte of the message. */
    if (!errorsReserve(e, (file ? strlen(file) : 0) + 32 + 2 * (size_t)n)) {
        goto done;
    }
    if (file != NULL && line > 0) {
        e->len += (size_t)sprintf(e->text + e->len, "%s:%u:%u: ", file, line,
                                  column);
    } else if (file != NULL) {
        e->len += (size_t)sprintf(e->text + e->len, "%s: ", file);
    }
    for (const unsigned char* p = (const unsigned char*)msg; *p; p++) {
        if (*p == '\n' || *p == '\t') {
            e->text[e->len++] = '\\';
            e->text[e->len++] = *p == '\n' ? 'n' : 't';
        } else if (*p < 0x20 || *p == 0x7f) {
            e->text[e->len++] = '?';
        } else {
            e->text[e->len++] = (char)*p;
        }
    }
    e->text[e->len++] = '\n';
    e->text[e->len] = '\0';

done:
    if (msg != small) {
        free(msg);
    }
}

void
corConfErrorAt(CorConfErrors* e, const char* file, unsigned line,
               unsigned column, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    errorAtv(e, file, line, column, fmt, ap);
    va_end(ap);
}

const char*
corConfQuote(const char* text, char* buf, size_t size)
{
    size_t len = strlen(text);

    if (len < size) {
        return text;
    }
    memcpy(buf, text, size - 4);
    memcpy(buf + size - 4, "...", 4);
    return buf;
}

static void
nodeFree(CorConf* node)
{
    if (node == NULL) {
        return;
    }
    /* Recursion is bounded by COR_CONF_MAX_DEPTH. */
    for (size_t i = 0; i < node->count; i++) {
        nodeFree(node->items[i]);
    }
    for (size_t i = 0; i < node->askedCount; i++) {
        free(node->asked[i]);
    }
    free(node->asked);
    free(node->items);
    free(node->key);
    free(node->text);
    free(node->ownedFile);
    free(node);
}

/* ---- Loading ------------------------------------------------------------- */

typedef struct {
    const char* file;
    const unsigned char* input;
    size_t inputLen;
    CorConfErrors* errors;
    CorConf* root;
    CorConf* stack[COR_CONF_MAX_DEPTH];
    unsigned depth;
    char* key; /* a mapping's key waiting for its value */
    unsigned keyLine;
    unsigned keyColumn;
    unsigned documents;
    bool keyRepeated; /* the pending key was given before in its mapping */
    bool failed;      /* stop reading: the rest cannot be trusted */
} Loader;

static void __attribute__((format(printf, 3, 4)))
loadError(Loader* ld, yaml_mark_t mark, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    errorAtv(ld->errors, ld->file, (unsigned)mark.line + 1,
             (unsigned)mark.column + 1, fmt, ap);
    va_end(ap);
}

static void
outOfMemory(Loader* ld, yaml_mark_t mark)
{
    loadError(ld, mark, "out of memory reading the configuration");
    ld->failed = true;
}

static bool
isNull(const yaml_event_t* ev)
{
    const char* v = (const char*)ev->data.scalar.value;

    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0
           || strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Refuse the anchor and tag an event may carry; reading goes on, since the
 * value itself is still plain data. */
static void
refuseDecorations(Loader* ld, const yaml_event_t* ev)
{
    const yaml_char_t* anchor = NULL;
    const yaml_char_t* tag = NULL;

    if (ev->type == YAML_SCALAR_EVENT) {
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
    } else if (ev->type == YAML_MAPPING_START_EVENT) {
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
    }
    if (anchor != NULL) {
        loadError(ld, ev->start_mark,
                  "anchor '&%s' is not supported (a config has no use for "
                  "anchors and aliases: write the value out)",
                  (const char*)anchor);
    }
    if (tag != NULL) {
        loadError(ld, ev->start_mark,
                  "tag '%s' is not supported (a config has no use for tags: "
                  "write the value plainly)",
                  (const char*)tag);
    }
}

static CorConf*
nodeNew(Loader* ld, CorConfKind kind, yaml_mark_t mark)
{
    CorConf* node = calloc(1, sizeof(*node));

    if (node == NULL) {
        outOfMemory(ld, mark);
        return NULL;
    }
    node->kind = kind;
    node->file = ld->file;
    node->line = (unsigned)mark.line + 1;
    node->column = (unsigned)mark.column + 1;
    return node;
}

/* Hang node under the open container (or make it the root), taking the
 * pending key when the container is a mapping. Frees node on failure. */
static bool
nodeAdd(Loader* ld, CorConf* node, yaml_mark_t mark)
{
    CorConf* parent;

    if (ld->depth == 0) {
        ld->root = node;
        return true;
    }
    parent = ld->stack[ld->depth - 1];
    if (parent->count == parent->cap) {
        size_t cap = parent->cap ? parent->cap * 2 : 4;
        CorConf** items = realloc(parent->items, cap * sizeof(*items));

        if (items == NULL) {
            nodeFree(node);
            outOfMemory(ld, mark);
            return false;
        }
        parent->items = items;
        parent->cap = cap;
    }
    if (parent->kind == COR_CONF_MAP) {
        node->key = ld->key;
        node->keyLine = ld->keyLine;
        node->keyColumn = ld->keyColumn;
        /* Reported as a duplicate: not again as a key nothing read. */
        node->used = ld->keyRepeated;
        ld->key = NULL;
        ld->keyRepeated = false;
    }
    parent->items[parent->count++] = node;
    return true;
}

/* Whether the next node read is a key of the open mapping. */
static bool
expectingKey(const Loader* ld)
{
    return ld->depth > 0 && ld->stack[ld->depth - 1]->kind == COR_CONF_MAP
           && ld->key == NULL;
}

static void
takeKey(Loader* ld, const yaml_event_t* ev)
{
    const CorConf* map = ld->stack[ld->depth - 1];
    const char* key = (const char*)ev->data.scalar.value;
    char buf[QUOTE_MAX];

    for (size_t i = 0; i < map->count; i++) {
        if (strcmp(map->items[i]->key, key) == 0) {
            loadError(ld, ev->start_mark, "duplicate key '%s' (first at %u:%u)",
                      corConfQuote(key, buf, sizeof(buf)),
                      map->items[i]->keyLine, map->items[i]->keyColumn);
            ld->keyRepeated = true;
            break;
        }
    }
    ld->key = strdup(key);
    if (ld->key == NULL) {
        outOfMemory(ld, ev->start_mark);
        return;
    }
    ld->keyLine = (unsigned)ev->start_mark.line + 1;
    ld->keyColumn = (unsigned)ev->start_mark.column + 1;
}

static void
onScalar(Loader* ld, const yaml_event_t* ev)
{
    size_t len = ev->data.scalar.length;
    CorConf* node;

    refuseDecorations(ld, ev);
    /* An escaped "\0" would silently cut a path or a name short. */
    if (memchr(ev->data.scalar.value, '\0', len) != NULL) {
        loadError(ld, ev->start_mark,
                  "a NUL character is not allowed in a string");
    }
    if (expectingKey(ld)) {
        takeKey(ld, ev);
        return;
    }
    node = nodeNew(ld, COR_CONF_SCALAR, ev->start_mark);
    if (node == NULL) {
        return;
    }
    node->null = isNull(ev);
    node->text = malloc(len + 1);
    if (node->text == NULL) {
        nodeFree(node);
        outOfMemory(ld, ev->start_mark);
        return;
    }
    memcpy(node->text, ev->data.scalar.value, len);
    node->text[len] = '\0';
    nodeAdd(ld, node, ev->start_mark);
}

static void
onContainerStart(Loader* ld, const yaml_event_t* ev, CorConfKind kind)
{
    const char* what = kind == COR_CONF_MAP ? "a mapping" : "a list";
    CorConf* node;

    refuseDecorations(ld, ev);
    if (expectingKey(ld)) {
        loadError(ld, ev->start_mark, "a key must be a plain string, not %s",
                  what);
        ld->failed = true;
        return;
    }
    if (ld->depth == COR_CONF_MAX_DEPTH) {
        loadError(ld, ev->start_mark,
                  "nesting is too deep (more than %d levels)",
                  COR_CONF_MAX_DEPTH);
        ld->failed = true;
        return;
    }
    node = nodeNew(ld, kind, ev->start_mark);
    if (node == NULL || !nodeAdd(ld, node, ev->start_mark)) {
        return;
    }
    ld->stack[ld->depth++] = node;
}

/* Returns false at the end of the stream. */
static bool
onEvent(Loader* ld, const yaml_event_t* ev)
{
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (ld->documents++ > 0) {
            loadError(ld, ev->start_mark,
                      "a second document is not supported (one file holds "
                      "one configuration; remove the '---' or split the "
                      "file)");
            ld->failed = true;
        }
        break;
    case YAML_ALIAS_EVENT:
        loadError(ld, ev->start_mark,
                  "alias '*%s' is not supported (a config has no use for "
                  "anchors and aliases: write the value out)",
                  (const char*)ev->data.alias.anchor);
        /* Going on would need a value in the alias's place. */
        ld->failed = true;
        break;
    case YAML_SCALAR_EVENT:
        onScalar(ld, ev);
        break;
    case YAML_MAPPING_START_EVENT:
        onContainerStart(ld, ev, COR_CONF_MAP);
        break;
    case YAML_SEQUENCE_START_EVENT:
        onContainerStart(ld, ev, COR_CONF_SEQ);
        break;
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
        ld->depth--;
        break;
    case YAML_STREAM_END_EVENT:
        return false;
    default:
        break;
    }
    return true;
}

/* The line a mark is on, for hints about what libyaml refused there. */
static bool
lineHasTabIndent(const Loader* ld, size_t line)
{
    size_t i = 0;

    while (line > 0 && i < ld->inputLen) {
        if (ld->input[i++] == '\n') {
            line--;
        }
    }
    for (; i < ld->inputLen && ld->input[i] != '\n'; i++) {
        if (ld->input[i] == '\t') {
            return true;
        }
        if (ld->input[i] != ' ' && ld->input[i] != '-') {
            return false;
        }
    }
    return false;
}

static void
syntaxError(Loader* ld, const yaml_parser_t* parser)
{
    yaml_mark_t mark = parser->problem_mark;
    const char* problem = parser->problem ? parser->problem : "syntax error";
    const char* hint = "";

    switch (parser->error) {
    case YAML_MEMORY_ERROR:
        corConfErrorAt(ld->errors, ld->file, 0, 0,
                       "out of memory reading the configuration");
        return;
    case YAML_READER_ERROR:
        /* The reader knows only a byte offset; count lines up to it. */
        mark.line = 0;
        mark.column = 0;
        for (size_t i = 0; i < parser->problem_offset && i < ld->inputLen;
             i++) {
            if (ld->input[i] == '\n') {
                mark.line++;
                mark.column = 0;
            } else {
                mark.column++;
            }
        }
        loadError(ld, mark, "%s (byte 0x%02x)", problem,
                  (unsigned)parser->problem_value & 0xff);
        return;
    default:
        break;
    }
    if (lineHasTabIndent(ld, mark.line)) {
        hint = "; YAML does not allow tabs for indentation, use spaces";
    }
    /* At the end of the file, where the unfinished thing began (an
     * unclosed quote or bracket) is the mark worth having. */
    if (parser->context != NULL && parser->problem != NULL
        && strcmp(parser->problem, "found unexpected end of stream") == 0) {
        loadError(ld, parser->context_mark,
                  "found unexpected end of stream %s that starts here",
                  parser->context);
        return;
    }
    /* A context that starts where the problem is adds nothing. */
    if (parser->context != NULL
        && (parser->context_mark.line != mark.line
            || parser->context_mark.column != mark.column)) {
        loadError(ld, mark, "%s (%s that starts at %zu:%zu)%s", problem,
                  parser->context, parser->context_mark.line + 1,
                  parser->context_mark.column + 1, hint);
    } else {
        loadError(ld, mark, "%s%s", problem, hint);
    }
}

/* The whole file into *bufP (the caller frees it). Returns 0, or -1 with
 * the reason in errors. */
static int
fileRead(const char* path, char** bufP, size_t* lenP, CorConfErrors* errors)
{
    char* buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        corConfErrorAt(errors, path, 0, 0, "cannot open: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        ssize_t n;

        if (len == cap) {
            char* grown;

            cap = cap ? cap * 2 : 4096;
            grown = realloc(buf, cap);
            if (grown == NULL) {
                corConfErrorAt(errors, path, 0, 0, "out of memory reading it");
                goto failed;
            }
            buf = grown;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            corConfErrorAt(errors, path, 0, 0, "cannot read: %s",
                           strerror(errno));
            goto failed;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    *bufP = buf;
    *lenP = len;
    return 0;

failed:
    close(fd);
    free(buf);
    return -1;
}

CorConf*
corConfLoadFile(const char* path, CorConfErrors* errors)
{
    unsigned before = errors->count;
    bool whole;
    CorConf* root = corConfLoadFilePartial(path, errors, &whole);

    if (root != NULL && errors->count != before) {
        corConfFree(root);
        return NULL;
    }
    return root;
}

CorConf*
corConfLoadFilePartial(const char* path, CorConfErrors* errors, bool* whole)
{
    char* buf;
    size_t len;
    CorConf* root;

    *whole = false;
    if (fileRead(path, &buf, &len, errors) != 0) {
        return NULL;
    }
    root = corConfLoadStringPartial(path, buf, len, errors, whole);
    free(buf);
    return root;
}

CorConf*
corConfLoadString(const char* name, const char* text, size_t len,
                  CorConfErrors* errors)
{
    unsigned before = errors->count;
    bool whole;
    CorConf* root = corConfLoadStringPartial(name, text, len, errors, &whole);

    if (root != NULL && errors->count != before) {
        corConfFree(root);
        return NULL;
    }
    return root;
}

CorConf*
corConfLoadStringPartial(const char* name, const char* text, size_t len,
                         CorConfErrors* errors, bool* whole)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    unsigned before = errors->count;
    Loader ld = { .input = (const unsigned char*)text,
                  .inputLen = len,
                  .errors = errors };
    char* file = strdup(name);

    *whole = false;
    if (file == NULL || !yaml_parser_initialize(&parser)) {
        free(file);
        corConfErrorAt(errors, name, 0, 0,
                       "out of memory reading the "
                       "configuration");
        return NULL;
    }
    ld.file = file;
    yaml_parser_set_input_string(&parser, ld.input, len);
    while (!ld.failed) {
        bool more;

        if (!yaml_parser_parse(&parser, &ev)) {
            syntaxError(&ld, &parser);
            ld.failed = true;
            break;
        }
        more = onEvent(&ld, &ev);
        yaml_event_delete(&ev);
        if (!more) {
            break;
        }
    }
    yaml_parser_delete(&parser);
    free(ld.key);
    if (ld.root == NULL && errors->count == before) {
        corConfErrorAt(errors, file, 1, 1,
                       "the file is empty (expected a mapping of settings)");
    }
    if (ld.root == NULL) {
        free(file);
        return NULL;
    }
    *whole = !ld.failed;
    ld.root->ownedFile = file;
    return ld.root;
}

void
corConfFree(CorConf* root)
{
    while (root != NULL) {
        CorConf* next = root->next;

        nodeFree(root);
        root = next;
    }
}

/* ---- Nodes --------------------------------------------------------------- */

const char*
corConfFile(const CorConf* node)
{
    return node->file;
}

unsigned
corConfLine(const CorConf* node)
{
    return node->line;
}

unsigned
corConfColumn(const CorConf* node)
{
    return node->column;
}

CorConfKind
corConfKind(const CorConf* node)
{
    return node->kind;
}

const char*
corConfText(const CorConf* node)
{
    return node != NULL && node->kind == COR_CONF_SCALAR ? node->text : NULL;
}

size_t
corConfCount(const CorConf* node)
{
    return node == NULL || node->kind == COR_CONF_SCALAR ? 0 : node->count;
}

const CorConf*
corConfAt(const CorConf* node, size_t i)
{
    if (node == NULL || node->kind == COR_CONF_SCALAR || i >= node->count) {
        return NULL;
    }
    ((CorConf*)node->items[i])->used = true;
    return node->items[i];
}

const char*
corConfKeyAt(const CorConf* map, size_t i)
{
    if (map == NULL || map->kind != COR_CONF_MAP || i >= map->count) {
        return NULL;
    }
    return map->items[i]->key;
}

/* ---- Errors -------------------------------------------------------------- */

void
corConfErrorf(CorConfErrors* e, const CorConf* at, const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (at != NULL) {
        errorAtv(e, at->file, at->line, at->column, fmt, ap);
    } else {
        errorAtv(e, NULL, 0, 0, fmt, ap);
    }
    va_end(ap);
}

void
corConfErrorsFree(CorConfErrors* e)
{
    free(e->text);
    e->text = NULL;
    e->len = 0;
    e->cap = 0;
    e->count = 0;
}
