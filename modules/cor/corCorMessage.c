/* SPDX-License-Identifier: Apache-2.0 */
/*
 * REQUEST and RESPONSE frames as messages (docs/cor-protocol.md,
 * "Bodies"): verb or status, path, headers, and a body that travels as its
 * JSON tree, as "text" or as "bytes" (base64). The body rule serves the
 * chain A -> B -> C, which must answer byte for byte what HTTP answers: a
 * body goes as a tree only when the tree prints back to the very same
 * bytes (jansson's compact form), since the receiver prints it to hand it
 * on. Deciding by printing is the one rule that covers every way two JSON
 * texts of one value differ (spaces, number forms, escapes, key order,
 * duplicate keys) without listing them.
 */
#include "corCorInt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* How a JSON body is printed, by the sender to test it and by the
 * receiver to hand it on. */
#define BODY_DUMP (JSON_COMPACT | JSON_ENCODE_ANY)
#define BODY_LOAD (JSON_DECODE_ANY | JSON_REJECT_DUPLICATES)

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- Checks both directions make ---------------------------------------- */

/* RFC 9110 tchar: what a method and a header name are made of. A table,
 * since every header name of every message is checked twice (sent and
 * received), and a strchr per byte cost more than the rest of the check. */
static const bool tchar[256] = {
    ['0' ... '9'] = true, ['A' ... 'Z'] = true, ['a' ... 'z'] = true,
    ['!'] = true,         ['#'] = true,         ['$'] = true,
    ['%'] = true,         ['&'] = true,         ['\''] = true,
    ['*'] = true,         ['+'] = true,         ['-'] = true,
    ['.'] = true,         ['^'] = true,         ['_'] = true,
    ['`'] = true,         ['|'] = true,         ['~'] = true,
};

bool
corCorToken(const char* s, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!tchar[(unsigned char)s[i]]) {
            return false;
        }
    }
    return true;
}

/* A header value HTTP can carry: no control character but a tab (a CR or
 * an LF would let a peer add headers of its own on the next hop). Eight
 * bytes at a time, and byte by byte only in a word that holds a control
 * character (a tab, or the one that refuses the value) and in the tail. */
static bool
bytesValue(const char* s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c < 0x20 && c != '\t') || c == 0x7F) {
            return false;
        }
    }
    return true;
}

bool
corCorFieldValue(const char* s, size_t len)
{
    size_t i = 0;

    for (; len - i > 8; i += 8) {
        if (corCorWordControl(corCorWordAt(s + i)) && !bytesValue(s + i, 8)) {
            return false;
        }
    }
    return !corCorWordControl(corCorTailAt(s + i, len - i, 'a'))
           || bytesValue(s + i, len - i);
}

/* Headers that do not travel: the receiver knows the length, and the
 * date is the last hop's to set. */
bool
corCorDropped(const char* name, size_t len)
{
    return corCorNamed(name, len, "Date")
           || corCorNamed(name, len, "Content-Length");
}

const struct CorCorKnownName corCorKnownNames[COR_COR_KNOWN_COUNT] = {
    [COR_COR_KNOWN_VERB] = { "verb", 4 },
    [COR_COR_KNOWN_PATH] = { "path", 4 },
    [COR_COR_KNOWN_STATUS] = { "status", 6 },
    [COR_COR_KNOWN_HEADERS] = { "headers", 7 },
    [COR_COR_KNOWN_TEXT] = { "text", 4 },
    [COR_COR_KNOWN_BYTES] = { "bytes", 5 },
    [COR_COR_KNOWN_BODY] = { "body", 4 },
};

uint8_t
corCorNameKind(const char* s, size_t len)
{
    uint8_t kind = COR_COR_NAME_SET;

    for (unsigned i = 0; i < COR_COR_KNOWN_COUNT; i++) {
        if (len == corCorKnownNames[i].len
            && memcmp(s, corCorKnownNames[i].s, len) == 0) {
            kind |= (uint8_t)(i + 1);
        }
    }
    if (corCorNamed(s, len, "Content-Type")) {
        kind |= COR_COR_NAME_CONTENT_TYPE;
    }
    if (corCorDropped(s, len)) {
        kind |= COR_COR_NAME_DROPPED;
    }
    return kind;
}

/* A RESPONSE answers its REQUEST once, finally: a 1xx is no answer (an
 * HTTP client would read it as an interim one and take what follows for
 * the answer), 101 is an HTTP upgrade, which cor:// has not, and a status
 * past 599 no HTTP client takes. */
bool
corCorStatusFinal(long long status)
{
    return status >= 200 && status <= 599;
}

/* ---- Bodies ------------------------------------------------------------- */

/* Whether the tree fits under a frame's root within the codec's limits. */
static bool
treeFits(const json_t* node, unsigned depth, size_t* nodes)
{
    const char* key;
    json_t* child;
    size_t i;

    if (depth > COR_COR_DEPTH_MAX || ++*nodes > COR_COR_NODES_MAX / 2) {
        return false;
    }
    if (json_is_object(node)) {
        json_object_foreach((json_t*)node, key, child)
        {
            if (!treeFits(child, depth + 1, nodes)) {
                return false;
            }
        }
    }
    json_array_foreach(node, i, child)
    {
        if (!treeFits(child, depth + 1, nodes)) {
            return false;
        }
    }
    return true;
}

/* Whether the JSON text s nests no deeper than max, counting brackets
 * outside strings. jansson's parser recurses once a level, up to 2048
 * levels: a body from any client, 2000 brackets deep, would take more
 * stack than a coroutine has, and a tree that deep could not travel
 * anyway. */
static bool
shallow(const char* s, size_t len, unsigned max)
{
    unsigned depth = 0;
    bool inString = false;

    for (size_t i = 0; i < len; i++) {
        if (inString) {
            if (s[i] == '\\') {
                i++; /* what it escapes */
            } else if (s[i] == '"') {
                inString = false;
            }
        } else if (s[i] == '"') {
            inString = true;
        } else if (s[i] == '[' || s[i] == '{') {
            if (++depth > max) {
                return false;
            }
        } else if ((s[i] == ']' || s[i] == '}') && depth > 0) {
            depth--;
        }
    }
    return true;
}

/* The body's tree when it is JSON that prints back to the same bytes,
 * else NULL. */
json_t*
corCorBodyTree(const void* body, size_t len)
{
    /* What jansson prints starts with one of these: anything else (most
     * text bodies) is known not to travel as a tree without parsing. */
    char first = len > 0 ? *(const char*)body : '\0';
    bool printable = first != '\0'
                     && strchr("{[\"-0123456789tfn", first) != NULL;
    json_t* tree = printable && shallow(body, len, COR_COR_DEPTH_MAX)
                       ? json_loadb(body, len, BODY_LOAD, NULL)
                       : NULL;
    size_t nodes = 0;
    char* printed = NULL;

    if (tree == NULL || json_dumpb(tree, NULL, 0, BODY_DUMP) != len
        || !treeFits(tree, 2, &nodes) || (printed = malloc(len)) == NULL
        || json_dumpb(tree, printed, len, BODY_DUMP) != len
        || memcmp(printed, body, len) != 0) {
        json_decref(tree);
        tree = NULL;
    }
    free(printed);
    return tree;
}

void
corCorBase64(const uint8_t* p, size_t len, char* out)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;

        v |= i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < len ? p[i + 2] : 0;
        out[o++] = b64[v >> 18];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? b64[v & 63] : '=';
    }
}

static json_t*
base64(const uint8_t* p, size_t len)
{
    size_t n = (len + 2) / 3 * 4;
    char* out = malloc(n + 1);
    json_t* s;

    if (out == NULL) {
        return NULL;
    }
    corCorBase64(p, len, out);
    s = json_stringn_nocheck(out, n);
    free(out);
    return s;
}

/* Put the body under its member: "body", "text" or "bytes". */
static int
bodyPut(json_t* root, const void* body, size_t len)
{
    json_t* v;

    if (len == 0) {
        return 0;
    }
    if ((v = corCorBodyTree(body, len)) != NULL) {
        return json_object_set_new_nocheck(root, "body", v);
    }
    if (memchr(body, '\0', len) == NULL && corCorUtf8(body, len)) {
        return json_object_set_new_nocheck(root, "text",
                                           json_stringn_nocheck(body, len));
    }
    return json_object_set_new_nocheck(root, "bytes", base64(body, len));
}

/* ---- Message to tree ---------------------------------------------------- */

/* Add one header; a name that comes again makes its value an array. */
static int
headerPut(json_t* headers, const CorHeader* h, char* why, size_t whyLen)
{
    json_t* v;
    json_t* old;

    if (!corCorToken(h->name, h->nameLen)
        || !corCorFieldValue(h->value, h->valueLen)) {
        corCorWhy(why, whyLen,
                  "header \"%.*s\": a name that is not a token "
                  "or a value with a control character",
                  (int)h->nameLen, h->name);
        return -EINVAL;
    }
    v = json_stringn(h->value, h->valueLen);
    if (v == NULL) {
        corCorWhy(why, whyLen, "header %.*s: a value that is not UTF-8",
                  (int)h->nameLen, h->name);
        return -EINVAL;
    }
    old = json_object_getn(headers, h->name, h->nameLen);
    if (old == NULL) {
        return json_object_setn_new_nocheck(headers, h->name, h->nameLen, v);
    }
    if (json_is_string(old)) {
        json_t* both = json_pack("[O]", old);

        if (both == NULL
            || json_object_setn_new_nocheck(headers, h->name, h->nameLen, both)
                   != 0) {
            json_decref(v);
            return -ENOMEM;
        }
        old = both;
    }
    return json_array_append_new(old, v);
}

/* The content type as a header: the field, else a Content-Type among the
 * headers (whose value may not end with a NUL). False when there is none. */
bool
corCorContentType(const CorCorMessage* m, CorHeader* ct)
{
    *ct = (CorHeader){ "Content-Type", 12, m->contentType,
                       m->contentType ? strlen(m->contentType) : 0 };
    for (unsigned i = 0; ct->value == NULL && i < m->headerCount; i++) {
        const CorHeader* h = &m->headers[i];

        if (corCorNamed(h->name, h->nameLen, "Content-Type")) {
            ct->value = h->value;
            ct->valueLen = h->valueLen;
        }
    }
    return ct->value != NULL;
}

static json_t*
headersTree(const CorCorMessage* m, char* why, size_t whyLen)
{
    json_t* headers = json_object();
    CorHeader ct;
    int rc = headers != NULL ? 0 : -ENOMEM;

    if (rc == 0 && corCorContentType(m, &ct)) {
        rc = headerPut(headers, &ct, why, whyLen);
    }
    for (unsigned i = 0; rc == 0 && i < m->headerCount; i++) {
        const CorHeader* h = &m->headers[i];

        if (!corCorDropped(h->name, h->nameLen)
            && !corCorNamed(h->name, h->nameLen, "Content-Type")) {
            rc = headerPut(headers, h, why, whyLen);
        }
    }
    if (rc != 0) {
        if (rc == -ENOMEM) {
            corCorWhy(why, whyLen, "no memory for headers");
        }
        json_decref(headers);
        return NULL;
    }
    return headers;
}

/* verb and path, or status: the members that come first. */
static int
headPut(json_t* root, CorCorType type, const CorCorMessage* m, char* why,
        size_t whyLen)
{
    if (type != COR_COR_REQUEST && type != COR_COR_RESPONSE) {
        corCorWhy(why, whyLen, "a message in a frame of type %d", type);
        return -EINVAL;
    }
    if (type == COR_COR_RESPONSE) {
        if (!corCorStatusFinal(m->status)) {
            corCorWhy(why, whyLen, "status %d, not 200..599", m->status);
            return -EINVAL;
        }
        return json_object_set_new_nocheck(root, "status",
                                           json_integer(m->status))
                       == 0
                   ? 0
                   : -ENOMEM;
    }
    if (m->verb == NULL || !corCorToken(m->verb, strlen(m->verb))
        || m->path == NULL || m->path[0] == '\0'
        || !corCorFieldValue(m->path, strlen(m->path))) {
        corCorWhy(why, whyLen, "a request without a token verb and a path");
        return -EINVAL;
    }
    if (json_object_set_new_nocheck(root, "verb", json_string(m->verb)) != 0
        || json_object_set_new_nocheck(root, "path", json_string(m->path))
               != 0) {
        corCorWhy(why, whyLen, "a path that is not UTF-8, or no memory");
        return -EINVAL;
    }
    return 0;
}

json_t*
corCorMessageTree(CorCorType type, const CorCorMessage* m, char* why,
                  size_t whyLen)
{
    json_t* root = json_object();
    json_t* headers;

    if (root == NULL) {
        goto nomem;
    }
    if (headPut(root, type, m, why, whyLen) != 0) {
        goto failed;
    }
    if ((headers = headersTree(m, why, whyLen)) == NULL) {
        goto failed;
    }
    if (json_object_set_new_nocheck(root, "headers", headers) != 0
        || bodyPut(root, m->body, m->bodyLen) != 0) {
        goto nomem;
    }
    return root;

nomem:
    corCorWhy(why, whyLen, "no memory for a message");
failed:
    json_decref(root);
    return NULL;
}

/* ---- Tree to message ---------------------------------------------------- */

/* Refusals of a message say what, not where (a message is a tree). */
#define refuse(why, whyLen, ...) corCorRefuse(why, whyLen, -1, __VA_ARGS__)

static int
b64Value(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

ssize_t
corCorUnbase64Len(const char* s, size_t len)
{
    size_t pad = 0;

    if (len % 4 != 0) {
        return -1;
    }
    while (pad < 2 && pad < len && s[len - 1 - pad] == '=') {
        pad++;
    }
    return (ssize_t)(len / 4 * 3 - pad);
}

int
corCorUnbase64(const char* s, size_t len, uint8_t* out)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        unsigned chars = 4;

        for (unsigned k = 0; k < 4; k++) {
            int c = b64Value(s[i + k]);

            if (c < 0
                && (s[i + k] != '=' || i + 4 != len || k < 2
                    || (k == 2 && s[i + 3] != '='))) {
                return -1;
            }
            chars = c < 0 && chars == 4 ? k : chars;
            v = v << 6 | (c < 0 ? 0 : (uint32_t)c);
        }
        for (unsigned k = 0; k + 1 < chars; k++) {
            out[o++] = (uint8_t)(v >> (16 - 8 * k));
        }
        if ((chars == 2 && (v & 0xFFFF) != 0)
            || (chars == 3 && (v & 0xFF) != 0)) {
            return -1;
        }
    }
    return 0;
}

size_t
corCorBodyPrint(const json_t* tree, char* out, size_t size)
{
    return json_dumpb(tree, out, size, BODY_DUMP);
}

/* The members a message may have, each of the type it must be. */
static int
membersCheck(CorCorType type, json_t* tree, char* why, size_t whyLen)
{
    const char* key;
    json_t* v;
    unsigned bodies = 0;

    json_object_foreach(tree, key, v)
    {
        bool request = type == COR_COR_REQUEST;
        bool ok = false;

        if (strcmp(key, "verb") == 0 || strcmp(key, "path") == 0) {
            ok = request && json_is_string(v);
        } else if (strcmp(key, "status") == 0) {
            ok = !request && json_is_integer(v);
        } else if (strcmp(key, "headers") == 0) {
            ok = json_is_object(v);
        } else if (strcmp(key, "text") == 0 || strcmp(key, "bytes") == 0) {
            ok = json_is_string(v) && ++bodies == 1;
        } else if (strcmp(key, "body") == 0) {
            ok = ++bodies == 1;
        }
        if (!ok) {
            return refuse(why, whyLen,
                          "%s: a member \"%.40s\" unknown, "
                          "of the wrong type or a second body",
                          request ? "REQUEST" : "RESPONSE", key);
        }
    }
    return 0;
}

static int
headRead(CorCorType type, json_t* tree, CorCorMessage* m, char* why,
         size_t whyLen)
{
    json_t* v;

    if (type == COR_COR_RESPONSE) {
        v = json_object_get(tree, "status");
        if (v == NULL || !corCorStatusFinal(json_integer_value(v))) {
            return refuse(why, whyLen, "RESPONSE: no status in 200..599");
        }
        m->status = (int)json_integer_value(v);
        return 0;
    }
    m->verb = json_string_value(json_object_get(tree, "verb"));
    m->path = json_string_value(json_object_get(tree, "path"));
    if (m->verb == NULL || !corCorToken(m->verb, strlen(m->verb))
        || m->path == NULL || m->path[0] == '\0'
        || !corCorFieldValue(m->path, strlen(m->path))) {
        return refuse(why, whyLen, "REQUEST: no token verb and path");
    }
    return 0;
}

/* Check one header's value (a string, or an array of them); returns how
 * many lines it makes, or -EPROTO. */
static int
headerLines(const char* name, size_t nameLen, json_t* v, char* why,
            size_t whyLen)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 1;

    if (!corCorToken(name, nameLen) || n == 0 || n > COR_COR_NODES_MAX) {
        return refuse(why, whyLen,
                      "header \"%.40s\": a name that is not a "
                      "token, or no value",
                      name);
    }
    for (size_t i = 0; i < n; i++) {
        json_t* s = json_is_array(v) ? json_array_get(v, i) : v;

        if (!json_is_string(s)
            || !corCorFieldValue(json_string_value(s), json_string_length(s))) {
            return refuse(why, whyLen,
                          "header \"%.40s\": a value that is "
                          "not a string HTTP can carry",
                          name);
        }
    }
    return (int)n;
}

/* Check the headers, take Content-Type out, and count the other lines. */
static int
headersCheck(json_t* headers, CorCorMessage* m, char* why, size_t whyLen)
{
    const char* key;
    size_t keyLen;
    json_t* v;
    int lines;

    json_object_keylen_foreach(headers, key, keyLen, v)
    {
        if ((lines = headerLines(key, keyLen, v, why, whyLen)) < 0) {
            return lines;
        }
        if (corCorNamed(key, keyLen, "Content-Type")) {
            if (lines != 1 || m->contentType != NULL) {
                return refuse(why, whyLen, "more than one Content-Type");
            }
            /* One line, which a peer may send as an array of one. */
            m->contentType = json_string_value(
                json_is_array(v) ? json_array_get(v, 0) : v);
        } else if (!corCorDropped(key, keyLen)) {
            m->headerCount += (unsigned)lines;
        }
    }
    return 0;
}

static void
headersFill(json_t* headers, CorHeader* out)
{
    const char* key;
    size_t keyLen;
    json_t* v;
    unsigned n = 0;

    json_object_keylen_foreach(headers, key, keyLen, v)
    {
        size_t count = json_is_array(v) ? json_array_size(v) : 1;

        if (corCorNamed(key, keyLen, "Content-Type")
            || corCorDropped(key, keyLen)) {
            continue;
        }
        for (size_t i = 0; i < count; i++) {
            json_t* s = json_is_array(v) ? json_array_get(v, i) : v;

            out[n++] = (CorHeader){ key, keyLen, json_string_value(s),
                                    json_string_length(s) };
        }
    }
}

/* The bytes of the body in store, or where it already is (text). Its
 * length was checked by bodySize. */
static int
bodyFill(json_t* tree, CorCorMessage* m, char* store, char* why, size_t whyLen)
{
    json_t* v;

    if ((v = json_object_get(tree, "text")) != NULL) {
        m->body = json_string_value(v);
        return 0;
    }
    m->body = store;
    store[m->bodyLen] = '\0';
    if ((v = json_object_get(tree, "bytes")) != NULL
        && corCorUnbase64(json_string_value(v), json_string_length(v),
                          (uint8_t*)store)
               != 0) {
        return refuse(why, whyLen, "\"bytes\" that are not base64");
    }
    if ((v = json_object_get(tree, "body")) != NULL
        && corCorBodyPrint(v, store, m->bodyLen) != m->bodyLen) {
        return refuse(why, whyLen, "a body tree that does not print");
    }
    return 0;
}

/* The body's length; for text and bytes before anything is allocated. */
static int
bodySize(json_t* tree, CorCorMessage* m, char* why, size_t whyLen)
{
    json_t* v;
    ssize_t n = 0;

    if ((v = json_object_get(tree, "text")) != NULL) {
        n = (ssize_t)json_string_length(v);
    } else if ((v = json_object_get(tree, "bytes")) != NULL) {
        n = corCorUnbase64Len(json_string_value(v), json_string_length(v));
    } else if ((v = json_object_get(tree, "body")) != NULL) {
        n = (ssize_t)corCorBodyPrint(v, NULL, 0);
        n = n == 0 ? -1 : n;
    }
    if (n < 0) {
        return refuse(why, whyLen, "a body that is not base64 or JSON");
    }
    m->bodyLen = (size_t)n;
    return 0;
}

int
corCorMessageRead(CorCorType type, json_t* tree, CorCorMessage* m, char* why,
                  size_t whyLen)
{
    json_t* headers = json_object_get(tree, "headers");
    int rc;

    memset(m, 0, sizeof(*m));
    m->tree = tree;
    if (!json_is_object(tree)
        || (type != COR_COR_REQUEST && type != COR_COR_RESPONSE)) {
        rc = refuse(why, whyLen, "a message that is not an object");
        goto failed;
    }
    if ((rc = membersCheck(type, tree, why, whyLen)) != 0
        || (rc = headRead(type, tree, m, why, whyLen)) != 0
        || (headers != NULL
            && (rc = headersCheck(headers, m, why, whyLen)) != 0)
        || (rc = bodySize(tree, m, why, whyLen)) != 0) {
        goto failed;
    }
    m->store = malloc(m->headerCount * sizeof(CorHeader) + m->bodyLen + 1);
    if (m->store == NULL) {
        corCorWhy(why, whyLen, "no memory for a message");
        rc = -ENOMEM;
        goto failed;
    }
    m->headers = m->store;
    if (headers != NULL) {
        headersFill(headers, m->store);
    }
    rc = bodyFill(tree, m, (char*)m->store + m->headerCount * sizeof(CorHeader),
                  why, whyLen);
    if (rc != 0) {
        goto failed;
    }
    return 0;

failed:
    corCorMessageClear(m);
    return rc;
}

void
corCorMessageClear(CorCorMessage* m)
{
    json_decref(m->tree);
    corChunkGive(m->store, m->storeSize);
    memset(m, 0, sizeof(*m));
}
