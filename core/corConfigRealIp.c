/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The top level's real_ip: { from: [ 10.0.0.0/8, ::1 ], header: NAME }.
 * The networks are parsed here, once, so that a request only compares
 * bytes (corRealIp.c), and a wrong one is an error at its own mark.
 */
#include "corConfigRead.h"

#include "cor.h"

#include <stdlib.h>
#include <strings.h>

static const struct {
    const char* name;
    CorRealIpHeader header;
} headers[] = {
    { "X-Forwarded-For", COR_REAL_IP_X_FORWARDED_FOR },
    { "X-Real-IP", COR_REAL_IP_X_REAL_IP },
    { "Forwarded", COR_REAL_IP_FORWARDED },
};

/* from: a network or a list of them, at least one. */
static void
readFrom(CorConfigRealIp* ri, const CorConf* from, CorConfErrors* e)
{
    bool list = corConfKind(from) == COR_CONF_SEQ;
    size_t count = list ? corConfCount(from) : 1;

    if (count == 0 || (!list && corConfKind(from) != COR_CONF_SCALAR)) {
        corConfErrorf(e, from,
                      "real_ip.from: expected a network or a list "
                      "of them, such as [ 10.0.0.0/8, \"::1\" ]");
        return;
    }
    ri->from = calloc(count, sizeof(*ri->from));
    if (ri->from == NULL) {
        corConfErrorf(e, from, "out of memory reading the configuration");
        return;
    }
    for (size_t i = 0; i < count; i++) {
        const CorConf* net = list ? corConfAt(from, i) : from;

        if (corConfKind(net) != COR_CONF_SCALAR
            || corNetParse(corConfText(net), &ri->from[ri->fromCount]) != 0) {
            corConfErrorf(e, net,
                          "real_ip.from: expected an address or a "
                          "network such as 10.0.0.0/8 or 2001:db8::/32, got "
                          "'%s'",
                          corConfKind(net) == COR_CONF_SCALAR ? corConfText(net)
                                                              : "a collection");
            continue;
        }
        ri->fromCount++;
    }
}

static void
readHeader(CorConfigRealIp* ri, const CorConf* m, CorConfErrors* e)
{
    const char* name = corConfString(m, "header", headers[0].name, e);

    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
        if (strcasecmp(name, headers[i].name) == 0) {
            ri->header = headers[i].header;
            ri->headerName = headers[i].name;
            return;
        }
    }
    corConfErrorf(e, corConfGet(m, "header"),
                  "real_ip.header: expected "
                  "X-Forwarded-For, X-Real-IP or Forwarded, got '%s'",
                  name);
}

void
corConfigRealIpRead(CorConfig* cf, const CorConf* root, CorConfErrors* e)
{
    static const char* const keys[] = { "from", "header", NULL };
    const CorConf* m = corConfMap(root, "real_ip", e);
    const CorConf* from;

    if (m == NULL) {
        return;
    }
    cf->realIp = calloc(1, sizeof(*cf->realIp));
    if (cf->realIp == NULL) {
        corConfErrorf(e, m, "out of memory reading the configuration");
        return;
    }
    from = corConfigRequired(m, "from", "real_ip",
                             "the proxies trusted, such as [ 10.0.0.0/8 ]", e);
    if (from != NULL) {
        readFrom(cf->realIp, from, e);
    }
    readHeader(cf->realIp, m, e);
    corConfUnknownKeys(m, "real_ip", keys, e);
}

void
corConfigRealIpFree(CorConfigRealIp* ri)
{
    if (ri != NULL) {
        free(ri->from);
        free(ri);
    }
}
