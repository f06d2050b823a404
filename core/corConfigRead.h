/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of the core's schema, shared by its readers: corConfig.c (the
 * sections), corConfigTls.c (a listener's tls mapping) and
 * corConfigNotify.c (a route's notify), on the getters of
 * corConfigRead.c. Never included from outside them.
 */
#ifndef COR_CONFIG_READ_H
#define COR_CONFIG_READ_H

#include "corConfig.h"

/* Replace *field with a copy of value (NULL: none). */
void corConfigSetString(char** field, const char* value, CorConfErrors* e);

/* The value of a key a mapping must have; reports it missing at the
 * mapping, where naming it ("listen[0].tls") and example saying what
 * goes there. */
const CorConf* corConfigRequired(const CorConf* map, const char* key,
                                 const char* where, const char* example,
                                 CorConfErrors* e);

/* A string that may not be empty; what names it for the error. */
const char* corConfigNonEmpty(const CorConf* map, const char* key,
                              const char* def, const char* what,
                              CorConfErrors* e);

/* A file's key of map (a non-empty string) into *field, as a path beside
 * the configuration file map is in (corConfigPathBeside), as ca_file and
 * pid_file are: what loads it later needs no folder. NULL when absent or
 * wrong. */
void corConfigSetPath(char** field, const CorConf* map, const char* key,
                      CorConfErrors* e);

/* A string that must be one of words (NULL-terminated); def when absent
 * or after an error. */
const char* corConfigOneOf(const CorConf* map, const char* key, const char* def,
                           const char* const* words, CorConfErrors* e);

/* Where first is, for "(first at ...)" beside an error at at: its
 * line:column, with its file before them when that is another (an
 * include's). Written into buf; returns buf. */
const char* corConfigFirstAt(const CorConf* first, const CorConf* at, char* buf,
                             size_t size);

/* A listener's tls mapping into l->tls; where names the listener
 * ("listen[0]"). */
void corConfigTlsRead(CorConfigListen* l, const CorConf* tls, const char* where,
                      CorConfErrors* e);

/* A tls mapping's acme (corConfigAcme.c): NULL when it has none or after
 * an error; freed with corConfigAcmeFree (NULL taken). */
CorConfigAcme* corConfigAcmeRead(const CorConf* tls, const char* tlsWhere,
                                 CorConfErrors* e);
void corConfigAcmeFree(CorConfigAcme* a);

/* Free what corConfigTlsRead set (tls may be NULL). */
void corConfigTlsFree(CorConfigTls* tls);

/* A route's notify key into r->notify (NULL when absent or wrong);
 * where names the route ("routes[0]"). */
void corConfigNotifyRead(CorConfigRoute* r, const CorConf* entry,
                         const char* where, CorConfErrors* e);

/* Free what corConfigNotifyRead set (n may be NULL). */
void corConfigNotifyFree(CorConfigNotify* n);

/* A route's match (corConfigRoute.c): "GET /hello", a prefix ending in
 * a star, "=/exact", "~regex" or "~*regex" (without case); false after an
 * error at node. */
bool corConfigMatchRead(CorConfigRoute* r, const CorConf* node,
                        CorConfErrors* e);
/* Whether two routes match the same requests the same way. */
bool corConfigSameRoute(const CorConfigRoute* a, const CorConfigRoute* b);
/* The rest of a route's entry beside its match, handler, timeout and the
 * keys above: host, redirect, rewrite, request_headers, error_pages;
 * where names it ("routes[3]"). */
void corConfigRouteRead(CorConfigRoute* r, const CorConf* entry,
                        const char* where, CorConfErrors* e);
void corConfigRouteFree(CorConfigRoute* r);
/* error_pages: { "404": FILE, "5xx": FILE } into *pagesP (the files
 * beside the configuration file); where names the key for errors. */
void corConfigErrorPagesRead(CorConfigErrorPage** pagesP, unsigned* countP,
                             const CorConf* map, const char* where,
                             CorConfErrors* e);
void corConfigErrorPagesFree(CorConfigErrorPage* pages, unsigned count);

/* The top level's real_ip mapping into cf->realIp (NULL when absent or
 * wrong). */
void corConfigRealIpRead(CorConfig* cf, const CorConf* root, CorConfErrors* e);

/* Free what corConfigRealIpRead set (ri may be NULL). */
void corConfigRealIpFree(CorConfigRealIp* ri);

#endif /* COR_CONFIG_READ_H */
