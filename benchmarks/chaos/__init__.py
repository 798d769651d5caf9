"""The chaos soak: the real ``workload serve`` under load while processes and PostgreSQL break.

``python -m benchmarks.chaos`` (the ``chaos`` nox session) owns everything it touches: a
PostgreSQL cluster from the Debian binaries (:mod:`.cluster`), the service and the supervisor
that restarts it (:mod:`.service`), four client threads that start and cancel runs with
idempotency keys (:mod:`.load`), a schedule of faults with their windows (:mod:`.faults`), and
after a drain, the checks of what the database and the API hold (:mod:`.verify`), summed up as
one JSON object on stdout (:mod:`.report`). :mod:`.settings` holds every knob and the workflows.
See ``docs/chaos.md``.
"""
