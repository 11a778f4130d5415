"""The official A2A SDK (a2a-sdk, pinned by scripts/test.sh) as a client of agentd.

Run by tests/tests/suite/a2a.rs against a running agentd whose `[a2a] expose` serves
`research`, with the script tests/a2a/script.toml. Each scenario asserts what the A2A 1.0
specification and docs/a2a.md say; the process exits non-zero, naming the scenario, on the
first failure.

    python client.py <scenario> --url URL [--url2 URL] --binding JSONRPC|HTTP+JSON [--token T]
        [--receiver URL] [--contexts ID,ID] [--context ID]
"""

import argparse
import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

AGENT = "research"
STREAMED = "one two three four five six seven eight nine ten eleven twelve"


def message(text, context_id=None, task_id=None, data=None, file_url=None):
    parts = [Part(text=text)]
    if data is not None:
        from google.protobuf import struct_pb2

        v = struct_pb2.Value()
        v.struct_value.update(data)
        parts.append(Part(data=v))
    if file_url is not None:
        parts.append(Part(url=file_url, media_type="image/png"))
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts)
    if context_id:
        m.context_id = context_id
    if task_id:
        m.task_id = task_id
    return m


class Ctx:
    def __init__(self, args):
        self.args = args
        headers = {}
        if args.token:
            headers["Authorization"] = f"Bearer {args.token}"
        self.headers = headers

    def http(self):
        return httpx.AsyncClient(headers=self.headers, timeout=60)

    async def client(self, url=None, streaming=False, polling=False):
        config = ClientConfig(
            streaming=streaming,
            polling=polling,
            httpx_client=self.http(),
            supported_protocol_bindings=[self.args.binding],
        )
        return await create_client(f"{url or self.args.url}/a2a/{AGENT}", client_config=config)


async def send(client, msg, **cfg):
    """Sends `msg` (not streaming) and answers the task."""
    req = SendMessageRequest(message=msg)
    for k, v in cfg.items():
        setattr(req.configuration, k, v)
    out = [ev async for ev in client.send_message(req)]
    assert len(out) == 1 and out[0].HasField("task"), out
    return out[0].task


def text_of(task):
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def wait_state(client, task_id, states, limit=30):
    for _ in range(limit * 10):
        t = await client.get_task(GetTaskRequest(id=task_id))
        if t.status.state in states:
            return t
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} never reached {states}: {t}")


async def expect(exc, coro, what):
    try:
        await coro
    except exc as e:
        return e
    raise AssertionError(f"{what}: expected {exc.__name__}")


# ---- scenarios ----


async def discovery(ctx):
    async with ctx.http() as http:
        card = await A2ACardResolver(http, f"{ctx.args.url}/a2a/{AGENT}").get_agent_card()
        root = await A2ACardResolver(http, ctx.args.url).get_agent_card()
        # Without any token: discovery is open.
        raw = (await httpx.AsyncClient().get(f"{ctx.args.url}/.well-known/agent-card.json")).json()
    assert card.name and card.description, card
    assert MessageToDict(card) == MessageToDict(root), "the first type's card is at the root"
    bindings = {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
    assert bindings == {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")}, bindings
    assert all(i.url.endswith(f"/a2a/{AGENT}") for i in card.supported_interfaces)
    assert card.capabilities.streaming
    assert card.capabilities.push_notifications
    assert card.skills and card.skills[0].id == AGENT
    if ctx.args.token:
        assert "bearer" in raw["securitySchemes"], raw
        assert raw["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    else:
        assert "securitySchemes" not in raw, raw


async def basics(ctx):
    c = await ctx.client()
    t = await send(c, message("hello there"))
    assert t.status.state == TaskState.TASK_STATE_COMPLETED, t
    assert text_of(t) == "echo: hello there", text_of(t)
    assert t.context_id and t.id.startswith(t.context_id + "."), t.id
    # The tokens its turn used, under agentd's key (the specification has no field for it).
    usage = t.metadata["agentd.usage"]
    assert usage["input"] > 0 and usage["output"] > 0, t.metadata
    # The same context, a second task; a data part reaches the model as JSON text.
    t2 = await send(c, message("and data", context_id=t.context_id, data={"k": "v"}))
    assert t2.context_id == t.context_id and t2.id != t.id
    assert text_of(t2) == 'echo: and data\n{"k":"v"}', text_of(t2)
    got = await c.get_task(GetTaskRequest(id=t.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(got) == "echo: hello there"
    assert len(got.history) == 1 and got.history[0].parts[0].text == "hello there", got.history
    none = await c.get_task(GetTaskRequest(id=t.id, history_length=0))
    assert len(none.history) == 0
    # ListTasks: by context, by state, paged, newest first, artifacts only when asked.
    listed = await c.list_tasks(ListTasksRequest(context_id=t.context_id))
    assert [x.id for x in listed.tasks] == [t2.id, t.id], listed
    assert listed.total_size == 2 and listed.next_page_token == ""
    assert all(len(x.artifacts) == 0 for x in listed.tasks)
    page1 = await c.list_tasks(ListTasksRequest(context_id=t.context_id, page_size=1, include_artifacts=True))
    assert [x.id for x in page1.tasks] == [t2.id] and page1.next_page_token, page1
    assert text_of(page1.tasks[0]).startswith("echo: and data")
    page2 = await c.list_tasks(
        ListTasksRequest(context_id=t.context_id, page_size=1, page_token=page1.next_page_token)
    )
    assert [x.id for x in page2.tasks] == [t.id] and page2.next_page_token == "", page2
    working = await c.list_tasks(
        ListTasksRequest(context_id=t.context_id, status=TaskState.TASK_STATE_WORKING)
    )
    assert len(working.tasks) == 0
    # Errors: the specification's codes, nothing queued.
    await expect(TaskNotFoundError, c.get_task(GetTaskRequest(id=t.context_id + "." + str(uuid.uuid4()))), "unknown task")
    await expect(TaskNotFoundError, c.get_task(GetTaskRequest(id="nope")), "malformed task id")
    await expect(ContentTypeNotSupportedError, send(c, message("a file", context_id=t.context_id, file_url="https://example.com/x.png")), "file part")
    await expect(UnsupportedOperationError, send(c, message("more", task_id=t.id)), "message to a completed task")
    await expect(TaskNotCancelableError, c.cancel_task(CancelTaskRequest(id=t.id)), "cancel a completed task")
    after = await c.list_tasks(ListTasksRequest(context_id=t.context_id))
    assert after.total_size == 2, "a refused message makes no task"
    # A resend of the same message is the same task, handled once.
    m = message("once only", context_id=t.context_id)
    a = await send(c, m)
    b = await send(c, m)
    assert a.id == b.id
    assert (await c.list_tasks(ListTasksRequest(context_id=t.context_id))).total_size == 3
    # So is a resend of a message without a context: the first one's context, task and answer.
    m = message("no context, once only")
    a = await send(c, m)
    b = await send(c, m)
    assert (a.id, a.context_id) == (b.id, b.context_id), (a.id, b.id)
    assert text_of(b) == "echo: no context, once only", text_of(b)
    listed = await c.list_tasks(ListTasksRequest(context_id=a.context_id))
    assert [x.id for x in listed.tasks] == [a.id], listed
    assert len(listed.tasks[0].history) <= 1 or listed.tasks[0].history[0].parts[0].text == "no context, once only"


async def raw_errors(ctx):
    """What the SDK never sends: no version, malformed JSON-RPC, unknown methods."""
    url = f"{ctx.args.url}/a2a/{AGENT}"
    async with ctx.http() as http:
        req = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        r = (await http.post(url, json=req)).json()
        assert r["error"]["code"] == -32009 and "1.0" in r["error"]["message"], r
        r = await http.get(f"{url}/tasks/x")
        assert r.status_code == 400, r.text
        assert r.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED", r.text
        v = {"A2A-Version": "1.0"}
        r = (await http.post(url, content=b"{nope", headers=v)).json()
        assert r["error"]["code"] == -32700 and r["id"] is None, r
        r = (await http.post(url, json=[req], headers=v)).json()
        assert r["error"]["code"] == -32600, r
        r = (await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "Nope"}, headers=v)).json()
        assert r["error"]["code"] == -32601 and r["id"] == 2, r
        r = (await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {}}, headers=v)).json()
        assert r["error"]["code"] == -32602 and "message" in r["error"]["message"], r
        r = (await http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": "x", "future": 1}}, headers=v)).json()
        assert r["error"]["code"] == -32001, "unknown fields are ignored: " + json.dumps(r)
        r = (await http.post(url, json={"jsonrpc": "2.0", "id": 5, "method": "CreateTaskPushNotificationConfig", "params": {"taskId": "x", "url": "http://127.0.0.1:1/"}}, headers=v)).json()
        assert r["error"]["code"] == -32001, r  # TaskNotFoundError: push is supported
        big = "x" * (300 * 1024)
        m = {"messageId": "big", "role": "ROLE_USER", "parts": [{"text": big}]}
        r = (await http.post(url, json={"jsonrpc": "2.0", "id": 6, "method": "SendMessage", "params": {"message": m}}, headers=v)).json()
        assert r["error"]["code"] == -32602 and "max_message_bytes" in r["error"]["message"], r
        r = await http.post(f"{url}/message:send?A2A-Version=1.0", json={"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}})
        assert r.status_code == 400 and r.json()["error"]["details"][0]["reason"] == "INVALID_PARAMS", r.text


async def cancel(ctx):
    c = await ctx.client(polling=True)
    # A queued task is taken out alone; the running one and the next still answer.
    slow = await send(c, message("slow one"))
    cid = slow.context_id
    queued = await send(c, message("queued two", context_id=cid))
    third = await send(c, message("third three", context_id=cid))
    assert queued.status.state == TaskState.TASK_STATE_SUBMITTED, queued
    canceled = await c.cancel_task(CancelTaskRequest(id=queued.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
    done = await wait_state(c, slow.id, [TaskState.TASK_STATE_COMPLETED])
    assert text_of(done) == "slow done", text_of(done)
    third = await wait_state(c, third.id, [TaskState.TASK_STATE_COMPLETED])
    assert text_of(third) == "echo: third three"
    assert (await c.get_task(GetTaskRequest(id=queued.id))).status.state == TaskState.TASK_STATE_CANCELED
    # A running task's turn is interrupted; the context's next task still answers.
    running = await send(c, message("slow again", context_id=cid))
    nxt = await send(c, message("after it", context_id=cid))
    await wait_state(c, running.id, [TaskState.TASK_STATE_WORKING])
    canceled = await c.cancel_task(CancelTaskRequest(id=running.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
    nxt = await wait_state(c, nxt.id, [TaskState.TASK_STATE_COMPLETED])
    assert text_of(nxt) == "echo: after it", text_of(nxt)
    assert (await c.get_task(GetTaskRequest(id=running.id))).status.state == TaskState.TASK_STATE_CANCELED
    await expect(TaskNotCancelableError, c.cancel_task(CancelTaskRequest(id=running.id)), "cancel twice")


async def streaming(ctx):
    c = await ctx.client(streaming=True)
    req = SendMessageRequest(message=message("stream me"))
    events = [ev async for ev in c.send_message(req)]
    assert events[0].HasField("task"), events[0]
    task_id = events[0].task.id
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) >= 3, f"the answer streams in pieces: {chunks}"
    # The task that opens the stream holds what streamed before it; each piece is appended.
    first = text_of(events[0].task)
    assert chunks[0].append == bool(first), (first, chunks[0])
    assert all(ch.append for ch in chunks[1:]), chunks
    assert chunks[-1].last_chunk
    text = first + "".join(p.text for ch in chunks for p in ch.artifact.parts)
    assert text == STREAMED, text
    assert events[-1].HasField("status_update"), events[-1]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert events[-1].status_update.metadata["agentd.usage"]["output"] > 0, events[-1]
    assert all(e.status_update.task_id == task_id for e in events if e.HasField("status_update"))


async def resubscribe(ctx):
    """The connection drops mid-answer; SubscribeToTask (maybe on another process) starts with
    the snapshot holding the answer so far and goes on: no gap, no duplicate."""
    c = await ctx.client(streaming=True)
    req = SendMessageRequest(message=message("stream me"))
    seen = ""
    task_id = None
    stream = c.send_message(req)
    async for ev in stream:
        if ev.HasField("task"):
            task_id = ev.task.id
            seen = text_of(ev.task)
        if ev.HasField("artifact_update"):
            seen += "".join(p.text for p in ev.artifact_update.artifact.parts)
            if len(seen.split()) >= 3:
                break
    await stream.aclose()
    await c.close()
    assert task_id and seen, (task_id, seen)
    c2 = await ctx.client(url=ctx.args.url2, streaming=True)
    events = [ev async for ev in c2.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert events[0].HasField("task"), events[0]
    snap = text_of(events[0].task)
    assert snap.startswith(seen), (snap, seen)
    assert events[0].task.status.state == TaskState.TASK_STATE_WORKING, events[0].task
    rest = ""
    for e in events[1:]:
        if e.HasField("artifact_update"):
            assert e.artifact_update.append, "after the snapshot, pieces are appended"
            rest += "".join(p.text for p in e.artifact_update.artifact.parts)
    assert snap + rest == STREAMED, (snap, rest)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    done = await c2.get_task(GetTaskRequest(id=task_id))
    await expect(UnsupportedOperationError, c2.subscribe(SubscribeToTaskRequest(id=task_id)).__anext__(), "subscribe to a completed task")
    assert text_of(done) == STREAMED


async def input_required(ctx):
    c = await ctx.client()
    t = await send(c, message("ask me something"))
    assert t.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, t
    assert t.status.message.parts[0].text.strip() == "Which region?", t.status
    t2 = await send(c, message("eu-west", task_id=t.id, context_id=t.context_id))
    assert t2.id == t.id
    assert t2.status.state == TaskState.TASK_STATE_COMPLETED, t2
    assert text_of(t2).startswith("Deploying to"), text_of(t2)
    assert "eu-west" in text_of(t2)
    assert len(t2.history) == 2, t2.history


def agent_of(task):
    """The context agent a task belongs to (its id's first part, docs/a2a.md)."""
    return task.id.split(".")[0]


async def client_context(ctx):
    """A contextId the client chose (any string) opens a context with its first message, even
    when two processes (--url, --url2) get a first message for it at once; every task of it
    carries that id, and every method finds it through either process. Prints
    `CONTEXT <id>` and `AGENT <context agent>`."""
    here = await ctx.client()
    there = await ctx.client(url=ctx.args.url2)
    cid = f"chosen by the client/{uuid.uuid4()} ✓"
    a, b = await asyncio.gather(
        send(here, message("first here", context_id=cid)),
        send(there, message("first there", context_id=cid)),
    )
    assert a.context_id == cid and b.context_id == cid, (a.context_id, b.context_id)
    assert agent_of(a) == agent_of(b), "one context for one id, however many opened it"
    assert text_of(a) == "echo: first here" and text_of(b) == "echo: first there"
    c = await send(there, message("and more", context_id=cid))
    assert c.context_id == cid and agent_of(c) == agent_of(a), c
    got = await here.get_task(GetTaskRequest(id=a.id))
    assert got.context_id == cid and got.history[0].context_id == cid, got
    listed = await there.list_tasks(ListTasksRequest(context_id=cid))
    ids = [x.id for x in listed.tasks]
    assert set(ids) == {a.id, b.id, c.id} and listed.total_size == 3, (ids, a.id, b.id, c.id)
    assert all(x.context_id == cid for x in listed.tasks), listed
    everything = await here.list_tasks(ListTasksRequest(page_size=100))
    assert all(x.context_id == cid for x in everything.tasks if agent_of(x) == agent_of(a)), everything
    # A context the client names but never opened holds no task (nothing is opened by a list).
    none = await here.list_tasks(ListTasksRequest(context_id=f"never opened {uuid.uuid4()}"))
    assert none.total_size == 0 and len(none.tasks) == 0, none
    # A UUID the client chose is its own id too, not taken for one of agentd's.
    u = str(uuid.uuid4())
    d = await send(here, message("a uuid context", context_id=u))
    assert d.context_id == u and agent_of(d) != u and agent_of(d) != agent_of(a), d
    # A question and its answer, each through another process, with the client's id.
    q = await send(here, message("ask me something", context_id=cid))
    assert q.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and q.context_id == cid, q
    assert q.status.message.context_id == cid, q.status
    answered = await send(there, message("eu-west", task_id=q.id, context_id=cid))
    assert answered.id == q.id and answered.context_id == cid, answered
    await expect(InvalidParamsError, send(there, message("x", task_id=q.id, context_id="another")), "a task of another context")
    # A stream's events carry it.
    streams = await ctx.client(url=ctx.args.url2, streaming=True)
    events = [ev async for ev in streams.send_message(SendMessageRequest(message=message("stream me", context_id=cid)))]
    assert events[0].task.context_id == cid, events[0]
    for e in events[1:]:
        which = e.status_update if e.HasField("status_update") else e.artifact_update
        assert which.context_id == cid, e
    print(f"CONTEXT {cid}")
    print(f"AGENT {agent_of(a)}")


async def client_context_again(ctx):
    """A message to the client-chosen context --context: prints the agent that is that context
    now (`AGENT <id>`) and how many tasks it lists (`TASKS <n>`)."""
    c = await ctx.client()
    t = await send(c, message("back again", context_id=ctx.args.context))
    assert t.context_id == ctx.args.context and text_of(t) == "echo: back again", t
    listed = await c.list_tasks(ListTasksRequest(context_id=ctx.args.context, page_size=100))
    assert all(x.context_id == ctx.args.context for x in listed.tasks), listed
    print(f"AGENT {agent_of(t)}")
    print(f"TASKS {listed.total_size}")


async def auth(ctx):
    """With a token: a call without it is refused; with it, it works."""
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(
            f"{ctx.args.url}/a2a/{AGENT}",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers={"A2A-Version": "1.0"},
        )
        assert r.status_code == 401, r.text
    c = await ctx.client()
    t = await send(c, message("with a token"))
    assert text_of(t) == "echo: with a token"


async def agent_output(ctx):
    """A context whose agent is told something no A2A message started: a new task in the
    context, listed by ListTasks, with that turn's answer."""
    c = await ctx.client()
    t = await send(c, message("hello"))
    async with ctx.http() as http:
        r = await http.post(
            f"{ctx.args.url}/v1/agents/{t.context_id}/messages", json={"text": "from elsewhere"}
        )
        assert r.status_code == 202, r.text
    for _ in range(100):
        listed = await c.list_tasks(ListTasksRequest(context_id=t.context_id, include_artifacts=True))
        other = [x for x in listed.tasks if x.id != t.id]
        if other and other[0].status.state == TaskState.TASK_STATE_COMPLETED:
            break
        await asyncio.sleep(0.1)
    assert len(other) == 1, listed
    assert text_of(other[0]) == "echo: from elsewhere", other[0]
    assert other[0].history[0].parts[0].text == "from elsewhere"
    assert other[0].metadata["agentd.origin"] == "agent"


async def push(ctx):
    """A task with push notification configs: one given with the message, one created, got,
    listed and deleted. Prints the task's id; the test (tests/tests/suite/a2a.rs) checks what
    its receiver (--receiver) gets."""
    receiver = ctx.args.receiver or "http://127.0.0.1:9/none"
    c = await ctx.client()
    msg = message("slow push")
    req = SendMessageRequest(message=msg)
    req.configuration.return_immediately = True
    req.configuration.task_push_notification_config.CopyFrom(
        TaskPushNotificationConfig(
            id="main",
            url=receiver,
            token="tok-1",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="cred-1"),
        )
    )
    out = [ev async for ev in c.send_message(req)]
    t = out[0].task
    got = await c.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=t.id, id="main")
    )
    assert got.url == receiver and got.token == "tok-1", got
    assert got.authentication.scheme == "Bearer", got
    extra = await c.create_task_push_notification_config(
        TaskPushNotificationConfig(task_id=t.id, url=receiver + "/extra")
    )
    assert extra.id and extra.task_id == t.id, extra
    listed = await c.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=t.id)
    )
    assert sorted(x.id for x in listed.configs) == sorted(["main", extra.id]), listed
    for _ in range(2):  # idempotent
        await c.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=t.id, id=extra.id)
        )
    listed = await c.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=t.id)
    )
    assert [x.id for x in listed.configs] == ["main"], listed
    await expect(
        TaskNotFoundError,
        c.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=t.id, id=extra.id)
        ),
        "a deleted config",
    )
    await expect(
        TaskNotFoundError,
        c.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=t.context_id + ".nope")
        ),
        "the configs of an unknown task",
    )
    await expect(
        InvalidParamsError,
        c.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=t.id, url="ftp://example.com/x")
        ),
        "a config whose url is not http",
    )
    done = await wait_state(c, t.id, [TaskState.TASK_STATE_COMPLETED])
    assert text_of(done) == "slow done", done
    print(f"TASK {t.id}")


async def push_prompt(ctx):
    """Two lengthy tasks queued in one context, each with a push config to --receiver (which
    accepts), in the context --context if given; the second is read (GetTask) until it works,
    nothing after. Prints `CONTEXT <id>` and `TASK <id>` for each; the test
    (tests/tests/suite/a2a.rs) checks when its receiver got each state."""
    c = await ctx.client()
    cfg = TaskPushNotificationConfig(url=ctx.args.receiver, token="tok-prompt")
    tasks = []
    context_id = ctx.args.context or None
    for text in ["lengthy one", "lengthy two"]:
        req = SendMessageRequest(message=message(text, context_id=context_id))
        req.configuration.return_immediately = True
        req.configuration.task_push_notification_config.CopyFrom(cfg)
        out = [ev async for ev in c.send_message(req)]
        context_id = out[0].task.context_id
        tasks.append(out[0].task.id)
    await wait_state(c, tasks[1], [TaskState.TASK_STATE_WORKING])
    print(f"CONTEXT {context_id}")
    for t in tasks:
        print(f"TASK {t}")


async def skills(ctx):
    """A type file's `[a2a]` skills are its card's skills."""
    async with ctx.http() as http:
        card = await A2ACardResolver(http, f"{ctx.args.url}/a2a/scout").get_agent_card()
    got = [(s.id, s.name, s.description, list(s.tags), list(s.examples)) for s in card.skills]
    assert got == [
        ("survey", "Survey", "Surveys a place and reports what is there.", ["survey", "report"],
         ["survey the harbour"]),
        ("count", "count", "Counts things.", ["scout"], []),
    ], got


async def idle_close(ctx):
    """With `[a2a] context_idle_close_ms`, an idle context is closed; a new message re-opens it
    and its earlier task is still there."""
    c = await ctx.client()
    t = await send(c, message("before the close"))
    assert t.status.state == TaskState.TASK_STATE_COMPLETED, t
    async with ctx.http() as http:
        for _ in range(200):
            r = (await http.get(f"{ctx.args.url}/v1/agents/{t.context_id}")).json()
            if r["status"] == "closed":
                break
            await asyncio.sleep(0.1)
        assert r["status"] == "closed", r
    t2 = await send(c, message("after the close", context_id=t.context_id))
    assert t2.status.state == TaskState.TASK_STATE_COMPLETED, t2
    assert text_of(t2) == "echo: after the close", t2
    old = await c.get_task(GetTaskRequest(id=t.id))
    assert text_of(old) == "echo: before the close", old


async def any_process(ctx):
    """Every method on a process that does not own the context (--url2), for contexts given
    (--contexts, research roots the test made, one owned by each process): sent through --url,
    read, listed, cancelled (queued and running), subscribed to and answered through --url2."""
    here = await ctx.client(polling=True)
    there = await ctx.client(url=ctx.args.url2, polling=True)
    streams_there = await ctx.client(url=ctx.args.url2, streaming=True)
    for cid in ctx.args.contexts.split(","):
        slow = await send(here, message("slow one", context_id=cid))
        queued = await send(here, message("queued two", context_id=cid))
        got = await there.get_task(GetTaskRequest(id=queued.id))
        assert got.status.state == TaskState.TASK_STATE_SUBMITTED, got
        listed = await there.list_tasks(ListTasksRequest(context_id=cid))
        assert {slow.id, queued.id} <= {x.id for x in listed.tasks}, listed
        canceled = await there.cancel_task(CancelTaskRequest(id=queued.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
        done = await wait_state(there, slow.id, [TaskState.TASK_STATE_COMPLETED])
        assert text_of(done) == "slow done", done
        # A running task cancelled through the other process; the next one still answers.
        running = await send(here, message("slow again", context_id=cid))
        nxt = await send(here, message("after it", context_id=cid))
        await wait_state(there, running.id, [TaskState.TASK_STATE_WORKING])
        canceled = await there.cancel_task(CancelTaskRequest(id=running.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
        nxt = await wait_state(there, nxt.id, [TaskState.TASK_STATE_COMPLETED])
        assert text_of(nxt) == "echo: after it", text_of(nxt)
        # A stream followed through the other process from its start.
        streamed = await send(here, message("stream me", context_id=cid))
        events = [ev async for ev in streams_there.subscribe(SubscribeToTaskRequest(id=streamed.id))]
        snap = text_of(events[0].task)
        rest = "".join(
            p.text for e in events[1:] if e.HasField("artifact_update") for p in e.artifact_update.artifact.parts
        )
        assert snap + rest == STREAMED, (snap, rest)
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        # A question asked through one process, answered through the other.
        asked = await send(here, message("ask me something", context_id=cid))
        asked = await wait_state(there, asked.id, [TaskState.TASK_STATE_INPUT_REQUIRED])
        answered = await send(there, message("eu-west", task_id=asked.id, context_id=cid))
        assert answered.id == asked.id
        answered = await wait_state(here, asked.id, [TaskState.TASK_STATE_COMPLETED])
        assert "eu-west" in text_of(answered), text_of(answered)


SCENARIOS = {
    f.__name__: f
    for f in [discovery, basics, raw_errors, cancel, streaming, resubscribe, input_required, auth, agent_output, push, push_prompt, skills, idle_close, any_process, client_context, client_context_again]
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--url", required=True)
    ap.add_argument("--url2")
    ap.add_argument("--binding", default="JSONRPC")
    ap.add_argument("--token")
    ap.add_argument("--receiver")
    ap.add_argument("--contexts", default="")
    ap.add_argument("--context", default="")
    args = ap.parse_args()
    args.url2 = args.url2 or args.url
    ctx = Ctx(args)
    for name in args.scenarios:
        try:
            asyncio.run(SCENARIOS[name](ctx))
        except Exception as e:  # noqa: BLE001 - report which scenario failed, then fail
            print(f"FAILED {name} ({args.binding}): {type(e).__name__}: {e}", file=sys.stderr)
            raise
        print(f"ok {name} ({args.binding})")


if __name__ == "__main__":
    main()
