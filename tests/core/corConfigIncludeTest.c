/* SPDX-License-Identifier: Apache-2.0 */
/*
 * include: files in a scratch folder read through the core's schema. The
 * lists of the included files come after the main file's, in the order
 * the files are read; a nested include and a relative path are beside
 * the file that names them; each error names the included file's
 * line:column; cycles and a chain deeper than COR_CONF_INCLUDE_DEPTH are
 * refused at the include that makes them; every file read is listed.
 */
#include "corTest.h"
#include "corConfig.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LISTEN "listen: [{ protocol: http, address: \"127.0.0.1:8080\" }]\n"

static char folder[64];

static void
folderMake(void)
{
    snprintf(folder, sizeof(folder), "/tmp/corConfigIncludeTest.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

static void
folderRemove(void)
{
    char command[128];

    snprintf(command, sizeof(command), "rm -rf '%s'", folder);
    ck_assert_int_eq(system(command), 0);
}

/* Write text to name in the scratch folder, making its folders. */
static void
fileWrite(const char* name, const char* text)
{
    char path[256];
    FILE* f;

    for (const char* slash = strchr(name, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        snprintf(path, sizeof(path), "%s/%.*s", folder, (int)(slash - name),
                 name);
        mkdir(path, 0700);
    }
    snprintf(path, sizeof(path), "%s/%s", folder, name);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* The scratch folder's main.yaml, read; NULL with its errors in e. */
static CorConfig*
mainLoad(CorConfErrors* e)
{
    char path[128];

    snprintf(path, sizeof(path), "%s/main.yaml", folder);
    return corConfigLoad(path, e);
}

/* Load main.yaml, which must fail with want (the folder's name for %s)
 * among its errors, and with no more than count errors. */
static void
refusedWith(const char* want, unsigned count)
{
    CorConfErrors e = { 0 };
    CorConfig* cf = mainLoad(&e);
    char wanted[512];

    snprintf(wanted, sizeof(wanted), want, folder, folder, folder, folder);
    ck_assert_msg(cf == NULL, "loaded");
    ck_assert_msg(strstr(e.text, wanted) != NULL, "wanted %s in:\n%s", wanted,
                  e.text);
    ck_assert_msg(e.count <= count, "%u errors:\n%s", e.count, e.text);
    corConfErrorsFree(&e);
}

/* Ends with tail: the files are named by the folder they are in. */
static bool
endsWith(const char* s, const char* tail)
{
    size_t n = strlen(s);
    size_t t = strlen(tail);

    return n >= t && strcmp(s + n - t, tail) == 0;
}

START_TEST(test_lists_appended_in_the_order_read)
{
    static const char* const paths[] = { "/main", "/a", "/b", "/n", "/last" };
    static const char* const files[] = { "/main.yaml", "/conf.d/10-a.yaml",
                                         "/conf.d/20-b.yaml",
                                         "/conf.d/../nested/n.yaml",
                                         "/last.yaml" };
    CorConfErrors e = { 0 };
    CorConfig* cf;
    const CorConf* n;

    folderMake();
    fileWrite(
        "main.yaml",
        "include: [ \"conf.d/*.yaml\", \"none/*.yaml\", last.yaml ]\n" LISTEN
        "modules: [ { load: http } ]\n"
        "routes: [ { match: /main, handler: h } ]\n");
    fileWrite("conf.d/20-b.yaml", "include: ../nested/n.yaml\n"
                                  "routes: [ { match: /b, handler: h } ]\n");
    fileWrite("conf.d/10-a.yaml",
              "routes: [ { match: /a, handler: h } ]\n"
              "listen: [ { protocol: http, address: \"127.0.0.1:8081\" } ]\n"
              "modules: [ { load: hello, greeting: hi } ]\n");
    fileWrite("conf.d/README", "not read: the glob names *.yaml\n");
    fileWrite("nested/n.yaml",
              "listen:\n"
              "  - protocol: https\n"
              "    address: \"127.0.0.1:8443\"\n"
              "    tls: { certificate: certs/c.pem, key: /k.pem }\n"
              "routes:\n"
              "  - { match: /n, handler: h }\n");
    fileWrite("last.yaml", "routes: [ { match: /last, handler: h } ]\n");
    cf = mainLoad(&e);
    ck_assert_msg(cf != NULL, "%s", e.text);

    ck_assert_uint_eq(cf->routeCount, 5);
    for (unsigned i = 0; i < 5; i++) {
        ck_assert_str_eq(cf->routes[i].path, paths[i]);
        ck_assert_msg(endsWith(corConfFile(cf->routes[i].node), files[i]), "%s",
                      corConfFile(cf->routes[i].node));
        ck_assert_msg(endsWith(corConfFileRead(cf->root, i), files[i]), "%s",
                      corConfFileRead(cf->root, i));
    }
    ck_assert_ptr_null(corConfFileRead(cf->root, 5));
    ck_assert_uint_eq(cf->listenCount, 3);
    ck_assert_str_eq(cf->listen[1].address, "127.0.0.1:8081");
    ck_assert_str_eq(cf->listen[2].address, "127.0.0.1:8443");
    /* A path in an included file is beside that file. */
    ck_assert(endsWith(cf->listen[2].tls->certs[0].certificate,
                       "/nested/certs/c.pem"));
    ck_assert_uint_eq(cf->moduleCount, 2);
    ck_assert_str_eq(cf->modules[1].load, "hello");
    n = cf->routes[3].node;
    ck_assert_uint_eq(corConfLine(n), 6);
    ck_assert_uint_eq(corConfColumn(n), 5);
    corConfigFree(cf);
    folderRemove();
}
END_TEST

/* The main file needs no list of its own: the included one becomes it. */
START_TEST(test_list_only_in_an_included_file)
{
    CorConfErrors e = { 0 };
    CorConfig* cf;

    folderMake();
    fileWrite("main.yaml", "include: [ l.yaml, r.yaml ]\n");
    fileWrite("l.yaml", LISTEN);
    fileWrite("r.yaml", "routes: [ { match: /r, handler: h } ]\n"
                        "listen: [ { protocol: http, address: "
                        "\"127.0.0.1:8081\" } ]\n");
    cf = mainLoad(&e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->listenCount, 2);
    ck_assert_uint_eq(cf->routeCount, 1);
    corConfigFree(cf);
    folderRemove();
}
END_TEST

/* Every error in an included file is at its own file:line:column. */
START_TEST(test_errors_name_the_included_file)
{
    folderMake();
    fileWrite("main.yaml", "include: inc.yaml\n" LISTEN
                           "routes: [ { match: /x, handler: h } ]\n");
    fileWrite("inc.yaml", "routes:\n"
                          "  - { match: \"GET x\", handler: h }\n"
                          "  - { match: /x, handler: h }\n"
                          "limits: { body_bytes: 1KiB }\n"
                          "rotues: []\n");
    refusedWith("%s/inc.yaml:2:14: match: the path must start with '/'", 4);
    refusedWith("%s/inc.yaml:3:14: match: '/x' is already routed (first at "
                "%s/main.yaml:3:20)",
                4);
    refusedWith("%s/inc.yaml:4:1: 'limits' is not read from an included "
                "file, only from %s/main.yaml",
                4);
    refusedWith("%s/inc.yaml:5:1: 'rotues' is not read from an included "
                "file",
                4);
    refusedWith("did you mean 'routes'?", 4);

    /* A syntax error ends the reading there, as in the main file: the
     * schema is not run on what it could not read. */
    fileWrite("inc.yaml", "routes: [ { match: /y\n");
    refusedWith("%s/inc.yaml:2:1: did not find expected ',' or '}'", 1);

    fileWrite("inc.yaml", "routes: { a: 1 }\n");
    refusedWith("%s/inc.yaml:1:9: routes: expected a list", 1);
    fileWrite("inc.yaml", "- routes\n");
    refusedWith("%s/inc.yaml:1:1: expected a mapping such as routes", 1);
    fileWrite("inc.yaml", "");
    refusedWith("%s/inc.yaml:1:1: the file is empty", 1);
    folderRemove();
}
END_TEST

/* A file that a file being read includes again is a cycle, at the include
 * that closes it, with the files it went through. */
START_TEST(test_cycle_refused)
{
    folderMake();
    fileWrite("main.yaml", "include: a.yaml\n" LISTEN);
    fileWrite("a.yaml", "include: sub/b.yaml\n");
    fileWrite("sub/b.yaml", "routes: []\ninclude: [ ../main.yaml ]\n");
    refusedWith("%s/sub/b.yaml:2:12: include: %s/sub/../main.yaml includes "
                "itself (%s/main.yaml > %s/a.yaml > ",
                1);

    /* The same file twice, side by side, is no cycle. */
    fileWrite("main.yaml", "include: [ a.yaml, a.yaml ]\n" LISTEN);
    fileWrite("a.yaml", "modules: []\n");
    {
        CorConfErrors e = { 0 };
        CorConfig* cf = mainLoad(&e);

        ck_assert_msg(cf != NULL, "%s", e.text);
        ck_assert_ptr_nonnull(corConfFileRead(cf->root, 2));
        corConfigFree(cf);
    }
    folderRemove();
}
END_TEST

/* Eight levels of include are read; a ninth is refused where it is asked
 * for. */
START_TEST(test_depth_limit)
{
    CorConfErrors e = { 0 };
    CorConfig* cf;
    char name[32];
    char text[96];

    folderMake();
    fileWrite("main.yaml", "include: d1.yaml\n" LISTEN);
    for (int i = 1; i <= COR_CONF_INCLUDE_DEPTH; i++) {
        int len = snprintf(text, sizeof(text),
                           "routes: [ { match: /d%d, "
                           "handler: h } ]\n",
                           i);

        if (i < COR_CONF_INCLUDE_DEPTH) {
            snprintf(text + len, sizeof(text) - (size_t)len,
                     "include: d%d.yaml\n", i + 1);
        }
        snprintf(name, sizeof(name), "d%d.yaml", i);
        fileWrite(name, text);
    }
    cf = mainLoad(&e);
    ck_assert_msg(cf != NULL, "%s", e.text);
    ck_assert_uint_eq(cf->routeCount, COR_CONF_INCLUDE_DEPTH);
    corConfigFree(cf);

    fileWrite("d8.yaml", "include: d9.yaml\n");
    fileWrite("d9.yaml", "routes: []\n");
    refusedWith("%s/d8.yaml:1:10: include: %s/d9.yaml is more than 8 levels "
                "of include deep",
                1);
    folderRemove();
}
END_TEST

/* include itself: a glob or a list of globs; a name without a wildcard
 * must be a file. */
START_TEST(test_include_values)
{
    folderMake();
    fileWrite("main.yaml", LISTEN "include: { a: 1 }\n");
    refusedWith("%s/main.yaml:2:10: include: expected a file or a glob", 1);
    fileWrite("main.yaml", LISTEN "include: [ \"\", ~ ]\n");
    refusedWith("%s/main.yaml:2:12: include: expected a file or a glob", 2);
    fileWrite("main.yaml", LISTEN "include: [ \"*.conf\", nosuch.yaml ]\n");
    refusedWith("%s/main.yaml:2:22: include: cannot read %s/nosuch.yaml: "
                "No such file or directory",
                1);
    fileWrite("main.yaml", LISTEN "include: [ sub ]\n");
    fileWrite("sub/x.yaml", "routes: []\n");
    refusedWith("%s/main.yaml:2:12: include: %s/sub is not a file", 1);
    folderRemove();
}
END_TEST

COR_TEST_SUITE(corConfigInclude)
{
    tcase_add_test(tc, test_lists_appended_in_the_order_read);
    tcase_add_test(tc, test_list_only_in_an_included_file);
    tcase_add_test(tc, test_errors_name_the_included_file);
    tcase_add_test(tc, test_cycle_refused);
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_include_values);
}
