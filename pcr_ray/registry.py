"""`Registry`: one name -> entry table per extension point, filled by a `@register` decorator (aliases included)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError):
    """A name that no entry of a registry has; the message lists the names it knows."""


class Registry(Generic[T]):
    """Named entries of one extension point (search strategies, generator backends, scorers, baselines, data sources).

    `register(name, *aliases)` is a decorator that stores the object it decorates under `name` and under each
    alias; `get(name)` returns it or raises UnknownNameError listing the known names; `names()` lists the
    canonical names in registration order (aliases left out), the one list every config check and doc test reads.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator: store the decorated object under `name` (and `aliases`); a name taken already is an error."""

        def deco(obj: T) -> T:
            self.add(name, obj, *aliases)
            return obj

        return deco

    def add(self, name: str, obj: T, *aliases: str) -> None:
        """Store `obj` under `name` and `aliases` (what `register` does, without the decorator)."""
        for n in (name, *aliases):
            if n in self:
                raise ValueError(f"{self.what} {n!r} is registered already (to {self.get(n)!r})")
        self._entries[name] = obj
        for a in aliases:
            self._aliases[a] = name

    def remove(self, name: str) -> None:
        """Drop `name` and its aliases (a test that registered a toy entry cleans up with this)."""
        self._entries.pop(self.canonical(name))
        self._aliases = {a: n for a, n in self._aliases.items() if n != name}

    def canonical(self, name: str) -> str:
        """The registered name `name` stands for (itself, or the name an alias points to)."""
        key = self._aliases.get(name, name)
        if key not in self._entries:
            raise UnknownNameError(f"unknown {self.what} {name!r}; known: {', '.join(self.all_names())}")
        return key

    def get(self, name: str) -> T:
        """The entry under `name` or one of its aliases; UnknownNameError (listing the known names) otherwise."""
        return self._entries[self.canonical(name)]

    def names(self) -> tuple[str, ...]:
        """Canonical names in registration order."""
        return tuple(self._entries)

    def aliases(self) -> dict[str, str]:
        """alias -> canonical name."""
        return dict(self._aliases)

    def all_names(self) -> tuple[str, ...]:
        """Canonical names, then aliases: every name `get` accepts."""
        return self.names() + tuple(self._aliases)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names())})"


def import_submodules(package: ModuleType, skip: Iterable[str] = ()) -> list[str]:
    """Import every module of `package` (not sub-packages' modules; those in `skip` left out), in name order.

    A package whose modules register entries calls this from its `__init__`, so that a new module is registered
    by being there: adding a search strategy, a generator backend, a baseline or a data source touches its own
    file (and a config), never a list of imports. Returns the module names imported.
    """
    left_out = set(skip)
    names = [m.name for m in pkgutil.iter_modules(package.__path__)
             if not m.ispkg and not m.name.startswith("_") and m.name not in left_out]
    for name in names:
        importlib.import_module(f"{package.__name__}.{name}")
    return names
