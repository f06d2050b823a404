/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binary's entry. It lives on the HTTP floor, the top of what is
 * linked into cor (the modules are loaded later), so that it may name
 * every floor below it: the floors register what they bring with explicit
 * calls, bottom to top, and then the core's command line runs. A
 * constructor would do the same unseen (STYLE.md forbids them), and main
 * in the core would be an arrow up from core/ to http/.
 */
#include "corHttpClient.h"

int
main(int argc, char** argv)
{
    corHttpSchemesAdd();
    return corMain(argc, argv);
}
