"""Redis CPU of one flush call, as the script FLUSH_MANY and as a WATCH-fenced transaction
(issue 34, item 4; BENCHMARKS.md, "Where Redis's time goes").

Starts a private redis-server on a free loopback port and writes, ROUNDS times, what a flush
call of 10 agents writes (per agent: the input and the answer appended to its thread, its
record set, its held stream entry acknowledged), three ways:
- the script FLUSH_MANY (its text read from services/store/src/redis_store/scripts.rs);
- MULTI ... EXEC with the WATCH and GET of the partition's lease after each EXEC (agentd's call
  on one Redis, services/store/src/redis_store/fenced.rs);
- MULTI ... EXEC alone.
Prints redis-server's CPU (its own `used_cpu_*`) per agent's part. A raw RESP client (the
standard library only): redis-py runs a pipeline's commands one at a time once it sees WATCH.

    python3 scripts/flush_call_cost.py [ROUNDS]
"""
import os, re, socket, subprocess, sys, tempfile, time, uuid

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode() if isinstance(a, (int, str)) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)

class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port)); self.buf = b""
    def _line(self):
        while b"\r\n" not in self.buf: self.buf += self.sock.recv(1 << 16)
        line, self.buf = self.buf.split(b"\r\n", 1); return line
    def _reply(self):
        line = self._line(); kind = line[:1]
        if kind in (b"+", b"-", b":"): return line
        if kind == b"$":
            n = int(line[1:])
            if n < 0: return None
            while len(self.buf) < n + 2: self.buf += self.sock.recv(1 << 16)
            value, self.buf = self.buf[:n], self.buf[n + 2:]; return value
        n = int(line[1:])
        return None if n < 0 else [self._reply() for _ in range(n)]
    def call(self, *cmds):
        self.sock.sendall(b"".join(cmds)); return [self._reply() for _ in cmds]
    def cpu(self):
        info = self.call(enc("INFO", "cpu"))[0].decode()
        return sum(float(re.search(k + r":([\d.]+)", info).group(1)) for k in ("used_cpu_user", "used_cpu_sys"))

def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    here = os.path.dirname(os.path.abspath(__file__))
    src = open(os.path.join(here, "../services/store/src/redis_store/scripts.rs")).read()
    const = lambda name: re.search(r'const %s: &str = r"(.*?)";' % name, src, re.S).group(1)
    flush_many = const("APPEND_ONCE") + const("FLUSH_MANY").replace("'GROUP'", "'agentd'")
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tempfile.mkdtemp()], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = Client(port)
        sha = r.call(enc("SCRIPT", "LOAD", flush_many))[0].decode()
        agents = [str(uuid.uuid4()) for _ in range(10)]
        p = "{ns:p1}"; stream = p + ":stream"; lease = p + ":lease"
        entry, record = b"x" * 120, b"r" * 669
        r.call(enc("XGROUP", "CREATE", stream, "agentd", "0", "MKSTREAM"), enc("SET", lease, "me"))

        def read_entries():
            adds = [enc("XADD", stream, "*", "m", b"y" * 400) for _ in range(len(agents) * rounds)]
            for i in range(0, len(adds), 500): r.call(*adds[i:i + 500])
            ids = []
            while len(ids) < len(agents) * rounds:
                got = r.call(enc("XREADGROUP", "GROUP", "agentd", "c", "COUNT", 1000, "STREAMS", stream, ">"))[0]
                ids += [e[0] for e in got[0][1]]
            return [ids[i * len(agents):(i + 1) * len(agents)] for i in range(rounds)]

        def script(ids):
            keys, args = [lease, stream, p + ":outbox"], ["me", len(agents)]
            for a, id_ in zip(agents, ids):
                keys += [f"{p}:a:{a}:thread", f"{p}:a:{a}:inbox", f"{p}:a:{a}:inboxdata", f"{p}:a:{a}"]
                args += [2, 1, uuid.uuid4().bytes, entry, 1, uuid.uuid4().bytes, entry, 0, 0, 0, 1, id_, 1, record]
            return [enc("EVALSHA", sha, len(keys), *keys, *args)]

        def transaction(ids, watch):
            cmds = [enc("MULTI")]
            for a in agents:
                cmds.append(enc("RPUSH", f"{p}:a:{a}:thread", uuid.uuid4().bytes, entry, uuid.uuid4().bytes, entry))
                cmds.append(enc("SET", f"{p}:a:{a}", record))
            cmds += [enc("XACK", stream, "agentd", *ids), enc("EXEC")]
            return cmds + ([enc("WATCH", lease), enc("GET", lease)] if watch else [])

        r.call(enc("WATCH", lease), enc("GET", lease))
        for _ in range(3):
            for name, make in [("FLUSH_MANY", script),
                               ("WATCH-fenced MULTI/EXEC", lambda ids: transaction(ids, True)),
                               ("MULTI/EXEC alone", lambda ids: transaction(ids, False))]:
                calls = read_entries()
                for a in agents: r.call(enc("DEL", f"{p}:a:{a}:thread"))
                before = r.cpu()
                for ids in calls: r.call(*make(ids))
                print(f"{name}: {(r.cpu() - before) * 1e6 / (rounds * len(agents)):.2f} us per agent's part", flush=True)
    finally:
        server.terminate()

if __name__ == "__main__":
    main()
