"""A hostile MCP server for clawbus's tests, written without any SDK: it answers the handshake and
tools/list over stdio, then, when its tool `flood` is called, writes an endless line (no newline)
on stdout. Its tool `pid` answers its process id, so a test can tell a restarted process.
"""

import json
import os
import sys


def answer(msg_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "flood", "description": "Writes an endless line.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "pid", "description": "This server's process id.", "inputSchema": {"type": "object", "properties": {}}},
]

for line in sys.stdin:
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue
    if method == "initialize":
        answer(msg_id, {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        })
    elif method == "tools/list":
        answer(msg_id, {"tools": TOOLS})
    elif method == "tools/call" and msg["params"]["name"] == "pid":
        answer(msg_id, {"content": [{"type": "text", "text": str(os.getpid())}]})
    elif method == "tools/call":
        chunk = b"x" * 65536
        try:
            while True:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
        except (BrokenPipeError, OSError):
            sys.exit(0)
    else:
        answer(msg_id, {})
