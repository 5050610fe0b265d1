#ifndef ADPLAYERD_CMPV_SHIM_H
#define ADPLAYERD_CMPV_SHIM_H
/* Hide API that mpv deprecated (MPV_EVENT_IDLE/TICK, the wakeup pipe): nothing here may use it. */
#define MPV_ENABLE_DEPRECATED 0
#include <mpv/client.h>
#include <locale.h>
#endif
