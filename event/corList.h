/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive doubly linked lists, at the lowest floor that links things
 * (event/: a loop's waits, a lookup's waiters) so that every floor above
 * it (core/, the modules, through corKit.h) unlinks the same way instead
 * of by hand. Inline: as cheap as the hand-written prev/next code.
 */
#ifndef COR_LIST_H
#define COR_LIST_H

#include <stdbool.h>
#include <stddef.h>

/*
 * A doubly linked circular list through nodes embedded in their items
 * (recovered with corContainerOf). A zeroed head is an empty list, so a
 * list in calloc'ed or static memory needs no init; a node removed points
 * to itself, so removing it again does nothing.
 */
typedef struct CorList {
    struct CorList* prev;
    struct CorList* next;
} CorList;

static inline void corListInit(CorList* head);
static inline bool corListEmpty(const CorList* head);
/* Insert node first in head's list; corListAppend, last. */
static inline void corListInsert(CorList* head, CorList* node);
static inline void corListAppend(CorList* head, CorList* node);
static inline void corListRemove(CorList* node);
/* Whether node is in a list (not zeroed, not removed). */
static inline bool corListLinked(const CorList* node);
/* The first node, or NULL for an empty list. */
static inline CorList* corListFirst(const CorList* head);
/* Every node of from moves to to (an empty list before), in order; from
 * is left empty. */
static inline void corListMove(CorList* to, CorList* from);

/* Each node of head's list in turn; the body may remove the current one
 * (the next is read before it runs). */
#define corListForEach(node, nextNode, head)                                   \
    for ((node) = corListFirst(head),                                          \
        (nextNode) = (node) != NULL ? (node)->next : NULL;                     \
         (node) != NULL && (node) != (head);                                   \
         (node) = (nextNode), (nextNode) = (node)->next)

static inline void
corListInit(CorList* head)
{
    head->prev = head->next = head;
}

static inline bool
corListEmpty(const CorList* head)
{
    return head->next == NULL || head->next == head;
}

static inline void
corListInsert(CorList* head, CorList* node)
{
    if (head->next == NULL) {
        corListInit(head);
    }
    node->next = head->next;
    node->prev = head;
    head->next->prev = node;
    head->next = node;
}

static inline void
corListAppend(CorList* head, CorList* node)
{
    if (head->next == NULL) {
        corListInit(head);
    }
    corListInsert(head->prev, node);
}

static inline void
corListRemove(CorList* node)
{
    if (node->next != NULL) {
        node->prev->next = node->next;
        node->next->prev = node->prev;
    }
    node->prev = node->next = node;
}

static inline bool
corListLinked(const CorList* node)
{
    return node->next != NULL && node->next != node;
}

static inline CorList*
corListFirst(const CorList* head)
{
    return corListEmpty(head) ? NULL : head->next;
}

static inline void
corListMove(CorList* to, CorList* from)
{
    if (corListEmpty(from)) {
        corListInit(to);
        return;
    }
    to->next = from->next;
    to->prev = from->prev;
    to->next->prev = to;
    to->prev->next = to;
    corListInit(from);
}

#endif /* COR_LIST_H */
