#ifndef ADPLAYERD_MPRIS_H
#define ADPLAYERD_MPRIS_H
/* MPRIS2 (org.mpris.MediaPlayer2 and .Player) on the session bus with sd-bus, and logind's
   PrepareForSleep on the system bus. sd-bus's vtables are C macros, so the D-Bus side is
   written here; everything it needs to know or do goes through the callbacks (Swift).

   Threading: mpris_run() runs the bus loop on the calling thread, and every callback is
   called on it. mpris_properties_changed(), mpris_seeked(), mpris_reply() and mpris_stop() may
   be called from any thread: they queue and wake the bus loop. */
#include <stddef.h>
#include <stdint.h>

typedef struct mpris_service mpris_service;

enum { MPRIS_STOPPED = 0, MPRIS_PLAYING = 1, MPRIS_PAUSED = 2 };

enum {
    MPRIS_PLAY, MPRIS_PAUSE, MPRIS_PLAY_PAUSE, MPRIS_STOP, MPRIS_NEXT, MPRIS_PREVIOUS,
    MPRIS_SEEK,          /* argument: offset in microseconds */
    MPRIS_SET_POSITION,  /* argument: position in microseconds; text: the track id */
    MPRIS_SET_RATE,      /* value */
    MPRIS_SET_LOOP,      /* argument: 0 "None", 1 "Track", 2 "Playlist" */
    MPRIS_SET_VOLUME,    /* value: 0 to 1 */
    MPRIS_SET_SHUFFLE,   /* argument: 1 on, 0 off */
};

typedef struct {
    int status;
    double rate;
    int64_t length_us;        /* < 0: unknown */
    int has_track;
    char track_id[256];       /* a D-Bus object path */
    char title[512];
    char url[4096];
    int can_play, can_pause, can_seek, can_go_next, can_go_previous;
    int loop_status;          /* 0 None, 1 Track, 2 Playlist */
    int shuffle;
    double volume;            /* 0 to 1 */
} mpris_state;

typedef struct {
    /* Everything but the position, which changes all the time: that is `position`. Both are
       answered from what the daemon handed over last: the bus thread never waits on the player. */
    void (*state)(void *context, mpris_state *out);
    int64_t (*position)(void *context);
    /* A method call (`reply` is a token) or a property write (`reply` is NULL). Returns < 0 when
       refused at once, with `message`: the caller answers with that error. Otherwise the command
       is under way: a method's answer is sent once mpris_reply(reply, …) is called — from any
       thread, exactly once — and a property write is answered at once. */
    int (*command)(void *context, int command, int64_t argument, double value, const char *text, void *reply,
                   char *message, size_t message_size);
    void (*sleep)(void *context, int going_to_sleep);
} mpris_callbacks;

/* With a `name`: connects to the session bus (DBUS_SESSION_BUS_ADDRESS), exports both
   interfaces and takes org.mpris.MediaPlayer2.<name>. Always: connects to the system bus
   (DBUS_SYSTEM_BUS_ADDRESS or the default) for logind's PrepareForSleep — a failure there is
   written to `warning` and is fatal only without a name (nothing would be left to do).
   NULL on failure, with `error` set. */
mpris_service *mpris_open(const char *name, mpris_callbacks callbacks, void *context,
                          char *error, size_t error_size, char *warning, size_t warning_size);
void mpris_run(mpris_service *service);
/* Names of changed properties of .Player, comma-separated ("PlaybackStatus,Rate"). */
void mpris_properties_changed(mpris_service *service, const char *names);
void mpris_seeked(mpris_service *service, int64_t position_us);
/* Answers the method call `reply` (a token from the command callback): success when `error` is
   NULL, else a D-Bus error with that message. Any thread; queued for the bus thread. */
void mpris_reply(mpris_service *service, void *reply, const char *error);
/* What waits for the bus thread: answers, plus one for changed properties, one for a Seeked
   (coalesced: bounded however long the bus thread is held up). Any thread. */
int mpris_pending_count(mpris_service *service);
void mpris_stop(mpris_service *service);
/* After mpris_run() has returned. */
void mpris_close(mpris_service *service);

/* For benchmarks and tests: calls org.mpris.MediaPlayer2.Player.<method> on the session bus
   at `address` for org.mpris.MediaPlayer2.<name>; 0 on success. */
int mpris_call(const char *address, const char *name, const char *method);
#endif
