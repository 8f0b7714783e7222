"""Adapters: side effects (local processes, Slurm, SkyPilot). They speak RemoteStatus and never
import the journal or the engine. The adapter protocol is `vibesys.adapters.base`; concrete
adapters are loaded through the registry (`vibesys.adapters.registry`), which imports one only
when an invocation needs it, so importing this package loads none of them."""
