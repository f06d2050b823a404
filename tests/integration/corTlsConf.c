/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS suites' configuration and their cor -t check (corTlsConf.h).
 */
#include "corTlsConf.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char*
bin(void)
{
    const char* b = getenv("COR_BIN");

    return b ? b : "build/cor";
}

void
corTlsConfigWrite(char* yaml, size_t cap, const char* certs, const char* tls)
{
    char tlsText[1024];
    const char* at;
    size_t n = 0;

    /* CERTS -> the folder, wherever it occurs. */
    for (const char* p = tls; *p != '\0' && n + 64 < sizeof(tlsText);) {
        at = strstr(p, "CERTS");
        if (at == NULL) {
            n += (size_t)snprintf(tlsText + n, sizeof(tlsText) - n, "%s", p);
            break;
        }
        n += (size_t)snprintf(tlsText + n, sizeof(tlsText) - n, "%.*s%s",
                              (int)(at - p), p, certs);
        p = at + 5;
    }
    snprintf(yaml, cap,
             "runtime:\n"
             "  loops: 2\n"
             "  workers: 4\n"
             "  coroutines: { enabled: {COROUTINES} }\n"
             "listen:\n"
             "  - protocol: https\n"
             "    address: 127.0.0.1:{PORT}\n"
             "    tls: %s\n"
             "modules:\n"
             "  - { load: http }\n"
             "  - { load: hello }\n"
             "  - { load: {MODULES}/testkit.so }\n"
             "routes:\n"
             "  - { match: \"GET /hello\", handler: hello }\n"
             "  - { match: \"GET /bytes\", handler: bytes }\n"
             "  - { match: \"GET /file\", handler: file }\n"
             "  - { match: \"/waitecho\", handler: waitecho }\n"
             "log: { pid_file: {DIR}/cor.pid }\n",
             tlsText);
}

void
corTlsServerStart(CorServer* s, const char* certs, const char* tls)
{
    char yaml[4096];

    corTlsConfigWrite(yaml, sizeof(yaml), certs, tls);
    ck_assert_int_eq(corServerStart(s, yaml), 0);
}

int
corTlsShell(const CorServer* s, const char* certs, const char* command,
            char* out, size_t cap)
{
    char line[2048];

    snprintf(line, sizeof(line), "P=%d C=%s; %s 2>&1", s->port, certs, command);
    return corShell(line, out, cap);
}

void
corTlsCheckRefuses(const char* certs, const char* tls, const char* mark,
                   const char* want, char* out, size_t cap)
{
    char yaml[4096];
    char command[512];
    char config[128];
    FILE* f;
    char* text;
    size_t len;
    unsigned line = 0;

    corTlsConfigWrite(yaml, sizeof(yaml), certs, tls);
    snprintf(config, sizeof(config), "%s/check.yaml", certs);
    /* The placeholders cor -t needs: a port and the modules. */
    f = fopen(config, "w");
    ck_assert_ptr_nonnull(f);
    for (const char* p = yaml; *p != '\0'; p++) {
        if (strncmp(p, "{PORT}", 6) == 0) {
            fputs("1", f);
            p += 5;
        } else if (strncmp(p, "{COROUTINES}", 12) == 0) {
            fputs("true", f);
            p += 11;
        } else if (strncmp(p, "{MODULES}", 9) == 0) {
            const char* slash = strrchr(bin(), '/');

            fprintf(f, "%.*s/modules", slash ? (int)(slash - bin()) : 1,
                    slash ? bin() : ".");
            p += 8;
        } else if (strncmp(p, "{DIR}", 5) == 0) {
            fputs(certs, f);
            p += 4;
        } else {
            fputc(*p, f);
        }
    }
    fclose(f);
    text = strstr(yaml, mark);
    ck_assert_ptr_nonnull(text);
    for (const char* p = yaml; p < text; p++) {
        line += *p == '\n';
    }
    snprintf(command, sizeof(command), "%s -t -c %s 2>&1", bin(), config);
    ck_assert_int_eq(corShell(command, out, cap), 1);
    len = (size_t)snprintf(command, sizeof(command), "%s:%u:", config,
                           line + 1);
    ck_assert_msg(strncmp(out, command, len) == 0 && strstr(out, want),
                  "want '%s' ... '%s', got %s", command, want, out);
}
