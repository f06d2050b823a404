/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor.h: the whole module API, in three parts by reader: corModule.h
 * (application modules), corProtocol.h (protocol modules) and corClient.h
 * (clients of other servers), with corPostgres.h (PostgreSQL databases
 * that the postgres module configured); a module includes cor.h, or the part it
 * needs. A module is a shared object that exports one descriptor, made
 * with COR_MODULE(name, .init = ...); the core loads it with dlopen,
 * checks the ABI it was built for, and calls its hooks:
 *
 *     static void
 *     helloServe(CorRequest* r)
 *     {
 *         corRespond(r, 200, "text/plain", greeting, strlen(greeting));
 *     }
 *
 *     static int
 *     helloInit(CorModule* m, const CorConf* conf)
 *     {
 *         greeting = corConfString(conf, "greeting", "hello",
 *                                  corModuleErrors(m));
 *         return corHandlerAdd(m, &(CorHandler){ .name = "hello",
 *                                                .serve = helloServe });
 *     }
 *
 *     COR_MODULE(hello, .init = helloInit);
 *
 * Requests are protocol-neutral: the same handler serves HTTP and cor://.
 * Where a handler runs is said when it is registered (CorRun) and, per
 * request, by a CorRestCoroutineHook; docs/modules.md has the whole story.
 */
#ifndef COR_H
#define COR_H

#include "corModule.h"
#include "corProtocol.h"
#include "corClient.h"
#include "corPostgres.h"

#endif /* COR_H */
