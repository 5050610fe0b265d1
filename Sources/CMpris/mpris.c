#define _GNU_SOURCE
#include "mpris.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#define PATH "/org/mpris/MediaPlayer2"
#define ROOT "org.mpris.MediaPlayer2"
#define PLAYER "org.mpris.MediaPlayer2.Player"

/* An answer to a method call, for the bus thread to send (the loop decided it). */
typedef struct pending {
    struct pending *next;
    sd_bus_message *reply;    /* the call to answer (a reference we hold) */
    char error[256];          /* the error, or "" */
} pending;

/* Most property names one PropertiesChanged carries (the Player interface has fewer). */
#define MAX_CHANGED 32

struct mpris_service {
    sd_bus *session;
    sd_bus *system;
    mpris_callbacks callbacks;
    void *context;
    int wake[2];
    pthread_mutex_t lock;
    /* What waits for the bus thread, under `lock`. Coalesced and bounded whatever the bus does
       (a stopped session bus stalls the bus thread, not the loop): one set of changed
       properties, the last Seeked, and the answers in order (a list with its tail: O(1) to add;
       as many as calls in flight, which the bus thread itself took). */
    pending *replies;
    pending **replies_tail;
    int reply_count;
    char changed[MAX_CHANGED][32];
    int changed_count;
    int seeked;
    int64_t seeked_position;
    int stopping;
};

static void state(mpris_service *s, mpris_state *out) {
    memset(out, 0, sizeof *out);
    out->length_us = -1;
    s->callbacks.state(s->context, out);
}

/* ---- org.mpris.MediaPlayer2 ---- */

static int get_false(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    return sd_bus_message_append(r, "b", 0);
}

static int get_identity(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    return sd_bus_message_append(r, "s", "adplayerd");
}

static int get_empty_list(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    return sd_bus_message_append(r, "as", 0);
}

static int method_unsupported(sd_bus_message *m, void *u, sd_bus_error *e) {
    return sd_bus_error_set(e, SD_BUS_ERROR_NOT_SUPPORTED, "adplayerd has no window to raise and quits only by its service");
}

static const sd_bus_vtable root_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Raise", "", "", method_unsupported, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Quit", "", "", method_unsupported, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_PROPERTY("CanQuit", "b", get_false, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("CanRaise", "b", get_false, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("HasTrackList", "b", get_false, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("Identity", "s", get_identity, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("SupportedUriSchemes", "as", get_empty_list, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("SupportedMimeTypes", "as", get_empty_list, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_VTABLE_END
};

/* ---- org.mpris.MediaPlayer2.Player ---- */

/* A method call (m) is answered later, through mpris_reply(), once the player's loop has run
   it: the bus thread goes on serving meanwhile. A property write (m NULL) is answered now. */
static int command(mpris_service *s, sd_bus_message *m, sd_bus_error *e, int which, int64_t argument, double value, const char *text) {
    char message[512] = "";
    if (m) sd_bus_message_ref(m);
    if (s->callbacks.command(s->context, which, argument, value, text, m, message, sizeof message) < 0) {
        if (m) sd_bus_message_unref(m);
        return sd_bus_error_set(e, SD_BUS_ERROR_FAILED, message[0] ? message : "refused");
    }
    return 1;   /* handled: the answer comes with mpris_reply() (sd-bus sends none by itself) */
}

#define SIMPLE_METHOD(fn, which) \
    static int fn(sd_bus_message *m, void *u, sd_bus_error *e) { return command(u, m, e, which, 0, 0, NULL); }
SIMPLE_METHOD(method_play, MPRIS_PLAY)
SIMPLE_METHOD(method_pause, MPRIS_PAUSE)
SIMPLE_METHOD(method_play_pause, MPRIS_PLAY_PAUSE)
SIMPLE_METHOD(method_stop, MPRIS_STOP)
SIMPLE_METHOD(method_next, MPRIS_NEXT)
SIMPLE_METHOD(method_previous, MPRIS_PREVIOUS)

static int method_seek(sd_bus_message *m, void *u, sd_bus_error *e) {
    int64_t offset = 0;
    int r = sd_bus_message_read(m, "x", &offset);
    if (r < 0) return r;
    return command(u, m, e, MPRIS_SEEK, offset, 0, NULL);
}

static int method_set_position(sd_bus_message *m, void *u, sd_bus_error *e) {
    const char *track = NULL;
    int64_t position = 0;
    int r = sd_bus_message_read(m, "ox", &track, &position);
    if (r < 0) return r;
    return command(u, m, e, MPRIS_SET_POSITION, position, 0, track);
}

static int method_open_uri(sd_bus_message *m, void *u, sd_bus_error *e) {
    return sd_bus_error_set(e, SD_BUS_ERROR_NOT_SUPPORTED, "adplayerd plays files of its library: use adplayerctl open");
}

static int get_playback_status(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    return sd_bus_message_append(r, "s", st.status == MPRIS_PLAYING ? "Playing" : st.status == MPRIS_PAUSED ? "Paused" : "Stopped");
}

static int get_loop_status(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    return sd_bus_message_append(r, "s", st.loop_status == 2 ? "Playlist" : st.loop_status == 1 ? "Track" : "None");
}

static int set_loop_status(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *v, void *u, sd_bus_error *e) {
    const char *text = NULL;
    int r = sd_bus_message_read(v, "s", &text);
    if (r < 0) return r;
    int mode = strcmp(text, "None") == 0 ? 0 : strcmp(text, "Track") == 0 ? 1 : strcmp(text, "Playlist") == 0 ? 2 : -1;
    if (mode < 0) return sd_bus_error_set(e, SD_BUS_ERROR_INVALID_ARGS, "LoopStatus: None, Track or Playlist");
    return command(u, NULL, e, MPRIS_SET_LOOP, mode, 0, NULL);
}

static int get_shuffle(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    return sd_bus_message_append(r, "b", st.shuffle);
}

static int set_shuffle(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *v, void *u, sd_bus_error *e) {
    int on = 0;
    int r = sd_bus_message_read(v, "b", &on);
    if (r < 0) return r;
    return command(u, NULL, e, MPRIS_SET_SHUFFLE, on != 0, 0, NULL);
}

static int get_volume(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    return sd_bus_message_append(r, "d", st.volume);
}

static int set_volume(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *v, void *u, sd_bus_error *e) {
    double volume = 0;
    int r = sd_bus_message_read(v, "d", &volume);
    if (r < 0) return r;
    return command(u, NULL, e, MPRIS_SET_VOLUME, 0, volume, NULL);
}

static int get_rate(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    return sd_bus_message_append(r, "d", st.rate > 0 ? st.rate : 1.0);
}

static int set_rate(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *v, void *u, sd_bus_error *e) {
    double rate = 0;
    int r = sd_bus_message_read(v, "d", &rate);
    if (r < 0) return r;
    return command(u, NULL, e, MPRIS_SET_RATE, 0, rate, NULL);
}

static int append_entry(sd_bus_message *r, const char *key, const char *type, const void *value) {
    int k;
    if ((k = sd_bus_message_open_container(r, 'e', "sv")) < 0) return k;
    if ((k = sd_bus_message_append(r, "s", key)) < 0) return k;
    if ((k = sd_bus_message_open_container(r, 'v', type)) < 0) return k;
    if (type[0] == 'x') k = sd_bus_message_append(r, "x", *(const int64_t *)value);
    else k = sd_bus_message_append(r, type, (const char *)value);
    if (k < 0) return k;
    if ((k = sd_bus_message_close_container(r)) < 0) return k;
    return sd_bus_message_close_container(r);
}

static int get_metadata(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    int k = sd_bus_message_open_container(r, 'a', "{sv}");
    if (k < 0) return k;
    if (st.has_track) {
        if ((k = append_entry(r, "mpris:trackid", "o", st.track_id)) < 0) return k;
        if (st.length_us >= 0 && (k = append_entry(r, "mpris:length", "x", &st.length_us)) < 0) return k;
        if ((k = append_entry(r, "xesam:title", "s", st.title)) < 0) return k;
        if ((k = append_entry(r, "xesam:url", "s", st.url)) < 0) return k;
    } else {
        if ((k = append_entry(r, "mpris:trackid", "o", "/org/mpris/MediaPlayer2/TrackList/NoTrack")) < 0) return k;
    }
    return sd_bus_message_close_container(r);
}

static int get_position(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_service *s = u;
    return sd_bus_message_append(r, "x", s->callbacks.position(s->context));
}

static int get_number(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    double value = strcmp(prop, "MinimumRate") == 0 ? 0.01 : strcmp(prop, "MaximumRate") == 0 ? 100.0 : 1.0;
    return sd_bus_message_append(r, "d", value);
}

static int get_can(sd_bus *b, const char *p, const char *i, const char *prop, sd_bus_message *r, void *u, sd_bus_error *e) {
    mpris_state st;
    state(u, &st);
    int value = strcmp(prop, "CanPlay") == 0 ? st.can_play
              : strcmp(prop, "CanPause") == 0 ? st.can_pause
              : strcmp(prop, "CanSeek") == 0 ? st.can_seek
              : strcmp(prop, "CanGoNext") == 0 ? st.can_go_next
              : strcmp(prop, "CanGoPrevious") == 0 ? st.can_go_previous
              : strcmp(prop, "CanControl") == 0 ? 1 : 0;
    return sd_bus_message_append(r, "b", value);
}

#define CHANGES SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE
static const sd_bus_vtable player_vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Play", "", "", method_play, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Pause", "", "", method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("PlayPause", "", "", method_play_pause, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Stop", "", "", method_stop, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Next", "", "", method_next, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Previous", "", "", method_previous, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("Seek", "x", "", method_seek, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("SetPosition", "ox", "", method_set_position, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("OpenUri", "s", "", method_open_uri, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("Seeked", "x", 0),
    SD_BUS_PROPERTY("PlaybackStatus", "s", get_playback_status, 0, CHANGES),
    SD_BUS_WRITABLE_PROPERTY("LoopStatus", "s", get_loop_status, set_loop_status, 0, CHANGES | SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_WRITABLE_PROPERTY("Rate", "d", get_rate, set_rate, 0, CHANGES | SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_WRITABLE_PROPERTY("Shuffle", "b", get_shuffle, set_shuffle, 0, CHANGES | SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_PROPERTY("Metadata", "a{sv}", get_metadata, 0, CHANGES),
    SD_BUS_WRITABLE_PROPERTY("Volume", "d", get_volume, set_volume, 0, CHANGES | SD_BUS_VTABLE_UNPRIVILEGED),
    /* No change signal for Position, as the specification says: clients read it, and Seeked
       tells them of a jump. */
    SD_BUS_PROPERTY("Position", "x", get_position, 0, 0),
    SD_BUS_PROPERTY("MinimumRate", "d", get_number, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("MaximumRate", "d", get_number, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_PROPERTY("CanGoNext", "b", get_can, 0, CHANGES),
    SD_BUS_PROPERTY("CanGoPrevious", "b", get_can, 0, CHANGES),
    SD_BUS_PROPERTY("CanPlay", "b", get_can, 0, CHANGES),
    SD_BUS_PROPERTY("CanPause", "b", get_can, 0, CHANGES),
    SD_BUS_PROPERTY("CanSeek", "b", get_can, 0, CHANGES),
    SD_BUS_PROPERTY("CanControl", "b", get_can, 0, SD_BUS_VTABLE_PROPERTY_CONST),
    SD_BUS_VTABLE_END
};

/* ---- logind ---- */

static int on_prepare_for_sleep(sd_bus_message *m, void *u, sd_bus_error *e) {
    mpris_service *s = u;
    int sleeping = 0;
    if (sd_bus_message_read(m, "b", &sleeping) >= 0) s->callbacks.sleep(s->context, sleeping);
    return 0;
}

/* ---- the service ---- */

mpris_service *mpris_open(const char *name, mpris_callbacks callbacks, void *context,
                          char *error, size_t error_size, char *warning, size_t warning_size) {
    mpris_service *s = calloc(1, sizeof *s);
    if (!s) { snprintf(error, error_size, "out of memory"); return NULL; }
    s->callbacks = callbacks;
    s->context = context;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->lock, NULL);
    s->replies_tail = &s->replies;
    error[0] = warning[0] = 0;
    if (pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) != 0) { snprintf(error, error_size, "pipe: %s", strerror(errno)); goto fail; }
    int r;
    if (name) {
        r = sd_bus_open_user(&s->session);
        if (r < 0) { snprintf(error, error_size, "cannot connect to the session bus: %s", strerror(-r)); goto fail; }
        if ((r = sd_bus_add_object_vtable(s->session, NULL, PATH, ROOT, root_vtable, s)) < 0 ||
            (r = sd_bus_add_object_vtable(s->session, NULL, PATH, PLAYER, player_vtable, s)) < 0) {
            snprintf(error, error_size, "cannot export %s: %s", PATH, strerror(-r));
            goto fail;
        }
        char bus_name[256];
        snprintf(bus_name, sizeof bus_name, "org.mpris.MediaPlayer2.%s", name);
        if ((r = sd_bus_request_name(s->session, bus_name, 0)) < 0) {
            snprintf(error, error_size, "cannot own %s: %s", bus_name, strerror(-r));
            goto fail;
        }
    }
    r = sd_bus_open_system(&s->system);
    if (r >= 0) {
        /* The sender is matched by the bus, which resolves logind's name to its owner: a
           signal of that shape from anyone else is not delivered. */
        r = sd_bus_match_signal(s->system, NULL, "org.freedesktop.login1", "/org/freedesktop/login1",
                                "org.freedesktop.login1.Manager", "PrepareForSleep", on_prepare_for_sleep, s);
    }
    if (r < 0) {
        snprintf(warning, warning_size, "no system bus for logind's PrepareForSleep (%s): going to sleep is not seen", strerror(-r));
        if (s->system) s->system = sd_bus_flush_close_unref(s->system);
        if (!s->session) {
            snprintf(error, error_size, "%s", warning);
            goto fail;
        }
    }
    return s;
fail:
    mpris_close(s);
    return NULL;
}

static void wake(mpris_service *s) {
    char byte = 1;
    ssize_t ignored = write(s->wake[1], &byte, 1);
    (void)ignored;
}

static void discard(pending *p) {
    if (p->reply) sd_bus_message_unref(p->reply);
    free(p);
}

/* Adds `name` to the set of changed properties (unless it is there). Under the lock. */
static void add_changed(mpris_service *s, const char *name, size_t length) {
    if (length == 0 || length >= sizeof s->changed[0]) return;
    for (int i = 0; i < s->changed_count; i++) {
        if (strlen(s->changed[i]) == length && memcmp(s->changed[i], name, length) == 0) return;
    }
    if (s->changed_count >= MAX_CHANGED) return;
    memcpy(s->changed[s->changed_count], name, length);
    s->changed[s->changed_count][length] = 0;
    s->changed_count++;
}

void mpris_properties_changed(mpris_service *s, const char *names) {
    if (!s->session) return;   /* no MPRIS: nobody to tell */
    pthread_mutex_lock(&s->lock);
    for (const char *n = names; *n;) {
        const char *end = strchr(n, ',');
        size_t length = end ? (size_t)(end - n) : strlen(n);
        add_changed(s, n, length);
        n += length + (end ? 1 : 0);
    }
    pthread_mutex_unlock(&s->lock);
    wake(s);
}

void mpris_seeked(mpris_service *s, int64_t position_us) {
    if (!s->session) return;
    pthread_mutex_lock(&s->lock);
    s->seeked = 1;
    s->seeked_position = position_us;   /* the last seek's position is what a client needs */
    pthread_mutex_unlock(&s->lock);
    wake(s);
}

void mpris_reply(mpris_service *s, void *reply, const char *error) {
    pending *p = calloc(1, sizeof *p);
    if (!p) return;   /* out of memory: the caller gets no answer (sd-bus objects are the bus thread's) */
    p->reply = reply;
    snprintf(p->error, sizeof p->error, "%s", error ? error : "");
    pthread_mutex_lock(&s->lock);
    *s->replies_tail = p;
    s->replies_tail = &p->next;
    s->reply_count++;
    pthread_mutex_unlock(&s->lock);
    wake(s);
}

int mpris_pending_count(mpris_service *s) {
    pthread_mutex_lock(&s->lock);
    int count = s->reply_count + (s->changed_count > 0) + s->seeked;
    pthread_mutex_unlock(&s->lock);
    return count;
}

void mpris_stop(mpris_service *s) {
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_mutex_unlock(&s->lock);
    wake(s);
}

/* Sends what waits: the answers in order, then one PropertiesChanged with every property
   changed since the last, then the last Seeked. */
static void emit_pending(mpris_service *s) {
    char changed[MAX_CHANGED][32];
    char *names[MAX_CHANGED + 1];
    pthread_mutex_lock(&s->lock);
    pending *p = s->replies;
    s->replies = NULL;
    s->replies_tail = &s->replies;
    s->reply_count = 0;
    int count = s->changed_count;
    memcpy(changed, s->changed, sizeof changed);
    s->changed_count = 0;
    int seeked = s->seeked;
    int64_t position = s->seeked_position;
    s->seeked = 0;
    pthread_mutex_unlock(&s->lock);
    while (p) {
        pending *next = p->next;
        if (p->error[0]) sd_bus_reply_method_errorf(p->reply, SD_BUS_ERROR_FAILED, "%s", p->error);
        else sd_bus_reply_method_return(p->reply, "");
        discard(p);
        p = next;
    }
    for (int i = 0; i < count; i++) names[i] = changed[i];
    names[count] = NULL;
    if (count > 0) sd_bus_emit_properties_changed_strv(s->session, PATH, PLAYER, names);
    if (seeked) sd_bus_emit_signal(s->session, PATH, PLAYER, "Seeked", "x", position);
}

static int timeout_ms(sd_bus *bus) {
    uint64_t usec = 0;
    if (!bus || sd_bus_get_timeout(bus, &usec) < 0 || usec == UINT64_MAX) return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t current = (uint64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
    return usec <= current ? 0 : (int)((usec - current + 999) / 1000);
}

void mpris_run(mpris_service *s) {
    for (;;) {
        while (s->session && sd_bus_process(s->session, NULL) > 0) {}
        while (s->system && sd_bus_process(s->system, NULL) > 0) {}
        if (s->session) {
            emit_pending(s);
            sd_bus_flush(s->session);
        }
        pthread_mutex_lock(&s->lock);
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        if (stopping) break;
        struct pollfd fds[3] = {
            { .fd = s->wake[0], .events = POLLIN },
            { .fd = s->session ? sd_bus_get_fd(s->session) : -1, .events = s->session ? (short)sd_bus_get_events(s->session) : 0 },
            { .fd = s->system ? sd_bus_get_fd(s->system) : -1, .events = s->system ? (short)sd_bus_get_events(s->system) : 0 },
        };
        int a = timeout_ms(s->session), b = timeout_ms(s->system);
        int timeout = a < 0 ? b : b < 0 ? a : (a < b ? a : b);
        if (poll(fds, 3, timeout) < 0 && errno != EINTR) break;
        if (fds[0].revents) {
            char buffer[64];
            while (read(s->wake[0], buffer, sizeof buffer) > 0) {}
        }
    }
}

void mpris_close(mpris_service *s) {
    if (!s) return;
    if (s->session) sd_bus_flush_close_unref(s->session);
    if (s->system) sd_bus_flush_close_unref(s->system);
    pending *p = s->replies;
    while (p) { pending *next = p->next; discard(p); p = next; }
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int mpris_call(const char *address, const char *name, const char *method) {
    sd_bus *bus = NULL;
    int r = sd_bus_new(&bus);
    if (r < 0) return r;
    if ((r = sd_bus_set_address(bus, address)) < 0 || (r = sd_bus_set_bus_client(bus, 1)) < 0 || (r = sd_bus_start(bus)) < 0) {
        sd_bus_unref(bus);
        return r;
    }
    char bus_name[256];
    snprintf(bus_name, sizeof bus_name, "org.mpris.MediaPlayer2.%s", name);
    sd_bus_error error = SD_BUS_ERROR_NULL;
    r = sd_bus_call_method(bus, bus_name, PATH, PLAYER, method, &error, NULL, "");
    sd_bus_error_free(&error);
    sd_bus_flush_close_unref(bus);
    return r;
}
