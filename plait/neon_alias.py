"""Serve `neon` from plait: after `install()`, `from neon.backends import gen_backend` gives plait's.

For programs written against neon 2.x's backend API, unchanged. Three ways to switch it on
(see plait/_alias.py):

    import plait.neon_alias; plait.neon_alias.install()   # before neon is imported
    PLAIT_AS_NEON=1 python my_script.py ...
    python -m plait.neon_alias my_script.py ...

`neon` is plait.neon (so `neon.NervanaObject` is plait's), `neon.backends` its package of the
same name, and `neon.backends.backend`, `.nervanacpu` and `.autodiff` the modules of those names.
Only the backend API is served: neon's layers, models and data loaders are not part of plait.
"""
from __future__ import annotations

from . import _alias

ALIAS = _alias.register(_alias.Alias("neon", "plait.neon", "PLAIT_AS_NEON"))

AliasError = _alias.AliasError

install = ALIAS.install
uninstall = ALIAS.uninstall
is_installed = ALIAS.is_installed
main = ALIAS.main


if __name__ == "__main__":
    raise SystemExit(main())
