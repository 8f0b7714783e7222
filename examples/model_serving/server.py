"""The candidate: an HTTP model server (standard library only) for model.py's perceptron.

`POST /predict` with `{"inputs": [[...32 floats...], ...]}` answers `{"outputs": [[...8...],
...]}`; `GET /health` answers 200 once the weights are loaded. Its settings come from
settings.json, which is what the rounds change:

- "precision": "f64" (exact weights), "q8" or "q4" (weights rounded to 8 or 4 bits);
- "threaded": one thread per connection, or one request at a time;
- "keep_alive": HTTP/1.1 persistent connections, or one connection per request.

It listens on 127.0.0.1, on the port given (0: any free one), and prints `listening PORT`.

    python3 server.py [--port PORT] [--settings settings.json]
"""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

import model


def handler_class(weights, keep_alive):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
        # The headers and the body leave in two writes: with Nagle's algorithm on, a kept-alive
        # connection waits out the client's delayed ACK (40 ms) on every answer.
        disable_nagle_algorithm = True

        def do_GET(self):
            self.reply(200, {"ok": True} if self.path == "/health" else {"error": "no such path"})

        def do_POST(self):
            if self.path != "/predict":
                self.reply(404, {"error": "no such path"})
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            inputs = json.loads(body)["inputs"]
            self.reply(200, {"outputs": [model.forward(weights, x) for x in inputs]})

        def reply(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):  # one line per request would drown the job's log
            pass

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--settings", default="settings.json")
    args = parser.parse_args()
    with open(args.settings) as f:
        settings = json.load(f)
    weights = model.quantize(model.generate(), settings["precision"])
    server_class = ThreadingHTTPServer if settings["threaded"] else HTTPServer
    server = server_class(("127.0.0.1", args.port), handler_class(weights, settings["keep_alive"]))
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
