/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the inline switch (corCoResume and corCoYield in corCo.h) needs out
 * of line: the pointer to the coroutine running on this thread, and in
 * AddressSanitizer builds the calls that tell it of each switch. It is the
 * bottom of coroutine/: the stacks (corCoStack.c) and the overflow report
 * (corCoGuard.c) ask it who runs, and it asks nobody.
 */
#include "corCoInt.h"

#if COR_HAVE_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

__thread CorCo* corCoRunning __attribute__((tls_model("initial-exec")));

#if COR_HAVE_ASAN
/*
 * AddressSanitizer tracks one stack per thread; it must be told of each
 * switch (a start before, a finish after), or it takes the coroutine's
 * frames for wild accesses.
 */
void
corCoAsanResume(CorCo* co, void** fakeP)
{
    __sanitizer_start_switch_fiber(fakeP, co->stackLow, co->stackSize);
}

void
corCoAsanResumed(void* fake)
{
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
}

void
corCoAsanYield(CorCo* co)
{
    __sanitizer_start_switch_fiber(&co->asanFake, co->asanResumerLow,
                                   co->asanResumerSize);
}

void
corCoAsanYielded(CorCo* co)
{
    __sanitizer_finish_switch_fiber(co->asanFake, &co->asanResumerLow,
                                    &co->asanResumerSize);
}
#endif
