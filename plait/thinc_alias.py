"""Serve `thinc` from plait: after `install()`, `import thinc.api` gives `plait.api`.

For spaCy and other code written for Thinc 8.3, which install thinc as a dependency. Three ways
to switch it on (see plait/_alias.py):

    import plait.thinc_alias; plait.thinc_alias.install()    # first thing, before thinc is imported
    PLAIT_AS_THINC=1 spacy train config.cfg ...               # any process, workers included
    python -m plait.thinc_alias spacy train config.cfg ...

Under the alias, functions that packages register through Thinc's entry-point groups
(`thinc_layers`, `thinc_optimizers`, ...) are found in plait's registries too.
"""
from __future__ import annotations

import sys

from . import _alias

ALIAS = _alias.register(
    _alias.Alias(
        "thinc",
        "plait",
        "PLAIT_AS_THINC",
        # plait's other faces and its own tools are not part of thinc's package.
        excluded=("chainer", "chainermn", "neon", "cli", "datasets", "demo", "thinc_alias", "chainer_alias"),
        on_install=("plait.thinc_alias:_read_thinc_entry_points",),
    )
)


def _read_thinc_entry_points() -> None:
    """Registries also read Thinc's entry-point groups. plait.config checks the alias when it is
    first imported; only an already imported one is told here, so installing the alias (at
    every interpreter start under PLAIT_AS_THINC=1) imports nothing heavy."""
    config = sys.modules.get("plait.config")
    if config is not None:
        config._use_thinc_entry_points()


AliasError = _alias.AliasError


# install(): serve the imports from plait in this process (before the real library is imported);
# uninstall(): stop serving new ones; is_installed(); main(argv): the `python -m` runner.
install = ALIAS.install
uninstall = ALIAS.uninstall
is_installed = ALIAS.is_installed
main = ALIAS.main


if __name__ == "__main__":
    raise SystemExit(main())
