/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The typed getters of the configuration tree: strings, booleans,
 * integers, sizes and durations with their units and ranges, and the
 * unknown-key report. A getter that meets a wrong type or a bad value
 * names the node's file:line:column and what was expected, and returns
 * the default, so that one pass collects every error of a file.
 */
#include "corConfInt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Reading ------------------------------------------------------------- */

/*
 * Keep a key that a reader looked for and the mapping lacks: the keys a
 * module takes are known only by what it asks for, and a typo of one is
 * reported with them (corConfUnusedKeys). Out of memory, the message
 * lists less; nothing else depends on it.
 */
static void
askedNote(CorConf* map, const char* key)
{
    char** grown;

    for (size_t i = 0; i < map->askedCount; i++) {
        if (strcmp(map->asked[i], key) == 0) {
            return;
        }
    }
    grown = realloc(map->asked, (map->askedCount + 1) * sizeof(*grown));
    if (grown == NULL) {
        return;
    }
    map->asked = grown;
    map->asked[map->askedCount] = strdup(key);
    if (map->asked[map->askedCount] != NULL) {
        map->askedCount++;
    }
}

const CorConf*
corConfGet(const CorConf* map, const char* key)
{
    if (map == NULL || map->kind != COR_CONF_MAP) {
        return NULL;
    }
    for (size_t i = 0; i < map->count; i++) {
        if (strcmp(map->items[i]->key, key) == 0) {
            /* The node is never const underneath: loading allocated it. */
            ((CorConf*)map->items[i])->used = true;
            return map->items[i];
        }
    }
    askedNote((CorConf*)map, key);
    return NULL;
}

/* How a node is named in "got ..." when it is not the scalar wanted. */
static const char*
describe(const CorConf* node, char* buf, size_t size)
{
    char q[QUOTE_MAX];

    if (node->kind == COR_CONF_MAP) {
        return "a mapping";
    }
    if (node->kind == COR_CONF_SEQ) {
        return "a list";
    }
    if (node->null) {
        return "nothing";
    }
    snprintf(buf, size, "'%s'", corConfQuote(node->text, q, sizeof(q)));
    return buf;
}

static const CorConf*
container(const CorConf* map, const char* key, CorConfKind kind,
          CorConfErrors* e)
{
    const CorConf* node = corConfGet(map, key);
    char buf[QUOTE_MAX + 2];

    if (node == NULL || node->kind == kind) {
        return node;
    }
    corConfErrorf(e, node, "%s: expected %s, got %s", key,
                  kind == COR_CONF_MAP ? "a mapping" : "a list",
                  describe(node, buf, sizeof(buf)));
    return NULL;
}

const CorConf*
corConfMap(const CorConf* map, const char* key, CorConfErrors* e)
{
    return container(map, key, COR_CONF_MAP, e);
}

const CorConf*
corConfSeq(const CorConf* map, const char* key, CorConfErrors* e)
{
    return container(map, key, COR_CONF_SEQ, e);
}

/* The value of key when it is a non-empty scalar; NULL when absent or (with
 * an error) when it is something else. */
static const CorConf*
scalar(const CorConf* map, const char* key, const char* expected,
       CorConfErrors* e)
{
    const CorConf* node = corConfGet(map, key);
    char buf[QUOTE_MAX + 2];

    if (node == NULL) {
        return NULL;
    }
    if (node->kind != COR_CONF_SCALAR || node->null) {
        corConfErrorf(e, node, "%s: expected %s, got %s", key, expected,
                      describe(node, buf, sizeof(buf)));
        return NULL;
    }
    return node;
}

/* Report that key's value is not what a getter takes: "key: expected
 * EXPECTED, got 'VALUE'", then why in parentheses when there is one. */
static void
expectedError(CorConfErrors* e, const CorConf* node, const char* key,
              const char* expected, const char* why)
{
    char q[QUOTE_MAX];
    const char* value = corConfQuote(node->text, q, sizeof(q));

    if (why != NULL) {
        corConfErrorf(e, node, "%s: expected %s, got '%s' (%s)", key, expected,
                      value, why);
    } else {
        corConfErrorf(e, node, "%s: expected %s, got '%s'", key, expected,
                      value);
    }
}

/* Report that key's value is out of range, the range said as text. */
static void
rangeError(CorConfErrors* e, const CorConf* node, const char* key,
           const char* range)
{
    char q[QUOTE_MAX];

    corConfErrorf(e, node, "%s: %s is out of range (%s)", key,
                  corConfQuote(node->text, q, sizeof(q)), range);
}

const char*
corConfString(const CorConf* map, const char* key, const char* def,
              CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "a string", e);

    return node ? node->text : def;
}

bool
corConfBoolWord(const char* text, bool* value)
{
    /* Every on/off key reads these alike: nginx's users write on and off,
     * YAML 1.2's true and false, YAML 1.1's yes and no; refusing any one
     * of them only sent people to the documentation (docs/configuration.md
     * "Booleans"). */
    static const struct {
        const char* word;
        bool value;
    } words[] = {
        { "on", true },     { "off", false }, { "true", true },
        { "false", false }, { "yes", true },  { "no", false },
    };

    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strcasecmp(text, words[i].word) == 0) {
            *value = words[i].value;
            return true;
        }
    }
    return false;
}

bool
corConfBool(const CorConf* map, const char* key, bool def, CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, COR_CONF_BOOL_WORDS, e);
    bool value;

    if (node == NULL) {
        return def;
    }
    if (corConfBoolWord(node->text, &value)) {
        return value;
    }
    expectedError(e, node, key, COR_CONF_BOOL_WORDS, NULL);
    return def;
}

typedef enum {
    PARSE_OK,
    PARSE_BAD,
    PARSE_NEGATIVE,
    PARSE_RANGE, /* does not fit 64 bits */
    PARSE_NO_UNIT,
    PARSE_FINE /* finer than a millisecond */
} ParseResult;

/* Digits into *out; p is left on the first non-digit. */
static ParseResult
parseDigits(const char** p, uint64_t* out)
{
    const char* s = *p;
    uint64_t v = 0;

    if (*s < '0' || *s > '9') {
        return PARSE_BAD;
    }
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (v > (UINT64_MAX - d) / 10) {
            while (*s >= '0' && *s <= '9') {
                s++;
            }
            *p = s;
            return PARSE_RANGE;
        }
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return PARSE_OK;
}

static ParseResult
parseInt(const char* s, int64_t* out)
{
    bool negative = *s == '-';
    uint64_t v = 0;
    ParseResult rc;

    if (*s == '-' || *s == '+') {
        s++;
    }
    rc = parseDigits(&s, &v);
    if (rc == PARSE_BAD || *s != '\0') {
        return PARSE_BAD;
    }
    if (rc == PARSE_RANGE || v > (uint64_t)INT64_MAX + negative) {
        return PARSE_RANGE;
    }
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return PARSE_OK;
}

static void
formatIntRange(int64_t min, int64_t max, char* buf, size_t size)
{
    if (max == INT64_MAX) {
        snprintf(buf, size, "at least %lld", (long long)min);
    } else if (min == INT64_MIN) {
        snprintf(buf, size, "at most %lld", (long long)max);
    } else {
        snprintf(buf, size, "%lld..%lld", (long long)min, (long long)max);
    }
}

int64_t
corConfInt(const CorConf* map, const char* key, int64_t def, int64_t min,
           int64_t max, CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "an integer", e);
    char range[64];
    int64_t v = 0;
    ParseResult rc;

    if (node == NULL) {
        return def;
    }
    rc = parseInt(node->text, &v);
    if (rc == PARSE_BAD) {
        expectedError(e, node, key, "an integer", NULL);
        return def;
    }
    if (rc == PARSE_RANGE || v < min || v > max) {
        formatIntRange(min, max, range, sizeof(range));
        rangeError(e, node, key, range);
        return def;
    }
    return v;
}

typedef struct {
    const char* name;
    uint64_t scale;
} Unit;

static const Unit sizeUnits[] = {
    { "TiB", (uint64_t)1 << 40 },
    { "GiB", (uint64_t)1 << 30 },
    { "MiB", (uint64_t)1 << 20 },
    { "KiB", (uint64_t)1 << 10 },
    { "TB", 1000000000000ull },
    { "GB", 1000000000ull },
    { "MB", 1000000ull },
    { "KB", 1000ull },
    { "B", 1 },
};

/* Ordered so that "ms" is tried before "m". */
static const Unit durationUnits[] = {
    { "ms", 1 },
    { "s", 1000 },
    { "m", 60 * 1000 },
    { "h", 60 * 60 * 1000 },
};

static const Unit*
findUnit(const char** p, const Unit* units, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(units[i].name);

        if (strncmp(*p, units[i].name, len) == 0) {
            *p += len;
            return &units[i];
        }
    }
    return NULL;
}

static ParseResult
parseSize(const char* s, uint64_t* out)
{
    const Unit* unit;
    uint64_t v = 0;
    ParseResult rc;

    if (*s == '-') {
        return PARSE_NEGATIVE;
    }
    rc = parseDigits(&s, &v);
    if (rc == PARSE_BAD) {
        return rc;
    }
    while (*s == ' ') {
        s++;
    }
    if (*s == '\0') {
        *out = v;
        return rc;
    }
    unit = findUnit(&s, sizeUnits, sizeof(sizeUnits) / sizeof(sizeUnits[0]));
    if (unit == NULL || *s != '\0') {
        return PARSE_BAD;
    }
    if (rc == PARSE_RANGE || v > UINT64_MAX / unit->scale) {
        return PARSE_RANGE;
    }
    *out = v * unit->scale;
    return PARSE_OK;
}

/* The largest unit that states v exactly: 16KiB rather than 16384. */
static void
formatScaled(uint64_t v, const Unit* units, size_t count, const char* bare,
             char* buf, size_t size)
{
    for (size_t i = 0; i < count; i++) {
        if (units[i].scale > 1 && v != 0 && v % units[i].scale == 0) {
            snprintf(buf, size, "%llu%s",
                     (unsigned long long)(v / units[i].scale), units[i].name);
            return;
        }
    }
    snprintf(buf, size, "%llu%s", (unsigned long long)v, bare);
}

static void
formatRange(uint64_t min, uint64_t max, const Unit* units, size_t count,
            const char* bare, char* buf, size_t size)
{
    char lo[32];
    char hi[32];

    formatScaled(min, units, count, bare, lo, sizeof(lo));
    formatScaled(max, units, count, bare, hi, sizeof(hi));
    if (max == UINT64_MAX) {
        snprintf(buf, size, "at least %s", lo);
    } else {
        snprintf(buf, size, "%s..%s", lo, hi);
    }
}

uint64_t
corConfSize(const CorConf* map, const char* key, uint64_t def, uint64_t min,
            uint64_t max, CorConfErrors* e)
{
    const CorConf* node = scalar(map, key, "a size", e);
    const size_t units = sizeof(sizeUnits) / sizeof(sizeUnits[0]);
    char range[80];
    uint64_t v = 0;
    ParseResult rc;

    if (node == NULL) {
        return def;
    }
    rc = parseSize(node->text, &v);
    if (rc == PARSE_NEGATIVE) {
        expectedError(e, node, key, "a size", "a size cannot be negative");
        return def;
    }
    if (rc == PARSE_BAD) {
        expectedError(e, node, key,
                      "a size such as 512, 16KiB or 1MiB (units: B, KB, MB, "
                      "GB, TB, KiB, MiB, GiB, TiB)",
                      NULL);
        return def;
    }
    if (rc == PARSE_RANGE || v < min || v > max) {
        formatRange(min, max, sizeUnits, units, "", range, sizeof(range));
        rangeError(e, node, key, range);
        return def;
    }
    return v;
}

/* One part of a duration, "1.5s", added to *total. */
static ParseResult
parseDurationPart(const char** p, uint64_t* total)
{
    const char* s = *p;
    const Unit* unit;
    uint64_t whole = 0;
    uint64_t frac = 0;
    uint64_t scale = 1;
    uint64_t fracMs;
    uint64_t ms;
    ParseResult rc = parseDigits(&s, &whole);

    if (rc == PARSE_BAD) {
        return rc;
    }
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9') {
            return PARSE_BAD;
        }
        for (; *s >= '0' && *s <= '9'; s++) {
            /* Past nine digits no unit we have leaves a whole millisecond
             * unless they are zeros. */
            if (scale < 1000000000ull) {
                frac = frac * 10 + (uint64_t)(*s - '0');
                scale *= 10;
            } else if (*s != '0') {
                return PARSE_FINE;
            }
        }
    }
    while (*s == ' ') {
        s++;
    }
    if (*s == '\0') {
        return PARSE_NO_UNIT;
    }
    unit = findUnit(&s, durationUnits,
                    sizeof(durationUnits) / sizeof(durationUnits[0]));
    if (unit == NULL) {
        return PARSE_BAD;
    }
    if (frac * unit->scale % scale != 0) {
        return PARSE_FINE;
    }
    fracMs = frac * unit->scale / scale;
    if (rc == PARSE_RANGE || whole > (UINT64_MAX - fracMs) / unit->scale) {
        return PARSE_RANGE;
    }
    ms = whole * unit->scale + fracMs;
    if (*total > UINT64_MAX - ms) {
        return PARSE_RANGE;
    }
    *total += ms;
    *p = s;
    return PARSE_OK;
}

static ParseResult
parseDuration(const char* s, uint64_t* out)
{
    uint64_t total = 0;

    if (*s == '-') {
        return PARSE_NEGATIVE;
    }
    do {
        ParseResult rc = parseDurationPart(&s, &total);

        if (rc != PARSE_OK) {
            return rc;
        }
    } while (*s != '\0');
    *out = total;
    return PARSE_OK;
}

uint64_t
corConfDurationMs(const CorConf* map, const char* key, uint64_t def,
                  uint64_t min, uint64_t max, CorConfErrors* e)
{
    static const Unit display[] = {
        { "h", 60 * 60 * 1000 },
        { "m", 60 * 1000 },
        { "s", 1000 },
    };
    const CorConf* node = scalar(map, key, "a duration", e);
    const char* why = NULL;
    bool tooBig = false;
    char range[80];
    uint64_t v = 0;

    if (node == NULL) {
        return def;
    }
    switch (parseDuration(node->text, &v)) {
    case PARSE_OK:
        break;
    case PARSE_NO_UNIT:
        why = "add a unit: ms, s, m, h";
        break;
    case PARSE_NEGATIVE:
        why = "a duration cannot be negative";
        break;
    case PARSE_FINE:
        why = "the smallest step is 1ms";
        break;
    case PARSE_BAD:
        expectedError(e, node, key, "a duration such as 100ms, 30s, 2m or 1h",
                      NULL);
        return def;
    case PARSE_RANGE:
        tooBig = true;
        break;
    }
    if (why != NULL) {
        expectedError(e, node, key, "a duration", why);
        return def;
    }
    if (tooBig || v < min || v > max) {
        formatRange(min, max, display, sizeof(display) / sizeof(display[0]),
                    "ms", range, sizeof(range));
        rangeError(e, node, key, range);
        return def;
    }
    return v;
}

/* Edit distance (optimal string alignment: an insertion, a deletion, a
 * change or two neighbours swapped are one edit each, so "hots" is one
 * from "host"), capped: only small ones matter for a suggestion. */
static size_t
distance(const char* a, const char* b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    size_t rows[3][33];

    if (la > 32 || lb > 32) {
        return SIZE_MAX;
    }
    for (size_t j = 0; j <= lb; j++) {
        rows[0][j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t* row = rows[i % 3];
        const size_t* up = rows[(i + 2) % 3];
        const size_t* upUp = rows[(i + 1) % 3];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = up[j - 1] + (a[i - 1] != b[j - 1]);

            if (up[j] + 1 < best) {
                best = up[j] + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]
                && upUp[j - 2] + 1 < best) {
                best = upUp[j - 2] + 1;
            }
            row[j] = best;
        }
    }
    return rows[la % 3][lb];
}

/* The known name word is a typo of: up to two edits, and fewer than half
 * the name; NULL when none is. */
static const char*
nearest(const char* word, const char* const* known)
{
    const char* near = NULL;
    size_t least = 3;

    for (size_t k = 0; known[k] != NULL; k++) {
        size_t d = distance(word, known[k]);

        if (d < least && d * 2 < strlen(known[k])) {
            least = d;
            near = known[k];
        }
    }
    return near;
}

const char*
corConfSuggest(const char* word, const char* const* known, const char* label,
               char* buf, size_t size)
{
    const char* near = nearest(word, known);
    size_t len = (size_t)snprintf(buf, size, " (%s: ", label);

    for (size_t k = 0; known[k] != NULL && len < size; k++) {
        len += (size_t)snprintf(buf + len, size - len, "%s%s", k ? ", " : "",
                                known[k]);
    }
    if (len < size && near != NULL) {
        snprintf(buf + len, size - len, "); did you mean '%s'?", near);
    } else if (len < size) {
        snprintf(buf + len, size - len, ")");
    }
    return buf;
}

/* Report every key of map nothing read (only those that are a typo of a
 * known one, when typosOnly): its mark, where, and what the mapping
 * takes. */
static unsigned
unreadKeys(const CorConf* map, const char* where, const char* const* known,
           bool typosOnly, CorConfErrors* e)
{
    char q[QUOTE_MAX];
    char tail[1024];
    unsigned reported = 0;

    for (size_t i = 0; i < map->count; i++) {
        const CorConf* value = map->items[i];

        if (value->used || (typosOnly && nearest(value->key, known) == NULL)) {
            continue;
        }
        corConfErrorAt(e, value->file, value->keyLine, value->keyColumn,
                       "unknown key '%s' %s%s%s",
                       corConfQuote(value->key, q, sizeof(q)),
                       where ? "in " : "at ", where ? where : "the top level",
                       corConfSuggest(value->key, known, "expected one of",
                                      tail, sizeof(tail)));
        reported++;
    }
    return reported;
}

unsigned
corConfUnknownKeys(const CorConf* map, const char* where,
                   const char* const* known, CorConfErrors* errors)
{
    if (map == NULL || map->kind != COR_CONF_MAP) {
        return 0;
    }
    return unreadKeys(map, where, known, false, errors);
}

/* The keys of map its reader took: those it read, and those it looked
 * for. NULL-terminated; the caller frees it; NULL when out of memory. */
static const char**
keysTaken(const CorConf* map)
{
    const char** known;
    size_t count = 0;

    known = malloc((map->count + map->askedCount + 1) * sizeof(*known));
    if (known == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < map->count; i++) {
        if (map->items[i]->used) {
            known[count++] = map->items[i]->key;
        }
    }
    for (size_t i = 0; i < map->askedCount; i++) {
        known[count++] = map->asked[i];
    }
    known[count] = NULL;
    return known;
}

static unsigned
unusedKeys(const CorConf* map, const char* where, bool typosOnly,
           CorConfErrors* errors)
{
    const char** known;
    unsigned reported;

    if (map == NULL || map->kind != COR_CONF_MAP) {
        return 0;
    }
    known = keysTaken(map);
    if (known == NULL) {
        corConfErrorf(errors, map, "out of memory checking the keys");
        return 1;
    }
    reported = unreadKeys(map, where, known, typosOnly, errors);
    free(known);
    return reported;
}

unsigned
corConfUnusedKeys(const CorConf* map, const char* where, CorConfErrors* errors)
{
    return unusedKeys(map, where, false, errors);
}

unsigned
corConfMistypedKeys(const CorConf* map, const char* where,
                    CorConfErrors* errors)
{
    return unusedKeys(map, where, true, errors);
}
