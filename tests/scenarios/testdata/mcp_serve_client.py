"""Drives `clawbus mcp serve` with the official MCP Python SDK's stdio client, for clawbus's tests.

argv: the clawbus binary, the project folder, the gateway URL, then a JSON list of calls
`[[tool, arguments], ...]` or `[tool, arguments, "progress"]` to ask for progress
notifications; an argument "$task_id" is replaced by the task_id of the latest result that
carried one. CLAWBUS_TOKEN, when set, is passed on to the server. Prints one JSON object:
`{"tools": [names], "calls": [{"error": bool, "text": str, "progress": [messages]}, ...]}`.
"""

import json
import statistics
import time
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main():
    binary, folder, url, plan = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    env = {"RUST_LOG": "warn"}
    if "CLAWBUS_TOKEN" in os.environ:
        env["CLAWBUS_TOKEN"] = os.environ["CLAWBUS_TOKEN"]
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "serve", "--url", url],
        cwd=folder,
        env=env,
    )
    out = {"tools": [], "calls": []}
    task_id = None
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["tools"] = [t.name for t in (await session.list_tools()).tools]
            for name, args, *flags in plan:
                args = {k: (task_id if v == "$task_id" else v) for k, v in args.items()}
                notes = []

                async def on_progress(progress, total, message, notes=notes):
                    notes.append(message)

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
    print(json.dumps(out))


anyio.run(main)
