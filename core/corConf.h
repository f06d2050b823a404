/* SPDX-License-Identifier: Apache-2.0 */
/*
 * corConf: the configuration file as a tree. A YAML file is read into
 * scalars, mappings and sequences that remember where they start
 * (file:line:column), so that every error found later, by the core or by a
 * module, can point at the text it is about. The typed getters read
 * strings, booleans, integers, sizes ("16KiB") and durations ("30s"), and
 * report a bad value in one consistent form:
 *
 *     FILE:LINE:COLUMN: KEY: expected ..., got '...'
 *
 * Errors are collected, not returned one at a time, so that one run shows
 * every mistake in the file.
 *
 * Ownership: a tree belongs to the caller of corConfLoadFile/String and is
 * released with corConfFree(); every node, string and file name handed out
 * by the functions below lives until then. The only thing a reader changes
 * in a tree is the "used" mark that corConfGet() sets on a key, which is how
 * corConfUnknownKeys() finds the keys that nothing read. A tree is not safe
 * to read from two threads at once for that reason.
 */
#ifndef COR_CONF_H
#define COR_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { COR_CONF_SCALAR, COR_CONF_MAP, COR_CONF_SEQ } CorConfKind;

/* A node: its kind, a scalar's text or a container's children (a mapping
 * keeps its keys in file order), and the mark of its first character. */
typedef struct CorConf CorConf;

/*
 * Collected error messages, one per line, each "FILE:LINE:COLUMN: message"
 * and ending in '\n'; text is NUL-terminated (or NULL while empty). Start
 * from a zeroed struct; the caller owns it and frees it with
 * corConfErrorsFree(). count goes up even when memory for a message ran
 * out, so a non-zero count always means the configuration is not usable.
 */
typedef struct {
    char* text;
    size_t len;
    size_t cap;
    unsigned count;
} CorConfErrors;

/* Containers nested deeper than this are refused: no config needs it, and
 * the limit keeps the tree's recursion bounded whatever the input. */
#define COR_CONF_MAX_DEPTH 64

/* ---- Loading ------------------------------------------------------------- */

/*
 * Read a YAML file into a tree. Returns NULL, with the reasons appended to
 * errors, when the file cannot be read ("FILE: cannot open: No such file
 * or directory"), is not valid YAML (the message and mark libyaml gives),
 * is empty, or uses what a config refuses: a key given twice in one
 * mapping ("duplicate key 'x' (first at LINE:COLUMN)", at the second one),
 * a key that is a mapping or a list, anchors, aliases, tags, more than one
 * document, a NUL character in a string, or nesting deeper than
 * COR_CONF_MAX_DEPTH. The caller frees the result with corConfFree().
 */
CorConf* corConfLoadFile(const char* path, CorConfErrors* errors);

/* The same for text already in memory (len bytes; no NUL needed at the
 * end); name stands for the file in marks. */
CorConf* corConfLoadString(const char* name, const char* text, size_t len,
                           CorConfErrors* errors);

/*
 * The same, but the tree comes back in spite of errors, as far as it was
 * read, so that one run can report every error of a file: NULL only when
 * nothing was read (the file cannot be read, is empty, or does not start
 * as YAML). *whole says whether reading went to the end of the file: true
 * when each error was local to one node (an anchor, a tag, a key given
 * twice, a NUL in a string: the tree holds the value as if written
 * plainly, and a repeated key's second value as read, so that it is not
 * reported again as unknown); false after what stops the reader (a syntax
 * error, an alias, a second document, nesting too deep), whose tree ends
 * where it stopped. The caller frees the result with corConfFree().
 */
CorConf* corConfLoadFilePartial(const char* path, CorConfErrors* errors,
                                bool* whole);
CorConf* corConfLoadStringPartial(const char* name, const char* text,
                                  size_t len, CorConfErrors* errors,
                                  bool* whole);

/* Free a tree and everything in it, the files it included too. NULL is
 * fine. */
void corConfFree(CorConf* root);

/* How deep files may include files: the main file's includes are level 1. */
#define COR_CONF_INCLUDE_DEPTH 8

/*
 * Read the files that the top-level include key of root (a tree read
 * whole, from corConfLoad*) names, and theirs in turn, into root: include
 * takes a glob or a list of them, each beside the file it is written in;
 * a glob's files are read in the order of their names, and one matching
 * nothing is fine, while a name without a wildcard must name a file. Each
 * included file's keys named in lists (a NULL-terminated list of names:
 * "listen", "routes") must be lists; their entries are moved onto the end
 * of root's list of that name (which is made when root has none), in the
 * order the files are read (a file's own entries before those of the
 * files it includes), each keeping its file:line:column. Any other key of
 * an included file but include is an error at its mark. An included file
 * that is itself being read (a cycle) or one more than
 * COR_CONF_INCLUDE_DEPTH levels deep is an error at the include entry
 * that names it, with the chain of files. Errors are appended to errors.
 * Returns false when an included file stopped short (a syntax error), as
 * corConfLoadFilePartial's whole says: root then lacks what it held.
 */
bool corConfInclude(CorConf* root, const char* const* lists,
                    CorConfErrors* errors);

/* The files root was read from, in the order read: 0 its own name, then
 * each file corConfInclude read; NULL past the last. */
const char* corConfFileRead(const CorConf* root, size_t i);

/* ---- Reading ------------------------------------------------------------- */

/*
 * The value of key in the mapping map, marked as used; NULL when map is
 * NULL, is not a mapping, or has no such key (which the mapping remembers
 * for corConfUnusedKeys' list). A NULL map reads as an empty one
 * everywhere below, so an absent section yields its defaults.
 */
const CorConf* corConfGet(const CorConf* map, const char* key);

/* The value of key when it is a mapping (a list for corConfSeq); NULL when
 * it is absent, and NULL with "KEY: expected a mapping, got '...'" appended
 * to e when it is something else. */
const CorConf* corConfMap(const CorConf* map, const char* key,
                          CorConfErrors* e);
const CorConf* corConfSeq(const CorConf* map, const char* key,
                          CorConfErrors* e);

/*
 * The typed getters. Each returns def when key is absent. When the value
 * has the wrong kind, is empty (`key:` or `key: ~`), cannot be parsed or
 * is out of [min, max], each appends an error at the value's mark and
 * returns def:
 *
 *     KEY: expected an integer, got 'abc'
 *     KEY: 70000 is out of range (1..65535)
 */

/* Any scalar, quoted or not; the result lives as long as the tree. */
const char* corConfString(const CorConf* map, const char* key, const char* def,
                          CorConfErrors* e);

/* On or off: on, true or yes; off, false or no, in any case. Every on/off
 * key of the core and the modules reads it, so that they take the same
 * words; anything else is "KEY: expected " COR_CONF_BOOL_WORDS ", got
 * '...'". */
#define COR_CONF_BOOL_WORDS "on, off, true, false, yes or no"
bool corConfBool(const CorConf* map, const char* key, bool def,
                 CorConfErrors* e);

/* Whether text is one of those words, its meaning into *value: for a key
 * that takes off or something else (log.access: off or a path). */
bool corConfBoolWord(const char* text, bool* value);

/* A decimal integer with an optional sign. */
int64_t corConfInt(const CorConf* map, const char* key, int64_t def,
                   int64_t min, int64_t max, CorConfErrors* e);

/*
 * A byte count: a whole number with an optional unit, B, KB, MB, GB, TB
 * (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), spaces allowed
 * between: "512", "16KiB", "10KB" (10000), "2 GiB". Negative numbers,
 * fractions and values that overflow 64 bits are refused.
 */
uint64_t corConfSize(const CorConf* map, const char* key, uint64_t def,
                     uint64_t min, uint64_t max, CorConfErrors* e);

/*
 * A duration in milliseconds: one or more parts, each a number with a unit
 * of ms, s, m or h: "100ms", "30s", "1.5s", "1h30m". A bare number is
 * refused ("add a unit: ms, s, m, h"), and so is a negative one or one
 * that is not a whole number of milliseconds ("0.5ms").
 */
uint64_t corConfDurationMs(const CorConf* map, const char* key, uint64_t def,
                           uint64_t min, uint64_t max, CorConfErrors* e);

/*
 * Report every key of map that nothing has read with corConfGet (or
 * reached with corConfAt), at the key's mark:
 *
 *     unknown key 'greting' in modules[0] (expected one of: load,
 *     greeting); did you mean 'greeting'?
 *
 * where names the mapping ("limits", "listen[0]"); NULL means the top
 * level ("unknown key 'x' at the top level"). known is the NULL-terminated
 * list of the keys the mapping takes, used only for the message. Call it
 * after the section has been read. Returns how many keys were reported.
 */
unsigned corConfUnknownKeys(const CorConf* map, const char* where,
                            const char* const* known, CorConfErrors* errors);

/*
 * The same without a list of known keys, for a mapping whose keys someone
 * else reads (a module's): what the mapping takes is what its reader read
 * or looked for (corConfGet remembers a key it did not find), so a typo
 * of a key the module asked for reads "unknown key 'greting' in modules[0]
 * (expected one of: load, greeting); did you mean 'greeting'?". Call it
 * after the reader is done.
 */
unsigned corConfUnusedKeys(const CorConf* map, const char* where,
                           CorConfErrors* errors);

/*
 * The same for a reader that stopped early (it reported an error first):
 * only the keys it did not read that are a typo of one it read or looked
 * for ("upstream" beside "upstreams"), which are mistakes whatever it did
 * not come to; the others may be keys it would have read.
 */
unsigned corConfMistypedKeys(const CorConf* map, const char* where,
                             CorConfErrors* errors);

/*
 * The tail of a message about an unknown name, word: " (LABEL: a, b, c);
 * did you mean 'b'?" with the known names (a NULL-terminated list) and the
 * nearest of them, if one is within two edits (a swap of two neighbours
 * is one) and less than half its length; without a near one, just the
 * list. Written into buf (cut at size); returns buf. Route and key errors
 * share it.
 */
const char* corConfSuggest(const char* word, const char* const* known,
                           const char* label, char* buf, size_t size);

/* ---- Nodes --------------------------------------------------------------- */

/* The four functions that read a node's mark and kind want a node; the
 * ones after them read NULL as an empty node. */

/* The file name given at load, and the node's 1-based line and column. */
const char* corConfFile(const CorConf* node);
unsigned corConfLine(const CorConf* node);
unsigned corConfColumn(const CorConf* node);

CorConfKind corConfKind(const CorConf* node);

/* A scalar's text, NUL-terminated; NULL for a mapping or a list. */
const char* corConfText(const CorConf* node);

/* How many children a mapping or list has; 0 for a scalar. */
size_t corConfCount(const CorConf* node);

/* Child i of a list, or the value of key i of a mapping (which marks that
 * key used); NULL when i is out of range or node is a scalar. */
const CorConf* corConfAt(const CorConf* node, size_t i);

/* Key i of a mapping; NULL when i is out of range or map is not one. */
const char* corConfKeyAt(const CorConf* map, size_t i);

/* ---- Errors -------------------------------------------------------------- */

/*
 * Append "FILE:LINE:COLUMN: message\n" to e, with at's mark; when at is
 * NULL the message goes in without a mark. Newlines and other control
 * characters in the message are escaped so that each error stays on one
 * line.
 */
void corConfErrorf(CorConfErrors* e, const CorConf* at, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Free the messages and zero e, ready for reuse. */
void corConfErrorsFree(CorConfErrors* e);

#endif /* COR_CONF_H */
