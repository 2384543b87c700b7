"""A secured NATS: TLS, a user and password, JWT credentials, several servers. The bundled
nats-server is started with each, the certificates and credentials made in the test; the
daemon, `publish` and `tail` run as a user runs them, and no secret appears in what they print."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
from pathlib import Path

import nats
import pytest
from conftest import ROOT, preemptd
from secured_nats import PASSWORD, USER, operator_server, tls_files, tls_password_server

from preemptd.daemon.bus import NatsAccess, redacted, servers
from preemptd.daemon.bus.embedded import EmbeddedNats, free_port
from preemptd.daemon.errors import BusError

pytestmark = pytest.mark.slow

EVENTS = "- {type: node.upserted, node: n1, capacity: {vcore: 4}}\n- {type: task.submitted, task: t1, app: a1, queue: root.default, resources: {vcore: 1}}\n"


def publish_and_tail(tmp_path: Path, url: str, *options: str, env: dict[str, str] | None = None) -> list[dict]:
    """Publish two events, then the decision they make, through `url` with `options`."""
    events = tmp_path / "events.yaml"
    events.write_text(EVENTS)
    published = preemptd("publish", str(events), "--nats-url", url, *options, env=env)
    assert published.returncode == 0, published.stderr
    tail = preemptd("tail", "--json", "--from-start", "--count", "1", "--timeout", "30", "--nats-url", url, *options, env=env)
    assert tail.returncode == 0, tail.stderr
    return [json.loads(line) for line in tail.stdout.splitlines()]


def one_line_refusal(result, *said: str) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for words in said:
        assert words in lines[0]
    return lines[0]


@pytest.fixture
def tls_server(tmp_path: Path):
    tls = tls_files(tmp_path / "tls")
    with tls_password_server(tmp_path, tls) as server:
        yield server, tls


def test_a_daemon_on_a_tls_server_with_a_password_decides_and_never_shows_the_password(tls_server, daemon_factory, tmp_path: Path) -> None:
    server, tls = tls_server
    daemon = daemon_factory("--nats-url", f"tls://{USER}:{PASSWORD}@127.0.0.1:{server.port}", "--nats-tls-ca", str(tls.ca)).start()
    assert daemon.url == f"tls://***@127.0.0.1:{server.port}"
    decisions = publish_and_tail(
        tmp_path, f"tls://127.0.0.1:{server.port}", "--nats-tls-ca", str(tls.ca), env={"PREEMPTD_NATS_USER": USER, "PREEMPTD_NATS_PASSWORD": PASSWORD}
    )
    assert [(d["type"], d["task"]) for d in decisions] == [("decision.allocated", "t1")]
    assert daemon.stop() == 0
    assert PASSWORD not in daemon.log_text() and PASSWORD not in (daemon.state_dir / "nats.url").read_text()


def test_a_wrong_password_is_a_one_line_refusal_that_does_not_repeat_it(tls_server, tmp_path: Path) -> None:
    server, tls = tls_server
    wrong = {"PREEMPTD_NATS_USER": USER, "PREEMPTD_NATS_PASSWORD": "not-the-password"}
    tail = preemptd("tail", "--timeout", "5", "--nats-url", f"tls://127.0.0.1:{server.port}", "--nats-tls-ca", str(tls.ca), env=wrong)
    line = one_line_refusal(tail, "refused the connection: authorization violation")
    assert "not-the-password" not in line
    run = preemptd(
        "run", "--state-dir", str(tmp_path / "state"), "--nats-url", f"tls://{USER}:not-the-password@127.0.0.1:{server.port}", "--nats-tls-ca", str(tls.ca)
    )
    assert run.returncode == 2, run.stderr
    refusal = run.stderr.strip().splitlines()[-1]  # after the daemon's log of its start
    assert refusal.startswith(f"preemptd: NATS at tls://***@127.0.0.1:{server.port} refused the connection: authorization violation")
    assert "not-the-password" not in run.stderr


def test_a_certificate_from_another_ca_or_no_tls_is_a_one_line_refusal(tls_server) -> None:
    server, tls = tls_server
    password = {"PREEMPTD_NATS_USER": USER, "PREEMPTD_NATS_PASSWORD": PASSWORD}
    other = preemptd("tail", "--timeout", "5", "--nats-url", f"tls://127.0.0.1:{server.port}", "--nats-tls-ca", str(tls.other_ca), env=password)
    one_line_refusal(other, "TLS:", "check --nats-tls-ca")
    plain = preemptd("tail", "--timeout", "5", "--nats-url", f"nats://127.0.0.1:{server.port}", env=password)
    one_line_refusal(plain, "TLS:")


def test_credentials_files_authenticate_the_daemon_and_the_shims(daemon_factory, tmp_path: Path) -> None:
    operator = operator_server(tmp_path / "operator")
    with operator.server as server:
        daemon = daemon_factory("--nats-url", server.url, "--nats-creds", str(operator.creds)).start()
        decisions = publish_and_tail(tmp_path, server.url, "--nats-creds", str(operator.creds))
        assert [(d["type"], d["task"]) for d in decisions] == [("decision.allocated", "t1")]
        stranger = preemptd("tail", "--timeout", "5", "--nats-url", server.url, "--nats-creds", str(operator.stranger_creds))
        one_line_refusal(stranger, "refused the connection: authorization violation")
        anonymous = preemptd("tail", "--timeout", "5", "--nats-url", server.url)
        one_line_refusal(anonymous, "refused the connection")
        garbage = tmp_path / "not.creds"
        garbage.write_text("not a credentials file\n")
        for command in ("tail", "run"):
            wrong = preemptd(command, "--nats-url", server.url, "--nats-creds", str(garbage), "--state-dir", str(tmp_path / "other"))
            one_line_refusal(wrong, f"--nats-creds {garbage}: not a NATS credentials file: it lacks the user JWT and the nkey seed")
        assert daemon.stop() == 0


def test_the_first_server_of_a_list_that_answers_is_used(nats_server: EmbeddedNats, daemon_factory, tmp_path: Path) -> None:
    cluster = f"nats://127.0.0.1:{free_port()},{nats_server.url}"
    daemon = daemon_factory("--nats-url", cluster).start()
    assert daemon.url == cluster
    assert [d["task"] for d in publish_and_tail(tmp_path, cluster)] == ["t1"]
    assert daemon.stop() == 0
    nobody = preemptd("tail", "--nats-url", f"nats://127.0.0.1:{free_port()},nats://127.0.0.1:{free_port()}")
    one_line_refusal(nobody, "cannot connect to NATS at", "connection refused at", "; connection refused at")


def test_credentials_for_the_bundled_server_are_refused(tmp_path: Path) -> None:
    run = preemptd("run", "--state-dir", str(tmp_path / "state"), "--nats-creds", str(tmp_path / "user.creds"))
    one_line_refusal(run, "--nats-creds is for a NATS server of your own (--nats-url)")
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://user:secret@host:4222", "nats://***@host:4222"),
        ("tls://token@host", "tls://***@host"),
        ("nats://a:1, nats://u:p@b:2", "nats://a:1,nats://***@b:2"),
        ("host:4222", "host:4222"),
    ],
)
def test_secrets_in_a_url_are_never_shown(url: str, shown: str) -> None:
    assert redacted(url) == shown
    assert len(servers(url)) == shown.count(",") + 1


def test_an_unreadable_credentials_file_is_named() -> None:
    with pytest.raises(BusError, match="--nats-creds /nonexistent.creds: No such file or directory"):
        NatsAccess(creds="/nonexistent.creds").options("nats://host:4222")


def test_a_server_that_is_not_nats_is_a_one_line_refusal() -> None:
    with socket.socket() as silent:  # accepts connections and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        tail = preemptd("tail", "--timeout", "5", "--nats-url", f"nats://127.0.0.1:{silent.getsockname()[1]}")
    one_line_refusal(tail, "cannot connect to NATS at", "(is it a NATS server?)")


def test_a_token_from_the_environment_or_the_url_is_taken_and_a_wrong_one_refused(tmp_path: Path) -> None:
    conf = tmp_path / "token.conf"
    conf.write_text('authorization { token: "t0ken-s3cret" }\n')
    with EmbeddedNats(tmp_path / "nats", options=["-c", str(conf)]) as server:
        address = server.url.removeprefix("nats://")
        for url, env in ((server.url, {"PREEMPTD_NATS_TOKEN": "t0ken-s3cret"}), (f"nats://t0ken-s3cret@{address}", {})):
            tail = preemptd("tail", "--timeout", "1", "--nats-url", url, env=env)
            assert tail.returncode == 0, tail.stderr
        wrong = preemptd("tail", "--timeout", "1", "--nats-url", f"nats://not-it@{address}")
        line = one_line_refusal(wrong, f"NATS at nats://***@{address} refused the connection: authorization violation")
        assert "not-it" not in line


def test_a_password_rotated_under_a_running_daemon_is_said_not_retried_in_silence(daemon_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a rotation the daemon reconnected for ever without a word: now it says that NATS
    refuses it, and asks whether the credentials changed."""
    port = free_port()

    def server(password: str) -> EmbeddedNats:
        conf = tmp_path / f"{password}.conf"
        conf.write_text(f'authorization {{ user: {USER}, password: "{password}" }}\n')
        return EmbeddedNats(tmp_path / "nats", port=port, options=["-c", str(conf)])

    monkeypatch.setenv("PREEMPTD_NATS_USER", USER)
    monkeypatch.setenv("PREEMPTD_NATS_PASSWORD", "old-secret")
    with server("old-secret"):
        daemon = daemon_factory("--nats-url", f"nats://127.0.0.1:{port}", state_dir=tmp_path / "state").start()
    with server("new-secret"):
        deadline = time.monotonic() + 30
        while "NATS refuses to let the daemon reconnect: were its credentials changed (a password rotation)?" not in daemon.log_text():
            assert time.monotonic() < deadline, daemon.log_text()[-2000:]
            time.sleep(0.2)
        assert "old-secret" not in daemon.log_text()
    daemon.stop()


# -- who may do what: the permissions docs/operating.md gives, as written ---------------------------


def readme_permissions() -> str:
    """The nats-server configuration of docs/operating.md, under "Who may do what"."""
    return (ROOT / "docs" / "operating.md").read_text().split("```conf\n", 1)[1].split("```", 1)[0]


ROLES = {"preemptd": "daemon-pa55", "shim": "shim-pa55", "alice": "alice-pa55"}


def as_user(user: str, *inbox: str) -> dict[str, str]:
    return {"PREEMPTD_NATS_USER": user, "PREEMPTD_NATS_PASSWORD": ROLES[user], **({"PREEMPTD_NATS_INBOX_PREFIX": inbox[0]} if inbox else {})}


def test_the_readmes_permissions_let_each_role_do_its_part_and_no_more(daemon_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the askers' permissions docs/operating.md gave (subscribe `_INBOX.>`), an asker read every
    reply on the server, others' answers and JetStream's acknowledgements, and could aim a
    query's answer at the daemon's inbox. Each user now has an inbox of its own."""
    for user, password in ROLES.items():
        monkeypatch.setenv(f"{user.upper()}_PASSWORD", password)
    conf = tmp_path / "server.conf"
    conf.write_text(readme_permissions())
    with EmbeddedNats(tmp_path / "nats", options=["-c", str(conf)]) as server:
        for name, value in as_user("preemptd", "_INBOX_preemptd").items():
            monkeypatch.setenv(name, value)
        daemon = daemon_factory("--nats-url", server.url).start()
        for name in as_user("preemptd", "_INBOX_preemptd"):
            monkeypatch.delenv(name)
        [decision] = publish_and_tail(tmp_path, server.url, env=as_user("shim", "_INBOX_shim"))
        assert decision["type"] == "decision.allocated" and decision["task"] == "t1"

        query = tmp_path / "query.yaml"
        query.write_text("- {type: task.submitted, task: q, app: q, queue: root.default, resources: {vcore: 1}}\n")
        asked = preemptd("try", str(query), "--nats-url", server.url, env=as_user("alice", "_INBOX_alice"))
        assert asked.returncode == 0 and "q would be allocated on n1" in asked.stdout, asked.stderr
        refused = preemptd("try", str(query), "--nats-url", server.url, env=as_user("alice"))
        one_line_refusal(refused, "NATS refused these credentials the subscription their answer comes to", "--nats-inbox-prefix")

        async def snoop() -> list[str]:
            """What NATS says when alice reads beyond her inbox, or aims an answer at the cluster's events."""
            denied: list[str] = []

            async def noted(exc: Exception) -> None:
                denied.append(str(exc))

            nc = await nats.connect(server.url, user="alice", password=ROLES["alice"], inbox_prefix="_INBOX_alice", error_cb=noted)
            for subject in ("_INBOX.>", "_INBOX_shim.>", "_INBOX_preemptd.>"):
                await nc.subscribe(subject)
            await nc.publish("preemptd.try.default", query.read_text().encode(), reply="preemptd.cluster.default.task")
            await nc.flush()
            await asyncio.sleep(1)
            await nc.close()
            return denied

        denied = asyncio.run(snoop())
        assert sorted(said.split('"')[1] for said in denied) == ["_inbox.>", "_inbox_preemptd.>", "_inbox_shim.>"], denied
        time.sleep(1)
        assert daemon.stop() == 0
        with sqlite3.connect(daemon.state_dir / "preemptd.db") as db:
            records = db.execute("select type from log order by seq").fetchall() + db.execute("select reason from dead_letters").fetchall()
        assert [kind for (kind,) in records] == ["node.upserted", "task.submitted", "clock.ticked", "decision.allocated"], (
            "the answer aimed at the cluster's events went nowhere"
        )


class _Arrived:
    """A message as nats-py hands it to a subscription's callback: data and headers."""

    def __init__(self, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.data, self.headers = data, headers


@pytest.mark.parametrize(
    ("data", "headers", "taken"),
    [
        (b'{"stream": "PREEMPTD_DECISIONS", "seq": 7}', None, True),
        (b'{"stream": "PREEMPTD_DECISIONS", "seq": 7, "duplicate": true}', None, True),
        (b'{"error": {"code": 503, "err_code": 10077, "description": "maximum messages exceeded"}}', None, True),
        (b"", {"Status": "503"}, True),  # no responders: no stream takes the subject
        (b'{"refused": "busy: 2 queries are being answered"}', None, False),  # a query's answer aimed at the inbox
        (b'{"seq": 7}', None, False),
        (b'{"stream": "PREEMPTD_DECISIONS", "seq": 0}', None, False),
        (b'{"error": "no"}', None, False),
        (b"", None, False),
        (b"not json", None, False),
    ],
)
def test_only_jetstreams_answers_count_as_acknowledgements(data: bytes, headers: dict | None, taken: bool) -> None:
    """A query's reply subject aimed at the daemon's acknowledgement inbox made the publisher
    take a refusal for JetStream's acknowledgement of a decision."""
    from preemptd.daemon.bus.publisher import _from_jetstream

    assert _from_jetstream(_Arrived(data, headers)) is taken
