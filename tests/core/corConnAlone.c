/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the connection files (core/corConn.c, corConnPool.c) take from the
 * generation when a program links them without it (bench/corClientBench):
 * no worker pool (takes and puts sweep the shared pool instead), and no
 * metrics. Here, beside the tests, because it
 * reads the core's internals, which a benchmark includes none of.
 */
#include "corCoreInt.h"

CorRuntime corRuntime;

void
corMetricsClient(CorClientCount which)
{
    (void)which;
}
