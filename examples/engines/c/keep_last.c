/*
 * keep_last.c: the README's keep-last engine in C, through rampart_engine.h.
 *
 * It keeps the newest `keep` messages (plugins.toml: [plugins.engines.keep-last.config]
 * keep = 50), never separating an assistant message that calls tools from the results that
 * answer it. It needs no JSON library: a small scanner finds each message's span in the input
 * and the answer is those spans copied back, so the messages return byte for byte.
 *
 * It announces `messageRefs` (docs/engine-protocol.md, section 4.1): after the first call the
 * host sends only the new messages as a delta against the list this engine kept, and the answer
 * is a `[start, length]` run of the call's list, so a turn costs the new messages, not the
 * history. A call whose list is a plain array (a raw call, `rampart engines check`) is answered
 * with a plain array.
 *
 * Build (from the repository's root):
 *   cc -std=c11 -O2 -shared -fPIC -I engine-api/include
 *       examples/engines/c/keep_last.c -o libkeep_last_c.so
 */
#include <stdint.h>
#include <stdio.h>
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

/* ---- the engine ---- */

/* A message as JSON bytes: in the call's input, or a copy the engine keeps. */
typedef struct {
    const char *p;
    size_t n;
} span;

typedef struct {
    size_t keep;
    /* The list of the last call that came as a delta (`messageRefs`, docs/engine-protocol.md
     * 4.1), kept under the number the host gave it: each message a malloc'd copy. */
    int held;
    unsigned long long gen;
    span *msgs;
    size_t count, cap;
} keep_last;

static const char INFO[] =
    "{\"id\":\"keep-last\",\"name\":\"Keep last N (C)\",\"version\":\"0.1.0\","
    "\"protocol\":{\"protocol\":\"rampart-engine\",\"version\":\"1.0.0\","
    "\"features\":[{\"name\":\"messageRefs\"}]}}";

static const char STALE[] = "unknown base message list";

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

static void free_spans(span *list, size_t count);

static void drop_kept(keep_last *self) {
    free_spans(self->msgs, self->count);
    self->msgs = NULL;
    self->count = self->cap = 0;
    self->held = 0;
}

static rampart_status create(const char *init_json, size_t init_len, const rampart_host *host,
                             void **instance, char **error, size_t *error_len) {
    (void)host;
    keep_last *self = calloc(1, sizeof *self);
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

/* Appends a span to a growable array; 0 when out of memory. */
static int push(span **list, size_t *count, size_t *cap, span m) {
    if (*count == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 64;
        span *grown = realloc(*list, grown_cap * sizeof *grown);
        if (grown == NULL) return 0;
        *list = grown;
        *cap = grown_cap;
    }
    (*list)[(*count)++] = m;
    return 1;
}

static void free_spans(span *list, size_t count) {
    for (size_t i = 0; i < count; i++) free((void *)list[i].p);
    free(list);
}

static int copy_span(span *out, const char *p, size_t n) {
    char *copy = malloc(n ? n : 1);
    if (copy == NULL) return 0;
    memcpy(copy, p, n);
    out->p = copy;
    out->n = n;
    return 1;
}

/* A whole number at `at`; 0 if there is none. */
static int number_at(const char *s, size_t len, size_t at, unsigned long long *n) {
    if (at >= len || s[at] < '0' || s[at] > '9') return 0;
    *n = strtoull(s + at, NULL, 10);
    return 1;
}

/* The call's `messages`: a plain array (spans into `s`, *as_delta = 0), or a delta against the
 * kept list (*as_delta = 1; the list is then the kept one, updated). Every call's list is read,
 * answered or not: the host's next delta is relative to it. Returns RAMPART_OK, or an error with
 * its text in *why. */
static rampart_status resolve(keep_last *self, const char *s, size_t len, span **list,
                              size_t *count, int *as_delta, const char **why) {
    size_t at;
    size_t cap = 0;
    *list = NULL;
    *count = 0;
    *as_delta = 0;
    int found = find_key(s, len, 0, "messages", &at);
    if (found < 0) return *why = "parameters are not a JSON object", RAMPART_INVALID_PARAMS;
    if (found == 0) return RAMPART_OK;
    if (s[at] == '[') {
        scan p = {s, len, at + 1};
        for (;;) {
            skip_ws(&p);
            if (p.at < len && s[p.at] == ']') return RAMPART_OK;
            size_t from = p.at;
            if (p.at >= len || s[p.at] != '{' || !skip_value(&p, 1)) {
                free(*list);
                return *why = "each message must be an object", RAMPART_INVALID_PARAMS;
            }
            if (!push(list, count, &cap, (span){s + from, p.at - from})) {
                free(*list);
                return *why = "out of memory", RAMPART_ENGINE;
            }
            skip_ws(&p);
            if (p.at < len && s[p.at] == ',') p.at++;
        }
    }
    if (s[at] != '{') return *why = "`messages` must be an array or a delta", RAMPART_INVALID_PARAMS;
    size_t v, items;
    unsigned long long gen = 0, base = 0, keep = 0;
    int has_gen = find_key(s, len, at, "gen", &v) == 1 && number_at(s, len, v, &gen);
    int has_base = find_key(s, len, at, "base", &v) == 1 && number_at(s, len, v, &base);
    if (find_key(s, len, at, "keep", &v) == 1) number_at(s, len, v, &keep);
    size_t base_count = has_base ? self->count : 0;
    if (has_base && (!self->held || self->gen != base)) return *why = STALE, RAMPART_INVALID_PARAMS;
    if (keep > base_count) return *why = STALE, RAMPART_INVALID_PARAMS;
    /* The new list: the kept prefix, then each item (a message, or a [start, len] run of the
     * base). When the history only grew, the kept list is extended in place. */
    span *out = NULL;
    size_t out_count = 0, out_cap = 0;
    int in_place = 1;
    if (find_key(s, len, at, "items", &items) == 1 && s[items] == '[') {
        scan q = {s, len, items + 1};
        for (;;) {
            skip_ws(&q);
            if (q.at >= len || s[q.at] == ']') break;
            if (s[q.at] == '[') in_place = 0;
            if (!skip_value(&q, 1)) return *why = "a malformed delta", RAMPART_INVALID_PARAMS;
            skip_ws(&q);
            if (q.at < len && s[q.at] == ',') q.at++;
        }
    }
    if (!has_base) in_place = 0;
    if (in_place && keep == base_count) {
        out = self->msgs;
        out_count = self->count;
        out_cap = self->cap;
        self->msgs = NULL;
        self->count = self->cap = 0;
    } else {
        for (size_t i = 0; i < keep; i++) {
            span copy;
            if (!copy_span(&copy, self->msgs[i].p, self->msgs[i].n) ||
                !push(&out, &out_count, &out_cap, copy))
                return *why = "out of memory", RAMPART_ENGINE;
        }
    }
    if (find_key(s, len, at, "items", &items) == 1 && s[items] == '[') {
        scan p = {s, len, items + 1};
        for (;;) {
            skip_ws(&p);
            if (p.at >= len || s[p.at] == ']') break;
            size_t from = p.at;
            if (!skip_value(&p, 1)) {
                free_spans(out, out_count);
                return *why = "a malformed delta", RAMPART_INVALID_PARAMS;
            }
            if (s[from] == '[') {
                unsigned long long run_start = 0, run_len = 0;
                scan r = {s, len, from + 1};
                skip_ws(&r);
                number_at(s, len, r.at, &run_start);
                while (r.at < len && s[r.at] != ',') r.at++;
                r.at++;
                skip_ws(&r);
                number_at(s, len, r.at, &run_len);
                if (run_start + run_len > base_count) {
                    free_spans(out, out_count);
                    return *why = STALE, RAMPART_INVALID_PARAMS;
                }
                for (size_t i = run_start; i < run_start + run_len; i++) {
                    span copy;
                    if (!copy_span(&copy, self->msgs[i].p, self->msgs[i].n) ||
                        !push(&out, &out_count, &out_cap, copy)) {
                        free_spans(out, out_count);
                        return *why = "out of memory", RAMPART_ENGINE;
                    }
                }
            } else {
                span copy;
                if (!copy_span(&copy, s + from, p.at - from) ||
                    !push(&out, &out_count, &out_cap, copy)) {
                    free_spans(out, out_count);
                    return *why = "out of memory", RAMPART_ENGINE;
                }
            }
            skip_ws(&p);
            if (p.at < len && s[p.at] == ',') p.at++;
        }
    }
    drop_kept(self);
    self->msgs = out;
    self->count = out_count;
    self->cap = out_cap;
    self->held = has_gen;
    self->gen = gen;
    *list = self->msgs;
    *count = self->count;
    *as_delta = 1;
    return RAMPART_OK;
}

/* Whether the message is a tool result. */
static int is_result(span m) {
    size_t role;
    return find_key(m.p, m.n, 0, "role", &role) == 1 && string_is(m.p, m.n, role, "toolResult");
}

/* Whether the assistant message calls a tool. */
static int has_calls(span m) {
    size_t role, content;
    if (find_key(m.p, m.n, 0, "role", &role) != 1 || !string_is(m.p, m.n, role, "assistant"))
        return 0;
    if (find_key(m.p, m.n, 0, "content", &content) != 1 || m.p[content] != '[') return 0;
    scan p = {m.p, m.n, content + 1};
    for (;;) {
        skip_ws(&p);
        if (p.at >= m.n || m.p[p.at] == ']') return 0;
        size_t block = p.at, type;
        if (m.p[block] == '{' && find_key(m.p, m.n, block, "type", &type) == 1 &&
            string_is(m.p, m.n, type, "toolCall"))
            return 1;
        if (!skip_value(&p, 1)) return 0;
        skip_ws(&p);
        if (p.at < m.n && m.p[p.at] == ',') p.at++;
    }
}

/* The start of the newest whole units of at most `keep` messages, walking back from the end
 * only as far as that: a tool call stays with the results after it. */
static size_t first_kept(const span *msgs, size_t count, size_t keep) {
    size_t start = count, i = count;
    while (i > 0) {
        size_t j = i - 1;
        if (is_result(msgs[j])) {
            size_t k = j;
            while (k > 0 && is_result(msgs[k - 1])) k--;
            if (k > 0 && has_calls(msgs[k - 1])) j = k - 1;
        }
        if (count - j > keep) break;
        start = i = j;
    }
    return start;
}

static rampart_status assemble(keep_last *self, const span *msgs, size_t count, int as_delta,
                               char **out, size_t *out_len) {
    size_t start = first_kept(msgs, count, self->keep);
    if (as_delta) {
        /* A run of the call's own list: nothing to copy however long the history is. */
        char buf[128];
        int n = count > start
                    ? snprintf(buf, sizeof buf,
                               "{\"messages\":{\"keep\":0,\"items\":[[%zu,%zu]]},\"estimatedTokens\":0}",
                               start, count - start)
                    : snprintf(buf, sizeof buf,
                               "{\"messages\":{\"keep\":0,\"items\":[]},\"estimatedTokens\":0}");
        *out = malloc((size_t)n);
        if (*out == NULL) return fail(RAMPART_ENGINE, "out of memory", out, out_len);
        memcpy(*out, buf, (size_t)n);
        *out_len = (size_t)n;
        return RAMPART_OK;
    }
    size_t bytes = 64;
    for (size_t i = start; i < count; i++) bytes += msgs[i].n + 1;
    char *answer = malloc(bytes);
    if (answer == NULL) return fail(RAMPART_ENGINE, "out of memory", out, out_len);
    size_t at = 13;
    memcpy(answer, "{\"messages\":[", 13);
    for (size_t i = start; i < count; i++) {
        if (i > start) answer[at++] = ',';
        memcpy(answer + at, msgs[i].p, msgs[i].n);
        at += msgs[i].n;
    }
    memcpy(answer + at, "],\"estimatedTokens\":0}", 22);
    at += 22;
    *out = answer;
    *out_len = at;
    return RAMPART_OK;
}

static rampart_status call(void *instance, const char *method, const char *json_in, size_t len,
                           const rampart_call_ctx *ctx, char **out, size_t *out_len) {
    (void)ctx;
    keep_last *self = instance;
    if (strcmp(method, "dispose") == 0) return RAMPART_OK;
    span *msgs;
    size_t count;
    int as_delta;
    const char *why = NULL;
    rampart_status status = resolve(self, json_in, len, &msgs, &count, &as_delta, &why);
    if (status != RAMPART_OK) {
        if (strcmp(why, STALE) == 0) drop_kept(self);
        return fail(status, why, out, out_len);
    }
    /* A plain array's spans point into the input: only the array is ours to free. */
    if (!as_delta) {
        if (strcmp(method, "assemble") == 0) {
            status = assemble(self, msgs, count, 0, out, out_len);
            free(msgs);
            return status;
        }
        free(msgs);
    } else if (strcmp(method, "assemble") == 0) {
        return assemble(self, msgs, count, 1, out, out_len);
    }
    if (strcmp(method, "ingest") == 0) {
        *out = copy_text("{\"ingested\":false}", out_len);
        return RAMPART_OK;
    }
    if (strcmp(method, "compact") == 0) {
        *out = copy_text("{\"ok\":true,\"compacted\":false}", out_len);
        return RAMPART_OK;
    }
    return RAMPART_UNSUPPORTED;
}

static void free_buffer(char *buf, size_t len) {
    (void)len;
    free(buf);
}

static void destroy(void *instance) {
    drop_kept(instance);
    free(instance);
}

static const rampart_engine_table_v1 TABLE = {
    RAMPART_ENGINE_ABI_VERSION, INFO, create, call, free_buffer, destroy,
};

const rampart_engine_table_v1 *rampart_engine_v1(void) { return &TABLE; }
