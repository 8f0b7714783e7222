"""The checks of a SkyPilot profile (a `[profiles.NAME]` of clusters.toml), in order.

skypilot       the pinned SkyPilot in its own venv (the adapter's own version check)
login-node     the login node SkyPilot's ~/.slurm/config names for the profile's infra,
               reached as vibesys reaches it (host key verified, key accepted), with python3
certificate    days left on the OpenSSH certificate next to that login's identity file
partitions     (a Slurm infra) the profile's allocation_time fits a partition it may use, as
               sinfo on the login node reports their MaxTime
artifact-root  remote_artifact_root ($USER/$HOME expanded there) is writable
"""

from __future__ import annotations

import secrets

from msgspec import Struct

from vibesys.adapters.skypilot.boundary import SkyCli
from vibesys.adapters.skypilot.environment import SkyEnvironment
from vibesys.adapters.skypilot.errors import INSTALL_FIX
from vibesys.adapters.skypilot.limits import allocation_fix, allocation_refusal, infra_partition
from vibesys.adapters.skypilot.login import login_transport_config, slurm_alias
from vibesys.adapters.skypilot.run_dirs import RunDirs
from vibesys.adapters.slurm.limits import limits_argv, parse_partition_limits
from vibesys.adapters.slurm.parse import UnparseableOutput
from vibesys.config.resources import SkyPilotProfile
from vibesys.config.slurm import LocalTransportConfig, SshTransportConfig
from vibesys.errors import ConfigError
from vibesys.sitecheck.access import SiteAccess, identity_path
from vibesys.sitecheck.certificate import certificate_found
from vibesys.sitecheck.model import Status
from vibesys.sitecheck.options import CheckOptions
from vibesys.sitecheck.rootdir import RootNotWritable, make_check_dir, remove_check_dir
from vibesys.sitecheck.runner import Check, Found, fail, ok

__all__ = ["SkyPilotChecks", "SkyPilotSite"]


class SkyPilotSite(Struct, frozen=True):
    name: str
    profile: SkyPilotProfile
    #: the clusters.toml it came from (named in fixes)
    source: str
    environment: SkyEnvironment


class SkyPilotChecks:
    def __init__(self, site: SkyPilotSite, options: CheckOptions) -> None:
        self.site = site
        self.options = options
        self.environment = site.environment
        self.home = self.environment.client_home()
        self.ssh_config = self.home / ".slurm" / "config"
        self.nonce = secrets.token_hex(8)
        # SkyPilot logs in with this entry whichever way vibesys reads the remote attempt dirs,
        # so its certificate matters in both cases.
        self.login: SshTransportConfig | None = None
        self.login_error = ""
        try:
            self.login = login_transport_config(site.profile.infra, self.home)
        except ConfigError as exc:
            self.login_error = str(exc)
        except Exception as exc:  # unreadable or unparsable: the login row says so
            self.login_error = f"{self.ssh_config}: {type(exc).__name__}: {exc}"
        transport: LocalTransportConfig | SshTransportConfig = LocalTransportConfig(kind="local")
        if self.environment.login == "ssh" and self.login is not None:
            transport = self.login
        self.access = SiteAccess(
            transport, options.timeout_seconds, where=f"Host {self._alias()} of {self.ssh_config}"
        )

    def checks(self) -> list[Check]:
        t = self.options.timeout_seconds
        return [
            Check("skypilot", self._skypilot, budget=t + 5, fix=_install_fix()),
            Check("login-node", self._login, budget=2 * t + 5, fix=self._fix_login()),
            Check("certificate", self._certificate, budget=t),
            Check("partitions", self._partitions, ("login-node",), t + 5, self._fix_sinfo()),
            Check("artifact-root", self._root, ("login-node",), 2 * t + 5, self._fix_root()),
        ]

    def close(self) -> None:
        self.access.close()

    # -- the rows -------------------------------------------------------------------------------

    def _skypilot(self) -> Found:
        cli = SkyCli(venv=self.environment.venv, env=self.environment.sky_env())
        version = cli.check_version(timeout=self.options.timeout_seconds)
        return ok(f"SkyPilot {version} in {self.environment.venv} (the pinned release)")

    def _login(self) -> Found:
        if self.environment.login == "local":
            found = self.access.login()
            head = "VIBESYS_SKY_LOGIN=local: remote attempt directories are read on this host"
        elif self.login is None:
            return fail(self.login_error, self._fix_login())
        else:
            found = self.access.login()
            head = f"Host {self._alias()} of {self.ssh_config}"
        if found.status is Status.FAIL:
            return found
        done = self.access.run(["python3", "-c", "import json, os, sys"])
        if done.returncode != 0:
            return fail(
                f"{head}: no python3 there (exit {done.returncode}): vibesys reads the run "
                "directories with it",
                "install python3 (3.6 or newer) on the login node",
            )
        return Found(found.status, f"{head}; {found.detail}", found.fix)

    def _certificate(self) -> Found:
        if self.login is None:
            return ok(f"no login entry to read an identity from ({self.login_error})")
        return certificate_found(
            identity_path(self.login),
            now=self.options.now(),
            warn_days=self.options.cert_warn_days,
            user=self.login.user,
        )

    def _partitions(self) -> Found:
        profile, name = self.site.profile, self.site.name
        if not profile.infra.startswith("slurm"):
            return ok(f"infra {profile.infra}: no Slurm partitions to compare")
        done = self.access.run(limits_argv())
        if done.returncode != 0:
            said = " ".join(done.stderr.split())[-300:] or "(no output)"
            return fail(
                f"sinfo on the login node exited {done.returncode}: {said}", self._fix_sinfo()
            )
        try:
            limits = parse_partition_limits(done.stdout)
            refused = allocation_refusal(name, profile.infra, profile.allocation_time, done.stdout)
        except UnparseableOutput as exc:
            return fail(str(exc), self._fix_sinfo())
        listing = ", ".join(
            limits.shown(p) + (" (default)" if p == limits.default else "") for p in limits.names
        )
        partition = infra_partition(profile.infra)
        if partition is not None and partition not in limits.names:
            return fail(
                f"infra {profile.infra} names partition {partition!r}, which sinfo does not "
                f"list (sinfo: {listing})",
                f"name a listed partition in infra of [profiles.{name}] in {self.site.source}",
            )
        if refused is not None:
            return fail(f"{refused} (sinfo: {listing})", allocation_fix(name, self.site.source))
        where = f"partition {partition}" if partition else "a partition SkyPilot may pick"
        return ok(f"allocation_time {profile.allocation_time} fits {where} (sinfo: {listing})")

    def _root(self) -> Found:
        template = self.site.profile.remote_artifact_root
        root = str(
            RunDirs(self.access.runner, template, timeout=self.options.timeout_seconds).root()
        )
        try:
            made = make_check_dir(self.access, root, self.nonce)
        except RootNotWritable as exc:
            return fail(str(exc), self._fix_root())
        removed = remove_check_dir(self.access, made.path)
        left = "" if removed else f"; could not remove {made.path}"
        spelled = f" ({template})" if template != root else ""
        created = " (created by this check)" if made.created_root else ""
        return ok(f"{root}{spelled} is writable by {made.user}{created}{left}")

    # -- fixes ----------------------------------------------------------------------------------

    def _alias(self) -> str:
        try:
            return slurm_alias(self.site.profile.infra)
        except ConfigError:
            return self.site.profile.infra

    def _fix_login(self) -> str:
        return (
            f"add Host {self._alias()} (HostName, User, IdentityFile, UserKnownHostsFile) to "
            f"{self.ssh_config}, SkyPilot's login configuration, with the login node's host key "
            "in that known_hosts; or set VIBESYS_SKY_LOGIN=local where the shared file system "
            "is mounted"
        )

    @staticmethod
    def _fix_sinfo() -> str:
        return (
            "check that sinfo answers on the login node (SkyPilot asks it for the partitions "
            "too) and that this account may see the partitions"
        )

    def _fix_root(self) -> str:
        return (
            f"make {self.site.profile.remote_artifact_root} writable on the site's shared file "
            f"system, or set remote_artifact_root of [profiles.{self.site.name}] in "
            f"{self.site.source}"
        )


def _install_fix() -> str:
    return INSTALL_FIX
