"""A webhook receiver for tests/tests/suite/webhook_tools.rs: it checks agentd's signature
(X-Agentd-Signature = sha256=HMAC-SHA256(secret, "<timestamp>.<body>")) with Python's own hmac,
and answers by path: /notify echoes, /flaky fails once with 503, /missing answers 404 with a
long body. GET /calls lists every POST it received ({path, call_id}), so a test can tell
whether a call reached it. Prints its port, then serves until killed."""
import hashlib
import hmac
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = sys.argv[1].encode()
ATTEMPTS = {}
CALLS = []


class Hook(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/calls":
            return self.reply(200, CALLS)
        self.reply(404, {"error": "no such page"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        ts = self.headers.get("X-Agentd-Timestamp", "")
        sig = self.headers.get("X-Agentd-Signature", "")
        call_id = self.headers.get("X-Agentd-Call-Id", "")
        CALLS.append({"path": self.path, "call_id": call_id})
        want = "sha256=" + hmac.new(SECRET, ts.encode() + b"." + body, hashlib.sha256).hexdigest()
        fresh = ts.isdigit() and abs(time.time() * 1000 - int(ts)) < 300_000
        if not (hmac.compare_digest(want, sig) and fresh and call_id):
            return self.reply(401, {"error": "bad signature"})
        key = (self.path, call_id)
        ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
        if self.path == "/flaky" and ATTEMPTS[key] == 1:
            return self.reply(503, {"error": "try again"})
        if self.path == "/missing":
            return self.reply(404, "no such hook " + "x" * 4000)
        self.reply(200, {"delivered": json.loads(body), "call_id": call_id, "attempt": ATTEMPTS[key],
                         "traceparent": self.headers.get("traceparent")})

    def reply(self, code, obj):
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Hook)
print(server.server_port, flush=True)
server.serve_forever()
