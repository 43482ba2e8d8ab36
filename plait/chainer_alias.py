"""Serve `chainer` from plait: after `install()`, `import chainer.functions` gives `plait.chainer.functions`.

For programs written for Chainer 1.7.2 (its examples among them), unchanged. Three ways to switch
it on (see plait/_alias.py):

    import plait.chainer_alias; plait.chainer_alias.install()   # before chainer is imported
    PLAIT_AS_CHAINER=1 python train_mnist.py ...
    python -m plait.chainer_alias train_mnist.py ...
"""
from __future__ import annotations

from . import _alias

ALIAS = _alias.register(_alias.Alias("chainer", "plait.chainer", "PLAIT_AS_CHAINER"))

AliasError = _alias.AliasError


# install(): serve the imports from plait in this process (before the real library is imported);
# uninstall(): stop serving new ones; is_installed(); main(argv): the `python -m` runner.
install = ALIAS.install
uninstall = ALIAS.uninstall
is_installed = ALIAS.is_installed
main = ALIAS.main


if __name__ == "__main__":
    raise SystemExit(main())
