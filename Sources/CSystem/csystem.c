#define _GNU_SOURCE
#include "csystem.h"
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/socket.h>

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

int csystem_batch_this_thread(void) {
    struct sched_param param = { .sched_priority = 0 };
    return pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
}
