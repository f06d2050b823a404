/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background tasks: the bi-modal seed's SPAWN, schedule_after and
 * schedule. A module starts long-running work (a health check, a
 * subscriber, a cache refresher) with corTaskSpawn; with coroutines on, and
 * called on a loop, the task is a coroutine of that loop; anywhere else (a
 * worker, blocking mode) it is a thread of its own. Not a thread of the
 * worker pool: a task lives as long as the generation, and each one would
 * take a worker from the requests for good (with workers: 1, the server
 * would answer nothing but inline handlers). The seed's blocking executor
 * gives each long-running loop a thread for the same reason.
 *
 * A stop ends every task: a coroutine's waits are cancelled with its loop
 * (corCoLoopCancel), and the loop runs until its coroutines finished; a
 * thread's waits are cancelled by corRestCancelAll and by its own cancel,
 * and the stop joins it. A task that waits only through corRestWaitFd (and
 * so corTaskScheduleAfter, corTaskSchedule) and returns on -ECANCELED is
 * therefore over at once.
 */
#include "corCoreInt.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A task: owned by its coroutine (freed when it ends) or, on a thread, by
 * the list below until the stop joins it. */
typedef struct CorTask {
    struct CorTask* next;
    CorTaskFn fn;
    void* arg;
    CorRestCancel cancel; /* a thread's: what the stop cancels */
    CorEvTask start;      /* a coroutine's start, posted to its loop */
    CorEvLoop* loop;
    pthread_t thread;
    char name[32];
} CorTask;

static pthread_mutex_t tasksLock = PTHREAD_MUTEX_INITIALIZER;
/* Whether tasks may start: from the loops' start to the stop. */
static bool tasksOpen;
static CorTask* taskThreads;

static void
taskCoMain(void* arg)
{
    CorTask* t = arg;

    t->fn(t->arg);
    corLog(COR_LOG_DEBUG, "task %s ended", t->name);
    free(t);
}

static void*
taskThreadMain(void* arg)
{
    CorTask* t = arg;

    corRestCancelBind(&t->cancel);
    t->fn(t->arg);
    corRestCancelBind(NULL);
    corLog(COR_LOG_DEBUG, "task %s ended", t->name);
    return NULL;
}

/* Start t on a thread of its own, listed for the stop to join. Under
 * tasksLock. */
static int
threadStart(CorTask* t)
{
    int rc = pthread_create(&t->thread, NULL, taskThreadMain, t);

    if (rc != 0) {
        corLog(COR_LOG_ERROR, "task %s: cannot start a thread: %s", t->name,
               strerror(rc));
        return -rc;
    }
    t->next = taskThreads;
    taskThreads = t;
    return 0;
}

/*
 * Start a coroutine task from the loop's own stack, at the loop's next
 * iteration. Not at once from corTaskSpawn: the caller may be an inline
 * handler, whose thread must not yield (corRestYieldAllow) and whose
 * request corRequestCurrent would report, both wrong for the task's first
 * slice.
 */
static void
taskCoStart(CorEvTask* task)
{
    CorTask* t = corContainerOf(task, CorTask, start);
    int rc = corCoLoopSpawn(t->loop, taskCoMain, t);

    if (rc == 0) {
        return;
    }
    /* Past the coroutine cap, or with no stack to be had, a thread does
     * it, as a worker takes a request a coroutine could not. */
    pthread_mutex_lock(&tasksLock);
    if (rc != -ECANCELED && tasksOpen) {
        rc = threadStart(t);
    }
    pthread_mutex_unlock(&tasksLock);
    if (rc != 0) {
        corLog(COR_LOG_WARN, "task %s refused: %s", t->name, strerror(-rc));
        free(t);
    }
}

int
corTaskSpawn(CorTaskFn fn, void* arg, const char* name)
{
    CorEvLoop* loop = corEvLoopCurrent();
    CorTask* t;
    int rc;

    if (fn == NULL) {
        return -EINVAL;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    t->fn = fn;
    t->arg = arg;
    snprintf(t->name, sizeof(t->name), "%s", name != NULL ? name : "task");
    pthread_mutex_lock(&tasksLock);
    if (!tasksOpen || atomic_load(&corRuntime.stopping)) {
        rc = tasksOpen ? -ECANCELED : -EPERM;
        goto failed;
    }
    if (corRuntime.coroutines && loop != NULL) {
        t->loop = loop;
        corEvLoopPost(loop, &t->start, taskCoStart);
    } else {
        rc = threadStart(t);
        if (rc != 0) {
            goto failed;
        }
    }
    pthread_mutex_unlock(&tasksLock);
    return 0;

failed:
    pthread_mutex_unlock(&tasksLock);
    corLog(COR_LOG_WARN, "task %s refused: %s", t->name, strerror(-rc));
    free(t);
    return rc;
}

int
corTaskScheduleAfter(int ms)
{
    short revents;

    if (atomic_load(&corRuntime.stopping)) {
        return -ECANCELED;
    }
    if (corRestWaitFd(-1, 0, ms > 0 ? ms : 0, &revents) < 0) {
        return -errno;
    }
    return 0;
}

int
corTaskSchedule(void)
{
    short revents;

    if (atomic_load(&corRuntime.stopping)) {
        return -ECANCELED;
    }
    /* On a coroutine, a wait of 0 ms is a timer due now: the loop takes
     * its events and its ready coroutines first, then resumes this one. A
     * thread is its own: nothing to yield to. */
    if (corCoCurrent() != NULL && corEvLoopCurrent() != NULL
        && corCoLoopWait(-1, 0, 0, &revents) < 0 && errno != EPERM) {
        return -errno;
    }
    return 0;
}

void
corTasksOpen(void)
{
    pthread_mutex_lock(&tasksLock);
    tasksOpen = true;
    pthread_mutex_unlock(&tasksLock);
}

void
corTasksStop(void)
{
    CorTask* list;

    pthread_mutex_lock(&tasksLock);
    tasksOpen = false;
    list = taskThreads;
    taskThreads = NULL;
    pthread_mutex_unlock(&tasksLock);
    for (CorTask* t = list; t != NULL; t = t->next) {
        corRestCancel(&t->cancel);
    }
    while (list != NULL) {
        CorTask* next = list->next;

        pthread_join(list->thread, NULL);
        free(list);
        list = next;
    }
}
