"""A site configuration as an invocation records it: the canonical rendering, and its digest.

The rendering is the validated model written back as TOML (every default filled in, comments
and key order of the file gone), so two files that mean the same give the same text and the
same digest (sha256 of the text). It is what every process that carries the invocation on
reads back (`load.recorded_slurm`, `profiles.recorded_profile`), never the file again.

    kind "slurm.toml"      the whole of slurm.toml (sbatch and srun; a `[slurm_gpu]` file as
                           translated by the deprecated alias)
    kind "clusters.toml"   the one `[profiles.NAME]` of clusters.toml a SkyPilot run uses
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from typing import TYPE_CHECKING, Final, Literal

import tomli_w
from msgspec import Struct

if TYPE_CHECKING:
    # Only the types: reading a recorded site back is its parser's (`load.recorded_slurm`,
    # `profiles.recorded_profile`), so a local run, whose request carries no site, loads none.
    from vibesys.config.resources import SkyPilotProfile
    from vibesys.config.slurm import SlurmSiteConfig

__all__ = [
    "CLUSTERS_KIND",
    "SLURM_KIND",
    "RecordedSite",
    "changed_keys",
    "profile_site",
    "render_profile",
    "render_slurm",
    "slurm_site",
    "text_digest",
]

SLURM_KIND: Final = "slurm.toml"
CLUSTERS_KIND: Final = "clusters.toml"
_DIGEST = re.compile(r"\A[0-9a-f]{64}\Z")


def text_digest(text: str) -> str:
    """sha256 of a rendering, as 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render_slurm(config: SlurmSiteConfig) -> str:
    """The canonical rendering of a whole slurm.toml."""
    data = config.model_dump(mode="json", exclude_none=True)
    transport = data["slurm"]["transport"]
    if "jump_host" not in transport:
        # Its default means nothing without a jump host (and is refused there when given).
        transport.pop("jump_port", None)
    return tomli_w.dumps(data)


def render_profile(name: str, profile: SkyPilotProfile) -> str:
    """The canonical rendering of one profile, as a clusters.toml that holds only it."""
    table = profile.model_dump(mode="json", exclude_none=True)
    return tomli_w.dumps({"profiles": {name: table}})


class RecordedSite(Struct, frozen=True, forbid_unknown_fields=True):
    """The rendering an invocation runs with (recorded at PREPARED, in the journal's
    `site_configs` table, keyed by digest)."""

    #: what it renders
    kind: Literal["slurm.toml", "clusters.toml"]
    #: the canonical rendering (TOML)
    text: str
    #: sha256 of `text`
    digest: str

    def __post_init__(self) -> None:
        if not _DIGEST.match(self.digest) or text_digest(self.text) != self.digest:
            raise ValueError(f"digest: {self.digest!r} is not the sha256 of the rendering")

    @property
    def label(self) -> str:
        return f"recorded {self.kind} sha256:{self.digest[:12]}"


def slurm_site(config: SlurmSiteConfig) -> RecordedSite:
    text = render_slurm(config)
    return RecordedSite(kind=SLURM_KIND, text=text, digest=text_digest(text))


def profile_site(name: str, profile: SkyPilotProfile) -> RecordedSite:
    text = render_profile(name, profile)
    return RecordedSite(kind=CLUSTERS_KIND, text=text, digest=text_digest(text))


def changed_keys(old: RecordedSite, new: RecordedSite) -> list[str]:
    """The dotted keys whose values differ between two renderings of one kind (for the
    evidence of a replacement): added, removed or changed."""

    def flat(table: dict[str, object], prefix: str = "") -> dict[str, object]:
        found: dict[str, object] = {}
        for key, value in table.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                found.update(flat(value, f"{path}."))
            else:
                found[path] = value
        return found

    before, after = flat(tomllib.loads(old.text)), flat(tomllib.loads(new.text))
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
