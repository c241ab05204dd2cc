"""A test backend with every member of the interface (chaos.backends.base.Backend): the members a
test does not define raise, so a call nobody expected fails the test instead of passing unseen. Its
scopes are the ones a test registers (``implementations``, as a real backend's: plan and effect_checks
go to them); it registers none."""

from chaos.backends import base


def _unexpected(name: str):
    def call(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__}.{name} was called, which this test does not expect")

    return call


class FakeBackend(base.ByScope):
    name = "fake"
    capabilities: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for member in base.members():
            if not hasattr(cls, member):
                setattr(cls, member, _unexpected(member))


class OneProxyBackend(FakeBackend):
    """A fake whose one Serve proxy is a loopback port (``self.port``, set by the subclass): what the run
    core asks of a backend's targets, answered for it."""

    port: int

    def targets(self):
        return [("worker-a", f"http://127.0.0.1:{self.port}", "zone-a", "region-1")]

    def head_target(self):
        return ("head", f"http://127.0.0.1:{self.port}", None, None)

    def own_hosts(self):
        return ()

    def describe(self):
        return {"backend": "fake"}

    def front_door(self):
        return {"shape": "direct", "what": "the client sends to the one proxy itself"}

    def prepare(self, run_id, scope, faults=None):
        self.run_id = run_id

    def graceful_shutdown(self):
        return {}

    def topology_doc(self):
        return {}

