"""Serve `chainer` from plait: after `install()`, `import chainer.functions` gives `plait.chainer.functions`.

For programs written for Chainer 1.7.2 (its examples among them), unchanged. Three ways to switch
it on (see plait/_alias.py):

    import plait.chainer_alias; plait.chainer_alias.install()   # before chainer is imported
    PLAIT_AS_CHAINER=1 python train_mnist.py ...
    python -m plait.chainer_alias train_mnist.py ...
"""
from __future__ import annotations

from typing import List, Optional

from . import _alias

ALIAS = _alias.register(_alias.Alias("chainer", "plait.chainer", "PLAIT_AS_CHAINER"))

AliasError = _alias.AliasError


def install() -> None:
    """Serve `chainer` and `chainer.*` imports from plait.chainer in this process."""
    ALIAS.install()


def uninstall() -> None:
    """Stop serving `chainer` from plait (modules already imported stay as they are)."""
    ALIAS.uninstall()


def is_installed() -> bool:
    return ALIAS.is_installed()


def main(argv: Optional[List[str]] = None) -> int:
    return ALIAS.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
