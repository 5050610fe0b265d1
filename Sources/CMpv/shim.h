#ifndef ADPLAYERD_CMPV_SHIM_H
#define ADPLAYERD_CMPV_SHIM_H
/* Hide API that mpv deprecated (MPV_EVENT_IDLE/TICK, the wakeup pipe): nothing here may use it. */
#define MPV_ENABLE_DEPRECATED 0
#include <mpv/client.h>
#include <locale.h>
#include <sys/prctl.h>

/* Names the calling thread (prctl is variadic, which Swift cannot call). */
static inline void cmpv_name_this_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }
#endif
