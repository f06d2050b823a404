/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration tree: a YAML file read with libyaml's event parser into
 * nodes that keep their file:line:column, and the typed getters every part
 * of the server reads its settings through.
 *
 * The event parser rather than libyaml's document loader: it hands us each
 * key with its own mark (the document API keeps only node marks and has
 * already merged duplicate keys into one mapping by then), and it lets us
 * refuse anchors, aliases and tags where they appear. A config has no use
 * for those; each makes the file harder to read than the lines it saves.
 * Duplicate keys are refused because YAML readers differ on which one wins.
 */
#include "corConf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

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
    const char* file; /* the root's copy of the name */
    char* ownedFile;  /* set on the root only */
};

/* How much of a value an error message quotes. */
#define QUOTE_MAX 64

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
        e->len +=
            (size_t)sprintf(e->text + e->len, "%s:%u:%u: ", file, line, column);
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

static void __attribute__((format(printf, 5, 6)))
errorAt(CorConfErrors* e, const char* file, unsigned line, unsigned column,
        const char* fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    errorAtv(e, file, line, column, fmt, ap);
    va_end(ap);
}

/* Copy text into buf for a message, shortened with "..." when long. */
static const char*
quote(const char* text, char* buf, size_t size)
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
    bool failed; /* stop reading: the rest cannot be trusted */
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
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
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
        ld->key = NULL;
    }
    parent->items[parent->count++] = node;
    return true;
}

/* Whether the next node read is a key of the open mapping. */
static bool
expectingKey(const Loader* ld)
{
    return ld->depth > 0 && ld->stack[ld->depth - 1]->kind == COR_CONF_MAP &&
           ld->key == NULL;
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
                      quote(key, buf, sizeof(buf)), map->items[i]->keyLine,
                      map->items[i]->keyColumn);
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
        errorAt(ld->errors, ld->file, 0, 0,
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
    if (parser->context != NULL && parser->problem != NULL &&
        strcmp(parser->problem, "found unexpected end of stream") == 0) {
        loadError(ld, parser->context_mark,
                  "found unexpected end of stream %s that starts here",
                  parser->context);
        return;
    }
    /* A context that starts where the problem is adds nothing. */
    if (parser->context != NULL &&
        (parser->context_mark.line != mark.line ||
         parser->context_mark.column != mark.column)) {
        loadError(ld, mark, "%s (%s that starts at %zu:%zu)%s", problem,
                  parser->context, parser->context_mark.line + 1,
                  parser->context_mark.column + 1, hint);
    } else {
        loadError(ld, mark, "%s%s", problem, hint);
    }
}

CorConf*
corConfLoadFile(const char* path, CorConfErrors* errors)
{
    char* buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    CorConf* root = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        errorAt(errors, path, 0, 0, "cannot open: %s", strerror(errno));
        return NULL;
    }
    for (;;) {
        ssize_t n;

        if (len == cap) {
            char* grown;

            cap = cap ? cap * 2 : 4096;
            grown = realloc(buf, cap);
            if (grown == NULL) {
                errorAt(errors, path, 0, 0, "out of memory reading it");
                goto failed;
            }
            buf = grown;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            errorAt(errors, path, 0, 0, "cannot read: %s", strerror(errno));
            goto failed;
        }
        if (n == 0) {
            break;
        }
        len += (size_t)n;
    }
    root = corConfLoadString(path, buf, len, errors);

failed:
    close(fd);
    free(buf);
    return root;
}

CorConf*
corConfLoadString(const char* name, const char* text, size_t len,
                  CorConfErrors* errors)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    unsigned before = errors->count;
    Loader ld = {
        .input = (const unsigned char*)text, .inputLen = len, .errors = errors};
    char* file = strdup(name);

    if (file == NULL || !yaml_parser_initialize(&parser)) {
        free(file);
        errorAt(errors, name, 0, 0,
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
        errorAt(errors, file, 1, 1,
                "the file is empty (expected a mapping of settings)");
    }
    if (errors->count != before) {
        nodeFree(ld.root);
        free(file);
        return NULL;
    }
    ld.root->ownedFile = file;
    return ld.root;
}

void
corConfFree(CorConf* root)
{
    nodeFree(root);
}

/* ---- Reading ------------------------------------------------------------- */

const CorConf*
corConfGet(const CorConf* map, const char* key)
{
    if (map == NULL || map->kind != COR_CONF_MAP) {
        return NULL;
    }
    for (size_t i = 0; i < map->count; i++) {
        if (strcmp(map->items[i]->key, key) == 0) {
            /* The node is never const underneath: loading allocated it. */
            ((CorConf*)map->items[i])->used = true;
            return map->items[i];
        }
    }
    return NULL;
}

/* How a node is named in "got ..." when it is not the scalar wanted. */
static const char*
describe(const CorConf* node, char* buf, size_t size)
{
    char q[QUOTE_MAX];

    if (node->kind == COR_CONF_MAP) {
        return "a mapping";
    }
    if (node->kind == COR_CONF_SEQ) {
        return "a list";
    }
    if (node->null) {
        return "nothing";
    }
    snprintf(buf, size, "'%s'", quote(node->text, q, sizeof(q)));
    return buf;
}

static const CorConf*
container(const CorConf* map, const char* key, CorConfKind kind,
          CorConfErrors* e)
{
    const CorConf* node = corConfGet(map, key);
    char buf[QUOTE_MAX + 2];

    if (node == NULL || node->kind == kind) {
        return node;
    }
    corConfErrorf(e, node, "%s: expected %s, got %s", key,
                  kind == COR_CONF_MAP ? "a mapping" : "a list",
                  describe(node, buf, sizeof(buf)));
    return NULL;
}

const CorConf*
corConfMap(const CorConf* map, const char* key, CorConfErrors* e)
{
    return container(map, key, COR_CONF_MAP, e);
}

const CorConf*
corConfSeq(const CorConf* map, const char* key, CorConfErrors* e)
{
    return container(map, key, COR_CONF_SEQ, e);
}

/* The value of key when it is a non-empty scalar; NULL when absent or (with
 * an error) when it is something else. */
static const CorConf*
scalar(const CorConf* map, const char* key, const char* expected,
       CorConfErrors* e)
{
    const CorConf* node = corConfGet(map, key);
    char buf[QUOTE_MAX + 2];

    if (node == NULL) {
        return NULL;
    }
    if (node->kind != COR_CONF_SCALAR || node->null) {
        corConfErrorf(e, node, "%s: expected %s, got %s", key, expected,
                      describe(node, buf, sizeof(buf)));
        return NULL;
    }
    return node;
}

const char*
corConfString(const CorConf* map, const char* key, const char* def,
              CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "a string", e);

    return node ? node->text : def;
}

bool
corConfBool(const CorConf* map, const char* key, bool def, CorConfErrors* e)
{
    static const char* const yaml11[][2] = {
        {"yes", "true"},    {"no", "false"},    {"on", "true"},
        {"off", "false"},   {"y", "true"},      {"n", "false"},
        {"True", "true"},   {"False", "false"}, {"TRUE", "true"},
        {"FALSE", "false"},
    };
    const CorConf* node = scalar(map, key, "true or false", e);
    char q[QUOTE_MAX];

    if (node == NULL) {
        return def;
    }
    if (strcmp(node->text, "true") == 0) {
        return true;
    }
    if (strcmp(node->text, "false") == 0) {
        return false;
    }
    for (size_t i = 0; i < sizeof(yaml11) / sizeof(yaml11[0]); i++) {
        if (strcasecmp(node->text, yaml11[i][0]) == 0) {
            corConfErrorf(e, node,
                          "%s: expected true or false, got '%s' (write %s)",
                          key, node->text, yaml11[i][1]);
            return def;
        }
    }
    corConfErrorf(e, node, "%s: expected true or false, got '%s'", key,
                  quote(node->text, q, sizeof(q)));
    return def;
}

typedef enum {
    PARSE_OK,
    PARSE_BAD,
    PARSE_NEGATIVE,
    PARSE_RANGE, /* does not fit 64 bits */
    PARSE_NO_UNIT,
    PARSE_FINE /* finer than a millisecond */
} ParseResult;

/* Digits into *out; p is left on the first non-digit. */
static ParseResult
parseDigits(const char** p, uint64_t* out)
{
    const char* s = *p;
    uint64_t v = 0;

    if (*s < '0' || *s > '9') {
        return PARSE_BAD;
    }
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (v > (UINT64_MAX - d) / 10) {
            while (*s >= '0' && *s <= '9') {
                s++;
            }
            *p = s;
            return PARSE_RANGE;
        }
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return PARSE_OK;
}

static ParseResult
parseInt(const char* s, int64_t* out)
{
    bool negative = *s == '-';
    uint64_t v = 0;
    ParseResult rc;

    if (*s == '-' || *s == '+') {
        s++;
    }
    rc = parseDigits(&s, &v);
    if (rc == PARSE_BAD || *s != '\0') {
        return PARSE_BAD;
    }
    if (rc == PARSE_RANGE || v > (uint64_t)INT64_MAX + negative) {
        return PARSE_RANGE;
    }
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return PARSE_OK;
}

static void
formatIntRange(int64_t min, int64_t max, char* buf, size_t size)
{
    if (max == INT64_MAX) {
        snprintf(buf, size, "at least %lld", (long long)min);
    } else if (min == INT64_MIN) {
        snprintf(buf, size, "at most %lld", (long long)max);
    } else {
        snprintf(buf, size, "%lld..%lld", (long long)min, (long long)max);
    }
}

int64_t
corConfInt(const CorConf* map, const char* key, int64_t def, int64_t min,
           int64_t max, CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "an integer", e);
    char q[QUOTE_MAX];
    char range[64];
    int64_t v = 0;
    ParseResult rc;

    if (node == NULL) {
        return def;
    }
    rc = parseInt(node->text, &v);
    if (rc == PARSE_BAD) {
        corConfErrorf(e, node, "%s: expected an integer, got '%s'", key,
                      quote(node->text, q, sizeof(q)));
        return def;
    }
    if (rc == PARSE_RANGE || v < min || v > max) {
        formatIntRange(min, max, range, sizeof(range));
        corConfErrorf(e, node, "%s: %s is out of range (%s)", key,
                      quote(node->text, q, sizeof(q)), range);
        return def;
    }
    return v;
}

typedef struct {
    const char* name;
    uint64_t scale;
} Unit;

static const Unit sizeUnits[] = {
    {"TiB", (uint64_t)1 << 40},
    {"GiB", (uint64_t)1 << 30},
    {"MiB", (uint64_t)1 << 20},
    {"KiB", (uint64_t)1 << 10},
    {"TB", 1000000000000ull},
    {"GB", 1000000000ull},
    {"MB", 1000000ull},
    {"KB", 1000ull},
    {"B", 1},
};

/* Ordered so that "ms" is tried before "m". */
static const Unit durationUnits[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
};

static const Unit*
findUnit(const char** p, const Unit* units, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(units[i].name);

        if (strncmp(*p, units[i].name, len) == 0) {
            *p += len;
            return &units[i];
        }
    }
    return NULL;
}

static ParseResult
parseSize(const char* s, uint64_t* out)
{
    const Unit* unit;
    uint64_t v = 0;
    ParseResult rc;

    if (*s == '-') {
        return PARSE_NEGATIVE;
    }
    rc = parseDigits(&s, &v);
    if (rc == PARSE_BAD) {
        return rc;
    }
    while (*s == ' ') {
        s++;
    }
    if (*s == '\0') {
        *out = v;
        return rc;
    }
    unit = findUnit(&s, sizeUnits, sizeof(sizeUnits) / sizeof(sizeUnits[0]));
    if (unit == NULL || *s != '\0') {
        return PARSE_BAD;
    }
    if (rc == PARSE_RANGE || v > UINT64_MAX / unit->scale) {
        return PARSE_RANGE;
    }
    *out = v * unit->scale;
    return PARSE_OK;
}

/* The largest unit that states v exactly: 16KiB rather than 16384. */
static void
formatScaled(uint64_t v, const Unit* units, size_t count, const char* bare,
             char* buf, size_t size)
{
    for (size_t i = 0; i < count; i++) {
        if (units[i].scale > 1 && v != 0 && v % units[i].scale == 0) {
            snprintf(buf, size, "%llu%s",
                     (unsigned long long)(v / units[i].scale), units[i].name);
            return;
        }
    }
    snprintf(buf, size, "%llu%s", (unsigned long long)v, bare);
}

static void
formatRange(uint64_t min, uint64_t max, const Unit* units, size_t count,
            const char* bare, char* buf, size_t size)
{
    char lo[32];
    char hi[32];

    formatScaled(min, units, count, bare, lo, sizeof(lo));
    formatScaled(max, units, count, bare, hi, sizeof(hi));
    if (max == UINT64_MAX) {
        snprintf(buf, size, "at least %s", lo);
    } else {
        snprintf(buf, size, "%s..%s", lo, hi);
    }
}

uint64_t
corConfSize(const CorConf* map, const char* key, uint64_t def, uint64_t min,
            uint64_t max, CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "a size", e);
    const size_t units = sizeof(sizeUnits) / sizeof(sizeUnits[0]);
    char q[QUOTE_MAX];
    char range[80];
    uint64_t v = 0;
    ParseResult rc;

    if (node == NULL) {
        return def;
    }
    rc = parseSize(node->text, &v);
    if (rc == PARSE_NEGATIVE) {
        corConfErrorf(e, node,
                      "%s: expected a size, got '%s' (a size cannot be "
                      "negative)",
                      key, quote(node->text, q, sizeof(q)));
        return def;
    }
    if (rc == PARSE_BAD) {
        corConfErrorf(e, node,
                      "%s: expected a size such as 512, 16KiB or 1MiB "
                      "(units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), "
                      "got '%s'",
                      key, quote(node->text, q, sizeof(q)));
        return def;
    }
    if (rc == PARSE_RANGE || v < min || v > max) {
        formatRange(min, max, sizeUnits, units, "", range, sizeof(range));
        corConfErrorf(e, node, "%s: %s is out of range (%s)", key,
                      quote(node->text, q, sizeof(q)), range);
        return def;
    }
    return v;
}

/* One part of a duration, "1.5s", added to *total. */
static ParseResult
parseDurationPart(const char** p, uint64_t* total)
{
    const char* s = *p;
    const Unit* unit;
    uint64_t whole = 0;
    uint64_t frac = 0;
    uint64_t scale = 1;
    uint64_t fracMs;
    uint64_t ms;
    ParseResult rc = parseDigits(&s, &whole);

    if (rc == PARSE_BAD) {
        return rc;
    }
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9') {
            return PARSE_BAD;
        }
        for (; *s >= '0' && *s <= '9'; s++) {
            /* Past nine digits no unit we have leaves a whole millisecond
             * unless they are zeros. */
            if (scale < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*s - '0');
                scale *= 10;
            } else if (*s != '0') {
                return PARSE_FINE;
            }
        }
    }
    while (*s == ' ') {
        s++;
    }
    if (*s == '\0') {
        return PARSE_NO_UNIT;
    }
    unit = findUnit(&s, durationUnits,
                    sizeof(durationUnits) / sizeof(durationUnits[0]));
    if (unit == NULL) {
        return PARSE_BAD;
    }
    if (frac * unit->scale % scale != 0) {
        return PARSE_FINE;
    }
    fracMs = frac * unit->scale / scale;
    if (rc == PARSE_RANGE || whole > (UINT64_MAX - fracMs) / unit->scale) {
        return PARSE_RANGE;
    }
    ms = whole * unit->scale + fracMs;
    if (*total > UINT64_MAX - ms) {
        return PARSE_RANGE;
    }
    *total += ms;
    *p = s;
    return PARSE_OK;
}

static ParseResult
parseDuration(const char* s, uint64_t* out)
{
    uint64_t total = 0;

    if (*s == '-') {
        return PARSE_NEGATIVE;
    }
    do {
        ParseResult rc = parseDurationPart(&s, &total);

        if (rc != PARSE_OK) {
            return rc;
        }
    } while (*s != '\0');
    *out = total;
    return PARSE_OK;
}

uint64_t
corConfDurationMs(const CorConf* map, const char* key, uint64_t def,
                  uint64_t min, uint64_t max, CorConfErrors* e)
{
    static const Unit display[] = {
        {"h", 60 * 60 * 1000},
        {"m", 60 * 1000},
        {"s", 1000},
    };
    const CorConf* node = scalar(map, key, "a duration", e);
    const char* why = NULL;
    bool tooBig = false;
    char q[QUOTE_MAX];
    char range[80];
    uint64_t v = 0;

    if (node == NULL) {
        return def;
    }
    switch (parseDuration(node->text, &v)) {
    case PARSE_OK:
        break;
    case PARSE_NO_UNIT:
        why = "add a unit: ms, s, m, h";
        break;
    case PARSE_NEGATIVE:
        why = "a duration cannot be negative";
        break;
    case PARSE_FINE:
        why = "the smallest step is 1ms";
        break;
    case PARSE_BAD:
        corConfErrorf(e, node,
                      "%s: expected a duration such as 100ms, 30s, 2m or 1h, "
                      "got '%s'",
                      key, quote(node->text, q, sizeof(q)));
        return def;
    case PARSE_RANGE:
        tooBig = true;
        break;
    }
    if (why != NULL) {
        corConfErrorf(e, node, "%s: expected a duration, got '%s' (%s)", key,
                      quote(node->text, q, sizeof(q)), why);
        return def;
    }
    if (tooBig || v < min || v > max) {
        formatRange(min, max, display, sizeof(display) / sizeof(display[0]),
                    "ms", range, sizeof(range));
        corConfErrorf(e, node, "%s: %s is out of range (%s)", key,
                      quote(node->text, q, sizeof(q)), range);
        return def;
    }
    return v;
}

/* Levenshtein distance, capped: only small ones matter for a suggestion. */
static size_t
distance(const char* a, const char* b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    size_t row[33];

    if (la > 32 || lb > 32) {
        return SIZE_MAX;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);

            if (up + 1 < best) {
                best = up + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Report one key nothing read: its mark, where, and a tail for context. */
static void
unknownKey(const CorConf* value, const char* where, const char* tail,
           CorConfErrors* e)
{
    char q[QUOTE_MAX];

    errorAt(e, value->file, value->keyLine, value->keyColumn,
            "unknown key '%s' %s%s%s", quote(value->key, q, sizeof(q)),
            where ? "in " : "at ", where ? where : "the top level", tail);
}

unsigned
corConfUnknownKeys(const CorConf* map, const char* where,
                   const char* const* known, CorConfErrors* errors)
{
    char tail[512];
    unsigned reported = 0;

    if (map == NULL || map->kind != COR_CONF_MAP) {
        return 0;
    }
    for (size_t i = 0; i < map->count; i++) {
        const CorConf* value = map->items[i];
        const char* near = NULL;
        size_t nearest = 3;
        size_t len;

        if (value->used) {
            continue;
        }
        len = (size_t)snprintf(tail, sizeof(tail), " (expected one of: ");
        for (size_t k = 0; known[k] != NULL && len < sizeof(tail); k++) {
            size_t d = distance(value->key, known[k]);

            /* Up to two edits, and fewer than half the word. */
            if (d < nearest && d * 2 < strlen(known[k])) {
                nearest = d;
                near = known[k];
            }
            len += (size_t)snprintf(tail + len, sizeof(tail) - len, "%s%s",
                                    k ? ", " : "", known[k]);
        }
        if (len < sizeof(tail) && near != NULL) {
            snprintf(tail + len, sizeof(tail) - len, "); did you mean '%s'?",
                     near);
        } else if (len < sizeof(tail)) {
            snprintf(tail + len, sizeof(tail) - len, ")");
        }
        unknownKey(value, where, tail, errors);
        reported++;
    }
    return reported;
}

unsigned
corConfUnusedKeys(const CorConf* map, const char* where, CorConfErrors* errors)
{
    unsigned reported = 0;

    if (map == NULL || map->kind != COR_CONF_MAP) {
        return 0;
    }
    for (size_t i = 0; i < map->count; i++) {
        if (!map->items[i]->used) {
            unknownKey(map->items[i], where, " (nothing read it)", errors);
            reported++;
        }
    }
    return reported;
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
