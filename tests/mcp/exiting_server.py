"""An MCP server (Python SDK) for agentd's tests (tests/tests/suite/mcp_tools.rs), run with the venv
scripts/test.sh makes: over stdio, or over streamable HTTP on 127.0.0.1 with `--http PORT` (the
SDK answers a session id it does not know, such as one from before a restart, with 404):

- `work` can exit the process in the middle of a call: the call must become a tool error and
  the next call must restart the server;
- `slow` waits until it is cancelled and writes `cancelled` to its marker file then: an
  interrupted turn must send `notifications/cancelled` for the call in flight;
- `meta` answers the `_meta` of its call's request, as JSON: agentd must put the W3C trace
  context there (`traceparent`), as the MCP semantic conventions say
  (tests/tests/suite/telemetry.rs).
"""

import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("exiting")


@server.tool()
def work(mode: str) -> str:
    """Do some work. mode = "exit" ends the server's process before it answers."""
    if mode == "exit":
        os._exit(3)
    return f"worked ({mode}) in process {os.getpid()}"


@server.tool()
async def slow(marker: str) -> str:
    """Wait a minute; write `started`, then `cancelled` if the call is cancelled, to marker."""
    Path(marker).write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")
        raise
    return "slept"


@server.tool()
def meta(ctx: Context) -> str:
    """Answer the `_meta` this call's request carried, as JSON."""
    return json.dumps(dict(ctx.request_context.meta or {}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
