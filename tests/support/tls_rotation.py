"""A certificate rotation to a new CA, as files: the material of both CAs and the three steps
people take (trust both CAs, then present the new certificates, then trust the new CA only),
and a directory updated the way the kubelet updates a Secret volume.

``SecretVolume`` mirrors the kubelet's atomic writer: each update writes every file into a new
hidden directory, points a temporary ``..data_tmp`` symlink at it and renames that over
``..data``; the visible names (``ca.crt``, ``tls.crt``, ``tls.key``) are symlinks through
``..data``, so a reader sees either the whole old content or the whole new one.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.certs import CertAuthority, Leaf, make_ca
from tributary.settings.security import SecuritySettings

KEYS = ("ca.crt", "tls.crt", "tls.key")


class SecretVolume:
    """A directory holding ``files`` as a Secret volume does; ``update`` swaps them at once."""

    def __init__(self, directory: Path, files: Mapping[str, bytes]) -> None:
        self.directory = directory
        self._versions = itertools.count()
        directory.mkdir(parents=True, exist_ok=True)
        self.update(files)
        for name in files:
            os.symlink(f"..data/{name}", directory / name)

    def update(self, files: Mapping[str, bytes]) -> None:
        version = self.directory / f"..version_{next(self._versions)}"
        version.mkdir()
        for name, content in files.items():
            (version / name).write_bytes(content)
        tmp = self.directory / "..data_tmp"
        os.symlink(version.name, tmp)
        os.replace(tmp, self.directory / "..data")

    def path(self, key: str) -> str:
        return str(self.directory / key)

    def security(self, allowed_cn: tuple[str, ...] = ()) -> SecuritySettings:
        """``[security]`` naming this volume's files, as the operator renders it."""
        return SecuritySettings(
            self.path("ca.crt"), self.path("tls.crt"), self.path("tls.key"), allowed_cn
        )


@dataclass(frozen=True)
class Rotation:
    """Two CAs, a leaf of each (server and client use), and the Secret's content at each step."""

    old: CertAuthority
    new: CertAuthority
    old_leaf: Leaf
    new_leaf: Leaf

    def files(self, ca: str, leaf: str) -> dict[str, bytes]:
        """The Secret's keys: ``ca`` is ``old``, ``new`` or ``both`` (a bundle), ``leaf`` is
        ``old`` or ``new``."""
        cas = {"old": [self.old], "new": [self.new], "both": [self.old, self.new]}[ca]
        chosen = self.old_leaf if leaf == "old" else self.new_leaf
        return {
            "ca.crt": b"".join(c.cert.read_bytes() for c in cas),
            "tls.crt": chosen.cert.read_bytes(),
            "tls.key": chosen.key.read_bytes(),
        }

    STEPS = (("old", "old"), ("both", "old"), ("both", "new"), ("new", "new"))
    """(ca, leaf) before the rotation and after each of its three updates."""

    def security(self, ca: str, leaf: str) -> SecuritySettings:
        """A client of plain files: trusting CA ``ca`` (``old``/``new``), presenting ``leaf``."""
        authority = self.old if ca == "old" else self.new
        chosen = self.old_leaf if leaf == "old" else self.new_leaf
        return SecuritySettings(str(authority.cert), str(chosen.cert), str(chosen.key))


def make_rotation(directory: Path, cn: str = "binlog") -> Rotation:
    """An old and a new CA (distinct names) with a leaf ``CN=cn`` of each."""
    old = make_ca(directory / "old", name="tributary-old-ca")
    new = make_ca(directory / "new", name="tributary-new-ca")
    return Rotation(old, new, old.issue(cn), new.issue(cn))
