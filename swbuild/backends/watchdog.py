"""The running-kernel marker every generated host keeps, and the runner's SIGTERM handler
that prints it: `swbuild check --timeout` stops a hung runner and says which kernel it was in.

The host sets `<prefix>_running_kernel` (a string literal) before each kernel launch; the
runner's handler writes it to stderr with async-signal-safe calls and exits 124.
"""
from __future__ import annotations

def host_definition(prefix):
    """The marker's definition and the launch hook (C and C++ hosts alike give them C linkage).
    The hook is NULL unless a program sets it: the runner's timings (runner_main.py) read the
    chip's clock there (Sunway rtc, CNRT notifiers placed on the model's queue)."""
    return ["#ifdef __cplusplus", 'extern "C" {', "#endif", f'const char *volatile {prefix}_running_kernel = "";',
            f"void (*volatile {prefix}_launch_hook)(const char *kernel, void *queue) = 0;",
            "#ifdef __cplusplus", "}", "#endif"]


def host_mark(prefix, kernel, indent="    ", queue="0"):
    """Before a launch: the kernel's name; after the last one (kernel=""): none. Either way the
    launch hook, when set, hears of it (with the queue the launch goes to, if any)."""
    return (f'{indent}{prefix}_running_kernel = "{kernel}"; '
            f'if ({prefix}_launch_hook) {prefix}_launch_hook("{kernel}", {queue});')


def runner_handler(prefix):
    """Includes, the marker's declaration and the handler; `runner_install()` goes in main."""
    return (["#include <signal.h>", "#include <string.h>", "#include <unistd.h>",
             "#ifdef __cplusplus", 'extern "C" {', "#endif", f"extern const char *volatile {prefix}_running_kernel;",
             "#ifdef __cplusplus", "}", "#endif", "",
               "static void on_term(int sig)", "{",
               f"    const char *k = {prefix}_running_kernel;",
               "    static const char head[] = \"runner: stopped in kernel \", none[] = \"runner: stopped outside any kernel\\n\";",
               "    (void)sig;",
               "    if (!k || !*k) { if (write(2, none, sizeof none - 1)) {} }",
               "    else if (write(2, head, sizeof head - 1) >= 0 && write(2, k, strlen(k)) >= 0 && write(2, \"\\n\", 1)) {}",
               "    _exit(124);", "}", ""])


def runner_install(indent="    "):
    return f"{indent}signal(SIGTERM, on_term);"
