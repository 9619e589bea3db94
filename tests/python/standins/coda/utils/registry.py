"""Stand-in for coda.utils.registry.Registry (LoongSage): a named mapping whose register()
is a decorator refusing a name twice and whose get() raises KeyError naming the registry,
the missing name and the names it has."""


class Registry:
    def __init__(self, name):
        self._name = name
        self._items = {}

    def register(self, name):
        def add(obj):
            if name in self._items:
                raise ValueError(f"[{self._name}] '{name}' is already registered.")
            self._items[name] = obj
            return obj
        return add

    def get(self, name):
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"[{self._name}] '{name}' is not registered. Available: "
                           f"{list(self._items)}") from None

    def __contains__(self, name):
        return name in self._items

    def keys(self):
        return list(self._items)
