/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cor:// server's settings (the module's YAML mapping: corCorModule.c
 * lists them), read once per generation by the module's init and read by
 * every file of the server. They are the bottom of the server's files, so
 * that the connection, its requests and the cut of a long REQUEST ask them
 * without asking the module.
 */
#include "corCorServerInt.h"

CorServerConf corCorServerConf;

void
corCorServerConfRead(const CorConf* conf, CorConfErrors* errors)
{
    CorServerConf* sc = &corCorServerConf;

    sc->maxFrame = (uint32_t)corConfSize(conf, "max_frame", COR_COR_FRAME_MAX,
                                         1024, (uint64_t)1 << 30, errors);
    sc->maxInFlight = (unsigned)corConfInt(conf, "max_in_flight", 256, 1, 65536,
                                           errors);
    sc->maxHeldBytes = corConfSize(conf, "max_in_flight_bytes",
                                   (uint64_t)16 << 20, 1024, (uint64_t)1 << 40,
                                   errors);
    sc->idleTimeoutMs = corConfDurationMs(conf, "idle_timeout", 60000, 1,
                                          24 * 3600 * 1000, errors);
    sc->helloTimeoutMs = corConfDurationMs(conf, "hello_timeout", 10000, 1,
                                           3600 * 1000, errors);
}
