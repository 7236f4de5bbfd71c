"""Per-target machine constants, loaded from `isa/arch/<target>.toml`."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = ["Arch", "load_arch", "TARGETS"]

_DIR = Path(__file__).parent / "arch"
TARGETS = tuple(sorted(p.stem for p in _DIR.glob("*.toml")))


class Arch:
    """Flat, read-only view of a target's constants: `arch.tile_pmax`, `arch["sbuf_partitions"]`.

    Keys are `<section>_<key>` so that constraint helpers can name a limit by string.
    """

    def __init__(self, raw: dict[str, Any]):
        self.name: str = raw["name"]
        self.nc_version: int = raw["nc_version"]
        flat: dict[str, Any] = {}
        for section, values in raw.items():
            if isinstance(values, dict):
                for key, value in values.items():
                    flat[f"{section}_{key}"] = value
        self._values = flat
        # Plain attributes too: the constants are read in every instruction's checks and
        # costs, and an instance attribute is read without calling __getattr__.
        self.__dict__.update((k, v) for k, v in flat.items() if not hasattr(Arch, k))

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(
                f"arch {self.__dict__.get('name')!r} has no constant {key!r}"
            ) from None

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def keys(self) -> list[str]:
        return sorted(self._values)

    def clock_ghz(self, engine: str) -> float:
        return float(self._values[f"clock_ghz_{engine}"])

    def __repr__(self) -> str:
        return f"Arch({self.name!r})"


@functools.lru_cache(maxsize=None)
def load_arch(target: str) -> Arch:
    path = _DIR / f"{target}.toml"
    if not path.is_file():
        raise KeyError(target)
    with path.open("rb") as f:
        return Arch(tomllib.load(f))
