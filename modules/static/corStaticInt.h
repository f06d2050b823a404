/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Inside modules/static: the roots the YAML names and the module's
 * settings (corStatic.c), the media types (corStaticMime.c), opening a
 * path without leaving its root (corStaticOpen.c), the open-file cache
 * (corStaticCache.c), the Range header (the core's corRange.h), the answers
 * (corStaticServe.c) and the multipart/byteranges body
 * (corStaticMultipart.c), the variants compressed ahead
 * (corStaticVariant.c).
 */
#ifndef COR_STATIC_INT_H
#define COR_STATIC_INT_H

#include "cor.h"

#include <stdint.h>
#include <sys/stat.h>

/* A root of the YAML: one handler. The module's, for the generation;
 * read by every loop and worker at once, never written after init. */
typedef struct {
    char* name;         /* the handler routes name */
    char* path;         /* the folder, absolute */
    char* index;        /* served for a directory; NULL: none */
    bool follow;        /* symlinks: follow (anywhere) rather than
                           beneath (only those that stay inside) */
    char* fallback;     /* served for a path that names nothing
                           (relative to the root); NULL: none */
    char* cacheControl; /* expires: "max-age=N"; NULL: none */
    bool dotfiles;      /* names starting with '.' are served */
    bool autoindex;     /* a folder without its index is listed */
    bool precompressed; /* NAME.zst, .br, .gz served for NAME */
    unsigned id;        /* its place in the list: the cache's key */
} StaticRoot;

/* What the module's YAML set beside the roots. */
typedef struct {
    unsigned cacheEntries; /* open_file_cache; 0: none */
    uint64_t cacheValidMs; /* open_file_cache_valid */
} StaticSettings;

extern StaticSettings corStaticSettings;

/* ---- Media types (corStaticMime.c) ----------------------------------------
 */

/* Add (or replace) the type of an extension (".wasm", compared without
 * case): a copy of both. Returns 0 or -ENOMEM. */
int corStaticMimeAdd(const char* ext, const char* type);
/* The type of a file name by its last extension; application/octet-stream
 * when none is known. The table's: it lives for the generation. */
const char* corStaticMimeOf(const char* name);
/* Read the system's table (/etc/mime.types) where path exists; 0, or
 * -errno for a file that cannot be read. */
int corStaticMimeSystemLoad(const char* path);
void corStaticMimeFree(void);

/* ---- Opening under a root (corStaticOpen.c) -------------------------------
 */

/*
 * Open rel (a relative path with no dot segment, "." for the root itself)
 * under root for reading, never blocking on a FIFO. With symlinks beneath,
 * no step of the walk may leave the root: openat2's RESOLVE_BENEATH where
 * the kernel has it (an absolute symlink is refused too), else the opened
 * file's real path is compared with the root's. Returns the fd, or
 * -errno: -EXDEV for a path that leaves the root.
 */
int corStaticOpen(const StaticRoot* root, const char* rel);

/* ---- The open-file cache (corStaticCache.c) -------------------------------
 */

/* An opened file as a request sees it: its own fd (the caller closes it;
 * -1 for a directory), what fstat said, and its validators. */
typedef struct {
    int fd;
    bool dir;
    uint64_t size;
    time_t mtime;
    const char* type;      /* the table's */
    char etag[48];         /* "SIZE-MTIME", hex, quoted */
    char lastModified[32]; /* IMF-fixdate */
} StaticFile;

/* Create the cache of corStaticSettings.cacheEntries entries, and free it.
 * Returns 0 or -ENOMEM. */
int corStaticCacheInit(void);
void corStaticCacheFree(void);

/*
 * Open rel under root into *f, from the cache when it holds rel and it
 * is fresh: opened by its path less than cacheValidMs ago, and fstat
 * still says what it said then (a file written in place is seen at
 * once, one replaced by a rename within cacheValidMs). A regular file or
 * a directory; anything else is -EACCES. Returns 0, or -errno as
 * corStaticOpen. From any thread; holds a lock only around the table,
 * never across an open.
 */
int corStaticCacheOpen(const StaticRoot* root, const char* rel, StaticFile* f);

/* ---- Listings (corStaticList.c) ----------------------------------------- */

/* Answer r with the listing of the folder rel under root (autoindex). */
void corStaticListAnswer(CorRequest* r, const StaticRoot* root,
                         const char* rel);

/* ---- Variants compressed ahead (corStaticVariant.c) ------------------- */

/*
 * precompressed: the variant of rel (the file f, opened) that r takes in
 * f's place: NAME.zst, NAME.br or NAME.gz, by Accept-Encoding's q, the
 * smaller coding on a tie. Replaces *f by it (f's fd closed; its type
 * kept, its ETag marked with the coding) and says Content-Encoding; says
 * Vary when any variant is there, taken or not. Leaves f as it is when
 * none fits.
 */
void corStaticVariantTake(CorRequest* r, const StaticRoot* root,
                          const char* rel, StaticFile* f);

/* ---- Answers (corStaticServe.c, corStaticMultipart.c) ---------------------
 */

/* Serve r from root, the one it was routed to. May yield (a multipart
 * body's writes). */
void corStaticServe(CorRequest* r, const StaticRoot* root);

/*
 * Answer 206 with the ranges of f as a multipart/byteranges body, its
 * length said: a stream, each part read from fd with pread. Owns fd.
 * May yield.
 */
void corStaticMultipartSend(CorRequest* r, const StaticFile* f, int fd,
                            const CorRange* ranges, unsigned count);

#endif /* COR_STATIC_INT_H */
