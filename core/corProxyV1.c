/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The PROXY protocol's v1 header, one line of text:
 *
 *     PROXY TCP4 192.0.2.7 198.51.100.1 4711 443\r\n
 *     PROXY TCP6 2001:db8::7 2001:db8::1 4711 443\r\n
 *     PROXY UNKNOWN ...\r\n
 *
 * Read strictly, as the specification asks: single spaces, addresses of
 * the family the line names, ports 0..65535 in at most five digits. On
 * -1, *src is not to be read.
 */
#include "corProxyHeader.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#define FIELDS 6

/* A port: 1 to 5 digits, at most 65535. */
static bool
portRead(const char* s, in_port_t* port)
{
    size_t n = strlen(s);
    unsigned long v = 0;

    if (n == 0 || n > 5) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    *port = htons((in_port_t)v);
    return v <= 65535;
}

/* The line's fields, split at single spaces into text; false when there
 * are not FIELDS of them (UNKNOWN excepted: its rest is not read). */
static bool
fieldsSplit(char* text, char* fields[FIELDS], unsigned* count)
{
    char* p = text;

    *count = 0;
    while (*count < FIELDS) {
        char* space = strchr(p, ' ');

        fields[(*count)++] = p;
        if (space == NULL) {
            return true;
        }
        *space = '\0';
        p = space + 1;
    }
    return false; /* a seventh field */
}

/* The line's addresses, of family (both checked), and its source port
 * into src. */
static bool
addressesRead(int family, char* const f[FIELDS], struct sockaddr_storage* src)
{
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)src;
    struct sockaddr_in* in = (struct sockaddr_in*)src;
    struct in6_addr dst; /* room for either family's */
    bool v6 = family == AF_INET6;

    if (inet_pton(family, f[2],
                  v6 ? (void*)&in6->sin6_addr : (void*)&in->sin_addr)
            != 1
        || inet_pton(family, f[3], &dst) != 1
        || !portRead(f[4], v6 ? &in6->sin6_port : &in->sin_port)) {
        return false;
    }
    src->ss_family = (sa_family_t)family;
    return true;
}

int
corProxyV1Parse(const uint8_t* line, size_t len, struct sockaddr_storage* src)
{
    char text[COR_PROXY_V1_MAX];
    char* f[FIELDS];
    unsigned count;
    in_port_t dport;

    memset(src, 0, sizeof(*src));
    src->ss_family = AF_UNSPEC;
    if (len < 8 || len > COR_PROXY_V1_MAX || line[len - 2] != '\r'
        || line[len - 1] != '\n' || memchr(line, '\0', len) != NULL
        || memchr(line, '\n', len - 1) != NULL) {
        return -1;
    }
    memcpy(text, line, len - 2);
    text[len - 2] = '\0';
    if (strncmp(text, "PROXY UNKNOWN", 13) == 0
        && (text[13] == '\0' || text[13] == ' ')) {
        return 0;
    }
    if (!fieldsSplit(text, f, &count) || count != FIELDS
        || strcmp(f[0], "PROXY") != 0
        || (strcmp(f[1], "TCP4") != 0 && strcmp(f[1], "TCP6") != 0)
        || !portRead(f[5], &dport)) {
        return -1;
    }
    return addressesRead(f[1][3] == '6' ? AF_INET6 : AF_INET, f, src) ? 0 : -1;
}
