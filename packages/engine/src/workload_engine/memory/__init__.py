"""The in-memory ``Store``: the PostgreSQL store's contract in process memory (tests, run-local).

Its parts match ``workload_store_postgres``'s one for one (see :mod:`.store`); the one contract
suite (``tests/contract``) runs against both.
"""

from workload_engine.memory.store import InMemoryStore, StoreIntegrityError

__all__ = ["InMemoryStore", "StoreIntegrityError"]
