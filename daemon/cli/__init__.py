"""The command line: the parser and dispatch (`main`), one module per command (`commands/`),
the options several share (`options`), what they print (`render`), the stories `explain` tells
(`stories`), the client side of `publish`, `tail` and `try` (`client`), and the HTML report
(`page`)."""

from .main import main

__all__ = ["main"]
