"""Configuration: strict, frozen pydantic models parsed once at the CLI edge, one module a
file kind (`load`/`slurm`: the Slurm site file; `profiles`/`resources`: SkyPilot's profiles and
resource requests; `sizing`: a person's resource ask; `transport`; `site`: a recorded site).

Only typed objects travel inward from here. Imports pydantic and `vibesys.errors`, nothing else
of vibesys. Import from the module that defines a name: a run loads only the kinds it reads.
"""
