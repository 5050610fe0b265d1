#ifndef ADPLAYERD_CSYSTEM_H
#define ADPLAYERD_CSYSTEM_H
/* Linux calls that glibc only declares with _GNU_SOURCE, which Swift's Glibc module does not
   set: accept4 and the peer credentials of a Unix socket; glibc's malloc tuning; and systemd's
   notification protocol (libsystemd's sd_notify, sd_watchdog_enabled). */
#include <stdint.h>
#include <sys/types.h>

/* accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC). */
int csystem_accept_nonblocking(int fd);

/* The connecting process of a Unix socket (SO_PEERCRED); 0 on success. */
int csystem_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/* mallopt(M_ARENA_MAX, count) (malloc.h is not in Swift's Glibc module); 1 on success. */
int csystem_limit_malloc_arenas(int count);

/* mallopt(M_MMAP_THRESHOLD, bytes): blocks from `bytes` up are mapped and unmapped on free, and
   glibc no longer raises the threshold as large blocks are freed; 1 on success. */
int csystem_fix_malloc_mmap_threshold(int bytes);

/* The calling thread becomes SCHED_BATCH: the scheduler no longer lets its wake-ups preempt
   the thread that woke it (the player's loop). 0 on success. */
int csystem_batch_this_thread(void);

/* sd_notify(0, state): > 0 sent, 0 not under systemd's notification (no $NOTIFY_SOCKET), < 0 -errno. */
int csystem_notify(const char *state);

/* sd_watchdog_enabled(0, &usec): > 0 with the interval in `usec` when systemd expects WATCHDOG=1
   from this process, 0 when not, < 0 -errno. */
int csystem_watchdog(uint64_t *usec);

/* Whether the kernel says the wall clock is synchronised (adjtimex: not TIME_ERROR, STA_UNSYNC
   clear) — what timedatectl's NTPSynchronized reports. 1 yes, 0 no, -1 unknown. */
int csystem_clock_synchronized(void);

/* sd_journal_sendv: `count` fields "NAME=value" (MESSAGE=, PRIORITY=, MESSAGE_ID=, …); 0 on success. */
int csystem_journal_send(const char *const *fields, int count);


/* sd_listen_fds(1): how many sockets systemd passed (from fd 3, SD_LISTEN_FDS_START), 0 when
   not socket-activated, < 0 -errno. */
int csystem_listen_fds(void);

/* Raises the soft RLIMIT_NOFILE to the hard limit; the new soft limit, or -1. */
long csystem_raise_file_limit(void);
#endif
