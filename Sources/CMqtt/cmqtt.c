#include "cmqtt.h"
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <stdlib.h>
#include <string.h>

typedef struct holder {
    void *context;
    cmqtt_callbacks callbacks;
} holder;

static void on_connect(struct mosquitto *m, void *obj, int rc, int flags, const mosquitto_property *props) {
    (void)m; (void)flags; (void)props;
    holder *h = obj;
    if (h->callbacks.connected) h->callbacks.connected(h->context, rc);
}

static void on_disconnect(struct mosquitto *m, void *obj, int rc, const mosquitto_property *props) {
    (void)m; (void)props;
    holder *h = obj;
    if (h->callbacks.disconnected) h->callbacks.disconnected(h->context, rc);
}

static void on_publish(struct mosquitto *m, void *obj, int mid, int reason, const mosquitto_property *props) {
    (void)m; (void)props;
    holder *h = obj;
    /* A PUBACK whose reason is a failure (>= 0x80) is not an acknowledgement of delivery: the
       bridge hears it with its reason (and says so). */
    if (h->callbacks.published) h->callbacks.published(h->context, mid, reason);
}

static void on_message(struct mosquitto *m, void *obj, const struct mosquitto_message *message, const mosquitto_property *props) {
    (void)m;
    holder *h = obj;
    char *response = NULL;
    void *correlation = NULL;
    uint16_t correlation_length = 0;
    mosquitto_property_read_string(props, MQTT_PROP_RESPONSE_TOPIC, &response, false);
    mosquitto_property_read_binary(props, MQTT_PROP_CORRELATION_DATA, &correlation, &correlation_length, false);
    if (h->callbacks.message) {
        h->callbacks.message(h->context, message->topic, message->payload, message->payloadlen, message->retain, response, correlation,
                             correlation_length);
    }
    free(response);
    free(correlation);
}

static void on_log(struct mosquitto *m, void *obj, int level, const char *text) {
    (void)m;
    holder *h = obj;
    if (h->callbacks.logged) h->callbacks.logged(h->context, level, text);
}

void cmqtt_init(void) { mosquitto_lib_init(); }
const char *cmqtt_error(int code) { return mosquitto_strerror(code); }
const char *cmqtt_connack(int reason) { return mosquitto_reason_string(reason); }
const char *cmqtt_reason(int reason) { return mosquitto_reason_string(reason); }

struct mosquitto *cmqtt_new(const char *client_id, void *context, const cmqtt_callbacks *callbacks) {
    holder *h = calloc(1, sizeof(holder));
    if (!h) return NULL;
    h->context = context;
    h->callbacks = *callbacks;
    struct mosquitto *m = mosquitto_new(client_id, true, h);
    if (!m) { free(h); return NULL; }
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    mosquitto_connect_v5_callback_set(m, on_connect);
    mosquitto_disconnect_v5_callback_set(m, on_disconnect);
    mosquitto_publish_v5_callback_set(m, on_publish);
    mosquitto_message_v5_callback_set(m, on_message);
    mosquitto_log_callback_set(m, on_log);
    return m;
}

void cmqtt_destroy(struct mosquitto *client) {
    if (!client) return;
    holder *h = mosquitto_userdata(client);
    mosquitto_destroy(client);
    free(h);
}

int cmqtt_credentials(struct mosquitto *client, const char *username, const char *password) {
    return mosquitto_username_pw_set(client, username, password);
}

int cmqtt_tls(struct mosquitto *client, const char *ca_file, const char *ca_path, const char *cert_file, const char *key_file) {
    int rc = mosquitto_tls_set(client, ca_file, ca_path, cert_file, key_file, NULL);
    if (rc != MOSQ_ERR_SUCCESS) return rc;
    /* The broker's name is checked against its certificate (never insecure). */
    return mosquitto_tls_insecure_set(client, false);
}

int cmqtt_will(struct mosquitto *client, const char *topic, const void *payload, int length, int qos, bool retain) {
    return mosquitto_will_set_v5(client, topic, length, payload, qos, retain, NULL);
}

int cmqtt_connect(struct mosquitto *client, const char *host, int port, int keepalive, unsigned int max_packet) {
    mosquitto_property *props = NULL;
    mosquitto_property_add_int32(&props, MQTT_PROP_MAXIMUM_PACKET_SIZE, max_packet);
    int rc = mosquitto_connect_bind_v5(client, host, port, keepalive, NULL, props);
    mosquitto_property_free_all(&props);
    return rc;
}

int cmqtt_disconnect(struct mosquitto *client) { return mosquitto_disconnect_v5(client, 0, NULL); }

int cmqtt_loop(struct mosquitto *client, int timeout_ms) { return mosquitto_loop(client, timeout_ms, 1); }

int cmqtt_publish(struct mosquitto *client, int *mid, const char *topic, const void *payload, int length, int qos, bool retain,
                  const void *correlation, int correlation_length) {
    mosquitto_property *props = NULL;
    if (correlation && correlation_length > 0) {
        mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, correlation, (uint16_t)correlation_length);
    }
    int rc = mosquitto_publish_v5(client, mid, topic, length, payload, qos, retain, props);
    mosquitto_property_free_all(&props);
    return rc;
}

int cmqtt_subscribe(struct mosquitto *client, const char *pattern, int qos) {
    /* No retained message at subscription, and the retain flag kept on live ones: a retained
       command is never run, whether it is replayed or published live with -r. */
    return mosquitto_subscribe_v5(client, NULL, pattern, qos, MQTT_SUB_OPT_SEND_RETAIN_NEVER | MQTT_SUB_OPT_RETAIN_AS_PUBLISHED, NULL);
}

bool cmqtt_publishable(const char *topic) {
    return mosquitto_pub_topic_check2(topic, strlen(topic)) == MOSQ_ERR_SUCCESS
        && mosquitto_validate_utf8(topic, (int)strlen(topic)) == MOSQ_ERR_SUCCESS;
}
