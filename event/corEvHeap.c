/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An intrusive binary min-heap: the nodes live in the timers and tasks
 * they order, linked by parent and child pointers, so inserting never
 * allocates and both insert and remove cost O(log n). The tree is kept
 * complete: node number k (1-based, breadth first) is found by walking the
 * bits of k below its top bit from the root, 0 left and 1 right.
 */
#include "corEvInt.h"

/* The slot where node number k hangs: its parent, and which child. */
static CorEvHeapNode**
slotOf(CorEvHeap* heap, unsigned k, CorEvHeapNode** parentP)
{
    CorEvHeapNode** slot = &heap->min;
    CorEvHeapNode* parent = NULL;
    int bit = 31 - __builtin_clz(k);

    while (--bit >= 0) {
        parent = *slot;
        slot = (k >> bit) & 1 ? &parent->right : &parent->left;
    }
    *parentP = parent;
    return slot;
}

/* Point node's children back at it. */
static inline void
adopt(CorEvHeapNode* node)
{
    if (node->left != NULL) {
        node->left->parent = node;
    }
    if (node->right != NULL) {
        node->right->parent = node;
    }
}

/* Hang node where old hung: node->parent is old's parent (NULL at the
 * root), whose child pointer still points at old. */
static inline void
hang(CorEvHeap* heap, const CorEvHeapNode* old, CorEvHeapNode* node)
{
    if (node->parent == NULL) {
        heap->min = node;
    } else if (node->parent->left == old) {
        node->parent->left = node;
    } else {
        node->parent->right = node;
    }
}

/* Exchange child with its parent, fixing every link around the two. */
static void
swapWithParent(CorEvHeap* heap, CorEvHeapNode* parent, CorEvHeapNode* child)
{
    CorEvHeapNode saved = *parent;
    CorEvHeapNode* sibling;

    *parent = *child;
    *child = saved;
    parent->parent = child;
    if (child->left == child) {
        child->left = parent;
        sibling = child->right;
    } else {
        child->right = parent;
        sibling = child->left;
    }
    if (sibling != NULL) {
        sibling->parent = child;
    }
    adopt(parent);
    hang(heap, parent, child);
}

static void
siftUp(CorEvHeap* heap, CorEvHeapNode* node, CorEvHeapLessFn less)
{
    while (node->parent != NULL && less(node, node->parent)) {
        swapWithParent(heap, node->parent, node);
    }
}

static void
siftDown(CorEvHeap* heap, CorEvHeapNode* node, CorEvHeapLessFn less)
{
    for (;;) {
        CorEvHeapNode* smallest = node;

        if (node->left != NULL && less(node->left, smallest)) {
            smallest = node->left;
        }
        if (node->right != NULL && less(node->right, smallest)) {
            smallest = node->right;
        }
        if (smallest == node) {
            return;
        }
        swapWithParent(heap, node, smallest);
    }
}

void
corEvHeapInsert(CorEvHeap* heap, CorEvHeapNode* node, CorEvHeapLessFn less)
{
    CorEvHeapNode* parent;
    CorEvHeapNode** slot = slotOf(heap, heap->count + 1, &parent);

    node->left = NULL;
    node->right = NULL;
    node->parent = parent;
    *slot = node;
    heap->count++;
    siftUp(heap, node, less);
}

void
corEvHeapRemove(CorEvHeap* heap, CorEvHeapNode* node, CorEvHeapLessFn less)
{
    CorEvHeapNode* parent;
    CorEvHeapNode** slot = slotOf(heap, heap->count, &parent);
    CorEvHeapNode* last = *slot;

    *slot = NULL;
    heap->count--;
    if (last == node) {
        return;
    }
    /* The last node takes the removed one's place, then finds its level. */
    *last = *node;
    adopt(last);
    hang(heap, node, last);
    siftDown(heap, last, less);
    siftUp(heap, last, less);
}
