"""The Python examples of README.md and docs/*.md run as written."""
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    pytest.param(code, id=f"{page.name}-{i}")
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf8"), re.S))
]


@pytest.mark.parametrize("code", BLOCKS)
def test_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(code.replace("/tmp/", f"{tmp_path}/"), encoding="utf8")
    runpy.run_path(str(script), run_name="__main__")
