#!/usr/bin/env python3
"""Cuts OpenAI's OpenAPI description down to the operations `rampart serve` implements.

Usage: trim.py FULL_OPENAPI_JSON > openai-subset.json

Keeps the paths of the operations named in OPERATIONS (and only those methods), then every
component they reach through `$ref`, transitively; drops everything else (other paths, unused
schemas, examples the code samples carry). The result is still a valid OpenAPI document that
schemathesis reads.

One deliberate change, listed in README.md ("OpenAI's specification"): OpenAI's document lists
only its success statuses (and 429 for some), while serve answers a request it refuses with an
error in OpenAI's own error shape. Each kept operation gets those statuses (ERROR_STATUSES),
described by the spec's own `ErrorResponse`, so that schemathesis checks the error bodies against
the schema instead of flagging every 400 as undocumented.

And one change of form: OpenAI's document gives each `text/event-stream` answer a `schema` meaning
the JSON in each event's `data`. OpenAPI 3.2, which schemathesis follows, reads such a `schema` as
the event itself (`data`, `event`, `id`), so every event would fail; the cut copy says what
OpenAI means in 3.2's words: an `itemSchema` whose `data` is JSON matching OpenAI's schema (or the
`[DONE]` line that ends a chat-completions stream). The source is github.com/openai/openai-openapi (MIT licence, see
LICENSE-openai-openapi beside this file); the commit used is recorded in the output's
`info.x-rampart-source`.
"""

import json
import sys

OPERATIONS = {"createChatCompletion", "createResponse", "listModels"}

# What serve answers besides success: a request it cannot honour (400), a missing or wrong token
# (401), a foreign Host or Origin (403), a body over the limit (413), a full queue (429), an
# upstream that failed, is unavailable or timed out (502, 503, 504).
ERROR_STATUSES = {
    "400": "The request cannot be honoured; the message says why.",
    "401": "The server's token is missing or wrong.",
    "403": "A foreign Host or a browser Origin.",
    "413": "The body is over the server's limit.",
    "429": "The queue is full; Retry-After says when to try again.",
    "502": "The upstream model failed.",
    "503": "The upstream or the session store is unavailable.",
    "504": "The upstream did not answer in time.",
}
ERROR_REF = "#/components/schemas/ErrorResponse"


def refs(value, found):
    """Every `$ref` string inside `value`."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for v in value.values():
            refs(v, found)
    elif isinstance(value, list):
        for v in value:
            refs(v, found)


def event_schema(data_schema):
    """An event of a stream whose `data` is JSON matching `data_schema`, or `[DONE]`."""
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "data": {
                "anyOf": [
                    {"const": "[DONE]"},
                    {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": data_schema,
                    },
                ]
            }
        },
    }


def resolve(doc, ref):
    """The value a local `$ref` (`#/components/...`) points at."""
    node = doc
    for part in ref.lstrip("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def main():
    doc = json.load(open(sys.argv[1]))
    source = sys.argv[2] if len(sys.argv) > 2 else "unknown"
    paths = {}
    for path, item in doc["paths"].items():
        kept = {
            method: op
            for method, op in item.items()
            if isinstance(op, dict) and op.get("operationId") in OPERATIONS
        }
        if kept:
            for op in kept.values():
                op.pop("x-oaiMeta", None)
                responses = op.setdefault("responses", {})
                for response in responses.values():
                    stream = response.get("content", {}).get("text/event-stream")
                    if stream and "schema" in stream:
                        stream["itemSchema"] = event_schema(stream.pop("schema"))
                for status, why in ERROR_STATUSES.items():
                    responses.setdefault(
                        status,
                        {
                            "description": why,
                            "content": {"application/json": {"schema": {"$ref": ERROR_REF}}},
                        },
                    )
            paths[path] = kept
    found = set()
    refs(paths, found)
    seen = set()
    while found - seen:
        ref = sorted(found - seen)[0]
        seen.add(ref)
        refs(resolve(doc, ref), found)
    components = {}
    for ref in sorted(seen):
        kind, name = ref.split("/")[2], "/".join(ref.split("/")[3:])
        components.setdefault(kind, {})[name] = resolve(doc, ref)
    out = {
        "openapi": doc["openapi"],
        "info": dict(doc["info"], **{"x-rampart-source": source}),
        "servers": [{"url": "http://127.0.0.1/v1"}],
        "paths": paths,
        "components": components,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
