"""What an operator watches: the daemon's logs (`logs`) and its metrics, `/healthz` and
`/readyz` (`metrics`)."""
