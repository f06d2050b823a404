/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP-01 (RFC 8555 8.3): while an order proves a name, the ACME server
 * asks http://NAME/.well-known/acme-challenge/TOKEN on port 80 and wants
 * the token's key authorization back. Every plain listener answers it
 * before any route, so that no route of the user's (a catch-all, a
 * redirect to https, a guard) can hide it. The tokens are few and live
 * for seconds: a short list under a lock, which a request takes only
 * when its path starts with the prefix.
 *
 * Each token is also written under its storage (challenges/TOKEN), and a
 * token not in the list is looked for in the storage folders of this
 * generation's acme listeners: instances that share storage (and the
 * port, with SO_REUSEPORT, or a balancer in front) answer each other's
 * tokens, whichever one the validation reaches.
 */
#include "corAcme.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PREFIX "/.well-known/acme-challenge/"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

typedef struct Token {
    struct Token* next;
    char* token;
    char* keyAuth;
} Token;

/* A token's file is at most this long (a key authorization is 43 + 1 +
 * the token). */
#define KEY_AUTH_MAX 512
#define STORAGES_MAX 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Token* tokens;
/* The storage folders looked in (the process's, never freed). */
static char* storages[STORAGES_MAX];
static unsigned storageCount;

/* Whether token is base64url (RFC 8555 8.1): a file name, no path. */
static bool
tokenValid(const char* token, size_t len)
{
    if (len == 0 || len > 128) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = token[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
            return false;
        }
    }
    return true;
}

void
corAcmeHttp01Storage(const char* storage)
{
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < storageCount; i++) {
        if (strcmp(storages[i], storage) == 0) {
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (storageCount < STORAGES_MAX
        && (storages[storageCount] = strdup(storage)) != NULL) {
        storageCount++;
    }
    pthread_mutex_unlock(&lock);
}

/* The key authorization of token in a storage folder's file, into r's
 * memory; NULL when none has it. */
static char*
fromStorage(CorRequest* r, const char* token, size_t tokenLen, size_t* lenP)
{
    char path[4096];
    char text[KEY_AUTH_MAX];
    char* copy = NULL;
    size_t len = 0;
    unsigned count;
    FILE* f;

    pthread_mutex_lock(&lock);
    count = storageCount;
    pthread_mutex_unlock(&lock);
    for (unsigned i = 0; i < count && copy == NULL; i++) {
        snprintf(path, sizeof(path), "%s/challenges/%.*s", storages[i],
                 (int)tokenLen, token);
        f = fopen(path, "re");
        if (f == NULL) {
            continue;
        }
        len = fread(text, 1, sizeof(text), f);
        fclose(f);
        if (len > 0 && len < sizeof(text)
            && (copy = corRequestAlloc(r, len)) != NULL) {
            memcpy(copy, text, len);
        }
    }
    *lenP = len;
    return copy;
}

int
corAcmeHttp01Add(const char* storage, const char* token, const char* keyAuth)
{
    char dir[4096];
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
    snprintf(dir, sizeof(dir), "%s/challenges", storage);
    if (tokenValid(token, strlen(token)) && corAcmeStoreDir(dir) == 0) {
        /* Not written: this instance answers it all the same. */
        (void)corAcmeStoreWrite(dir, token, keyAuth, strlen(keyAuth));
    }
    return 0;
}

void
corAcmeHttp01Remove(const char* storage, const char* token)
{
    char path[4096];
    Token* gone = NULL;

    if (tokenValid(token, strlen(token))) {
        snprintf(path, sizeof(path), "%s/challenges/%s", storage, token);
        unlink(path);
    }

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
    if (copy == NULL && tokenValid(token, tokenLen)) {
        copy = fromStorage(r, token, tokenLen, &len);
    }
    if (copy == NULL) {
        /* Not one of ours: the routes may serve their own (certbot's
         * webroot beside cor). */
        return false;
    }
    corRespondSet(r, 200, "application/octet-stream", copy, len);
    return true;
}
