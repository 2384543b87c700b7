"""The log: the database that keeps every event, tick and decision in order (`store`), reached
through `database`; the writer's lease of a PostgreSQL log (`lease`) and the lock of a SQLite
one (`lock`); the state rebuilt from it (`history`); decisions and rejection notices published
from it (`outbox`). The only package that talks to SQLAlchemy."""
