"""Stand-in for nemo_gym.sandbox.providers.registry: explicit registrations, then entry
points of group nemo_gym.sandbox_providers; create_provider takes a one-key mapping."""
from importlib.metadata import entry_points

GROUP = "nemo_gym.sandbox_providers"
_REGISTERED = {}


def register_provider(name, cls, *, override=False):
    if not name:
        raise ValueError("Provider name must be non-empty")
    if name in _REGISTERED and not override:
        raise ValueError(f"Sandbox provider {name!r} is already registered")
    _REGISTERED[name] = cls


def _eps():
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def list_providers():
    return sorted(set(_REGISTERED) | set(_eps()))


def get_provider_class(name):
    if name in _REGISTERED:
        return _REGISTERED[name]
    ep = _eps().get(name)
    if ep is None:
        raise ValueError(f"Unknown sandbox provider {name!r}. Available providers: "
                         f"{', '.join(list_providers()) or '<none>'}")
    return ep.load()


def create_provider(config):
    if len(config) != 1:
        raise ValueError("Sandbox provider config must contain exactly one provider name")
    (name, kwargs), = config.items()
    return get_provider_class(name)(**dict(kwargs or {}))
