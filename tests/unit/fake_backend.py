"""A test backend with every member of the interface (chaos.backends.base.Backend): the members a
test does not define raise, so a call nobody expected fails the test instead of passing unseen."""

from chaos.backends import base


def _unexpected(name: str):
    def call(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__}.{name} was called, which this test does not expect")

    return call


class FakeBackend:
    name = "fake"
    capabilities: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for member in base.members():
            if not hasattr(cls, member):
                setattr(cls, member, _unexpected(member))
