/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A module's list of named records from its conf (corModule.h,
 * corModuleRecordsRead): the guards of access and limit, the roots of
 * static, each read the same way into an array of the module's records,
 * which each module freed at its exit the same way too. The core keeps the
 * array on the module and frees it after the module's exit hook
 * (corModule.c), so a module says only how one record is read and what
 * one holds.
 */
#include "corCoreInt.h"

#include <assert.h>
#include <stdlib.h>

void*
corModuleRecordsRead(CorModule* m, const CorConf* conf, const char* key,
                     const char* shape, size_t size, CorRecordReadFn read,
                     CorRecordFreeFn freeRecord, unsigned* countP)
{
    const CorConf* list = corConfSeq(conf, key, corModuleErrors(m));
    size_t count = corConfCount(list);
    char* array;
    int rc = 0;

    *countP = 0;
    if (count == 0) {
        corModuleError(m, list != NULL ? list : conf, "%s: at least one (%s)",
                       key, shape);
        return NULL;
    }
    assert(m->records == NULL); /* one list a module */
    array = calloc(count, size);
    if (array == NULL) {
        corModuleError(m, conf, "no memory");
        return NULL;
    }
    m->records = array;
    m->recordCount = (unsigned)count;
    m->recordSize = size;
    m->recordFree = freeRecord;
    for (unsigned i = 0; i < m->recordCount; i++) {
        const CorConf* entry = corConfAt(list, i);

        if (corConfKind(entry) != COR_CONF_MAP) {
            corModuleError(m, entry, "%s[%u]: expected a mapping (%s)", key, i,
                           shape);
            rc = -1;
        } else if (read(m, entry, array + i * size, i) != 0) {
            rc = -1;
        }
    }
    if (rc != 0) {
        return NULL;
    }
    *countP = m->recordCount;
    return array;
}
