/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's request calls that the HTTP/2 and HTTP/3 fuzzers share, as
 * stand-ins: a request's limits are the top level's (each fuzzer's own
 * corLimits), a body is never streamed (gathered by the protocol's own
 * code, which is what is fuzzed), a refusal is said nowhere, and every
 * connection is admitted.
 */
#include "corClient.h"
#include "corProtocol.h"

#include <errno.h>

const CorLimits*
corRequestLimits(CorRequest* r)
{
    (void)r;
    return corLimits();
}

int
corLimitsBody(const CorRequest* r, uint64_t bytes)
{
    (void)r;
    return bytes > corLimits()->bodyBytes ? 413 : 0;
}

void
corLimitsRefused(const char* protocol, const char* who, const char* what,
                 int status)
{
    (void)protocol;
    (void)who;
    (void)what;
    (void)status;
}

void
corLimitsRefusedFor(const CorRequest* r, const char* protocol, const char* who,
                    const char* what, int status)
{
    (void)r;
    corLimitsRefused(protocol, who, what, status);
}

bool
corRequestBodyStreams(const CorRequest* r)
{
    (void)r;
    return false;
}

int
corRequestBodyBegin(CorRequest* r)
{
    (void)r;
    return -ENOSYS;
}

int
corRequestBodyPut(CorRequest* r, const void* data, size_t len)
{
    (void)r;
    (void)data;
    (void)len;
    return -ENOSYS;
}

void
corRequestBodyEnd(CorRequest* r, int rc)
{
    (void)r;
    (void)rc;
}

bool
corAcceptAdmit(void)
{
    return true;
}

void
corAcceptClosed(void)
{
}
