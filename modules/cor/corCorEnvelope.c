/* SPDX-License-Identifier: Apache-2.0 */
/*
 * REQUEST and RESPONSE frames written from a message and read into one
 * with no json_t between (docs/cor-protocol.md, "Requests and
 * responses"). Building the message's tree and then encoding it, and the
 * reverse, cost a server about a third of its CPU per request in jansson
 * and malloc; the envelope (verb or status, path, headers, a text or
 * bytes body) needs none of it. Only a JSON body is still a tree, parsed
 * and encoded (or decoded and printed) with the tree codec's own code.
 *
 * corCorMessageTree with corCorFrameEncode, and corCorFrameDecode with
 * corCorMessageRead, stay the reference: the same bytes out, the same
 * frames taken and refused, the same tables after (tests/cor and the
 * fuzzer check it).
 */
#include "corCorInt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- Encoder ------------------------------------------------------------ */

/* The depth of the root's members, of a header's value, and of one of
 * the values of a header that came more than once. */
#define DEPTH_MEMBER 2
#define DEPTH_VALUE 3
#define DEPTH_REPEATED 4

/* A string node with no name (an array's element): its tag, its value. */
static int
putStringElement(CorCorEncoder* e, const char* s, size_t len, unsigned depth)
{
    int rc = corCorPutHead(e, COR_COR_NODE_STRING, 0, NULL, 0, depth);

    return rc == 0 ? corCorPutString(e, s, len) : rc;
}

/* A member of the root that is a string, under one of the known names. */
static int
putStringMember(CorCorEncoder* e, CorCorKnown name, const char* s, size_t len)
{
    int rc = corCorPutHeadKnown(e, COR_COR_NODE_STRING, 0, name, DEPTH_MEMBER);

    return rc == 0 ? corCorPutString(e, s, len) : rc;
}

/* The members that come first: verb and path, or status. */
static int
putFirst(CorCorEncoder* e, CorCorType type, const CorCorMessage* m)
{
    size_t verbLen;
    size_t pathLen;
    int rc;

    if (type != COR_COR_REQUEST && type != COR_COR_RESPONSE) {
        corCorWhy(e->why, e->whyLen, "a message in a frame of type %d", type);
        return -EINVAL;
    }
    if (type == COR_COR_RESPONSE) {
        if (!corCorStatusFinal(m->status)) {
            corCorWhy(e->why, e->whyLen, "status %d, not 200..599", m->status);
            return -EINVAL;
        }
        rc = corCorPutHeadKnown(e, COR_COR_NODE_INT, corCorIntFlags(m->status),
                                COR_COR_KNOWN_STATUS, DEPTH_MEMBER);
        return rc == 0 ? corCorPutInt(e, m->status) : rc;
    }
    verbLen = m->verb != NULL ? strlen(m->verb) : 0;
    pathLen = m->path != NULL ? strlen(m->path) : 0;
    if (!corCorToken(m->verb, verbLen) || pathLen == 0
        || !corCorFieldValue(m->path, pathLen)) {
        corCorWhy(e->why, e->whyLen,
                  "a request without a token verb and a "
                  "path");
        return -EINVAL;
    }
    rc = putStringMember(e, COR_COR_KNOWN_VERB, m->verb, verbLen);
    return rc == 0 ? putStringMember(e, COR_COR_KNOWN_PATH, m->path, pathLen)
                   : rc;
}

/* The value of h, after its tag (and name) when depth is 0, else with a
 * tag of its own (an array's element at depth). */
static int
headerValue(CorCorEncoder* e, const CorHeader* h, unsigned depth)
{
    /* Its name was just put (depth 0), maybe by index from an entry that
     * says whether it is a token. */
    bool token = depth == 0 && e->nameToken;

    if (!(token || corCorToken(h->name, h->nameLen))
        || !corCorFieldValue(h->value, h->valueLen)) {
        corCorWhy(e->why, e->whyLen,
                  "header \"%.*s\": a name that is not a "
                  "token or a value with a control character",
                  (int)h->nameLen, h->name);
        return -EINVAL;
    }
    return depth == 0 ? corCorPutString(e, h->value, h->valueLen)
                      : putStringElement(e, h->value, h->valueLen, depth);
}

static bool
sameName(const CorHeader* a, const CorHeader* b)
{
    return a->nameLen == b->nameLen
           && memcmp(a->name, b->name, a->nameLen) == 0;
}

/* Whether headers[i] travels on its own line of the object: neither left
 * out nor a name that came before (whose member holds it already). */
static bool
headerLeads(const CorCorMessage* m, unsigned i)
{
    const CorHeader* h = &m->headers[i];

    if (corCorDropped(h->name, h->nameLen)
        || corCorNamed(h->name, h->nameLen, "Content-Type")) {
        return false;
    }
    for (unsigned j = 0; j < i; j++) {
        if (sameName(&m->headers[j], h)) {
            return false;
        }
    }
    return true;
}

/* The member of headers[i] and of the headers of its name after it: a
 * string, or an array of them when the name comes again (as headerPut
 * makes it, at the place of the first). */
static int
putHeaderMember(CorCorEncoder* e, const CorCorMessage* m, unsigned i)
{
    const CorHeader* h = &m->headers[i];
    unsigned count = 0;
    size_t start;
    int rc;

    for (unsigned k = i; k < m->headerCount; k++) {
        count += sameName(&m->headers[k], h);
    }
    if (count == 1) {
        rc = corCorPutHead(e, COR_COR_NODE_STRING, 0, h->name, h->nameLen,
                           DEPTH_VALUE);
        return rc == 0 ? headerValue(e, h, 0) : rc;
    }
    if ((rc = corCorPutHead(e, COR_COR_NODE_ARRAY, 0, h->name, h->nameLen,
                            DEPTH_VALUE))
            != 0
        || (rc = corCorPutOpen(e, &start)) != 0) {
        return rc;
    }
    for (unsigned k = i; rc == 0 && k < m->headerCount; k++) {
        if (sameName(&m->headers[k], h)) {
            rc = headerValue(e, &m->headers[k], DEPTH_REPEATED);
        }
    }
    return rc == 0 ? corCorPutClose(e, start) : rc;
}

static int
putHeaders(CorCorEncoder* e, const CorCorMessage* m)
{
    CorHeader ct;
    size_t start;
    int rc = corCorPutHeadKnown(e, COR_COR_NODE_OBJECT, 0,
                                COR_COR_KNOWN_HEADERS, DEPTH_MEMBER);

    if (rc != 0 || (rc = corCorPutOpen(e, &start)) != 0) {
        return rc;
    }
    if (corCorContentType(m, &ct)) {
        rc = corCorPutHead(e, COR_COR_NODE_STRING, 0, ct.name, ct.nameLen,
                           DEPTH_VALUE);
        rc = rc == 0 ? headerValue(e, &ct, 0) : rc;
    }
    for (unsigned i = 0; rc == 0 && i < m->headerCount; i++) {
        if (headerLeads(m, i)) {
            rc = putHeaderMember(e, m, i);
        }
    }
    return rc == 0 ? corCorPutClose(e, start) : rc;
}

/* The body under its member, by the body rule: "body", "text", "bytes". */
static int
putBody(CorCorEncoder* e, const CorCorMessage* m)
{
    json_t* tree;
    char* b64;
    int rc;

    if (m->bodyLen == 0) {
        return 0;
    }
    if ((tree = corCorBodyTree(m->body, m->bodyLen)) != NULL) {
        rc = corCorPutNode(e, tree, "body", 4, DEPTH_MEMBER);
        json_decref(tree);
        return rc;
    }
    if (memchr(m->body, '\0', m->bodyLen) == NULL
        && corCorUtf8(m->body, m->bodyLen)) {
        return putStringMember(e, COR_COR_KNOWN_TEXT, m->body, m->bodyLen);
    }
    if ((b64 = malloc((m->bodyLen + 2) / 3 * 4)) == NULL) {
        corCorWhy(e->why, e->whyLen, "no memory for a message");
        return -ENOMEM;
    }
    corCorBase64(m->body, m->bodyLen, b64);
    rc = putStringMember(e, COR_COR_KNOWN_BYTES, b64, (m->bodyLen + 2) / 3 * 4);
    free(b64);
    return rc;
}

/* The root object, whose header comes with a name mode of none. */
static int
putMessage(CorCorEncoder* e, CorCorType type, const CorCorMessage* m)
{
    size_t start;
    int rc = corCorPutHead(e, COR_COR_NODE_OBJECT, 0, NULL, 0, 1);

    if (rc != 0 || (rc = corCorPutOpen(e, &start)) != 0
        || (rc = putFirst(e, type, m)) != 0 || (rc = putHeaders(e, m)) != 0
        || (rc = putBody(e, m)) != 0) {
        return rc;
    }
    return corCorPutClose(e, start);
}

int
corCorMessageEncode(CorCorTables* t, CorCorType type, uint32_t id,
                    const CorCorMessage* m, CorBuf* out, char* why,
                    size_t whyLen)
{
    size_t start = out->len;
    CorCorEncoder e;
    int n;

    if (corBufReserve(out, COR_COR_HEAD_LEN) != 0) {
        corCorWhy(why, whyLen, "no memory for a frame");
        return -ENOMEM;
    }
    out->len += COR_COR_HEAD_LEN;
    corCorEncodeBegin(&e, t, out, why, whyLen);
    n = corCorEncodeEnd(&e, putMessage(&e, type, m));
    if (n < 0) {
        out->len = start;
        return n;
    }
    corCorHeadWrite(out->data + start, type, id, (uint32_t)n);
    return COR_COR_HEAD_LEN + n;
}

/* ---- Decoder ------------------------------------------------------------ */

/* The root's members, a bit each: each comes at most once. */
enum {
    MEMBER_VERB = 1 << 0,
    MEMBER_PATH = 1 << 1,
    MEMBER_STATUS = 1 << 2,
    MEMBER_HEADERS = 1 << 3,
    MEMBER_TEXT = 1 << 4,
    MEMBER_BYTES = 1 << 5,
    MEMBER_BODY = 1 << 6
};

/* By CorCorKnown: the names are corCorKnownNames. */
static const struct {
    unsigned member;
    unsigned type; /* the node type it must have; 0: any */
} members[COR_COR_KNOWN_COUNT] = {
    [COR_COR_KNOWN_VERB] = { MEMBER_VERB, COR_COR_NODE_STRING },
    [COR_COR_KNOWN_PATH] = { MEMBER_PATH, COR_COR_NODE_STRING },
    [COR_COR_KNOWN_STATUS] = { MEMBER_STATUS, COR_COR_NODE_INT },
    [COR_COR_KNOWN_HEADERS] = { MEMBER_HEADERS, COR_COR_NODE_OBJECT },
    [COR_COR_KNOWN_TEXT] = { MEMBER_TEXT, COR_COR_NODE_STRING },
    [COR_COR_KNOWN_BYTES] = { MEMBER_BYTES, COR_COR_NODE_STRING },
    [COR_COR_KNOWN_BODY] = { MEMBER_BODY, 0 },
};

/* What the store holds beyond twice the frame: names by index, the
 * header lines of a message of a dozen or so. */
#define STORE_SLACK 512
/* Lines the first block holds: a dozen headers, some twice. */
#define LINES_FIRST 12

/* A string kept in the store: its offset, since the store moves as it
 * grows. */
typedef struct {
    size_t at;
    size_t len;
} Kept;

/* One header line as read: every name in the object is one (for the
 * check of a second one), with keep false for Content-Type and the
 * dropped ones. */
typedef struct {
    Kept name;
    Kept value;
    bool keep;
} Line;

/* A frame being read into a message: the strings in store, the lines in
 * lines, until both become the message's one allocation. */
typedef struct {
    CorCorDecoder d;
    CorCorType type;
    unsigned seen;
    int64_t status;
    Kept verb;
    Kept path;
    Kept body; /* text or bytes (base64) as sent */
    json_t* bodyTree;
    Line contentType;
    CorBuf store;
    CorBuf lines; /* of Line */
    unsigned lineCount;
} Reader;

#define refuse(r, ...) corCorRefuse((r)->d.why, (r)->d.whyLen, -1, __VA_ARGS__)

static int
noMemory(Reader* r)
{
    corCorWhy(r->d.why, r->d.whyLen, "no memory for a message");
    return -ENOMEM;
}

static const char*
keptAt(const Reader* r, Kept k)
{
    return (const char*)r->store.data + k.at;
}

/* Room for n more bytes at the end of b, looked at inline: the store and
 * the lines are sized for a frame when it begins, and grow only past
 * that. */
static inline int
room(Reader* r, CorBuf* b, size_t n)
{
    if (b->cap - b->len < n && corBufReserve(b, n) != 0) {
        return noMemory(r);
    }
    return 0;
}

/* Copy s, NUL-terminated, to the end of the store. */
static int
keep(Reader* r, const CorCorStr* s, Kept* k)
{
    if (room(r, &r->store, s->len + 1) != 0) {
        return -ENOMEM;
    }
    k->at = r->store.len;
    k->len = s->len;
    memcpy(r->store.data + k->at, s->s, s->len);
    r->store.data[k->at + s->len] = '\0';
    r->store.len += s->len + 1;
    return 0;
}

static int
getKept(Reader* r, size_t end, Kept* k)
{
    CorCorStr s;
    int rc = corCorGetString(&r->d, end, &s);

    return rc == 0 ? keep(r, &s, k) : rc;
}

/* Whether the headers object already has a member named name. */
static bool
nameSeen(const Reader* r, const CorCorStr* name)
{
    const Line* lines = (const Line*)r->lines.data;

    for (unsigned i = 0; i < r->lineCount; i++) {
        if (lines[i].name.len == name->len
            && memcmp(keptAt(r, lines[i].name), name->s, name->len) == 0) {
            return true;
        }
    }
    return false;
}

/* One value of a header: a string HTTP can carry, a line of its own. */
static int
getLine(Reader* r, size_t end, unsigned tag, Kept name)
{
    Line line = { .name = name };
    int rc;

    if ((tag & 7) != COR_COR_NODE_STRING) {
        return refuse(r, "header \"%.40s\": a value that is not a string",
                      keptAt(r, name));
    }
    if ((rc = getKept(r, end, &line.value)) != 0) {
        return rc;
    }
    if (!corCorFieldValue(keptAt(r, line.value), line.value.len)) {
        return refuse(r,
                      "header \"%.40s\": a value that is not a string "
                      "HTTP can carry",
                      keptAt(r, name));
    }
    if (room(r, &r->lines, sizeof(line)) != 0) {
        return -ENOMEM;
    }
    memcpy(r->lines.data + r->lines.len, &line, sizeof(line));
    r->lines.len += sizeof(line);
    r->lineCount++;
    return 0;
}

/* A header that came more than once: an array of its values. */
static int
getLines(Reader* r, size_t end, Kept name)
{
    size_t childEnd;
    unsigned tag;
    unsigned n = 0;
    int rc = corCorGetLength(&r->d, end, &childEnd);

    while (rc == 0 && r->d.pos < childEnd) {
        rc = corCorGetHead(&r->d, childEnd, DEPTH_REPEATED, false, &tag, NULL);
        rc = rc == 0 ? getLine(r, childEnd, tag, name) : rc;
        n++;
    }
    if (rc == 0 && n == 0) {
        return refuse(r, "header \"%.40s\": no value", keptAt(r, name));
    }
    return rc;
}

/* One member of the headers object. Content-Type is one line at most,
 * under one name whatever its case. */
static int
getHeader(Reader* r, size_t end)
{
    CorCorStr s;
    Kept name;
    unsigned tag;
    uint8_t kind;
    bool contentType;
    unsigned before = r->lineCount;
    int rc = corCorGetHead(&r->d, end, DEPTH_VALUE, true, &tag, &s);

    if (rc != 0) {
        return rc;
    }
    if (nameSeen(r, &s)) {
        return refuse(r, "a second \"%.40s\" in one object", s.s);
    }
    if (!s.token && !corCorToken(s.s, s.len)) {
        return refuse(r, "header \"%.40s\": a name that is not a token", s.s);
    }
    kind = s.kind != 0 ? s.kind : corCorNameKind(s.s, s.len);
    contentType = (kind & COR_COR_NAME_CONTENT_TYPE) != 0;
    if ((rc = keep(r, &s, &name)) != 0) {
        return rc;
    }
    rc = (tag & 7) == COR_COR_NODE_ARRAY ? getLines(r, end, name)
                                         : getLine(r, end, tag, name);
    if (rc == 0 && contentType) {
        if (r->lineCount != before + 1 || r->contentType.keep) {
            return refuse(r, "more than one Content-Type");
        }
        r->contentType = ((Line*)r->lines.data)[before];
        r->contentType.keep = true;
    }
    for (unsigned i = before; rc == 0 && i < r->lineCount; i++) {
        ((Line*)r->lines.data)[i].keep = (kind
                                          & (COR_COR_NAME_CONTENT_TYPE
                                             | COR_COR_NAME_DROPPED))
                                         == 0;
    }
    return rc;
}

static int
getHeaders(Reader* r, size_t end)
{
    size_t childEnd;
    int rc = corCorGetLength(&r->d, end, &childEnd);

    while (rc == 0 && r->d.pos < childEnd) {
        rc = getHeader(r, childEnd);
    }
    return rc;
}

/* The value of the root's member m, of the type it must have. */
static int
getMember(Reader* r, size_t end, unsigned member, unsigned tag)
{
    switch (member) {
    case MEMBER_VERB:
        return getKept(r, end, &r->verb);
    case MEMBER_PATH:
        return getKept(r, end, &r->path);
    case MEMBER_STATUS:
        return corCorGetInt(&r->d, end, tag >> 5, &r->status);
    case MEMBER_HEADERS:
        return getHeaders(r, end);
    case MEMBER_TEXT:
    case MEMBER_BYTES:
        return getKept(r, end, &r->body);
    default:
        return corCorGetValue(&r->d, end, tag, DEPTH_MEMBER, &r->bodyTree);
    }
}

/* One member of the root: known, of its type, once, one body at most. */
static int
getRootMember(Reader* r, size_t end)
{
    const unsigned bodies = MEMBER_TEXT | MEMBER_BYTES | MEMBER_BODY;
    const unsigned own = r->type == COR_COR_REQUEST ? MEMBER_VERB | MEMBER_PATH
                                                    : MEMBER_STATUS;
    CorCorStr name;
    unsigned tag;
    size_t i;
    int rc = corCorGetHead(&r->d, end, DEPTH_MEMBER, true, &tag, &name);

    if (rc != 0) {
        return rc;
    }
    /* members is in CorCorKnown's order; a name not known is none. */
    i = ((name.kind != 0 ? name.kind : corCorNameKind(name.s, name.len))
         & COR_COR_NAME_KNOWN)
        - 1u;
    if (i >= sizeof(members) / sizeof(members[0])
        || (members[i].member & r->seen) != 0
        || (members[i].member & (own | MEMBER_HEADERS | bodies)) == 0
        || ((members[i].member & bodies) != 0 && (r->seen & bodies) != 0)
        || (members[i].type != 0 && members[i].type != (tag & 7))) {
        return refuse(r,
                      "a member \"%.40s\" unknown, of the wrong type, "
                      "twice, or a second body",
                      name.s);
    }
    r->seen |= members[i].member;
    return getMember(r, end, members[i].member, tag);
}

static int
getRoot(Reader* r, size_t len)
{
    size_t childEnd;
    unsigned tag;
    int rc = corCorGetHead(&r->d, len, 1, false, &tag, NULL);

    if (rc != 0) {
        return rc;
    }
    if ((tag & 7) != COR_COR_NODE_OBJECT) {
        return refuse(r, "a message that is not an object");
    }
    rc = corCorGetLength(&r->d, len, &childEnd);
    while (rc == 0 && r->d.pos < childEnd) {
        rc = getRootMember(r, childEnd);
    }
    return rc;
}

/* verb and path, or status, as corCorMessageRead checks them. */
static int
checkFirst(Reader* r)
{
    if (r->type == COR_COR_RESPONSE) {
        if ((r->seen & MEMBER_STATUS) == 0 || !corCorStatusFinal(r->status)) {
            return refuse(r, "RESPONSE: no status in 200..599");
        }
        return 0;
    }
    if ((r->seen & MEMBER_VERB) == 0 || (r->seen & MEMBER_PATH) == 0
        || !corCorToken(keptAt(r, r->verb), r->verb.len) || r->path.len == 0
        || !corCorFieldValue(keptAt(r, r->path), r->path.len)) {
        return refuse(r, "REQUEST: no token verb and path");
    }
    return 0;
}

/* The body's bytes: text as it is, bytes decoded, a tree printed. */
static int
bodyLength(Reader* r, size_t* lenP)
{
    ssize_t n = 0;

    if ((r->seen & MEMBER_TEXT) != 0) {
        n = (ssize_t)r->body.len;
    } else if ((r->seen & MEMBER_BYTES) != 0) {
        n = corCorUnbase64Len(keptAt(r, r->body), r->body.len);
    } else if (r->bodyTree != NULL) {
        n = (ssize_t)corCorBodyPrint(r->bodyTree, NULL, 0);
        n = n == 0 ? -1 : n;
    }
    if (n < 0) {
        return refuse(r, "a body that is not base64 or JSON");
    }
    *lenP = (size_t)n;
    return 0;
}

static int
bodyFill(Reader* r, char* out, size_t len)
{
    out[len] = '\0';
    if ((r->seen & MEMBER_TEXT) != 0) {
        memcpy(out, keptAt(r, r->body), len);
    } else if ((r->seen & MEMBER_BYTES) != 0
               && corCorUnbase64(keptAt(r, r->body), r->body.len, (uint8_t*)out)
                      != 0) {
        return refuse(r, "\"bytes\" that are not base64");
    } else if (r->bodyTree != NULL
               && corCorBodyPrint(r->bodyTree, out, len) != len) {
        return refuse(r, "a body tree that does not print");
    }
    return 0;
}

/* The lines that travel on, pointing into the store. */
static void
headersFill(const Reader* r, CorHeader* out)
{
    const Line* lines = (const Line*)r->lines.data;

    for (unsigned i = 0; i < r->lineCount; i++) {
        if (lines[i].keep) {
            *out++ = (CorHeader){ keptAt(r, lines[i].name), lines[i].name.len,
                                  keptAt(r, lines[i].value),
                                  lines[i].value.len };
        }
    }
}

/* Lay the message out in the store, which becomes m->store: the strings,
 * the body, then the header lines, aligned, with room for one more (a
 * client hands the store on as its response's, Content-Type among the
 * headers again: m->spare). */
static int
messageFill(Reader* r, CorCorMessage* m)
{
    const Line* lines = (const Line*)r->lines.data;
    size_t bodyAt = r->store.len;
    size_t bodyLen = 0;
    size_t at;
    CorHeader* headers;
    unsigned n = 0;
    int rc = bodyLength(r, &bodyLen);

    for (unsigned i = 0; i < r->lineCount; i++) {
        n += lines[i].keep;
    }
    at = (bodyAt + bodyLen + 1 + _Alignof(CorHeader) - 1) / _Alignof(CorHeader)
         * _Alignof(CorHeader);
    if (rc != 0
        || (rc = corBufReserve(&r->store,
                               at - bodyAt + (n + 1) * sizeof(CorHeader)))
               != 0) {
        return rc != -ENOMEM ? rc : noMemory(r);
    }
    if ((rc = bodyFill(r, (char*)r->store.data + bodyAt, bodyLen)) != 0) {
        return rc;
    }
    headers = (CorHeader*)(r->store.data + at);
    headersFill(r, headers);
    *m = (CorCorMessage){ .status = (int)r->status,
                          .headers = headers,
                          .headerCount = n,
                          .body = r->store.data + bodyAt,
                          .bodyLen = bodyLen,
                          .store = r->store.data,
                          .storeSize = r->store.cap,
                          .spare = true };
    if (r->type == COR_COR_REQUEST) {
        m->verb = keptAt(r, r->verb);
        m->path = keptAt(r, r->path);
    }
    m->contentType = r->contentType.keep ? keptAt(r, r->contentType.value)
                                         : NULL;
    r->store = (CorBuf){ 0 };
    return 0;
}

int
corCorEnvelopeRead(CorCorTables* t, const uint8_t* frame, size_t len,
                   uint32_t maxLength, CorCorHead* h, CorCorMessage* m,
                   char* why, size_t whyLen)
{
    Reader r = { .d.why = why, .d.whyLen = whyLen };
    int rc = corCorHeadRead(frame, len, maxLength, h, why, whyLen);

    memset(m, 0, sizeof(*m));
    if (rc < 0) {
        return rc == -EAGAIN ? -EPROTO : rc;
    }
    if (len - COR_COR_HEAD_LEN != h->length || h->length == 0
        || (h->type != COR_COR_REQUEST && h->type != COR_COR_RESPONSE)) {
        return refuse(&r, "a frame that is not a whole message");
    }
    r.type = h->type;
    /* The store in one allocation for most frames: its strings (a name by
     * index may be longer than the byte that sent it), a body that is
     * kept and then copied (text) or decoded (bytes), the lines. */
    r.store.cap = (size_t)h->length * 2 + STORE_SLACK;
    r.lines.cap = LINES_FIRST * sizeof(Line);
    r.store.data = corChunkTake(&r.store.cap);
    r.lines.data = corChunkTake(&r.lines.cap);
    if (r.store.data == NULL || r.lines.data == NULL) {
        rc = noMemory(&r);
        goto done;
    }
    corCorDecodeBegin(&r.d, t, frame + COR_COR_HEAD_LEN, why, whyLen);
    rc = corCorDecodeEnd(&r.d, h->length, getRoot(&r, h->length));
    if (rc == 0
        && ((rc = checkFirst(&r)) != 0 || (rc = messageFill(&r, m)) != 0)
        && t != NULL) {
        /* The tree was whole; the message was not: back as before. */
        corCorTableTruncate(&t->namespaces, r.d.namespaces);
        corCorTableTruncate(&t->names, r.d.names);
    }
done:
    corChunkGive(r.store.data, r.store.cap);
    corChunkGive(r.lines.data, r.lines.cap);
    json_decref(r.bodyTree);
    return rc;
}

/* A frame the direct decoder refused goes through the reference path,
 * which refuses it (the tests and the fuzzer hold the two to the same
 * verdicts) with its own words and leaves the tables as it always has.
 * Only a connection about to close pays for it. */
int
corCorMessageDecode(CorCorTables* t, const uint8_t* frame, size_t len,
                    uint32_t maxLength, CorCorHead* h, CorCorMessage* m,
                    char* why, size_t whyLen)
{
    json_t* tree;
    int rc = corCorEnvelopeRead(t, frame, len, maxLength, h, m, why, whyLen);

    if (rc == 0) {
        return 0;
    }
    rc = corCorFrameDecode(t, frame, len, maxLength, h, &tree, why, whyLen);
    if (rc != 0) {
        return rc;
    }
    return corCorMessageRead(h->type, tree, m, why, whyLen);
}
