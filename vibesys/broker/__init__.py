"""The GPU broker: the host side of `vibesys-gpu`.

An agent in a container without GPUs asks the broker, over a Unix socket, to run one command as
its own confined Slurm job. The broker is a security boundary and a long-running client of the
engine, so it sits beside the CLI, not among the adapters:

- `protocol` and `replies`: the wire format (pure; its framing is `vibesys.service`'s);
- `jobs`: the accepted job and the runner protocol the server drives (pure);
- `admission`: a request checked against the workspace, the limits and the environment filter;
- `slots`: the run's concurrency cap, first come, first served;
- `server`: the broker's one operation on the socket service (`vibesys.service`);
- `engine_runner`: the only module that touches the engine;
- `client`: `vibesys-gpu`, one stdlib-only file;
- `startup`: the checks before serving and the server, for `vibesys broker serve` and a
  session's broker; `cli`: the command's declaration.
"""
