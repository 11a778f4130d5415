"""Redis CPU and commands per one-way message: the Redis store's command set today against a
design where the partition stream is the agent's durable inbox (issue 34, item 4).

Emulates, with Debian's python3-redis against a private redis-server on a free loopback port,
20,000 one-way messages to 100 agents in 8 partitions, B at a time:
- today: the sender's checked forward (EXISTS, XADD); the reader's XREADGROUP; the grouped push
  (window INCR and ZADD, inbox ZADD and HSET, the input appended once: LLEN, LPOS, RPUSH, the
  record SET); the flush (the answer appended once, the done mark ZREM and HDEL, the lease GET,
  the record SET); the turn's event XADD; XACK and XTRIM per read;
- stream-as-inbox: the sender's XADD; the reader's XREADGROUP; one flush per message (the lease
  GET, the input and the answer in one RPUSH, the record SET, the entry's XACK); the event XADD;
  XTRIM per read.
Prints redis-server's CPU (from /proc) and its commands (INFO commandstats, a script's inner
commands included) per message. The client makes more round trips than agentd does, so the
CPU figures are higher than the bench's; compare the two designs with each other.

    python3 scripts/redis_design_cost.py
"""
import os, shutil, socket, subprocess, tempfile, time, uuid
import redis

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

PUSH = """
local n = tonumber(ARGV[2]); local a = 3
for j = 1, n do
  local k = (j - 1) * 5
  local seq = redis.call('INCR', KEYS[k+2])
  if redis.call('ZADD', KEYS[k+1], 'NX', seq, ARGV[a]) == 1 then
    redis.call('ZADD', KEYS[k+3], seq, ARGV[a]); redis.call('HSET', KEYS[k+4], ARGV[a], ARGV[a+1])
    local t = KEYS[k+5] .. ':thread'
    local len = redis.call('LLEN', t)
    if not redis.call('LPOS', t, ARGV[a+2]) then redis.call('RPUSH', t, ARGV[a+2], ARGV[a+3]) end
    redis.call('SET', KEYS[k+5], ARGV[a+4])
  end
  a = a + 5
end
return 1"""
FLUSH = """
local t = KEYS[1] .. ':thread'
local len = redis.call('LLEN', t)
if not redis.call('LPOS', t, ARGV[1]) then redis.call('RPUSH', t, ARGV[1], ARGV[2]) end
redis.call('ZREM', KEYS[2], ARGV[3]); redis.call('HDEL', KEYS[3], ARGV[3])
if redis.call('GET', KEYS[4]) ~= ARGV[4] then return -1 end
redis.call('SET', KEYS[1], ARGV[5]); return 1"""
FORWARD = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', 'm', ARGV[1]); return 1"""
NEW_FLUSH = """
local t = KEYS[1] .. ':thread'
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
redis.call('RPUSH', t, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
redis.call('SET', KEYS[1], ARGV[6])
redis.call('XACK', KEYS[2], 'g', ARGV[7]); return 1"""

def run(design, n, batch):
    port = free_port(); d = tempfile.mkdtemp()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL)
    r = redis.Redis(port=port)
    for _ in range(100):
        try: r.ping(); break
        except Exception: time.sleep(0.05)
    pid = srv.pid
    agents = [f"{{ns:p{i%8}}}:a:{uuid.uuid4()}" for i in range(100)]
    for a in agents: r.set(a, b"r" * 300)
    for k in range(8): r.xgroup_create(f"{{ns:p{k}}}:stream", "g", id="0", mkstream=True); r.set(f"{{ns:p{k}}}:lease", "me")
    push, flush, fwd, nflush = (r.register_script(x) for x in (PUSH, FLUSH, FORWARD, NEW_FLUSH))
    env = b"e" * 250; entry = b"t" * 120; rec = b"r" * 300
    r.config_resetstat(); c0 = cpu(pid); t0 = time.time()
    for start in range(0, n, batch):
        ids = [(i, agents[i % 100]) for i in range(start, min(n, start + batch))]
        p = r.pipeline(transaction=False)
        for i, a in ids:  # the sender
            k = a[1:a.index('}')]  # ns:pK
            if design == "today": fwd(keys=[f"{{{k}}}:stream", a], args=[env], client=p)
            else: p.xadd(f"{{{k}}}:stream", {"m": env})
        p.execute()
        by_part = {}
        for i, a in ids: by_part.setdefault(a[1:a.index('}')], []).append((i, a))
        for k, items in by_part.items():
            stream = f"{{{k}}}:stream"
            got = r.xreadgroup("g", "c", {stream: ">"}, count=len(items))
            sids = [e[0] for e in got[0][1]] if got else []
            p = r.pipeline(transaction=False)
            if design == "today":
                keys, args = [], ["", len(items)]
                for i, a in items:
                    keys += [a + ":seen", a + ":seenseq", a + ":inbox", a + ":inboxdata", a]
                    args += [f"m{i}", env, uuid.uuid4().bytes, entry, rec]
                push(keys=keys, args=args, client=p)
                for i, a in items:
                    flush(keys=[a, a + ":inbox", a + ":inboxdata", f"{{{k}}}:lease"], args=[uuid.uuid4().bytes, entry, f"m{i}", "me", rec], client=p)
                    p.xadd("ns:events", {"e": b"x" * 80})
                p.xack(stream, "g", *sids); p.xtrim(stream, minid=sids[-1] if sids else 0)
            else:
                for (i, a), sid in zip(items, sids):
                    nflush(keys=[a, stream, f"{{{k}}}:lease"], args=["me", uuid.uuid4().bytes, entry, uuid.uuid4().bytes, entry, rec, sid], client=p)
                    p.xadd("ns:events", {"e": b"x" * 80})
                p.xtrim(stream, minid=sids[-1] if sids else 0)
            p.execute()
    secs = cpu(pid) - c0
    cmds = sum(v["calls"] for kk, v in r.info("commandstats").items())
    srv.terminate(); srv.wait(); shutil.rmtree(d, ignore_errors=True)
    return secs * 1e6 / n, cmds / n

for design in ("today", "stream-as-inbox"):
    for batch in (16, 100):
        us, c = run(design, 20000, batch)
        print(f"{design:16} batch {batch:3}: {us:5.1f} µs of Redis CPU, {c:4.1f} commands per message")
