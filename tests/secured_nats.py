"""Secured nats-servers for tests, made in the test: TLS with certificates from a CA of its own
(trustme), a user and password, and operator mode with JWT credentials signed here (nkeys)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import nkeys
import trustme

from preemptd.daemon.bus.embedded import EmbeddedNats

USER, PASSWORD = "shim", "s3cret-pa55"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA that signed the server's certificate
    other_ca: Path  # one that did not
    cert: Path
    key: Path


def tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(directory / "ca.pem", directory / "other-ca.pem", directory / "server.pem", directory / "server-key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    other.cert_pem.write_to_path(str(files.other_ca))
    server.cert_chain_pems[0].write_to_path(str(files.cert))
    server.private_key_pem.write_to_path(str(files.key))
    return files


def tls_password_server(directory: Path, tls: TlsFiles) -> EmbeddedNats:
    """A server that speaks TLS only and takes one user and password."""
    conf = directory / "tls-password.conf"
    conf.write_text(f'tls {{ cert_file: "{tls.cert}", key_file: "{tls.key}" }}\nauthorization {{ user: {USER}, password: "{PASSWORD}" }}\n')
    return EmbeddedNats(directory / "nats", options=["-c", str(conf)])


# -- operator mode: JWTs signed here ----------------------------------------------------------------


def _keypair(prefix: int) -> tuple[nkeys.KeyPair, bytes]:
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    return nkeys.from_seed(bytearray(seed)), seed


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(issuer: nkeys.KeyPair, subject: nkeys.KeyPair, kind: str, claims: dict) -> str:
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = {"iat": 1, "iss": issuer.public_key.decode(), "name": kind, "sub": subject.public_key.decode(), "nats": {"type": kind, "version": 2, **claims}}
    body["jti"] = base64.b32encode(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()).decode().rstrip("=")
    signed = f"{header}.{_b64(json.dumps(body).encode())}"
    return f"{signed}.{_b64(issuer.sign(signed.encode()))}"


def _creds(account: nkeys.KeyPair, path: Path) -> Path:
    user, seed = _keypair(nkeys.PREFIX_BYTE_USER)
    token = _jwt(account, user, "user", {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1})
    path.write_text(
        f"-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n"
    )
    return path


@dataclass(frozen=True)
class Operator:
    server: EmbeddedNats
    creds: Path  # a user of the server's account
    stranger_creds: Path  # a user of an account the server does not know


def operator_server(directory: Path) -> Operator:
    """A server in operator mode (a memory resolver) with one account that may use JetStream."""
    directory.mkdir(parents=True, exist_ok=True)
    operator, _ = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    account, _ = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    system, _ = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    stranger, _ = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    unlimited = {"subs": -1, "conn": -1, "leaf": -1, "imports": -1, "exports": -1, "data": -1, "payload": -1, "wildcards": True}
    jetstream = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    conf = directory / "operator.conf"
    conf.write_text(
        f'operator: "{_jwt(operator, operator, "operator", {"system_account": system.public_key.decode()})}"\n'
        f'system_account: "{system.public_key.decode()}"\n'
        "resolver: MEMORY\n"
        "resolver_preload: {\n"
        f'  {account.public_key.decode()}: "{_jwt(operator, account, "account", {"limits": {**unlimited, **jetstream}})}"\n'
        f'  {system.public_key.decode()}: "{_jwt(operator, system, "account", {"limits": unlimited})}"\n'
        "}\n"
    )
    server = EmbeddedNats(directory / "nats", options=["-c", str(conf)])
    return Operator(server, _creds(account, directory / "user.creds"), _creds(stranger, directory / "stranger.creds"))
