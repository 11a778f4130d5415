"""A remote A2A agent built with the official SDK's server classes (a2a-sdk, pinned by
scripts/test.sh), for agentd's A2A *client* (a provider of `backend = "a2a"`).

Run by tests/tests/suite/a2a_client.rs:

    python remote.py --port P [--no-stream] [--log FILE] [--token T]

What it answers (per message):
- a message containing "ask me" starts a task that asks once ("Which region?",
  `TASK_STATE_INPUT_REQUIRED`); the message that continues that task is answered
  "region noted: <text>";
- a message containing "slow" waits 3 s before answering;
- anything else is answered "remote #N heard: <text>", N counting the messages of the
  context, so that a test sees one continuing remote conversation.
Answers are artifacts streamed word by word (appended chunks) and the task then completes.
Every message received is appended to --log as a JSON line (messageId, contextId, taskId,
text, and the `traceparent` header of its request), so a test counts what reached the remote
and sees the trace it was sent in.
"""

import argparse
import asyncio
import json

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_message
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
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
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse


class Remote(AgentExecutor):
    def __init__(self, log):
        self.log = log
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
            await asyncio.sleep(3)
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
        await updater.complete()

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--no-stream", action="store_true")
    ap.add_argument("--log")
    ap.add_argument("--token")
    args = ap.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    card = AgentCard(
        name="Remote",
        description="A remote agent made with the A2A SDK's server classes.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base + "/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=not args.no_stream),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Answers.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=Remote(args.log), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    )
    app.add_middleware(Bearer, token=args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
