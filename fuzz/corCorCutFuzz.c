/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the cut of a REQUEST past the limits
 * (modules/cor/corCorServerCut.c, included for its statics): the input is
 * a REQUEST's tree. Beyond the sanitizers (the search for the body reads
 * only the bytes that came: it is given exact-size copies of a prefix and
 * of the whole), it aborts when the cut would put the tables out of step:
 * a tree that decodes whole, and in which the search finds a body string
 * at its end, decodes cut short too, as the same head, and leaves both
 * tables with the same entries as the whole one.
 *
 * Build: see `make fuzz` (clang -fsanitize=fuzzer,address,undefined, the
 * codec's files, -ljansson).
 */
#include "../modules/cor/corCorServerCut.c"

#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define FUZZ_FRAME_MAX ((uint32_t)1 << 20)

CorServerConf corCorServerConf = { .maxFrame = FUZZ_FRAME_MAX };

/* What the cut file asks of the rest of the server. */
const CorLimits*
corLimits(void)
{
    static const CorLimits limits = { .headerBytes = 1024,
                                      .headerCount = 8,
                                      .bodyBytes = 64,
                                      .bodyBytesMost = 64 };

    return &limits;
}

int
corCorServerRequestRefuse(CorServerConn* c, uint32_t id, CorCorMessage* m,
                          uint64_t bodyLen)
{
    (void)c;
    (void)id;
    (void)bodyLen;
    corCorMessageClear(m);
    return 0;
}

static void
require(bool ok, const char* what)
{
    if (!ok) {
        fprintf(stderr, "corCorCutFuzz: %s\n", what);
        abort();
    }
}

/* Tables that already hold the names a REQUEST uses, as a connection's
 * do after its first one: the search finds them by index too. */
static CorCorTables*
tablesMade(void)
{
    static const char* const names[] = { "verb", "path",  "headers",
                                         "text", "bytes", "body" };
    CorCorTables* t = corCorTablesNew();

    for (size_t i = 0; t != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        corCorTableAppend(&t->names, names[i], strlen(names[i]));
    }
    return t;
}

/* The search on an exact copy of the first avail bytes of the tree. */
static bool
found(const uint8_t* tree, size_t avail, size_t treeLen, const CorCorTables* t,
      Cut* cut)
{
    uint8_t* copy = malloc(avail > 0 ? avail : 1);
    bool ok;

    require(copy != NULL, "no memory");
    memcpy(copy, tree, avail);
    ok = bodyFind(copy, avail, treeLen, &t->names, cut);
    free(copy);
    return ok;
}

static bool
sameMessage(const CorCorMessage* a, const CorCorMessage* b)
{
    return strcmp(a->verb, b->verb) == 0 && strcmp(a->path, b->path) == 0
           && a->headerCount == b->headerCount
           && (a->contentType == NULL) == (b->contentType == NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    CorCorTables* whole = tablesMade();
    CorServerConn c = { .received = tablesMade() };
    uint8_t* frame = malloc(COR_COR_HEAD_LEN + size);
    CorCorMessage a;
    CorCorMessage b;
    CorCorHead h;
    Cut cut;
    char why[COR_COR_WHY_MAX];

    require(whole != NULL && c.received != NULL && frame != NULL, "no memory");
    if (size > 0) {
        found(data, data[0] % size, size, whole, &cut);
    }
    corCorHeadWrite(frame, COR_COR_REQUEST, 1, (uint32_t)size);
    memcpy(frame + COR_COR_HEAD_LEN, data, size);
    h = (CorCorHead){ .type = COR_COR_REQUEST,
                      .id = 1,
                      .length = (uint32_t)size };
    if (size > 0 && size <= FUZZ_FRAME_MAX
        && found(data, size, size, whole, &cut)
        && corCorMessageDecode(whole, frame, COR_COR_HEAD_LEN + size,
                               FUZZ_FRAME_MAX, &h, &a, why, sizeof(why))
               == 0) {
        require(cutDecode(&c, &h, frame, &cut, &b, why, sizeof(why)) == 0, why);
        require(sameMessage(&a, &b), "the cut head differs");
        require(whole->names.count == c.received->names.count
                    && whole->namespaces.count == c.received->namespaces.count,
                "the cut left the tables out of step");
        corCorMessageClear(&a);
        corCorMessageClear(&b);
    }
    free(frame);
    corCorTablesFree(whole);
    corCorTablesFree(c.received);
    return 0;
}
