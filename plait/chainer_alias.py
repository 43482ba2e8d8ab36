"""Serve `chainer` from plait: after `install()`, `import chainer.functions` gives `plait.chainer.functions`.

For programs written for Chainer 1.7.2 (its examples among them), unchanged, and with `chainermn`
served by plait.chainermn too (ChainerMN 1.3's API). Three ways to switch it on (see
plait/_alias.py):

    import plait.chainer_alias; plait.chainer_alias.install()   # before chainer is imported
    PLAIT_AS_CHAINER=1 python train_mnist.py ...
    python -m plait.chainer_alias train_mnist.py ...
"""
from __future__ import annotations

from . import _alias

# `chainermn` (plait.chainermn) is served with it: ChainerMN code imports both (plait/chainermn_alias.py).
ALIAS = _alias.register(
    _alias.Alias("chainer", "plait.chainer", "PLAIT_AS_CHAINER", on_install=("plait.chainermn_alias:install",))
)

AliasError = _alias.AliasError


# install(): serve the imports from plait in this process (before the real library is imported);
# uninstall(): stop serving new ones; is_installed(); main(argv): the `python -m` runner.
install = ALIAS.install
uninstall = ALIAS.uninstall
is_installed = ALIAS.is_installed
main = ALIAS.main


if __name__ == "__main__":
    raise SystemExit(main())
