/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a generation says when one of its threads dies of a fault (SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL) or an abort: the thread (loop N, worker N), the
 * handler it ran and the module that registered it, and the request line
 * it was serving. Without it the log said only the master's "generation 3
 * (pid N) died (signal 11)", which names no culprit.
 *
 * The line is written by the coroutine layer's crash handler
 * (coroutine/corCoGuard.c, which adds the coroutine when its stack
 * overflowed) and asks this file for its words, in the signal handler: so
 * everything here reads what is there with no lock, no allocation and no
 * call that might take either. What the thread serves costs the serving
 * code nothing: it is the pointer corRequestCurrent reads, which a worker
 * or an inline handler sets before the handler runs and clears after, and
 * a coroutine keeps as its data. The line starts as corLog's do; the time
 * is turned into local time with the offset to UTC taken at start, since
 * localtime is not safe in a handler.
 */
#include "corCoreInt.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

/* Enough of a request line to find it in the access log. */
#define TARGET_MAX 200
#define METHOD_MAX 16

static long utcOffsetS;

static const struct {
    int sig;
    const char* name;
} signalNames[] = {
    { SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },
    { SIGILL, "SIGILL" },   { SIGABRT, "SIGABRT" },
};

static void
putPadded(CorCoCrashLine* line, unsigned value, unsigned width)
{
    char digits[8];

    for (unsigned i = width; i > 0; i--) {
        digits[i - 1] = (char)('0' + value % 10);
        value /= 10;
    }
    corCoCrashPut(line, digits, width);
}

/* "2026-12-06 01:30:00.123", the days turned into a date as in Howard
 * Hinnant's civil_from_days. */
static void
putTime(CorCoCrashLine* line)
{
    struct timespec now;
    long long days;
    long secs;

    clock_gettime(CLOCK_REALTIME, &now);
    now.tv_sec += utcOffsetS;
    days = (long long)(now.tv_sec / 86400);
    secs = (long)(now.tv_sec % 86400);
    days += 719468;
    long long era = (days >= 0 ? days : days - 146096) / 146097;
    unsigned doe = (unsigned)(days - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    unsigned day = doy - (153 * mp + 2) / 5 + 1;
    unsigned month = mp < 10 ? mp + 3 : mp - 9;
    long long year = (long long)yoe + era * 400 + (month <= 2);

    putPadded(line, (unsigned)year, 4);
    corCoCrashPutText(line, "-");
    putPadded(line, month, 2);
    corCoCrashPutText(line, "-");
    putPadded(line, day, 2);
    corCoCrashPutText(line, " ");
    putPadded(line, (unsigned)(secs / 3600), 2);
    corCoCrashPutText(line, ":");
    putPadded(line, (unsigned)(secs / 60 % 60), 2);
    corCoCrashPutText(line, ":");
    putPadded(line, (unsigned)(secs % 60), 2);
    corCoCrashPutText(line, ".");
    putPadded(line, (unsigned)(now.tv_nsec / 1000000), 3);
}

static void
putSignal(CorCoCrashLine* line, int sig, const siginfo_t* info)
{
    corCoCrashPutText(line, "signal ");
    corCoCrashPutNumber(line, (uint64_t)sig, 10);
    for (size_t i = 0; i < sizeof(signalNames) / sizeof(signalNames[0]); i++) {
        if (signalNames[i].sig == sig) {
            corCoCrashPutText(line, " (");
            corCoCrashPutText(line, signalNames[i].name);
            corCoCrashPutText(line, ")");
        }
    }
    /* kill -SEGV from outside is no fault of the code that ran. */
    if (info->si_code <= 0 && info->si_pid != getpid()) {
        corCoCrashPutText(line, " sent by pid ");
        corCoCrashPutNumber(line, (uint64_t)info->si_pid, 10);
    }
}

static void
putThread(CorCoCrashLine* line)
{
    int loop = corLoopIndexCurrent();
    int worker = corRuntime.workers != NULL
                     ? corEvPoolWorkerIndex(corRuntime.workers)
                     : -1;
    pid_t tid = (pid_t)syscall(SYS_gettid);

    if (loop >= 0) {
        corCoCrashPutText(line, "loop ");
        corCoCrashPutNumber(line, (uint64_t)loop, 10);
    } else if (worker >= 0) {
        corCoCrashPutText(line, "worker ");
        corCoCrashPutNumber(line, (uint64_t)worker, 10);
    } else if (tid == getpid()) {
        corCoCrashPutText(line, "the main thread");
    } else {
        corCoCrashPutText(line, "thread ");
        corCoCrashPutNumber(line, (uint64_t)tid, 10);
    }
}

/* Bytes a client sent, as text that cannot break the line: what is not
 * printable ASCII goes as \xHH. */
static void
putEscaped(CorCoCrashLine* line, const char* bytes, size_t len, size_t max)
{
    for (size_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)bytes[i];

        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') {
            corCoCrashPut(line, (const char*)&c, 1);
        } else {
            char hex[4] = { '\\', 'x', "0123456789abcdef"[c >> 4],
                            "0123456789abcdef"[c & 15] };

            corCoCrashPut(line, hex, sizeof(hex));
        }
    }
    if (len > max) {
        corCoCrashPutText(line, "...");
    }
}

/* The method, the target as the client wrote it (else the path and the
 * query) and the version, each bounded. */
static void
putRequestLine(CorCoCrashLine* line, const CorRequest* r)
{
    corCoCrashPutText(line, "\"");
    putEscaped(line, r->method, r->methodLen, METHOD_MAX);
    corCoCrashPutText(line, " ");
    if (r->target != NULL) {
        putEscaped(line, r->target, r->targetLen, TARGET_MAX);
    } else {
        putEscaped(line, r->path, r->pathLen, TARGET_MAX);
        if (r->query != NULL) {
            corCoCrashPutText(line, "?");
            putEscaped(line, r->query, r->queryLen, TARGET_MAX);
        }
    }
    if (r->version != NULL) {
        corCoCrashPutText(line, " ");
        corCoCrashPutText(line, r->version);
    }
    corCoCrashPutText(line, "\"");
}

static void
putServing(CorCoCrashLine* line)
{
    const CorRequest* r = corRequestCurrent();
    const CorHandlerEntry* h;
    const CorModule* m;

    if (r == NULL || (h = r->handler) == NULL) {
        corCoCrashPutText(line, ", serving no request");
        return;
    }
    m = h->module;
    corCoCrashPutText(line, ", in handler ");
    corCoCrashPutText(line, h->handler.name);
    corCoCrashPutText(line, " of module ");
    corCoCrashPutText(line, m != NULL && m->descriptor != NULL
                                ? m->descriptor->name
                                : "core");
    corCoCrashPutText(line, r->inFinish ? ", after answering " : ", serving ");
    putRequestLine(line, r);
}

static void
describe(CorCoCrashLine* line, int sig, const siginfo_t* info)
{
    putTime(line);
    corCoCrashPutText(line, " [error] ");
    corCoCrashPutNumber(line, (uint64_t)getpid(), 10);
    corCoCrashPutText(line, ": crash: ");
    putSignal(line, sig, info);
    corCoCrashPutText(line, " on ");
    putThread(line);
    putServing(line);
}

void
corCrashReportInit(void)
{
    time_t now = time(NULL);
    struct tm tm;

    if (localtime_r(&now, &tm) != NULL) {
        utcOffsetS = tm.tm_gmtoff;
    }
    corCoCrashReportSet(corLogFd(), describe);
    corCoCrashArm();
}
