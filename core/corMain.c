/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cor's command line:
 *
 *   cor [-c FILE]                run (master + a worker generation), in the
 *                                foreground, on FILE (default conf/cor.yaml)
 *   cor -t [-c FILE]             check FILE completely: parse, load and
 *                                initialise the modules, resolve the routes;
 *                                listen on nothing. "configuration ok" and a
 *                                "read FILE" line a file read (includes), or
 *                                the errors; exit 0 or 1
 *   cor -s SIGNAL [-c FILE]      reload | stop | quit | reopen | upgrade the
 *                                running master (its pid file); reload and
 *                                upgrade wait for the outcome and fail with
 *                                its errors
 *   cor --module-info MODULE     what a module was built against
 */
#include "corCoreInt.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The installed configuration, as nginx reads its compiled-in path: a
 * relative default would depend on the folder cor runs in. The tree's
 * `make run` names conf/cor.yaml. */
#define DEFAULT_CONFIG COR_CONFIG_DEFAULT
#define RELOAD_WAIT_MS 60000

static void
usage(FILE* out)
{
    fprintf(out,
            "usage: cor [-c FILE]               run on FILE (default %s)\n"
            "       cor -t [-c FILE]            check FILE and exit\n"
            "       cor -s reload|stop|quit|reopen|upgrade [-c FILE]\n"
            "       cor --module-info MODULE    what a module was built for\n"
            "                                   (a name or a path, as load: "
            "takes it)\n"
            "       cor -v                      the version\n",
            DEFAULT_CONFIG);
}

int
corConfigCheck(const CorOptions* options)
{
    CorConfErrors errors = { 0 };
    CorConfig* config = corConfigLoad(options->configFile, &errors);

    if (config != NULL) {
        corConfigFilesCheck(config, &errors);
    }
    if (config != NULL && corGenerationPrepare(config, &errors) == 0
        && errors.count == 0) {
        printf("configuration ok: %s\n", options->configFile);
        /* nginx -T's "# configuration file" lines: which files the
         * includes brought in is what a glob leaves one unsure of. */
        for (size_t i = 0; corConfFileRead(config->root, i) != NULL; i++) {
            printf("read %s\n", corConfFileRead(config->root, i));
        }
        return 0;
    }
    fprintf(stderr, "%s", errors.text ? errors.text : "");
    fprintf(stderr, "configuration failed: %s (%u error%s)\n",
            options->configFile, errors.count ? errors.count : 1,
            errors.count == 1 ? "" : "s");
    return 1;
}

/*
 * The pid file a configuration names, beside it as the master reads it
 * (corConfigPathBeside). A file that fails its checks (the reload that is
 * about to be refused) still names it, the master should hear of the
 * failed reload and say why: as long as its log.pid_file comes before
 * what breaks the YAML, since the file is read as far as it goes. NULL,
 * with why in errors, when the file cannot tell: it does not read up to a
 * pid_file (the default, cor.pid beside it, holds only for a file read
 * to its end).
 */
static char*
pidFilePath(const char* configFile, CorConfErrors* errors)
{
    bool whole;
    CorConf* root = corConfLoadFilePartial(configFile, errors, &whole);
    const CorConf* pid = corConfGet(corConfGet(root, "log"), "pid_file");
    char* path = NULL;

    if (pid != NULL && corConfKind(pid) == COR_CONF_SCALAR) {
        path = corConfigPathBeside(configFile, corConfText(pid));
    } else if (whole) {
        path = corConfigPathBeside(configFile, "cor.pid");
    }
    corConfFree(root);
    return path;
}

static pid_t
masterPid(const char* pidFile)
{
    FILE* f = fopen(pidFile, "r");
    int pid = 0;

    if (f == NULL || fscanf(f, "%d", &pid) != 1) {
        fprintf(stderr, "cor: no running master (pid file %s: %s)\n", pidFile,
                f ? "unreadable" : strerror(errno));
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    return pid;
}

/* The reload status file: "SEQ ok|failed\nERRORS". */
static unsigned
statusRead(const char* path, char* detail, size_t size, bool* ok)
{
    FILE* f = fopen(path, "r");
    unsigned seq = 0;
    char outcome[16] = "";
    size_t n;

    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%u %15s\n", &seq, outcome) != 2) {
        seq = 0;
    }
    n = fread(detail, 1, size - 1, f);
    detail[n] = '\0';
    fclose(f);
    *ok = strcmp(outcome, "ok") == 0;
    return seq;
}

/* Wait for a reload's or an upgrade's outcome: a status file whose
 * sequence number is no longer before. Returns the exit status. */
static int
outcomeWait(pid_t pid, const char* status, unsigned before, const char* command,
            int sig)
{
    char detail[8192];
    bool ok = false;

    for (int waited = 0; waited < RELOAD_WAIT_MS; waited += 20) {
        /* The outcome first: an upgraded master may be gone already. */
        if (statusRead(status, detail, sizeof(detail), &ok) != before) {
            if (ok) {
                printf("%s ok\n", command);
                return 0;
            }
            fprintf(stderr, "%s failed, the running %s keeps serving:\n%s",
                    command, sig == SIGHUP ? "configuration" : "master",
                    detail);
            return 1;
        }
        if (kill(pid, 0) != 0) {
            fprintf(stderr,
                    "cor: the master (pid %d) exited before the "
                    "%s's outcome\n",
                    (int)pid, command);
            return 1;
        }
        nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
    }
    fprintf(stderr, "cor: no %s outcome after %d s\n", command,
            RELOAD_WAIT_MS / 1000);
    return 1;
}

int
corSignalSend(const CorOptions* options, const char* command)
{
    static const struct {
        const char* name;
        int sig;
    } commands[] = {
        { "reload", SIGHUP },  { "stop", SIGTERM },    { "quit", SIGQUIT },
        { "reopen", SIGUSR1 }, { "upgrade", SIGUSR2 },
    };
    CorConfErrors errors = { 0 };
    CorConfErrors pidErrors = { 0 };
    CorConfig* config = corConfigLoad(options->configFile, &errors);
    char* pidFile = pidFilePath(options->configFile, &pidErrors);
    char status[PATH_MAX];
    char detail[8192];
    bool ok = false;
    int sig = 0;
    pid_t pid;
    unsigned before;

    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(command, commands[i].name) == 0) {
            sig = commands[i].sig;
        }
    }
    if (sig == 0) {
        fprintf(stderr,
                "cor: -s %s: expected reload, stop, quit, reopen or "
                "upgrade\n",
                command);
        return 1;
    }
    if (pidFile == NULL) {
        fprintf(stderr,
                "cor: -s %s: the master's pid file is unknown: %s "
                "cannot be read up to its log.pid_file:\n%s",
                command, options->configFile,
                pidErrors.text ? pidErrors.text : "");
        return 1;
    }
    pid = masterPid(pidFile);
    if (pid < 0) {
        fprintf(stderr, "%s", errors.text ? errors.text : "");
        return 1;
    }
    if (config == NULL && sig != SIGHUP) {
        /* Stop, quit and reopen need no new configuration. */
        errors.count = 0;
    }
    snprintf(status, sizeof(status), "%s.reload", pidFile);
    free(pidFile);
    corConfigFree(config);
    before = statusRead(status, detail, sizeof(detail), &ok);
    if (kill(pid, sig) != 0) {
        fprintf(stderr, "cor: cannot signal %d: %s\n", (int)pid,
                strerror(errno));
        return 1;
    }
    if (sig != SIGHUP && sig != SIGUSR2) {
        return 0;
    }
    return outcomeWait(pid, status, before, command, sig);
}

int
corMain(int argc, char** argv)
{
    static char self[PATH_MAX];
    CorOptions options = { .configFile = DEFAULT_CONFIG };
    const char* signalName = NULL;
    bool check = false;
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    if (n > 0) {
        self[n] = '\0';
        corSelfPath = self;
    }
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];

        if (strcmp(arg, "-c") == 0 && i + 1 < argc) {
            options.configFile = argv[++i];
        } else if (strcmp(arg, "-t") == 0) {
            check = true;
        } else if (strcmp(arg, "-s") == 0 && i + 1 < argc) {
            signalName = argv[++i];
        } else if (strcmp(arg, "--module-info") == 0 && i + 1 < argc) {
            return corModuleInfo(argv[++i]);
        } else if (strcmp(arg, "-v") == 0 || strcmp(arg, "--version") == 0) {
            printf("cor %s (module ABI %d)\n", COR_VERSION, COR_ABI_VERSION);
            return 0;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "cor: unknown argument '%s'\n", arg);
            usage(stderr);
            return 1;
        }
    }
    if (check) {
        return corConfigCheck(&options);
    }
    if (signalName != NULL) {
        return corSignalSend(&options, signalName);
    }
    return corMasterRun(&options);
}
