#define _GNU_SOURCE
#include "csystem.h"
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timex.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

int csystem_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int csystem_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int csystem_limit_malloc_arenas(int count) {
    return mallopt(M_ARENA_MAX, count);
}

int csystem_fix_malloc_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

int csystem_batch_this_thread(void) {
    struct sched_param param = { .sched_priority = 0 };
    return pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
}

int csystem_notify(const char *state) {
    return sd_notify(0, state);
}

int csystem_watchdog(uint64_t *usec) {
    return sd_watchdog_enabled(0, usec);
}

long csystem_raise_file_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    }
    return (long)limit.rlim_cur;
}

int csystem_clock_synchronized(void) {
    struct timex tx = { .modes = 0 };
    int state = adjtimex(&tx);
    if (state < 0) return -1;
    return (state != TIME_ERROR && !(tx.status & STA_UNSYNC)) ? 1 : 0;
}

int csystem_journal_send(const char *const *fields, int count) {
    if (count <= 0 || count > 32) return -1;
    struct iovec iov[32];
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = (void *)fields[i];
        iov[i].iov_len = strlen(fields[i]);
    }
    return sd_journal_sendv(iov, count);
}

int csystem_listen_fds(void) {
    return sd_listen_fds(1);
}
