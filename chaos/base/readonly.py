"""Read-only JSON values: what a parsed experiment holds (:mod:`chaos.core.run_spec`, :class:`chaos.core.experiment.Settings`).

:func:`freeze` copies a JSON value with every object a :class:`ReadOnlyDict` and every list a tuple: a write into
it raises ``TypeError``, so a derived value is a new one (:func:`thaw` gives a mutable copy to build it from).
A :class:`ReadOnlyDict` is still a ``dict`` to whoever only reads it: ``json.dumps``, ``dataclasses.asdict``,
``isinstance(x, dict)``, ``==``, ``{**x}``, pickling and ``copy.deepcopy`` see its items as they would a dict's.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["ReadOnlyDict", "freeze", "thaw"]


class ReadOnlyDict(dict):
    """A dict whose items cannot be set, deleted or updated in place (``TypeError``); ``copy()`` and ``|`` give
    plain dicts."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a parsed experiment's value is read-only: build a new one (chaos.base.readonly.thaw)")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):  # pickle and copy rebuild it whole (dict's own way sets its items one by one)
        return (type(self), (dict(self),))


def freeze(value: Any) -> Any:
    """A read-only copy of a JSON value: objects as :class:`ReadOnlyDict`, lists (and tuples) as tuples."""
    if isinstance(value, Mapping):
        return ReadOnlyDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A mutable copy of a frozen JSON value (:func:`freeze`): dicts and lists again."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
