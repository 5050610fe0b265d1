#ifndef ADPLAYERD_CMQTT_H
#define ADPLAYERD_CMQTT_H
/* libmosquitto for `adplayerd mqtt`, as a few plain calls: MQTT 5 on, the callbacks in one
   table with one context pointer, the v5 properties the bridge uses (a response topic and its
   correlation data; the largest packet this client takes) read and written here. Every call
   is made by the one thread that owns the client (the bridge's), which also runs its loop. */
#include <stdbool.h>
#include <stddef.h>

struct mosquitto;

typedef struct cmqtt_callbacks {
    void (*connected)(void *context, int reason);                  /* CONNACK: 0 accepted */
    void (*disconnected)(void *context, int reason);               /* 0: asked for */
    void (*published)(void *context, int mid, int reason);         /* QoS 1: PUBACK (reason >= 0x80: refused) */
    void (*message)(void *context, const char *topic, const void *payload, int length, bool retained,
                    const char *response_topic, const void *correlation, int correlation_length);
    void (*logged)(void *context, int level, const char *text);
} cmqtt_callbacks;

/* libmosquitto's library init (once per process). */
void cmqtt_init(void);
const char *cmqtt_error(int code);
const char *cmqtt_connack(int reason);
const char *cmqtt_reason(int reason);   /* a v5 reason code in words (a refused PUBACK's) */

/* A client (MQTT 5); NULL on failure. */
struct mosquitto *cmqtt_new(const char *client_id, void *context, const cmqtt_callbacks *callbacks);
void cmqtt_destroy(struct mosquitto *client);

/* Before connecting: credentials, TLS (ca: a file; NULL: the system's CAs), the will. */
int cmqtt_credentials(struct mosquitto *client, const char *username, const char *password);
int cmqtt_tls(struct mosquitto *client, const char *ca_file, const char *ca_path, const char *cert_file, const char *key_file);
int cmqtt_will(struct mosquitto *client, const char *topic, const void *payload, int length, int qos, bool retain);

/* Connects (blocking TCP/TLS connect; the CONNACK comes through the loop), telling the broker
   the largest packet this client takes. */
int cmqtt_connect(struct mosquitto *client, const char *host, int port, int keepalive, unsigned int max_packet);
int cmqtt_disconnect(struct mosquitto *client);

/* Runs the network loop for at most `timeout_ms`. */
int cmqtt_loop(struct mosquitto *client, int timeout_ms);

/* Publishes; *mid gets the message id (QoS 1: `published` with it once acknowledged).
   `correlation` (may be NULL) goes out as the v5 correlation data. */
int cmqtt_publish(struct mosquitto *client, int *mid, const char *topic, const void *payload, int length, int qos, bool retain,
                  const void *correlation, int correlation_length);
/* Subscribes; the broker sends no retained message for it (v5 Retain Handling 2) and keeps the
   retain flag of live messages (Retain As Published): the bridge drops retained commands. */
int cmqtt_subscribe(struct mosquitto *client, const char *pattern, int qos);

/* Whether `topic` is a topic a client may publish to (UTF-8, no wildcard, no NUL). */
bool cmqtt_publishable(const char *topic);
#endif
