"""Alembic environment: the caller passes an open connection in `config.attributes`.

preemptd runs migrations from its own code (`daemon.log.store`), on the async engine's connection,
so there is no alembic.ini and no URL here.
"""

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `preemptd db upgrade`, which passes the connection")

context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
