#ifndef ADPLAYERD_CSYSTEM_H
#define ADPLAYERD_CSYSTEM_H
/* Linux calls that glibc only declares with _GNU_SOURCE, which Swift's Glibc module does not
   set: accept4 and the peer credentials of a Unix socket; and glibc's malloc tuning. */
#include <sys/types.h>

/* accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC). */
int csystem_accept_nonblocking(int fd);

/* The connecting process of a Unix socket (SO_PEERCRED); 0 on success. */
int csystem_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/* mallopt(M_ARENA_MAX, count) (malloc.h is not in Swift's Glibc module); 1 on success. */
int csystem_limit_malloc_arenas(int count);

/* The calling thread becomes SCHED_BATCH: the scheduler no longer lets its wake-ups preempt
   the thread that woke it (the player's loop). 0 on success. */
int csystem_batch_this_thread(void);
#endif
