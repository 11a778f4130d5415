"""An MCP server (Python SDK, stdio) for agentd's tests (tests/tests/mcp_tools.rs), run with
the venv scripts/test.sh makes:

- `work` can exit the process in the middle of a call: the call must become a tool error and
  the next call must restart the server;
- `slow` waits until it is cancelled and writes `cancelled` to its marker file then: an
  interrupted turn must send `notifications/cancelled` for the call in flight.
"""

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

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


if __name__ == "__main__":
    server.run()
