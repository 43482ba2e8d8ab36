"""Serve `chainermn` from plait: after `install()`, `import chainermn` gives `plait.chainermn`.

For data-parallel programs written for ChainerMN 1.3 on Chainer, unchanged. ChainerMN code also
imports `chainer`, so this alias and plait.chainer_alias go together: installing either installs
both, and the same switches turn them on (see plait/_alias.py):

    import plait.chainermn_alias; plait.chainermn_alias.install()   # before chainer(mn) is imported
    PLAIT_AS_CHAINER=1 mpiexec -n 2 python train_mnist.py ...
    mpiexec -n 2 python -m plait.chainermn_alias train_mnist.py ...
"""
from __future__ import annotations

from . import _alias

ALIAS = _alias.register(
    _alias.Alias("chainermn", "plait.chainermn", "PLAIT_AS_CHAINER", on_install=("plait.chainer_alias:install",))
)

AliasError = _alias.AliasError

install = ALIAS.install
uninstall = ALIAS.uninstall
is_installed = ALIAS.is_installed
main = ALIAS.main


if __name__ == "__main__":
    raise SystemExit(main())
