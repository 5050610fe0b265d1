/* The floor for the memory and start-up benchmarks: a bare libmpv client with the daemon's
   options (headless, the locked options of docs/reliability.md, keep-open), playing the files
   given one after the other, in real time, then exiting. Built by scripts/bench.py:
     cc -O2 -o bare_mpv scripts/bench/bare_mpv.c $(pkg-config --cflags --libs mpv)
   With BARE_MPV_READY=1 it prints "ready <ns>" (CLOCK_MONOTONIC) on its first video frame
   (the first `playback-restart`) and exits: the start-up benchmark's end. */
#include <mpv/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *options[][2] = {
    {"vo", "null"}, {"ao", "null"}, {"audio-fallback-to-null", "yes"}, {"audio-display", "no"},
    {"keep-open", "yes"}, {"keep-open-pause", "no"}, {"input-default-bindings", "no"},
    {"input-vo-keyboard", "no"}, {"force-window", "no"}, {"network-timeout", "5.000"},
    {"config", "no"}, {"load-scripts", "no"}, {"ytdl", "no"}, {"osc", "no"},
    {"load-stats-overlay", "no"}, {"load-osd-console", "no"}, {"load-auto-profiles", "no"},
    {"terminal", "no"}, {"input-terminal", "no"}, {"idle", "yes"},
    {"access-references", "no"}, {"load-unsafe-playlists", "no"},
};

int main(int argc, char **argv) {
    mpv_handle *mpv = mpv_create();
    if (!mpv) return 1;
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) mpv_set_option_string(mpv, options[i][0], options[i][1]);
    if (mpv_initialize(mpv) < 0) return 1;
    int ready = getenv("BARE_MPV_READY") != NULL;
    mpv_observe_property(mpv, 1, "eof-reached", MPV_FORMAT_FLAG);
    int next = 1;
    if (next < argc) {
        const char *cmd[] = {"loadfile", argv[next++], "replace", NULL};
        mpv_command(mpv, cmd);
    }
    for (;;) {
        mpv_event *event = mpv_wait_event(mpv, -1);
        if (event->event_id == MPV_EVENT_SHUTDOWN) break;
        if (ready && event->event_id == MPV_EVENT_PLAYBACK_RESTART) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            printf("ready %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
            fflush(stdout);
            break;
        }
        if (event->event_id == MPV_EVENT_PROPERTY_CHANGE) {
            mpv_event_property *p = event->data;
            if (p->format == MPV_FORMAT_FLAG && *(int *)p->data) {
                if (next >= argc) break;
                const char *cmd[] = {"loadfile", argv[next++], "replace", NULL};
                mpv_command(mpv, cmd);
            }
        }
    }
    mpv_terminate_destroy(mpv);
    return 0;
}
