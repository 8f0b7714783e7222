"""The socket-service layer shared by the evaluation bridge and the GPU broker.

- `framing`: JSON lines, bounded in length and in integer size, and the protocol errors;
- `connections`: who may connect, how many at once, how long a peer may take (the gate);
- `server`: the listener, one request line read and answered or refused, the reply sink,
  heartbeats and teardown;
- `tokens`: the per-session tokens, one format per service, compared in constant time.

Each service (`vibesys.bridge`, `vibesys.broker`) is its own protocol and operations on it.
"""
