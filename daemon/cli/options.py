"""What several commands take: where the state directory and the log are, how NATS is reached
and secured, and the argument types and parser that refuse with the word meant."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from preemptd.events import PARTITION_PATTERN, DurationError, closest, parse_duration

from ..early import version
from ..errors import UsageError

if TYPE_CHECKING:
    from ..bus import NatsAccess

__all__ = [
    "COMMAND_PARSERS",
    "DEFAULT_STATE_DIR",
    "Parser",
    "Version",
    "at_least",
    "common_options",
    "duration",
    "log_target",
    "nats_access",
    "nats_security_options",
    "nats_url",
    "partitions",
    "port",
    "state_dir",
]

DEFAULT_STATE_DIR = "preemptd-state"


def state_dir(args: argparse.Namespace) -> Path:
    return Path(args.state_dir or os.environ.get("PREEMPTD_STATE_DIR") or DEFAULT_STATE_DIR)


def log_target(args: argparse.Namespace, *, as_written: bool = True) -> str:
    """--db, else (`as_written`) the log the daemon of the state directory wrote it uses (a
    PostgreSQL URL without its password: give it with $PGPASSWORD or ~/.pgpass), else the
    directory's SQLite file."""
    from ..settings import LOG_FILE

    if args.db:
        return args.db
    written = state_dir(args) / LOG_FILE
    if as_written and written.is_file():
        return written.read_text().strip()
    return str(state_dir(args) / "preemptd.db")


def nats_access(args: argparse.Namespace) -> NatsAccess:
    """Credentials and TLS files from the options, else from the environment (secrets such as
    passwords and tokens only from there, or in the URL: never on a command line others see)."""
    from ..bus import NatsAccess

    env = os.environ.get
    return NatsAccess(
        creds=args.nats_creds or env("PREEMPTD_NATS_CREDS"),
        user=env("PREEMPTD_NATS_USER"),
        password=env("PREEMPTD_NATS_PASSWORD"),
        token=env("PREEMPTD_NATS_TOKEN"),
        tls_ca=args.nats_tls_ca or env("PREEMPTD_NATS_TLS_CA"),
        tls_cert=args.nats_tls_cert or env("PREEMPTD_NATS_TLS_CERT"),
        tls_key=args.nats_tls_key or env("PREEMPTD_NATS_TLS_KEY"),
        inbox_prefix=args.nats_inbox_prefix or env("PREEMPTD_NATS_INBOX_PREFIX"),
    )


def nats_url(args: argparse.Namespace) -> str:
    """--nats-url, else $PREEMPTD_NATS_URL, else the URL a local daemon wrote in its state dir."""
    if args.nats_url or os.environ.get("PREEMPTD_NATS_URL"):
        return args.nats_url or os.environ["PREEMPTD_NATS_URL"]
    written = state_dir(args) / "nats.url"
    if written.exists():
        return written.read_text().strip()
    raise UsageError(f"no NATS URL: pass --nats-url, set PREEMPTD_NATS_URL, or start `preemptd run` (it writes {written})")


def duration(text: str, option: str) -> int:
    try:
        milliseconds = parse_duration(text)
    except DurationError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if milliseconds <= 0:
        raise UsageError(f"{option} must be longer than 0s")
    return milliseconds


def at_least(minimum: int, kind=int):
    """An argparse type: a number not below `minimum`."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {text}")
        return value

    return parse


class Version(argparse.Action):
    """`--version`, read from the installed distribution only when asked (importlib.metadata
    costs every other command a fifth of its start)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version())
        parser.exit()


def partitions(text: str) -> tuple[str, ...]:
    """`a,b`: partition names (the contract's), each once."""
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if not re.match(PARTITION_PATTERN, name):
            raise argparse.ArgumentTypeError(f"{name!r} is not a partition name (1-64 letters, digits, _ or -)")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a partition twice")
    return tuple(sorted(names))


def port(text: str) -> int:
    port = at_least(0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0-65535)")
    return port


def common_options(parser: argparse.ArgumentParser, *, nats: bool = False, db: bool = False, archived: bool = False) -> None:
    parser.add_argument("--state-dir", help=f"where the daemon keeps its log and NATS data (default: $PREEMPTD_STATE_DIR or ./{DEFAULT_STATE_DIR})")
    if db:
        parser.add_argument(
            "--db",
            help="the log: a SQLite file or a SQLAlchemy URL (default: STATE_DIR/preemptd.db; the commands that read a log take the one the daemon of "
            "STATE_DIR uses, from STATE_DIR/log.url, without its password: give that with $PGPASSWORD or ~/.pgpass)",
        )
    if archived:
        parser.add_argument(
            "--archive",
            metavar="DIR|URL",
            help="where the log's archived segments are now, if moved since the daemon wrote them (default: where it wrote them)",
        )
    if nats:
        parser.add_argument("--nats-url", help="NATS server (default: $PREEMPTD_NATS_URL, else the local daemon's)")
        nats_security_options(parser)


def nats_security_options(parser: argparse.ArgumentParser) -> None:
    """The options of a secured NATS; user and password or token go in the URL
    (nats://user:password@host) or in $PREEMPTD_NATS_USER, $PREEMPTD_NATS_PASSWORD, $PREEMPTD_NATS_TOKEN."""
    parser.add_argument("--nats-creds", metavar="FILE", help="JWT and nkey credentials file (default: $PREEMPTD_NATS_CREDS)")
    parser.add_argument("--nats-tls-ca", metavar="FILE", help="CA certificates that signed the server's (default: $PREEMPTD_NATS_TLS_CA, else the system's)")
    parser.add_argument("--nats-tls-cert", metavar="FILE", help="client certificate, for a server that verifies clients (default: $PREEMPTD_NATS_TLS_CERT)")
    parser.add_argument("--nats-tls-key", metavar="FILE", help="the client certificate's key (default: $PREEMPTD_NATS_TLS_KEY)")
    parser.add_argument(
        "--nats-inbox-prefix",
        metavar="PREFIX",
        help="where replies come, the user's own where permissions grant each user its inbox (default: $PREEMPTD_NATS_INBOX_PREFIX, else _INBOX)",
    )


_INVALID_CHOICE = re.compile(r"invalid choice: '(.*)' \(choose from (.*)\)$", re.DOTALL)


class Parser(argparse.ArgumentParser):
    """argparse, whose refusal of an unknown command, choice or option names the one meant."""

    def error(self, message: str) -> NoReturn:
        invalid = _INVALID_CHOICE.search(message)
        if invalid is not None:
            near = closest(invalid[1], re.findall(r"'([^']*)'", invalid[2]))
            message += f"; did you mean {near}?" if near else ""
        super().error(message)

    def parse_args(self, args=None, namespace=None):
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = getattr(parsed, "func", None)
            parser = COMMAND_PARSERS.get(command, self)
            known = [option for action in parser._actions if action.help != argparse.SUPPRESS for option in action.option_strings]
            hints = [f"{word} (did you mean {near}?)" if (near := closest(word, known)) else word for word in extra]
            parser.error(f"unrecognized arguments: {' '.join(hints)}")
        return parsed


COMMAND_PARSERS: dict[Any, argparse.ArgumentParser] = {}  # a command's function -> its parser, for its usage
