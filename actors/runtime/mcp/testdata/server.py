"""A small MCP server on the official Python SDK (MCPServer), for clawbus's tests: over stdio, over
Streamable HTTP on 127.0.0.1 with `server.py http PORT`, or over the older HTTP+SSE transport
(`GET /sse`, then POSTs to the endpoint it names) with `server.py sse PORT`.

Tools: add (sums two integers), pid (its process id, so a test can kill it), getenv (a
variable's value, which clawbus must redact when it is a secret), env_names (the variables it was given), hang
(never answers), rm (exists only to be denied), header (an HTTP request header's value), read (a
file's text, or why not) and connect (whether a TCP connection to 127.0.0.1:port opens), the last
two to probe a sandbox from inside.
"""

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("clawbus-test")


@mcp.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"sum={a + b}"


@mcp.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@mcp.tool()
def getenv(name: str) -> str:
    """The value of environment variable `name`."""
    return f"{name} is " + os.environ.get(name, "(unset)")


@mcp.tool()
def env_names() -> str:
    """The names of the environment variables this server was given."""
    return ",".join(sorted(os.environ))


@mcp.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep(3600)
    return "unreachable"


@mcp.tool()
def rm(path: str) -> str:
    """Pretends to remove a file."""
    return f"removed {path}"


@mcp.tool()
def read(path: str) -> str:
    """The text of the file at `path`, or why it cannot be read."""
    try:
        with open(path) as f:
            return "text: " + f.read()
    except OSError as e:
        return f"error: {e.strerror}"


@mcp.tool()
def connect(port: int) -> str:
    """Whether a TCP connection to 127.0.0.1:`port` opens."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "connected"
    except OSError as e:
        return f"error: {e.strerror or e}"


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """The value of HTTP request header `name` (over HTTP only)."""
    headers = ctx.headers or {}
    return f"{name}: " + headers.get(name.lower(), "(absent)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["sse"]:
        mcp.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
