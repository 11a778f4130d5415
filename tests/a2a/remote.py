"""A remote A2A agent built with the official SDK's server classes (a2a-sdk, pinned by
scripts/test.sh), for agentd's A2A *client* (a provider of `backend = "a2a"`).

Run by tests/tests/suite/a2a_client.rs:

    python remote.py --port P [--no-stream] [--rest] [--log FILE] [--calls FILE] [--token T]
        [--slow S]

It serves the JSON-RPC binding, or with --rest the HTTP+JSON binding only.

What it answers (per message):
- a message containing "ask me" starts a task that asks once ("Which region?",
  `TASK_STATE_INPUT_REQUIRED`); the message that continues that task is answered
  "region noted: <text>";
- a message containing "slow" waits --slow seconds (3 by default) before answering;
- a message containing "data please" is answered with a text part and a data part
  ({"ships": 3});
- anything else is answered "remote #N heard: <text>", N counting the messages of the
  context, so that a test sees one continuing remote conversation.
A completed task reports 11 input and 7 output tokens in its metadata ("agentd.usage").
Answers are artifacts streamed word by word (appended chunks) and the task then completes.
Every message received is appended to --log as a JSON line (messageId, contextId, taskId,
text, and the `traceparent` header of its request), so a test counts what reached the remote
and sees the trace it was sent in; the method of every JSON-RPC call to --calls
(one JSON line each: {"method"}; an HTTP+JSON call as "<HTTP method> <path>"), so a test sees
how a client followed a task.
"""

import argparse
import asyncio
import json

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_message
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from google.protobuf import struct_pb2
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse

# The tokens each completed task reports, under the key agentd counts (docs/a2a.md).
USAGE = {"agentd.usage": {"input": 11, "output": 7}}


class Remote(AgentExecutor):
    def __init__(self, log, slow):
        self.log = log
        self.slow = slow
        self.counts = {}

    async def execute(self, context, event_queue):
        msg = context.message
        text = get_message_text(msg)
        if self.log:
            with open(self.log, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "messageId": msg.message_id,
                            "contextId": context.context_id,
                            "taskId": context.task_id,
                            "text": text,
                            # The caller's W3C trace context, as its request carried it.
                            "traceparent": context.call_context.state.get("headers", {}).get(
                                "traceparent"
                            ),
                        }
                    )
                    + "\n"
                )
        task = context.current_task
        if task is None:
            # The task's history holds the client's message, as the specification's
            # examples show (a client finds its message's task again by it).
            await event_queue.enqueue_event(
                new_task(
                    context.task_id,
                    context.context_id,
                    TaskState.TASK_STATE_SUBMITTED,
                    history=[msg],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        resumed = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if "ask me" in text and not resumed:
            await updater.requires_input(
                new_text_message(
                    "Which region?", context_id=context.context_id, task_id=context.task_id
                )
            )
            return
        if resumed:
            answer = f"region noted: {text}"
        else:
            n = self.counts.get(context.context_id, 0) + 1
            self.counts[context.context_id] = n
            answer = f"remote #{n} heard: {text}"
        if "slow" in text:
            await asyncio.sleep(self.slow)
        if "data please" in text:
            # An answer with a data part besides its text.
            data = struct_pb2.Value()
            data.struct_value.update({"ships": 3})
            await updater.add_artifact(
                [Part(text="counted"), Part(data=data)], artifact_id="answer"
            )
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=USAGE)
            return
        words = answer.split(" ")
        for i, word in enumerate(words):
            chunk = word if i == 0 else " " + word
            await updater.add_artifact(
                [Part(text=chunk)],
                artifact_id="answer",
                append=i > 0,
                last_chunk=i == len(words) - 1,
            )
            await asyncio.sleep(0.01)
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=USAGE)

    async def cancel(self, context, event_queue):
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class Bearer(BaseHTTPMiddleware):
    def __init__(self, app, token):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request, call_next):
        if request.url.path.startswith("/.well-known") or not self.token:
            return await call_next(request)
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)


class MethodLog:
    """Appends each request's JSON-RPC method (or its HTTP method and path) to a file, then
    hands the request on unchanged (a plain ASGI wrapper: it reads the body once and replays
    it)."""

    def __init__(self, app, path):
        self.app = app
        self.path = path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.path:
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        method = method or f"{scope['method']} {scope['path']}"
        with open(self.path, "a") as f:
            f.write(json.dumps({"method": method}) + "\n")
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--no-stream", action="store_true")
    ap.add_argument("--rest", action="store_true")
    ap.add_argument("--log")
    ap.add_argument("--calls")
    ap.add_argument("--token")
    ap.add_argument("--slow", type=float, default=3.0)
    args = ap.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    card = AgentCard(
        name="Remote",
        description="A remote agent made with the A2A SDK's server classes.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base + "/",
                protocol_binding="HTTP+JSON" if args.rest else "JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=not args.no_stream),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Answers.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Remote(args.log, args.slow), task_store=InMemoryTaskStore(), agent_card=card
    )
    binding = create_rest_routes(handler) if args.rest else create_jsonrpc_routes(handler, rpc_url="/")
    app = Starlette(routes=create_agent_card_routes(card) + binding)
    app.add_middleware(Bearer, token=args.token)
    uvicorn.run(MethodLog(app, args.calls), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
