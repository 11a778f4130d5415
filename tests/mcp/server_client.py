"""The official MCP Python SDK (`mcp`, pinned in target/.venv-mcp) as a client of agentd's MCP
server (tests/tests/suite/mcp_server.rs): lists the tools, asks `ask_research` twice in one
thread and once without, then calls an unknown tool and `ask_research` with wrong arguments.
Prints one line per step, which the test asserts on.

Usage: server_client.py URL MODE THREAD   (MODE: legacy = the initialize handshake, auto =
discover the current revision, falling back to the handshake)
       server_client.py across THREAD URL...   (one thread asked through each URL in turn)
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.shared.exceptions import MCPError


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(url: str, mode: str, thread: str) -> None:
    async with Client(url, mode=mode) as client:
        print(f"revision {client.protocol_version}")
        tools = await client.list_tools()
        for t in tools.tools:
            schema = t.input_schema if hasattr(t, "input_schema") else t.inputSchema
            print(f"tool {t.name} required={','.join(schema.get('required', []))}")

        for n, message in enumerate(["remember the harbour", "what did I say?"], start=1):
            r = await client.call_tool("ask_research", {"message": message, "thread": thread})
            sc = r.structured_content if hasattr(r, "structured_content") else r.structuredContent
            print(f"thread call {n}: {text_of(r)} | {json.dumps(sc, sort_keys=True)}")

        r = await client.call_tool("ask_research", {"message": "alone"})
        sc = r.structured_content if hasattr(r, "structured_content") else r.structuredContent
        print(f"fresh call: {text_of(r)} | {json.dumps(sc, sort_keys=True)}")

        sc_of = lambda r: r.structured_content if hasattr(r, "structured_content") else r.structuredContent
        later = thread + "-async"
        r = await client.call_tool("send_message", {"type": "research", "thread": later, "message": "later"})
        print(f"sent: {json.dumps(sc_of(r)['status'])}")
        for _ in range(100):
            r = await client.call_tool("get_thread", {"type": "research", "thread": later})
            last = sc_of(r)["last_run"]
            if last and last["status"] == "completed":
                break
            await asyncio.sleep(0.1)
        print(f"async answer: {json.dumps(sc_of(r)['last_run']['answer'])}")
        r = await client.call_tool("get_thread", {"type": "research", "thread": thread})
        print(f"history: {json.dumps(text_of(r))}")

        slow = thread + "-slow"
        await client.call_tool("send_message", {"type": "research", "thread": slow, "message": "slow please"})
        await asyncio.sleep(0.5)
        r = await client.call_tool("cancel", {"type": "research", "thread": slow})
        print(f"cancel: {json.dumps(sc_of(r)['status'])}")
        r = await client.call_tool("get_thread", {"type": "research", "thread": slow})
        print(f"after cancel: {json.dumps(sc_of(r)['last_run']['status'])}")

        r = await client.call_tool("list_threads", {"type": "research"})
        names = sorted(t["thread"] for t in sc_of(r)["threads"])
        print(f"threads: {json.dumps(names)}")
        r = await client.call_tool("list_threads", {"type": "lead"})
        print(f"lead threads: {json.dumps(sc_of(r)['threads'])}")

        for name, args in [
            ("cancel", {"type": "research", "thread": slow}),
            ("get_thread", {"type": "research", "thread": "never-opened"}),
            ("send_message", {"type": "nobody", "thread": "t", "message": "hi"}),
            ("ask_nobody", {"message": "hi"}),
            ("ask_research", {"message": 3}),
            ("ask_research", {"thread": "t"}),
            ("ask_research", {"message": "x" * 200_000}),
        ]:
            try:
                r = await client.call_tool(name, args)
                print(f"error {name}: none (is_error={r.is_error if hasattr(r, 'is_error') else r.isError}: {text_of(r)[:200]})")
            except MCPError as e:
                err = e.error
                print(f"error {name}: {err.code} {err.message[:200]} {json.dumps(err.data)}")
    print("ok")


async def across(urls: list[str], thread: str) -> None:
    """One thread asked through each of `urls` in turn (agentd processes on one Redis)."""
    for n, url in enumerate(urls, start=1):
        async with Client(url, mode="auto") as client:
            r = await client.call_tool("ask_research", {"message": f"step {n}", "thread": thread})
            sc = r.structured_content if hasattr(r, "structured_content") else r.structuredContent
            print(f"across {n}: {text_of(r)} | {json.dumps(sc, sort_keys=True)}")
    print("ok")


if __name__ == "__main__":
    if sys.argv[1] == "across":
        asyncio.run(across(sys.argv[3:], sys.argv[2]))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
