/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every file of the core reads of the process it runs in: the
 * binary's path (main sets it; modules are looked for beside it, and an
 * upgrade runs it again), and in a generation its runtime (the
 * configuration, the limits, the loops and the workers), which
 * corGenerationPrepare and corGenerationRun fill in before anything is
 * served. Kept apart from corGeneration.c, which starts and stops
 * everything else: the files it starts read the runtime without calling
 * back up into it.
 */
#include "corCoreInt.h"

CorRuntime corRuntime;

const char* corSelfPath = "cor";

unsigned
corLoopCount(void)
{
    return corRuntime.loopCount;
}

CorEvLoop*
corLoopAt(unsigned index)
{
    return index < corRuntime.loopCount ? corRuntime.loops[index] : NULL;
}

const CorLimits*
corLimits(void)
{
    return &corRuntime.limits;
}
