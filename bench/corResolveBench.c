/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns.cached: what a lookup costs once its answer is in the cache, the
 * case of every request after a name's first (c-ares, like glibc, keeps
 * no cache of its own; without one each lookup is a round trip to the
 * DNS server). The answer comes once from the tests' DNS server, whose
 * path is the argument. Usage: corResolveBench PATH/corDnsServer.
 */
#include "corBench.h"
#include "corDns.h"
#include "corEv.h"

#define LOOKUPS 1000000

int
main(int argc, char** argv)
{
    double ns[COR_BENCH_ROUNDS];
    char servers[64];
    CorAddrs out;
    CorDns dns;

    if (argc != 2 || corDnsStart(&dns, argv[1]) != 0) {
        fprintf(stderr, "usage: corResolveBench PATH/corDnsServer\n");
        return 1;
    }
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", dns.port);
    if (corResolverConfigure(
            &(CorResolverConfig){ .servers = servers, .maxTtlS = 3600 })
            != 0
        || corResolve("bench.example.test", 0, &out, NULL, 0) != 0) {
        fprintf(stderr, "corResolveBench: the first lookup failed\n");
        corDnsStop(&dns);
        return 1;
    }
    for (int round = 0; round < COR_BENCH_ROUNDS; round++) {
        double start = corBenchNowNs();

        for (int i = 0; i < LOOKUPS; i++) {
            corResolve("bench.example.test", 0, &out, NULL, 0);
        }
        ns[round] = (corBenchNowNs() - start) / LOOKUPS;
    }
    corDnsStop(&dns);
    corBenchPrint("dns.cached", corBenchMedian(ns, COR_BENCH_ROUNDS), "ns");
    return 0;
}
