/*
 * keep_last.c: the README's keep-last engine in C, through rampart_engine.h.
 *
 * It keeps the newest `keep` messages (plugins.toml: [plugins.engines.keep-last.config]
 * keep = 50), never separating an assistant message that calls tools from the results that
 * answer it. It needs no JSON library: a small scanner finds each message's span in the input
 * and the answer is those spans copied back, so the messages return byte for byte.
 *
 * Build (from the repository's root):
 *   cc -std=c11 -O2 -shared -fPIC -I engine-api/include
 *       examples/engines/c/keep_last.c -o libkeep_last_c.so
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rampart_engine.h"

/* ---- a minimal JSON scanner: positions only, no values are built ---- */

typedef struct {
    const char *s;
    size_t len;
    size_t at;
} scan;

static void skip_ws(scan *p) {
    while (p->at < p->len && (p->s[p->at] == ' ' || p->s[p->at] == '\n' ||
                              p->s[p->at] == '\r' || p->s[p->at] == '\t'))
        p->at++;
}

/* Skips a string starting at its opening quote; 0 on malformed input. */
static int skip_string(scan *p) {
    if (p->at >= p->len || p->s[p->at] != '"') return 0;
    p->at++;
    while (p->at < p->len) {
        char c = p->s[p->at++];
        if (c == '\\') {
            if (p->at >= p->len) return 0;
            p->at++;
        } else if (c == '"') {
            return 1;
        }
    }
    return 0;
}

/* Skips any value; 0 on malformed input. Depth-limited so hostile input cannot overflow the
 * stack. */
static int skip_value(scan *p, int depth) {
    skip_ws(p);
    if (p->at >= p->len || depth > 200) return 0;
    char c = p->s[p->at];
    if (c == '"') return skip_string(p);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->at++;
        skip_ws(p);
        if (p->at < p->len && p->s[p->at] == close) {
            p->at++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                skip_ws(p);
                if (!skip_string(p)) return 0;
                skip_ws(p);
                if (p->at >= p->len || p->s[p->at] != ':') return 0;
                p->at++;
            }
            if (!skip_value(p, depth + 1)) return 0;
            skip_ws(p);
            if (p->at >= p->len) return 0;
            if (p->s[p->at] == ',') {
                p->at++;
                continue;
            }
            if (p->s[p->at] == close) {
                p->at++;
                return 1;
            }
            return 0;
        }
    }
    /* A number, true, false or null: a run of the characters they are made of. */
    size_t start = p->at;
    while (p->at < p->len && p->s[p->at] != 0 && strchr("+-.0123456789eEtrufalsn", p->s[p->at]) != NULL)
        p->at++;
    return p->at > start;
}

/* In the object whose '{' is at `obj`, finds the value of `key`; its offset in *value.
 * Returns 1 if found, 0 if absent, -1 if the object is malformed. */
static int find_key(const char *s, size_t len, size_t obj, const char *key, size_t *value) {
    scan p = {s, len, obj};
    size_t key_len = strlen(key);
    skip_ws(&p);
    if (p.at >= len || s[p.at] != '{') return -1;
    p.at++;
    skip_ws(&p);
    if (p.at < len && s[p.at] == '}') return 0;
    for (;;) {
        skip_ws(&p);
        size_t k = p.at;
        if (!skip_string(&p)) return -1;
        int match = p.at - k - 2 == key_len && memcmp(s + k + 1, key, key_len) == 0;
        skip_ws(&p);
        if (p.at >= len || s[p.at] != ':') return -1;
        p.at++;
        skip_ws(&p);
        if (match) {
            *value = p.at;
            return 1;
        }
        if (!skip_value(&p, 1)) return -1;
        skip_ws(&p);
        if (p.at < len && s[p.at] == ',') {
            p.at++;
            continue;
        }
        if (p.at < len && s[p.at] == '}') return 0;
        return -1;
    }
}

/* Whether the string value at `at` is exactly `text` (raw bytes; enough for the ASCII roles and
 * block types compared here). */
static int string_is(const char *s, size_t len, size_t at, const char *text) {
    size_t n = strlen(text);
    return at + n + 2 <= len && s[at] == '"' && memcmp(s + at + 1, text, n) == 0 &&
           s[at + n + 1] == '"';
}

/* The raw span of the string value at `at` (without quotes); 0 if it is not a string. */
static int string_span(const char *s, size_t len, size_t at, size_t *from, size_t *n) {
    scan p = {s, len, at};
    if (!skip_string(&p)) return 0;
    *from = at + 1;
    *n = p.at - at - 2;
    return 1;
}

/* ---- the engine ---- */

typedef struct {
    size_t keep;
} keep_last;

typedef struct {
    size_t start, end;  /* the message's bytes in the input */
    size_t id, id_len;  /* toolResult: the call id it answers */
    int is_result;
} message;

static const char INFO[] =
    "{\"id\":\"keep-last\",\"name\":\"Keep last N (C)\",\"version\":\"0.1.0\","
    "\"protocol\":{\"protocol\":\"rampart-engine\",\"version\":\"1.0.0\",\"features\":[]}}";

static char *copy_text(const char *text, size_t *len) {
    *len = strlen(text);
    char *out = malloc(*len);
    if (out != NULL) memcpy(out, text, *len);
    return out;
}

static rampart_status fail(rampart_status status, const char *why, char **out, size_t *out_len) {
    *out = copy_text(why, out_len);
    return status;
}

static rampart_status create(const char *init_json, size_t init_len, const rampart_host *host,
                             void **instance, char **error, size_t *error_len) {
    (void)host;
    keep_last *self = malloc(sizeof *self);
    if (self == NULL) return fail(RAMPART_ENGINE, "out of memory", error, error_len);
    self->keep = 50;
    size_t config, keep;
    if (find_key(init_json, init_len, 0, "config", &config) == 1 &&
        init_json[config] == '{' && find_key(init_json, init_len, config, "keep", &keep) == 1) {
        char *end = NULL;
        unsigned long long n = strtoull(init_json + keep, &end, 10);
        if (end == init_json + keep) {
            free(self);
            return fail(RAMPART_INVALID_PARAMS, "config.keep must be a whole number", error,
                        error_len);
        }
        self->keep = (size_t)n;
    }
    *instance = self;
    return RAMPART_OK;
}

/* Whether the assistant message at m.start calls the tool whose id is `id`. */
static int calls(const char *s, size_t len, const message *m, const char *id, size_t id_len) {
    size_t content;
    if (find_key(s, len, m->start, "content", &content) != 1 || s[content] != '[') return 0;
    scan p = {s, len, content + 1};
    for (;;) {
        skip_ws(&p);
        if (p.at >= len || s[p.at] == ']') return 0;
        size_t block = p.at, type, bid, from, n;
        if (s[block] == '{' && find_key(s, len, block, "type", &type) == 1 &&
            string_is(s, len, type, "toolCall") && find_key(s, len, block, "id", &bid) == 1 &&
            string_span(s, len, bid, &from, &n) && n == id_len && memcmp(s + from, id, n) == 0)
            return 1;
        if (!skip_value(&p, 1)) return 0;
        skip_ws(&p);
        if (p.at < len && s[p.at] == ',') p.at++;
    }
}

static rampart_status assemble(keep_last *self, const char *s, size_t len, char **out,
                               size_t *out_len) {
    size_t list;
    int found = find_key(s, len, 0, "messages", &list);
    if (found < 0) return fail(RAMPART_INVALID_PARAMS, "parameters are not a JSON object", out, out_len);
    size_t count = 0, cap = 0;
    message *msgs = NULL;
    if (found == 1) {
        if (s[list] != '[') return fail(RAMPART_INVALID_PARAMS, "`messages` must be an array", out, out_len);
        scan p = {s, len, list + 1};
        for (;;) {
            skip_ws(&p);
            if (p.at < len && s[p.at] == ']') break;
            if (count == cap) {
                cap = cap ? cap * 2 : 64;
                message *grown = realloc(msgs, cap * sizeof *msgs);
                if (grown == NULL) {
                    free(msgs);
                    return fail(RAMPART_ENGINE, "out of memory", out, out_len);
                }
                msgs = grown;
            }
            message *m = &msgs[count];
            memset(m, 0, sizeof *m);
            m->start = p.at;
            if (p.at >= len || s[p.at] != '{' || !skip_value(&p, 1)) {
                free(msgs);
                return fail(RAMPART_INVALID_PARAMS, "each message must be an object", out, out_len);
            }
            m->end = p.at;
            size_t role, id;
            if (find_key(s, len, m->start, "role", &role) == 1 && string_is(s, len, role, "toolResult") &&
                find_key(s, len, m->start, "toolCallId", &id) == 1 &&
                string_span(s, len, id, &m->id, &m->id_len))
                m->is_result = 1;
            count++;
            skip_ws(&p);
            if (p.at < len && s[p.at] == ',') p.at++;
        }
    }
    /* Units, as rampart_engine_api::pairing::tool_units: a message and the results right after
     * it that answer its calls. Walk them newest first while the whole unit fits in `keep`. */
    size_t start = count, i = 0;
    size_t *unit_starts = malloc((count + 1) * sizeof *unit_starts);
    size_t units = 0;
    if (unit_starts == NULL) {
        free(msgs);
        return fail(RAMPART_ENGINE, "out of memory", out, out_len);
    }
    while (i < count) {
        size_t opener = i++;
        unit_starts[units++] = opener;
        while (i < count && msgs[i].is_result &&
               calls(s, len, &msgs[opener], s + msgs[i].id, msgs[i].id_len))
            i++;
    }
    while (units > 0 && count - unit_starts[units - 1] <= self->keep) start = unit_starts[--units];
    free(unit_starts);

    size_t bytes = 64;
    for (i = start; i < count; i++) bytes += msgs[i].end - msgs[i].start + 1;
    char *answer = malloc(bytes);
    if (answer == NULL) {
        free(msgs);
        return fail(RAMPART_ENGINE, "out of memory", out, out_len);
    }
    size_t at = 0;
    memcpy(answer, "{\"messages\":[", 13);
    at = 13;
    for (i = start; i < count; i++) {
        if (i > start) answer[at++] = ',';
        memcpy(answer + at, s + msgs[i].start, msgs[i].end - msgs[i].start);
        at += msgs[i].end - msgs[i].start;
    }
    memcpy(answer + at, "],\"estimatedTokens\":0}", 22);
    at += 22;
    free(msgs);
    *out = answer;
    *out_len = at;
    return RAMPART_OK;
}

static rampart_status call(void *instance, const char *method, const char *json_in, size_t len,
                           const rampart_call_ctx *ctx, char **out, size_t *out_len) {
    (void)ctx;
    if (strcmp(method, "assemble") == 0) return assemble(instance, json_in, len, out, out_len);
    if (strcmp(method, "ingest") == 0) {
        *out = copy_text("{\"ingested\":false}", out_len);
        return RAMPART_OK;
    }
    if (strcmp(method, "compact") == 0) {
        *out = copy_text("{\"ok\":true,\"compacted\":false}", out_len);
        return RAMPART_OK;
    }
    if (strcmp(method, "dispose") == 0) return RAMPART_OK;
    return RAMPART_UNSUPPORTED;
}

static void free_buffer(char *buf, size_t len) {
    (void)len;
    free(buf);
}

static void destroy(void *instance) { free(instance); }

static const rampart_engine_table_v1 TABLE = {
    RAMPART_ENGINE_ABI_VERSION, INFO, create, call, free_buffer, destroy,
};

const rampart_engine_table_v1 *rampart_engine_v1(void) { return &TABLE; }
