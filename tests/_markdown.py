"""Reading the Markdown tables that the bench scripts print, for their smoke tests."""


def table_after(out, marker):
    """(header, rows) of the first Markdown table after the first line that starts with `marker`.

    Fails (assert) when there is no such line, or no table with at least one row after it, or
    a row whose number of cells differs from the header's.
    """
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(marker)]
    assert starts, f"no {marker!r} in the output:\n{out[-3000:]}"
    table = []
    for line in lines[starts[0] + 1:]:
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif table:
            break
    assert len(table) > 2, (marker, out[-3000:])
    header, rows = table[0], table[2:]
    assert all(len(r) == len(header) for r in rows), table
    return header, rows
