// SPDX-License-Identifier: Apache-2.0
//
// The peer of bench/corCoBench.c: the same two loops on Boost.Context's
// fcontext (the raw jump_fcontext/make_fcontext layer, no allocator or
// std::function around it), so the switch is measured against the switch.
#include <boost/context/detail/fcontext.hpp>

#include <cstdlib>
#include <ctime>

using boost::context::detail::fcontext_t;
using boost::context::detail::jump_fcontext;
using boost::context::detail::make_fcontext;
using boost::context::detail::transfer_t;

namespace {

const std::size_t stackSize = 256 * 1024;

double
nowNs()
{
    timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

void
pingPong(transfer_t t)
{
    for (;;) {
        t = jump_fcontext(t.fctx, nullptr);
    }
}

void
runOnce(transfer_t t)
{
    jump_fcontext(t.fctx, nullptr);
}

}  // namespace

extern "C" double
boostYieldResumeNs(long iterations)
{
    char* stack = static_cast<char*>(std::malloc(stackSize));
    fcontext_t ctx = make_fcontext(stack + stackSize, stackSize, pingPong);
    transfer_t t = jump_fcontext(ctx, nullptr);
    double start = nowNs();

    for (long i = 0; i < iterations; i++) {
        t = jump_fcontext(t.fctx, nullptr);
    }
    double ns = (nowNs() - start) / iterations;
    std::free(stack);
    return ns;
}

extern "C" double
boostCreateRunFinishNs(long iterations)
{
    char* stack = static_cast<char*>(std::malloc(stackSize));
    double start = nowNs();

    for (long i = 0; i < iterations; i++) {
        fcontext_t ctx = make_fcontext(stack + stackSize, stackSize, runOnce);
        jump_fcontext(ctx, nullptr);
    }
    double ns = (nowNs() - start) / iterations;
    std::free(stack);
    return ns;
}
