/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A list of headers (CorHeader: a name and a value, each with its length,
 * not NUL-terminated), as a request carries its own and a client's
 * answer its: a header found by name, whatever its case (RFC 9110 5.1),
 * and the copy that work beside its caller keeps of the caller's
 * (corNotify.c, corClientCall.c), in one block.
 */
#include "corCoreInt.h"

#include <stdint.h>
#include <string.h>

size_t
corHostNameLen(const char* value, size_t len)
{
    const char* colon;

    if (len > 0 && value[0] == '[') {
        const char* close = memchr(value, ']', len);

        return close != NULL ? (size_t)(close - value) + 1 : len;
    }
    colon = memchr(value, ':', len);
    return colon != NULL ? (size_t)(colon - value) : len;
}

const CorHeader*
corHeadersFind(const CorHeader* headers, unsigned count, const char* name)
{
    size_t len = strlen(name);

    for (unsigned i = 0; i < count; i++) {
        if (corHeaderIsLen(&headers[i], name, len)) {
            return &headers[i];
        }
    }
    return NULL;
}

size_t
corHeadersCopySize(const CorHeader* headers, unsigned count)
{
    size_t size = count * sizeof(CorHeader) + _Alignof(CorHeader);

    for (unsigned i = 0; i < count; i++) {
        size += headers[i].nameLen + headers[i].valueLen;
    }
    return size;
}

CorHeader*
corHeadersCopy(const CorHeader* headers, unsigned count, char* p, char** endP)
{
    CorHeader* copy = (CorHeader*)(void*)(((uintptr_t)p + _Alignof(CorHeader)
                                           - 1)
                                          & ~(uintptr_t)(_Alignof(CorHeader)
                                                         - 1));

    p = (char*)(copy + count);
    for (unsigned i = 0; i < count; i++) {
        copy[i] = headers[i];
        copy[i].name = memcpy(p, headers[i].name, headers[i].nameLen);
        p += headers[i].nameLen;
        if (headers[i].valueLen > 0) {
            copy[i].value = memcpy(p, headers[i].value, headers[i].valueLen);
            p += headers[i].valueLen;
        }
    }
    *endP = p;
    return copy;
}
