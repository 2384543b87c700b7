"""The command line: the commands (`main`), what they print (`render`), the client side of
`publish`, `tail` and `dead-letters` (`client`), and the HTML report (`report`)."""

from .main import main

__all__ = ["main"]
