"""The evaluation bridge: the host side of `vibesys-eval`.

An agent's container holds no credentials and no accelerator; its trusted evaluator helper asks
the bridge, over a Unix socket, to run the accuracy or benchmark command where the operator's
site configuration says (a Slurm site's sbatch path, a SkyPilot profile's campaign cluster, or
this host). The bridge is a security boundary and a long-running client of the engine:

- `protocol` and `replies`: the wire format (pure; its framing is `vibesys.service`'s);
- `admission`: a request checked against the session (token, run, workspace, variables,
  timeout), or refused with the reason;
- `site`: the operator's site resolved once (adapter, request, cluster name, capabilities);
- `capabilities`: what a session offers, typed (the `capabilities` reply), and `notes`: the
  agent's runtime notes rendered from it (`render_notes`);
- `queue`: the campaign's queue position (the queue is the journal's);
- `runner`: request id -> invocation (write-ahead), staging, teardown; `recorded`: a request
  row checked against a request sent again; `driving`: one evaluation driven to its end, its
  timeout, its result (with `session`, the only modules that reach the engine);
- `follow`: a reply stream built from the journal and the log spool;
- `server`: the bridge's operations on the socket service (`vibesys.service`);
- `options`, `setup`, `session`: `vibesys session serve` (the bridge, the GPU broker,
  teardown);
- `client`: `vibesys-eval`, one stdlib-only file.
"""
