"""The imperative shell: the NATS connection and embedded nats-server, the SQLite log, the
anyio actors of `preemptd run`, and the CLI. The only place with I/O, clocks and files."""
