/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `guards` list of a guard module's conf (access, limit): each module
 * keeps an array of its own records, one a named guard, read the same way.
 */
#include "cor.h"

#include <stdlib.h>

int
corGuardsRead(CorModule* m, const CorConf* conf, const char* shape,
              size_t size, CorGuardReadFn read, void** arrayP,
              unsigned* countP)
{
    const CorConf* list = corConfSeq(conf, "guards", corModuleErrors(m));
    size_t count = corConfCount(list);
    char* array;
    int rc = 0;

    if (count == 0) {
        corModuleError(m, list != NULL ? list : conf,
                       "guards: at least one (%s)", shape);
        return -1;
    }
    array = calloc(count, size);
    if (array == NULL) {
        corModuleError(m, conf, "no memory");
        return -1;
    }
    *arrayP = array;
    *countP = (unsigned)count;
    for (unsigned i = 0; i < *countP; i++) {
        rc |= read(m, corConfAt(list, i), array + i * size, i);
    }
    return rc != 0 ? -1 : 0;
}
