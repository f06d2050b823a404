/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Modules: loading with dlopen, the ABI check, the registries of handlers
 * and protocols they fill, and their lifecycle. Only a generation loads
 * modules; the master never runs module code, so a module that crashes at
 * init takes a generation down, never the server.
 *
 * The ABI check compares the descriptor's fields one by one and says which
 * differs, so the message tells the user what to rebuild and against what.
 */
#include "corCoreInt.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CorModule* modules;
static unsigned moduleCount;
static CorHandlerEntry* handlers;
static unsigned handlerCount;
static CorProtocolEntry* protocols;
static unsigned protocolCount;
static CorModule builtinModule = { .path = "(built in)" };

/* ---- The module API ------------------------------------------------------ */

const char*
corModuleName(const CorModule* m)
{
    return m->descriptor != NULL ? m->descriptor->name : "core";
}

void
corModuleSetData(CorModule* m, void* data)
{
    m->data = data;
}

void*
corModuleData(const CorModule* m)
{
    return m->data;
}

CorConfErrors*
corModuleErrors(CorModule* m)
{
    return m->errors;
}

void
corModuleError(CorModule* m, const CorConf* at, const char* fmt, ...)
{
    char message[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    corConfErrorf(m->errors, at != NULL ? at : m->conf, "module %s: %s",
                  corModuleName(m), message);
}

int
corHandlerAdd(CorModule* m, const CorHandler* handler)
{
    CorHandlerEntry* grown;

    if (handler->name == NULL || handler->serve == NULL) {
        corModuleError(m, NULL, "a handler needs a name and a serve function");
        return -1;
    }
    if (corHandlerFind(handler->name) != NULL) {
        corModuleError(m, NULL, "handler '%s' is already registered",
                       handler->name);
        return -1;
    }
    grown = realloc(handlers, (handlerCount + 1) * sizeof(*handlers));
    if (grown == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    handlers = grown;
    handlers[handlerCount].handler = *handler;
    handlers[handlerCount].handler.name = strdup(handler->name);
    handlers[handlerCount].module = m;
    handlerCount++;
    return 0;
}

int
corProtocolAdd(CorModule* m, const CorProtocol* protocol)
{
    CorProtocolEntry* grown;

    if (corProtocolFind(protocol->name) != NULL
        || (protocol->tlsName != NULL
            && corProtocolFind(protocol->tlsName) != NULL)) {
        corModuleError(m, NULL, "protocol '%s' is already registered",
                       protocol->name);
        return -1;
    }
    grown = realloc(protocols, (protocolCount + 1) * sizeof(*protocols));
    if (grown == NULL) {
        corModuleError(m, NULL, "out of memory");
        return -1;
    }
    protocols = grown;
    protocols[protocolCount].protocol = *protocol;
    protocols[protocolCount].module = m;
    protocolCount++;
    return 0;
}

const CorHandlerEntry*
corHandlerFind(const char* name)
{
    for (unsigned i = 0; i < handlerCount; i++) {
        if (strcmp(handlers[i].handler.name, name) == 0) {
            return &handlers[i];
        }
    }
    return NULL;
}

const char**
corHandlerNames(void)
{
    const char** names = malloc((handlerCount + 1) * sizeof(*names));

    for (unsigned i = 0; names != NULL && i < handlerCount; i++) {
        names[i] = handlers[i].handler.name;
    }
    if (names != NULL) {
        names[handlerCount] = NULL;
    }
    return names;
}

const CorProtocolEntry*
corProtocolFind(const char* name)
{
    for (unsigned i = 0; i < protocolCount; i++) {
        const CorProtocol* p = &protocols[i].protocol;

        if (strcmp(p->name, name) == 0
            || (p->tlsName != NULL && strcmp(p->tlsName, name) == 0)) {
            return &protocols[i];
        }
    }
    return NULL;
}

unsigned
corProtocolCount(void)
{
    return protocolCount;
}

const CorProtocolEntry*
corProtocolAt(unsigned index)
{
    return &protocols[index];
}

/* ---- Finding and checking a module file ---------------------------------- */

static char*
joinPath(const char* dir, size_t dirLen, const char* name, const char* ext)
{
    size_t len = dirLen + 1 + strlen(name) + strlen(ext) + 1;
    char* path = malloc(len);

    if (path != NULL) {
        snprintf(path, len, "%.*s/%s%s", (int)dirLen, dir, name, ext);
    }
    return path;
}

char*
corModulePath(const char* load, const char* configFile)
{
    size_t len = strlen(load);
    const char* slash;
    char* path;

    /* A path: beside the configuration file, always with a slash, since a
     * bare "wait.so" would send dlopen to its search path instead. */
    if (strchr(load, '/') != NULL
        || (len >= 3 && strcmp(load + len - 3, ".so") == 0)) {
        return corConfigPathBeside(configFile, load);
    }
    /* Beside the binary first (a build tree), then where make install
     * puts modules. */
    slash = strrchr(corSelfPath, '/');
    if (slash != NULL) {
        char dir[PATH_MAX];

        snprintf(dir, sizeof(dir), "%.*s/modules", (int)(slash - corSelfPath),
                 corSelfPath);
        path = joinPath(dir, strlen(dir), load, ".so");
        if (path != NULL && access(path, R_OK) == 0) {
            return path;
        }
        free(path);
    }
    return joinPath(COR_PREFIX "/lib/cor/modules",
                    strlen(COR_PREFIX "/lib/cor/modules"), load, ".so");
}

/* Compare what the module was built against with this binary, field by
 * field. Returns NULL when they agree, else what differs. */
static const char*
abiMismatch(const CorModuleDescriptor* d, char* buf, size_t size)
{
    if (d->abiVersion != COR_ABI_VERSION) {
        snprintf(buf, size,
                 "it was built for cor ABI %u (cor %s), this cor "
                 "has ABI %u (cor %s): rebuild it against this cor's "
                 "headers",
                 d->abiVersion,
                 d->abiVersion != 0 && d->corVersion ? d->corVersion : "?",
                 COR_ABI_VERSION, COR_VERSION);
    } else if (d->pointerSize != sizeof(void*)) {
        snprintf(buf, size,
                 "it was built for %u-byte pointers, this cor "
                 "has %zu",
                 d->pointerSize, sizeof(void*));
    } else if (d->descriptorSize != sizeof(CorModuleDescriptor)
               || d->requestSize != sizeof(CorRequest)) {
        snprintf(buf, size,
                 "its descriptor and request are %u and %u "
                 "bytes, this cor's are %zu and %zu, with the same ABI "
                 "number: its cor.h was edited",
                 d->descriptorSize, d->requestSize, sizeof(CorModuleDescriptor),
                 sizeof(CorRequest));
    } else {
        return NULL;
    }
    return buf;
}

static const CorModuleDescriptor*
openDescriptor(const char* path, void** dlP, char* why, size_t whySize)
{
    void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const CorModuleDescriptor* d;

    if (dl == NULL) {
        snprintf(why, whySize, "cannot load: %s", dlerror());
        return NULL;
    }
    d = dlsym(dl, "corModuleDescriptor");
    if (d == NULL) {
        snprintf(why, whySize,
                 "%s is not a cor module (it exports no "
                 "corModuleDescriptor: build it with COR_MODULE)",
                 path);
        dlclose(dl);
        return NULL;
    }
    *dlP = dl;
    return d;
}

int
corModuleInfo(const char* load)
{
    /* Named as `load:` names it, in a configuration file in the current
     * folder: "greet.so" is ./greet.so (dlopen would search its path for
     * a bare name), "forward" the tree's or the installed module. */
    char* path = corModulePath(load, "cor.yaml");
    char why[512];
    void* dl;
    const CorModuleDescriptor* d = path != NULL ? openDescriptor(path, &dl, why,
                                                                 sizeof(why))
                                                : NULL;
    const char* mismatch;

    if (d == NULL) {
        fprintf(stderr, "cor: %s\n", path != NULL ? why : "out of memory");
        free(path);
        return 1;
    }
    printf("module:       %s\n", d->name ? d->name : "?");
    printf("file:         %s\n", path);
    printf("built for:    cor %s, ABI %u\n",
           d->corVersion ? d->corVersion : "?", d->abiVersion);
    printf("compiler:     %s\n", d->compiler ? d->compiler : "?");
    printf("sizes:        descriptor %u, request %u, pointer %u\n",
           d->descriptorSize, d->requestSize, d->pointerSize);
    mismatch = abiMismatch(d, why, sizeof(why));
    printf("this cor:     %s, ABI %u: %s\n", COR_VERSION, COR_ABI_VERSION,
           mismatch ? mismatch : "compatible");
    dlclose(dl);
    free(path);
    return mismatch ? 1 : 0;
}

/* ---- Lifecycle ----------------------------------------------------------- */

static int
loadOne(CorModule* m, const CorConfigModule* entry, CorConfErrors* errors)
{
    char why[512];

    m->errors = errors;
    m->conf = entry->node;
    m->path = corModulePath(entry->load, corConfFile(entry->node));
    if (m->path == NULL) {
        corConfErrorf(errors, entry->node, "out of memory");
        return -1;
    }
    m->descriptor = openDescriptor(m->path, &m->dl, why, sizeof(why));
    if (m->descriptor == NULL) {
        corConfErrorf(errors, entry->node, "module '%s': %s", entry->load, why);
        return -1;
    }
    if (abiMismatch(m->descriptor, why, sizeof(why)) != NULL) {
        corConfErrorf(errors, entry->node, "module '%s' (%s) is refused: %s",
                      entry->load, m->path, why);
        return -1;
    }
    if (m->descriptor->init != NULL
        && m->descriptor->init(m, entry->node) != 0) {
        if (errors->count == 0) {
            corConfErrorf(errors, entry->node, "module '%s' failed to start",
                          entry->load);
        }
        return -1;
    }
    return 0;
}

int
corModulesLoad(const CorConfig* config, const CorHandler* builtins,
               unsigned builtinCount, CorConfErrors* errors)
{
    int rc = 0;

    /* The core's own handlers belong to a module of its own. */
    builtinModule.errors = errors;
    for (unsigned i = 0; i < builtinCount; i++) {
        corHandlerAdd(&builtinModule, &builtins[i]);
    }
    modules = calloc(config->moduleCount ? config->moduleCount : 1,
                     sizeof(*modules));
    if (modules == NULL) {
        return -1;
    }
    for (unsigned i = 0; i < config->moduleCount; i++) {
        const CorConfigModule* entry = &config->modules[i];
        unsigned before = errors->count;
        char where[32];

        if (loadOne(&modules[moduleCount], entry, errors) != 0) {
            rc = -1;
        }
        moduleCount++;
        /* What the module never read of its mapping is a typo; after an
         * error of its own, only a key near one it took ("upstream" for
         * "upstreams") surely is: it may not have come to the others. */
        snprintf(where, sizeof(where), "modules[%u]", i);
        if (errors->count == before) {
            corConfUnusedKeys(entry->node, where, errors);
        } else {
            corConfMistypedKeys(entry->node, where, errors);
        }
        if (errors->count != before) {
            rc = -1;
        }
    }
    return rc;
}

/* m's list of records (corModuleRecordsRead), after its exit hook. */
static void
recordsFree(CorModule* m)
{
    char* array = m->records;

    for (unsigned i = 0; m->recordFree != NULL && i < m->recordCount; i++) {
        m->recordFree(array + i * m->recordSize);
    }
    free(array);
    m->records = NULL;
    m->recordCount = 0;
}

void
corModulesExit(void)
{
    for (unsigned i = moduleCount; i-- > 0;) {
        CorModule* m = &modules[i];

        if (m->descriptor != NULL && m->descriptor->exit != NULL) {
            m->descriptor->exit(m);
        }
        recordsFree(m);
    }
}

int
corModulesLoopInit(CorEvLoop* loop, unsigned index)
{
    for (unsigned i = 0; i < moduleCount; i++) {
        CorModule* m = &modules[i];

        if (m->descriptor->loopInit != NULL
            && m->descriptor->loopInit(m, loop, index) != 0) {
            corLog(COR_LOG_ERROR, "module %s: loop %u failed to start",
                   corModuleName(m), index);
            return -1;
        }
    }
    return 0;
}

void
corModulesLoopExit(CorEvLoop* loop, unsigned index)
{
    for (unsigned i = moduleCount; i-- > 0;) {
        CorModule* m = &modules[i];

        if (m->descriptor->loopExit != NULL) {
            m->descriptor->loopExit(m, loop, index);
        }
    }
}
