"""A small OTLP/HTTP receiver for agentd's telemetry tests, on the official `opentelemetry-proto`
package (pinned by scripts/test.sh): it decodes what agentd exports to /v1/traces and
/v1/metrics (protobuf) and writes one JSON line per request (its path and headers) and per span
or metric data point to stdout.

Usage: receiver.py PORT. Binds 127.0.0.1 only. Prints `listening <port>` once it accepts.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        emit({
            "signal": "request",
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
        })
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(415)
            return
        if self.path == "/v1/traces":
            req = trace_service_pb2.ExportTraceServiceRequest()
            req.ParseFromString(body)
            for rs in req.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        emit({
                            "signal": "span",
                            "service": resource.get("service.name"),
                            "scope": ss.scope.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(),
                            "name": s.name,
                            "kind": KINDS.get(s.kind, str(s.kind)),
                            "attributes": attributes(s.attributes),
                            "links": [
                                {"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()}
                                for l in s.links
                            ],
                            "status": s.status.code,
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                        })
            reply = trace_service_pb2.ExportTraceServiceResponse()
        elif self.path == "/v1/metrics":
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            req.ParseFromString(body)
            for rm in req.resource_metrics:
                resource = attributes(rm.resource.attributes)
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        points = getattr(m, kind).data_points if kind else []
                        for p in points:
                            emit({
                                "signal": "metric",
                                "service": resource.get("service.name"),
                                "name": m.name,
                                "unit": m.unit,
                                "kind": kind,
                                "attributes": attributes(p.attributes),
                                "count": getattr(p, "count", None),
                                "sum": getattr(p, "sum", None),
                            })
            reply = metrics_service_pb2.ExportMetricsServiceResponse()
        else:
            self.send_error(404)
            return
        out = reply.SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    emit({"signal": "listening", "port": server.server_address[1]})
    server.serve_forever()


if __name__ == "__main__":
    main()
