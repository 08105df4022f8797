// LD_PRELOAD: on SIGSEGV print the faulting PC with the library and symbol it lies in, then the
// stack words that point into a loaded library's named symbol: likely return addresses, found
// without an unwinder (the unwinder may be what crashed) or frame pointers (seldom kept).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
static void where(const char *tag, void *pc) {
    Dl_info info;
    if (dladdr(pc, &info) && info.dli_fname) {
        fprintf(stderr, "%s %p %s (+%#lx) %s\n", tag, pc, info.dli_fname,
                (unsigned long)((char *)pc - (char *)info.dli_fbase), info.dli_sname ? info.dli_sname : "?");
    }
}
static void handler(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = (ucontext_t *)ctx;
    void *pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
    fprintf(stderr, "SEGV at address %p\n", si->si_addr);
    where("pc", pc);
    unsigned long *sp = (unsigned long *)uc->uc_mcontext.gregs[REG_RSP];
    int shown = 0;
    for (int i = 0; i < 4096 && shown < 40; i++) {
        Dl_info info;
        void *w = (void *)sp[i];
        if (dladdr(w, &info) && info.dli_fname && info.dli_sname) { where("stack", w); shown++; }
    }
    fflush(stderr);
    _exit(139);
}
__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    static char stack[1 << 16];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    sigaltstack(&ss, 0);
    sigaction(SIGSEGV, &sa, 0);
}
