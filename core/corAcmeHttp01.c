/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP-01 (RFC 8555 8.3): while an order proves a name, the ACME server
 * asks http://NAME/.well-known/acme-challenge/TOKEN on port 80 and wants
 * the token's key authorization back. Every plain listener answers it
 * before any route, so that no route of the user's (a catch-all, a
 * redirect to https, a guard) can hide it. The tokens are few and live
 * for seconds: a short list under a lock, which a request takes only
 * when its path starts with the prefix.
 */
#include "corAcme.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "/.well-known/acme-challenge/"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

typedef struct Token {
    struct Token* next;
    char* token;
    char* keyAuth;
} Token;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Token* tokens;

int
corAcmeHttp01Add(const char* token, const char* keyAuth)
{
    Token* t = calloc(1, sizeof(*t));

    if (t == NULL || (t->token = strdup(token)) == NULL
        || (t->keyAuth = strdup(keyAuth)) == NULL) {
        if (t != NULL) {
            free(t->token);
        }
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_lock(&lock);
    t->next = tokens;
    tokens = t;
    pthread_mutex_unlock(&lock);
    return 0;
}

void
corAcmeHttp01Remove(const char* token)
{
    Token* gone = NULL;

    pthread_mutex_lock(&lock);
    for (Token** p = &tokens; *p != NULL; p = &(*p)->next) {
        if (strcmp((*p)->token, token) == 0) {
            gone = *p;
            *p = gone->next;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (gone != NULL) {
        free(gone->token);
        free(gone->keyAuth);
        free(gone);
    }
}

bool
corAcmeHttp01Answer(CorRequest* r)
{
    const char* token = r->path + PREFIX_LEN;
    size_t tokenLen = r->pathLen - PREFIX_LEN;
    char* copy = NULL;
    size_t len = 0;

    if (r->secure || r->pathLen <= PREFIX_LEN
        || memcmp(r->path, PREFIX, PREFIX_LEN) != 0) {
        return false;
    }
    pthread_mutex_lock(&lock);
    for (const Token* t = tokens; t != NULL; t = t->next) {
        if (strlen(t->token) == tokenLen
            && memcmp(t->token, token, tokenLen) == 0) {
            len = strlen(t->keyAuth);
            copy = corRequestAlloc(r, len);
            if (copy != NULL) {
                memcpy(copy, t->keyAuth, len);
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (copy == NULL) {
        /* Not one of ours: the routes may serve their own (certbot's
         * webroot beside cor). */
        return false;
    }
    corRespondSet(r, 200, "application/octet-stream", copy, len);
    return true;
}
