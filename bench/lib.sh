# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# What every benchmark script shares, sourced as `. "$(dirname "$0")/lib.sh"`
# after `set -euo pipefail`: free ports and the wait for a server, the
# processes a script started and their stop, CPU cgroups for server-bound
# runs, CPU ticks and resident memory from /proc, and the figures (median,
# ratios, `bench: NAME VALUE UNIT` lines). One copy of each, so that the
# benchmarks measure the same way.
#
# Sourcing it makes $work, a temporary folder, and sets an EXIT trap that
# stops every process `track`ed (the last started first), removes every
# cgroup `cgroupMake` made and then $work. $benchName (the script's name)
# prefixes failures.

benchName=$(basename "$0")
work=$(mktemp -d)
pids=()
cgroups=()
trap 'stopAll; cgroupRemove; rm -rf "$work"' EXIT

fail() {   # MESSAGE...
    echo "bench: $benchName failed: $*" >&2
    exit 1
}

# "N cores, MODEL": the machine a run's figures come from.
machine() {
    echo "$(nproc) cores," \
         "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
}

# ---- Ports and processes --------------------------------------------------

freePort() {
    python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Wait until URL answers (any status) to curl with CURL_ARGS; fail after 5 s.
waitUrl() {   # URL [CURL_ARGS...]
    local url=$1
    shift
    for _ in $(seq 100); do
        curl -s -o /dev/null "$@" "$url" && return 0
        sleep 0.05
    done
    fail "nothing answers $url: the server did not start"
}

waitPort() {   # PORT [PATH]: a plain HTTP server on 127.0.0.1
    waitUrl "http://127.0.0.1:$1${2:-/hello}"
}

# Wait until something accepts on PORT of 127.0.0.1 (a server that does
# not speak HTTP: a broker); fail after 5 s.
waitTcp() {   # PORT
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    fail "nothing answers on port $1"
}

# Remember a process started in the background (`cmd & track $!`), to be
# stopped by stopAll.
track() {   # PID
    pids+=("$1")
}

# Stop one process this script started, and forget it. A process killed by
# its signal (floorPeer) is no failure.
stopOne() {   # PID
    local p kept=()
    [ -n "$1" ] || return 0
    if kill "$1" 2>/dev/null; then
        wait "$1" 2>/dev/null || true
    fi
    for p in "${pids[@]}"; do
        [ "$p" = "$1" ] || kept+=("$p")
    done
    pids=("${kept[@]}")
    return 0
}

stopAll() {   # every tracked process, the last started first
    while [ "${#pids[@]}" -gt 0 ]; do
        stopOne "${pids[-1]}"
    done
    return 0
}

# The one child of a master (cor's generation, nginx's worker): the
# process whose memory is measured.
childOf() {   # PID
    local kids
    for _ in $(seq 100); do
        kids=$(pgrep -P "$1" || true)
        if [ -n "$kids" ] && [ "$(wc -w <<< "$kids")" = 1 ]; then
            echo "$kids"
            return 0
        fi
        sleep 0.05
    done
    fail "process $1 has no single child (${kids:-none})"
}

# Whether the cor of BUILD has the io_uring backend (runtime.io: uring):
# its `cor -t` says so of a file that asks for it.
corHasUring() {   # BUILD
    ! "$1/cor" -t -c <(printf 'runtime: { io: uring }\n') 2>&1 \
        | grep -q "no io_uring"
}

# ---- CPU cgroups ----------------------------------------------------------

# Make a CPU cgroup (v1 or v2) for server-bound runs, held to half a core
# to start with (see cgroupQuota), and put its directory in the variable
# VAR; VAR is empty where this machine does not let us make one. The EXIT
# trap removes it.
cgroupMake() {   # VAR [NAME]
    local dir=
    if [ -w /sys/fs/cgroup/cpu ]; then
        dir=/sys/fs/cgroup/cpu/$benchName${2:-}.$$
        mkdir "$dir" 2>/dev/null && echo 100000 > "$dir/cpu.cfs_period_us" \
            || dir=
    elif [ -w /sys/fs/cgroup/cgroup.subtree_control ]; then
        dir=/sys/fs/cgroup/$benchName${2:-}.$$
        echo +cpu > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
        mkdir "$dir" 2>/dev/null || dir=
    fi
    if [ -n "$dir" ]; then
        cgroups+=("$dir")
        cgroupQuota "$dir" 50000
    fi
    printf -v "$1" '%s' "$dir"
}

# Hold the cgroup to QUOTA microseconds of CPU every 100 ms.
cgroupQuota() {   # DIR QUOTA
    if [ -f "$1/cpu.cfs_quota_us" ]; then
        echo "$2" > "$1/cpu.cfs_quota_us"
    else
        echo "$2 100000" > "$1/cpu.max"
    fi
}

# Remove the cgroups made, once the generation a master leaves behind is
# gone (it may outlive the master by a moment).
cgroupRemove() {
    local dir
    for dir in "${cgroups[@]}"; do
        for _ in $(seq 50); do
            rmdir "$dir" 2>/dev/null && break
            sleep 0.1
        done
    done
    cgroups=()
    return 0
}

# Become a command, in the cgroup when one is given (its children follow);
# run in the background, so that $! is the command's own pid.
inCgroup() {   # DIR COMMAND...
    local dir=$1
    shift
    if [ -n "$dir" ]; then
        exec sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$dir" "$@"
    fi
    exec "$@"
}

# ---- /proc ----------------------------------------------------------------

# User + system clock ticks of a process and its children.
cpuTicks() {   # PID
    local total=0 p
    for p in "$1" $(pgrep -P "$1"); do
        total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat" \
                               2>/dev/null || echo 0)))
    done
    echo "$total"
}

# Nanoseconds on a CPU of a process and its children, every thread, from
# the scheduler's own count (schedstat): clock ticks are 10 ms, too coarse
# for a short run of a process that sleeps between requests. A thread that
# ended is no longer counted: measure processes whose threads stay.
cpuNs() {   # PID
    local p
    for p in "$1" $(pgrep -P "$1"); do
        cat "/proc/$p/task/"*/schedstat 2>/dev/null || true
    done | awk '{ sum += $1 } END { printf "%.0f\n", sum }'
}

# The whole machine's clock ticks so far, every CPU, as "BUSY IDLE STEAL":
# busy is user, nice, system, irq and softirq (whoever ran), idle counts
# iowait, steal is the time the hypervisor gave our CPUs to other guests.
machineTicks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $5 + $6, $9; exit }' \
        /proc/stat
}

# Microseconds of CPU per request: TICKS clock ticks over REQUESTS.
perRequestUs() {   # TICKS REQUESTS
    awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "%.2f\n", (n > 0 ? t * 1e6 / hz / n : 0) }'
}

# Resident bytes of a process: Rss of smaps_rollup, which walks the page
# tables, where the kernel has it; VmRSS of status otherwise, whose
# per-thread counters may lag by a few pages a thread (cor's generation
# has several threads). The kernel's socket buffers are in neither.
rssBytes() {   # PID
    local file=/proc/$1/smaps_rollup field=Rss:
    if [ ! -r "$file" ]; then
        file=/proc/$1/status field=VmRSS:
    fi
    awk -v f="$field" '$1 == f { print $2 * 1024; found = 1 }
                       END { exit !found }' "$file" \
        || fail "no $field in $file"
}

fdCount() {   # PID
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 | wc -l
}

# ---- wrk ------------------------------------------------------------------

# Runs wrk with ARGS, its report in $work/wrk.out. Socket errors (connect,
# read, write, timeout) or answers other than 2xx and 3xx stop the whole
# benchmark with wrk's report: a rate would count them as requests served.
# wrk prints those lines only when a count is not zero; none of these runs
# closes its connections, so no read error is inherent to a run.
runWrk() {   # WRK_ARGS...
    if ! wrk "$@" > "$work/wrk.out" 2>&1 \
        || ! grep -q 'Requests/sec' "$work/wrk.out"; then
        echo "bench: $benchName: wrk $* failed:" >&2
        cat "$work/wrk.out" >&2
        exit 1
    fi
    if grep -Eq '(Socket errors|Non-2xx or 3xx responses):' "$work/wrk.out"
    then
        echo "bench: $benchName: wrk $* had errors, so no rate:" >&2
        grep -E '(Socket errors|Non-2xx or 3xx responses):' "$work/wrk.out" >&2
        exit 1
    fi
}

# ---- cor-request -----------------------------------------------------------

# One figure of a cor-request load report in FILE: the value after NAME
# (requests, failed, 2xx, non-2xx, p50, p90, p99, p99.9, max), or before it
# for req/s. Fails when the report has no such figure (cor-request did not
# get to print it).
requestFigure() {   # FILE NAME
    awk -v k="$2" '/^ *(requests|latency) / {
            for (i = 1; i < NF; i++) {
                if (k == "req/s" && $(i + 1) == k) { print $i; found = 1 }
                if (k != "req/s" && $i == k) { print $(i + 1); found = 1 }
            } }
        END { exit !found }' "$1"
}

# ---- Figures --------------------------------------------------------------

median() {   # figures on stdin, one a line
    sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

emit() {   # NAME VALUE UNIT
    printf 'bench: %s %s %s\n' "$1" "$2" "$3"
}

ratio() {   # A B
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'
}

# The median of the ratios of each round's two figures: the machine's
# drift between rounds (other tenants) falls on both sides of each ratio.
# DECIMALS (2) where a finer figure is wanted (abBench's 2 %).
pairedRatio() {   # FILE_A FILE_B [DECIMALS], one figure a line, round by round
    paste "$1" "$2" | awk '$2 > 0 { printf "%.6f\n", $1 / $2 }' | median \
        | awk -v d="${3:-2}" '{ printf "%.*f", d, $1 }'
}
