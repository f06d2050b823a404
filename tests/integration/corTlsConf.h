/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS suites' configuration (corTlsTest, corTlsKeysTest): an https
 * listener of the hello and testkit modules whose tls mapping the test
 * writes, and `cor -t` run on one that must be refused.
 */
#ifndef COR_TLS_CONF_H
#define COR_TLS_CONF_H

#include <stddef.h>

#include "corServer.h"

/* The configuration, for corServerStart: an https listener on {PORT}
 * whose tls mapping is tls, CERTS in it standing for certs (the folder of
 * corTestCertsMake); routes /hello, /bytes, /file, /waitecho. */
void corTlsConfigWrite(char* yaml, size_t cap, const char* certs,
                       const char* tls);

/* Start s on that configuration (the test fails if it does not start). */
void corTlsServerStart(CorServer* s, const char* certs, const char* tls);

/* Run a shell command with $P (s's port) and $C (certs) set, its stderr
 * with its stdout into out; its exit status. */
int corTlsShell(const CorServer* s, const char* certs, const char* command,
                char* out, size_t cap);

/* cor -t on that configuration (written into certs) must exit 1, its
 * first line at the file's line where mark (a piece of the written
 * text) is, and saying want; its output goes to out. */
void corTlsCheckRefuses(const char* certs, const char* tls, const char* mark,
                        const char* want, char* out, size_t cap);

#endif /* COR_TLS_CONF_H */
