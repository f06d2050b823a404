/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The route a request ends on, known before its body is read. A protocol
 * must decide, with only the head in, how much body to take (the route's
 * limits.body_bytes) and whether to hand it on as it comes (its handler's
 * streamBody), long before the core routes the request for real
 * (corRequestServe). A route that rewrites the target has no handler and
 * no say: the route the rewritten target reaches decides. So the
 * rewrites are followed here, as corRequest.c follows them, on a scratch
 * copy of the request with its own arena, given back before returning.
 */
#include "corCoreInt.h"

/* As corRequest.c's REWRITES_MAX: past it the request is answered 500. */
#define REWRITES_MAX 10

CorRouteResult
corRouteFindFinal(const CorRequest* r, CorRouteMatch* match)
{
    CorRouteResult found = corRouteFind(r, match);
    CorRequest scratch;
    unsigned rewrites = 0;

    if (found != COR_ROUTE_FOUND || match->rules.route->rewrite == NULL) {
        return found;
    }
    scratch = *r;
    scratch.arena = NULL;
    scratch.captures = NULL;
    while (found == COR_ROUTE_FOUND && match->rules.route->rewrite != NULL) {
        const CorConfigRoute* in = match->rules.route;

        if (++rewrites > REWRITES_MAX
            || corRouteCapturesKeep(&scratch, match) != 0
            || corRouteRequestHeaders(&scratch, in) != 0
            || corRouteRewrite(&scratch, in) != 0) {
            found = COR_ROUTE_FAILED;
            break;
        }
        found = corRouteFind(&scratch, match);
    }
    corRequestArenaFree(&scratch);
    return found;
}

const CorLimits*
corRequestLimits(CorRequest* r)
{
    CorRouteMatch match;

    if (r->limits != NULL) {
        return r->limits;
    }
    r->limits = corLimits();
    if (corRoutesLimited() && corRouteFindFinal(r, &match) == COR_ROUTE_FOUND
        && match.rules.limits != NULL) {
        r->limits = match.rules.limits;
    }
    return r->limits;
}
