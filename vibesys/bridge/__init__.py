"""The evaluation bridge: the host side of `vibesys-eval`.

An agent's container holds no credentials and no accelerator; its trusted evaluator helper asks
the bridge, over a Unix socket, to run the accuracy or benchmark command where the operator's
site configuration says (a Slurm site's sbatch path, a SkyPilot profile's campaign cluster, or
this host). The bridge is a security boundary and a long-running client of the engine:

- `protocol`: the wire format (pure);
- `admission`: a request checked against the session (token, run, workspace, variables,
  timeout), or refused with the reason;
- `site`: the operator's site resolved once (adapter, request, cluster name, capabilities);
- `capabilities`: what a session offers, typed (the `capabilities` reply), and `notes`: the
  agent's runtime notes rendered from it (`render_notes`);
- `queue`: the campaign's queue position (the queue is the journal's);
- `runner`: the only module that drives the engine: request id -> invocation (write-ahead),
  staging, driving, the timeout, teardown;
- `follow`: a reply stream built from the journal and the log spool;
- `server`: the socket, peer credentials, one thread per connection;
- `session`: `vibesys session serve` (the bridge, the GPU broker, teardown);
- `client`: `vibesys-eval`, one stdlib-only file.
"""
