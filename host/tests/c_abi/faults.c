/*
 * A C ABI engine that breaks one rule of rampart_engine.h, chosen at compile time, for the
 * fault cases of c_abi_engines_e2e.rs. Without a FAULT_* define it is a well-behaved engine
 * whose `assemble` keeps every message (it answers its parameters, whose extra keys the host
 * ignores).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rampart_engine.h"

#ifndef ENGINE_ID
#define ENGINE_ID "c-fault"
#endif

static const char INFO[] = "{\"id\":\"" ENGINE_ID "\",\"name\":\"C fault\",\"version\":\"0.1.0\","
                           "\"protocol\":{\"protocol\":\"rampart-engine\",\"version\":\"1.0.0\"}}";

static rampart_status create(const char *init_json, size_t init_len, const rampart_host *host,
                             void **instance, char **error, size_t *error_len) {
    (void)init_json, (void)init_len, (void)host, (void)error, (void)error_len;
    *instance = NULL;
    return RAMPART_OK;
}

static char *copy(const char *text, size_t len, size_t *out_len) {
    char *out = malloc(len ? len : 1);
    if (out != NULL) memcpy(out, text, len);
    *out_len = len;
    return out;
}

static rampart_status call(void *instance, const char *method, const char *json_in, size_t len,
                           const rampart_call_ctx *ctx, char **out, size_t *out_len) {
    (void)instance, (void)ctx;
    if (strcmp(method, "assemble") != 0) return RAMPART_UNSUPPORTED;
#if defined(FAULT_GARBAGE)
    (void)json_in, (void)len;
    *out = copy("{\"messages\": [oops", 17, out_len);
    return RAMPART_OK;
#elif defined(FAULT_STATUS)
    (void)json_in, (void)len;
    *out = copy("something odd", 13, out_len);
    return 42;
#elif defined(FAULT_ABORT)
    (void)json_in, (void)len, (void)out, (void)out_len;
    abort();
#elif defined(FAULT_SEGV)
    (void)json_in, (void)len, (void)out, (void)out_len;
    /* A real invalid write: raise(SIGSEGV) would be caught and returned from by the Rust
     * runtime's stack-overflow handler. */
    *(volatile int *)(uintptr_t)8 = 1;
    return RAMPART_ENGINE;
#else
    *out = copy(json_in, len, out_len);
    return RAMPART_OK;
#endif
}

static void free_buffer(char *buf, size_t len) {
    (void)len;
    free(buf);
}

static void destroy(void *instance) { (void)instance; }

#if defined(FAULT_VERSION)
#define VERSION 7u
#else
#define VERSION RAMPART_ENGINE_ABI_VERSION
#endif

static const rampart_engine_table_v1 TABLE = {VERSION, INFO, create, call, free_buffer, destroy};

const rampart_engine_table_v1 *rampart_engine_v1(void) {
#if defined(FAULT_NULL_TABLE)
    return NULL;
#else
    return &TABLE;
#endif
}
