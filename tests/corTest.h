/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every unit test shares: check's macros (which print both operands),
 * and a main() that runs one suite in forked processes so that one test's
 * crash is reported and the others still run.
 */
#ifndef COR_TEST_H
#define COR_TEST_H

#include <check.h>
#include <stdlib.h>

/* The loop a test of the engine runs on: epoll, or io_uring in the same
 * test built again with COR_TEST_URING (the *.uring tests of make check). */
#ifdef COR_TEST_URING
#define corTestLoopCreate() corEvLoopCreateWith(COR_EV_URING)
#else
#define corTestLoopCreate() corEvLoopCreate()
#endif

/* Define the suite with COR_TEST_SUITE(name) { tcase_add_test(tc, x); } */
#define COR_TEST_SUITE(name)                                                   \
    static void corTestAdd(TCase* tc);                                         \
    int main(void)                                                             \
    {                                                                          \
        Suite* s = suite_create(#name);                                        \
        TCase* tc = tcase_create("all");                                       \
        SRunner* sr;                                                           \
        int failed;                                                            \
        corTestAdd(tc);                                                        \
        suite_add_tcase(s, tc);                                                \
        sr = srunner_create(s);                                                \
        srunner_run_all(sr, CK_NORMAL);                                        \
        failed = srunner_ntests_failed(sr);                                    \
        srunner_free(sr);                                                      \
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                      \
    }                                                                          \
    static void corTestAdd(TCase* tc)

#endif /* COR_TEST_H */
