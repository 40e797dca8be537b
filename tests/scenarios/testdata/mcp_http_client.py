"""Drives the gateway's `/mcp` with the official MCP Python SDK's Streamable HTTP client, for
clawbus's tests.

argv: the endpoint URL, the bearer token, then a JSON list of calls `[[tool, arguments], ...]`
or `[tool, arguments, "progress"]` to ask for progress notifications ("repeat:N": the call N
times, its median time in `median_ms`); with "live" as well, each
notification is printed at once as a line `{"progress": message}`. An argument "$task_id" is
replaced by the task_id of the latest result that carried one. The last line printed is one
JSON object: `{"tools": [names], "calls": [{"error": bool, "text": str, "progress": [...]}]}`,
or `{"refused": text}` when the session could not start (a wrong token).
"""

import json
import statistics
import time
import sys

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def emit(v):
    print(json.dumps(v), flush=True)


async def session_calls(url, token, plan):
    out = {"tools": [], "calls": []}
    task_id = None
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                # A refused session (a wrong token) may leave the SDK waiting: bound the handshake.
                with anyio.fail_after(10):
                    await session.initialize()
                out["tools"] = [t.name for t in (await session.list_tools()).tools]
                for name, args, *flags in plan:
                    args = {k: (task_id if v == "$task_id" else v) for k, v in args.items()}
                    notes = []

                    async def on_progress(progress, total, message, notes=notes, live="live" in flags):
                        notes.append(message)
                        if live:
                            emit({"progress": message})

                    callback = on_progress if "progress" in flags else None
                    repeat = next((int(f.split(":")[1]) for f in flags if f.startswith("repeat:")), 1)
                    times = []
                    for _ in range(repeat):
                        began = time.perf_counter()
                        result = await session.call_tool(name, args, progress_callback=callback)
                        times.append((time.perf_counter() - began) * 1000.0)
                    text = text_of(result)
                    try:
                        task_id = json.loads(text).get("task_id", task_id)
                    except (ValueError, AttributeError):
                        pass
                    out["calls"].append({"error": bool(result.is_error), "text": text, "progress": notes, "median_ms": statistics.median(times)})
    return out


async def main():
    url, token, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    try:
        out = await session_calls(url, token, plan)
    except BaseException as e:  # the SDK raises an exception group on a refused session
        emit({"refused": repr(e)})
        return
    emit(out)


anyio.run(main)
