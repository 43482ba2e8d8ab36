"""Serve another library's module names from plait: `thinc.X` -> `plait.X`, `chainer.X` -> `plait.chainer.X`.

An `Alias` is an import hook (a meta-path finder) that answers imports of the aliased top-level
package and its submodules with plait's modules, the very same module objects: after
`install()`, `import thinc.api` gives `plait.api`, and `thinc.api is plait.api`. It is opt-in and
process-wide; `plait.thinc_alias` and `plait.chainer_alias` are its two instances, each usable as

* `plait.thinc_alias.install()` from Python (before anything imports the real library),
* an environment variable (`PLAIT_AS_THINC=1`, `PLAIT_AS_CHAINER=1`) read at interpreter start by
  the `plait-aliases.pth` hook that plait installs (a no-op while the variable is unset),
* `python -m plait.thinc_alias COMMAND ARGS...`, which installs the alias and then runs COMMAND
  (a console script such as `spacy`, a module given as `-m module`, or a Python file).

The real library, when it is installed, is left alone on disk; the alias only wins the import.
Installing refuses, with an error saying what to do, if the real library was already imported in
the process (two copies of a library's classes in one process break isinstance checks).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import threading
from types import ModuleType
from typing import Dict, FrozenSet, List, Optional, Sequence

_TRUE = {"1", "true", "yes", "on"}
_WARNED: set = set()


class AliasError(ImportError):
    """The alias cannot be installed (the real library is already imported) or cannot serve a name."""


class _AliasLoader(importlib.abc.Loader):
    """Hands out an already imported plait module under the aliased name."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        # The plait module ran when it was imported under its own name. The import system has
        # just stamped the aliased spec on it: give it back its own, or every relative import
        # it makes later would see __spec__.parent ("thinc") differ from __package__ ("plait")
        # and raise ImportWarning (an error under python -W error).
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class Alias(importlib.abc.MetaPathFinder):
    """Import `alias` and `alias.X` as `target` and `target.X`."""

    def __init__(
        self,
        alias: str,
        target: str,
        env_var: str,
        *,
        excluded: Sequence[str] = (),
        on_install: Sequence[str] = (),
    ) -> None:
        self.alias = alias
        self.target = target
        self.env_var = env_var
        # plait subpackages that the aliased library does not have (e.g. thinc.chainer).
        self.excluded: FrozenSet[str] = frozenset(excluded)
        # "module:function" hooks run once after installing (e.g. extra registry entry points).
        self.on_install = tuple(on_install)
        self._lock = threading.Lock()

    # --- the finder -------------------------------------------------------------------------

    def _target_name(self, fullname: str) -> Optional[str]:
        if fullname == self.alias:
            return self.target
        prefix = self.alias + "."
        if not fullname.startswith(prefix):
            return None
        rest = fullname[len(prefix):]
        if rest.split(".", 1)[0] in self.excluded:
            return None
        return f"{self.target}.{rest}"

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> Optional[importlib.machinery.ModuleSpec]:
        target_name = self._target_name(fullname)
        if target_name is None:
            if fullname.startswith(self.alias + ".") and self.is_installed():
                # An excluded plait subpackage: without this, the path finder would find it in
                # plait's directory and load a second copy under the aliased name.
                raise ModuleNotFoundError(
                    f"No module named {fullname!r} (plait serves '{self.alias}', which has no such module)",
                    name=fullname,
                )
            return None
        try:
            module = importlib.import_module(target_name)
        except ModuleNotFoundError as err:
            if err.name != target_name:
                raise
            return None  # plait has no such module: the import fails as it would for a missing one
        is_package = hasattr(module, "__path__")
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(module), is_package=is_package)
        if is_package:
            spec.submodule_search_locations = list(module.__path__)
        return spec

    # --- switching it on --------------------------------------------------------------------

    def is_installed(self) -> bool:
        return any(finder is self for finder in sys.meta_path)

    def _real_library_loaded(self) -> Optional[str]:
        """The file of an already imported real `alias` package, if one is loaded."""
        module = sys.modules.get(self.alias)
        if module is None:
            return None
        name = getattr(module, "__name__", "")
        if name == self.target or name.startswith(self.target + "."):
            return None
        return getattr(module, "__file__", None) or repr(module)

    def install(self) -> None:
        """Serve `alias.*` imports from plait in this process (idempotent)."""
        with self._lock:
            if self.is_installed():
                return
            loaded = self._real_library_loaded()
            if loaded is not None:
                raise AliasError(
                    f"Cannot serve '{self.alias}' from plait: the real {self.alias} is already imported "
                    f"in this process (from {loaded}). Install the alias before anything imports "
                    f"{self.alias}: call plait.{self.alias}_alias.install() first, set {self.env_var}=1 in "
                    f"the environment, or run `python -m plait.{self.alias}_alias ...`."
                )
            sys.meta_path.insert(0, self)
        for hook in self.on_install:
            module_name, func_name = hook.split(":")
            getattr(importlib.import_module(module_name), func_name)()

    def uninstall(self) -> None:
        """Stop serving new `alias.*` imports; modules already imported keep their names."""
        with self._lock:
            sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]
            for name in list(sys.modules):
                if name == self.alias or name.startswith(self.alias + "."):
                    if self._target_name(name) is not None:
                        module = sys.modules[name]
                        if getattr(module, "__name__", "") == self._target_name(name):
                            del sys.modules[name]

    def install_from_env(self) -> bool:
        """install() when the environment variable is set to a true value; returns whether it did."""
        value = os.environ.get(self.env_var, "").strip().lower()
        if value not in _TRUE:
            if value not in ("", "0", "false", "no", "off") and self.env_var not in _WARNED:
                # Some interpreters run site-packages' .pth files twice: say it once.
                _WARNED.add(self.env_var)
                sys.stderr.write(
                    f"plait: ignoring {self.env_var}={os.environ[self.env_var]!r}: use 1 to serve "
                    f"'{self.alias}' from plait, or unset it.\n"
                )
            return False
        self.install()
        return True

    # --- python -m plait.X_alias COMMAND ... ------------------------------------------------

    def main(self, argv: Optional[List[str]] = None) -> int:
        """Install the alias, then run a console script, `-m module` or a script file with its args."""
        args = list(sys.argv[1:] if argv is None else argv)
        usage = (
            f"usage: python -m plait.{self.alias}_alias COMMAND [ARGS...]\n"
            f"       python -m plait.{self.alias}_alias -m MODULE [ARGS...]\n"
            f"       python -m plait.{self.alias}_alias SCRIPT.py [ARGS...]\n"
            f"Runs the command with '{self.alias}' served by plait (as {self.env_var}=1 does)."
        )
        if not args or args[0] in ("-h", "--help"):
            print(usage)
            return 0 if args else 2
        # Child processes the command starts (spaCy's workers, a multiprocessing pool) get the alias too.
        os.environ[self.env_var] = "1"
        self.install()
        if args[0] == "-m":
            if len(args) < 2:
                sys.stderr.write(usage + "\n")
                return 2
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
            return 0
        if args[0].endswith(".py") or os.path.sep in args[0]:
            if not os.path.exists(args[0]):
                sys.stderr.write(f"plait.{self.alias}_alias: no such script: {args[0]}\n")
                return 2
            sys.argv = list(args)
            # As `python SCRIPT.py` does: the script's folder comes first on sys.path, so the
            # modules beside it (Chainer's examples import their own data.py and net.py) import.
            sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
            runpy.run_path(args[0], run_name="__main__")
            return 0
        return _run_console_script(args[0], args[1:], f"plait.{self.alias}_alias")


def _run_console_script(name: str, args: List[str], where: str) -> int:
    from importlib.metadata import entry_points

    matches = [ep for ep in entry_points(group="console_scripts") if ep.name == name]
    if not matches:
        sys.stderr.write(
            f"{where}: no console script named {name!r} is installed in this environment "
            f"(use `-m MODULE` to run a module, or give a .py file).\n"
        )
        return 2
    sys.argv = [name, *args]
    result = matches[0].load()()
    if isinstance(result, int):
        return result
    return 0 if result is None else 1


_ALIASES: Dict[str, Alias] = {}


def get(alias: str) -> Alias:
    return _ALIASES[alias]


def register(alias: Alias) -> Alias:
    _ALIASES[alias.alias] = alias
    return alias


def install_from_env() -> None:
    """The .pth hook's entry: install each alias whose environment variable is set.

    Never raises: an interpreter must start even if an alias cannot be installed; the reason is
    printed instead.
    """
    for module in ("plait.thinc_alias", "plait.chainer_alias", "plait.neon_alias"):
        try:
            importlib.import_module(module).ALIAS.install_from_env()
        except Exception as err:  # pragma: no cover - reported, not raised, at interpreter start
            sys.stderr.write(f"plait: could not install the alias of {module}: {err}\n")
