"""The NATS side of the shell: the connection and its parts (streams, the daemon's consumer, a
publisher), reaching a server, and the embedded nats-server. The only package that talks to
nats-py."""

from .access import NatsAccess, check_credentials, reachable, redacted, servers
from .connection import Bus
from .embedded import EmbeddedNats, free_port, keep_running
from .publisher import Publisher
from .streams import Reader, ReadThrough

__all__ = [
    "Bus",
    "EmbeddedNats",
    "NatsAccess",
    "Publisher",
    "ReadThrough",
    "Reader",
    "check_credentials",
    "free_port",
    "keep_running",
    "reachable",
    "redacted",
    "servers",
]
