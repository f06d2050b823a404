/* SPDX-License-Identifier: Apache-2.0 */
/*
 * This instance of cor, as modules name it to the world (a broker's client
 * id): made once by the master, so that every generation it starts (a
 * reload) says the same, and handed to a binary upgrade's new master in
 * the environment, which exec keeps. A generation's own PID would change
 * at each reload, and a broker would keep one session per generation.
 * Two instances of one configuration (two replicas, two containers whose
 * PIDs are alike) never say the same: the host name, the master's PID
 * and 24 random bits.
 */
#include "corCoreInt.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define INSTANCE_ENV "COR_INSTANCE"

static char instance[48];

static void
instanceMake(void)
{
    char host[13] = "";
    uint32_t random = 0;

    gethostname(host, sizeof(host) - 1);
    for (char* c = host; *c != '\0'; c++) {
        if (!isalnum((unsigned char)*c)) {
            *c = '_'; /* a dash is the parts' separator */
        }
    }
    if (getrandom(&random, sizeof(random), 0) != sizeof(random)) {
        random = (uint32_t)corEvClockMs() ^ (uint32_t)getpid() << 16;
    }
    snprintf(instance, sizeof(instance), "%s-%ld-%06x", host, (long)getpid(),
             random & 0xFFFFFF);
}

void
corInstanceInit(bool upgraded)
{
    const char* kept = getenv(INSTANCE_ENV);

    /* Only an upgrade's old master hands its own on: one in the
     * environment of a cor started by hand (from a shell that runs
     * another) would make two instances one. */
    if (upgraded && kept != NULL && kept[0] != '\0'
        && strlen(kept) < sizeof(instance)) {
        snprintf(instance, sizeof(instance), "%s", kept);
    } else {
        instanceMake();
    }
    setenv(INSTANCE_ENV, instance, 1);
}

const char*
corInstance(void)
{
    if (instance[0] == '\0') {
        instanceMake(); /* no master: `cor -t`, a tool */
    }
    return instance;
}
