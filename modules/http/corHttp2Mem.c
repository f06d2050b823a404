/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nghttp2's memory for one connection (docs/http2.md, "An idle
 * connection"). Why it exists: an nghttp2 session allocates its frame
 * buffer (16 KiB and a frame head) when it is made and keeps it until it
 * is deleted, and the session of an idle connection lives for as long as
 * the connection does. Through this allocator (nghttp2_mem) that buffer
 * is pages of its own, so that once the session has nothing to send
 * those pages can go back to the kernel (MADV_DONTNEED) while the
 * mapping stays: the next frame written into them finds zeroed pages,
 * faulted in as it writes.
 *
 * A calloc of a page or more (the stream map's table: 4 KiB, zero while
 * no stream is open) gets pages of its own as well: zero from the
 * kernel, resident only once written, and given back while its bytes are
 * all zero again, which takes nothing from it (the next read finds the
 * same zeros). A connection that never opened a stream never holds it.
 * Everything else (the session itself, its HPACK tables: the state an
 * idle connection must keep) is malloc's.
 *
 * The small blocks a stream takes and gives back (its record, its
 * outbound frames, the answer's copied fields: five mallocs and frees a
 * request) go through the loop's cache (corHttpBlocks.c): a
 * connection's sixteen streams of a turn came and went past glibc's
 * per-thread cache of seven a size, and 1 000 instructions a request
 * went to its bins.
 *
 * The frame buffer is told from the rest by how nghttp2 makes it: an
 * nghttp2_buf's bytes, begun by realloc(NULL, ...) of exactly
 * NGHTTP2_FRAMEBUF_CHUNKLEN. An nghttp2_buf's bytes are only bytes (its
 * places are in its record), so zeroing them between frames loses
 * nothing; a block with a record inside it (an rcbuf: malloc) must never
 * get pages of its own.
 */
#include "corHttp2Int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* NGHTTP2_FRAMEBUF_CHUNKLEN (nghttp2_session.h, not installed): a frame
 * head, a pad length byte and the largest payload. */
#define FRAME_CHUNK (9 + 1 + 16384)

/* A block in pages of its own; its record is malloc's. */
typedef struct {
    CorList link; /* in Http2Mem.blocks */
    void* data;
    size_t len;  /* mapped: a whole number of pages */
    bool zeroed; /* a calloc's: its pages go back only while all zero */
} PagesBlock;

static size_t
pagesOf(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return (n + page - 1) / page * page;
}

static PagesBlock*
blockOf(Http2Mem* m, const void* p)
{
    /* Pages begin on a page, which no page is smaller than: most of
     * malloc's blocks are told apart without the walk. */
    if (((uintptr_t)p & (4096 - 1)) != 0) {
        return NULL;
    }
    for (CorList* l = m->blocks.next; l != &m->blocks; l = l->next) {
        PagesBlock* b = corContainerOf(l, PagesBlock, link);

        if (b->data == p) {
            return b;
        }
    }
    return NULL;
}

/* A zeroed block of n bytes in pages of its own, or NULL. */
static void*
pagesNew(Http2Mem* m, size_t n, bool zeroed)
{
    PagesBlock* b = malloc(sizeof(*b));

    if (b == NULL) {
        return NULL;
    }
    b->len = pagesOf(n);
    b->data = mmap(NULL, b->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->data == MAP_FAILED) {
        free(b);
        return NULL;
    }
    b->zeroed = zeroed;
    corListAppend(&m->blocks, &b->link);
    return b->data;
}

static void*
memMalloc(size_t n, void* arg)
{
    return corHttpBlockTake(((Http2Mem*)arg)->hl, n);
}

static void*
memCalloc(size_t count, size_t size, void* arg)
{
    void* p;

    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    if (count * size >= pagesOf(1)) {
        return pagesNew(arg, count * size, true);
    }
    p = memMalloc(count * size, arg);
    if (p != NULL) {
        memset(p, 0, count * size);
    }
    return p;
}

static void
memFree(void* p, void* arg)
{
    PagesBlock* b;

    if (p == NULL) {
        return;
    }
    b = blockOf(arg, p);
    if (b == NULL) {
        corHttpBlockGive(((Http2Mem*)arg)->hl, p);
        return;
    }
    munmap(b->data, b->len);
    corListRemove(&b->link);
    free(b);
}

/* A frame buffer begins here; a block that grows stays where it began:
 * pages stay pages (moved by mremap when they must grow), malloc's stay
 * malloc's. */
static void*
memRealloc(void* p, size_t n, void* arg)
{
    Http2Mem* m = arg;
    PagesBlock* b;
    void* moved;

    if (p == NULL) {
        return n == FRAME_CHUNK ? pagesNew(m, n, false) : malloc(n);
    }
    b = blockOf(m, p);
    if (b == NULL) {
        return realloc(p, n);
    }
    if (n <= b->len) {
        return p;
    }
    moved = mremap(b->data, b->len, pagesOf(n), MREMAP_MAYMOVE);
    if (moved == MAP_FAILED) {
        return NULL;
    }
    b->data = moved;
    b->len = pagesOf(n);
    return moved;
}

void
corHttp2MemInit(Http2Mem* m, HttpLoop* hl)
{
    m->hl = hl;
    corListInit(&m->blocks);
    m->mem = (nghttp2_mem){ m, memMalloc, memFree, memCalloc, memRealloc };
}

void
corHttp2MemRelease(Http2Mem* m)
{
    for (CorList* l = m->blocks.next; l != &m->blocks; l = l->next) {
        PagesBlock* b = corContainerOf(l, PagesBlock, link);
        const uint8_t* d = b->data;

        if (!b->zeroed || (d[0] == 0 && memcmp(d, d + 1, b->len - 1) == 0)) {
            madvise(b->data, b->len, MADV_DONTNEED);
        }
    }
}
