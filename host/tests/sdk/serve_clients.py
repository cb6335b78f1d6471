"""Talks to `rampart serve` with the official SDKs; prints one JSON object with what came back.

Usage: serve_clients.py openai|anthropic|responses BASE_URL
"""
import json
import sys


def run_openai(base):
    from openai import OpenAI

    client = OpenAI(base_url=base + "/v1", api_key="sk-sdk-test", max_retries=0)
    out = {}
    history = [{"role": "user", "content": "Hello there."}]
    r = client.chat.completions.create(model="gpt-up", messages=history)
    out["plain"] = r.choices[0].message.content
    out["plain_usage"] = r.usage.completion_tokens
    history.append({"role": "assistant", "content": out["plain"]})
    history.append({"role": "user", "content": "Stream the next one."})
    stream = client.chat.completions.create(
        model="gpt-up", messages=history, stream=True, stream_options={"include_usage": True}
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage.completion_tokens
    out["streamed"] = text
    out["streamed_usage"] = usage
    tools = [{"type": "function", "function": {"name": "read", "description": "Read a file",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    calls = []
    stream = client.chat.completions.create(
        model="gpt-up", stream=True, tools=tools,
        messages=[{"role": "user", "content": "Read a.txt"}],
        extra_headers={"x-rampart-session": "sdk-tools"},
    )
    for chunk in stream:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            while len(calls) <= call.index:
                calls.append({"id": None, "name": None, "arguments": ""})
            if call.id:
                calls[call.index]["id"] = call.id
            if call.function and call.function.name:
                calls[call.index]["name"] = call.function.name
            if call.function and call.function.arguments:
                calls[call.index]["arguments"] += call.function.arguments
    out["tool_calls"] = calls
    return out


def run_anthropic(base):
    from anthropic import Anthropic

    client = Anthropic(base_url=base, api_key="sk-ant-sdk-test", max_retries=0)
    out = {}
    history = [{"role": "user", "content": "Hello Claude."}]
    r = client.messages.create(model="claude-up", max_tokens=256, messages=history)
    out["plain"] = r.content[0].text
    out["plain_stop"] = r.stop_reason
    history.append({"role": "assistant", "content": r.content[0].text})
    history.append({"role": "user", "content": "Stream please."})
    with client.messages.stream(model="claude-up", max_tokens=256, messages=history) as s:
        out["streamed"] = "".join(s.text_stream)
        final = s.get_final_message()
    out["streamed_stop"] = final.stop_reason
    out["streamed_usage"] = final.usage.output_tokens
    tools = [{"name": "Bash", "description": "Run a command",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    with client.messages.stream(
        model="claude-up", max_tokens=256, tools=tools,
        messages=[{"role": "user", "content": "Where am I?"}],
        extra_headers={"x-rampart-session": "sdk-tools"},
    ) as s:
        final = s.get_final_message()
    out["tool_use"] = [
        {"id": b.id, "name": b.name, "input": b.input} for b in final.content if b.type == "tool_use"
    ]
    out["tool_stop"] = final.stop_reason
    return out


def run_responses(base):
    """The Responses API, as the Codex CLI speaks it: instructions, input items, function tools,
    a tool call and its output sent back, streamed and not."""
    from openai import OpenAI

    client = OpenAI(base_url=base + "/v1", api_key="sk-sdk-test", max_retries=0)
    out = {}
    r = client.responses.create(
        model="gpt-up", instructions="Be brief.", input="Hello there.",
        extra_headers={"session_id": "codex-sdk"},
    )
    out["plain"] = r.output_text
    out["plain_usage"] = r.usage.output_tokens
    out["plain_status"] = r.status
    tools = [{"type": "function", "name": "shell", "description": "Run a command",
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello there."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": out["plain"]}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
    ]
    items, events, final = [], [], None
    with client.responses.stream(
        model="gpt-up", instructions="Be brief.", input=history, tools=tools,
        extra_headers={"session_id": "codex-sdk"},
    ) as stream:
        for event in stream:
            events.append(event.type)
            if event.type == "response.output_item.done":
                items.append(event.item.model_dump())
        final = stream.get_final_response()
    out["events"] = events
    out["items"] = [{"type": i["type"], "call_id": i.get("call_id"), "name": i.get("name"),
                     "arguments": i.get("arguments")} for i in items]
    out["streamed_usage"] = final.usage.output_tokens
    call = items[0]
    history.append({"type": "function_call", "call_id": call["call_id"], "name": call["name"],
                    "arguments": call["arguments"]})
    history.append({"type": "function_call_output", "call_id": call["call_id"], "output": "a.txt b.txt"})
    text = ""
    with client.responses.stream(
        model="gpt-up", instructions="Be brief.", input=history, tools=tools,
        extra_headers={"session_id": "codex-sdk"},
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                text += event.delta
    out["after_tool"] = text
    return out


if __name__ == "__main__":
    mode, base = sys.argv[1], sys.argv[2]
    runs = {"openai": run_openai, "anthropic": run_anthropic, "responses": run_responses}
    print(json.dumps(runs[mode](base)))
