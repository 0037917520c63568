"""One reader of lint's baseline file for ``graphtool lint``, the API and the pytest plugin: a bad file
is refused with its path and, where it applies, the line, by each of them alike."""

from __future__ import annotations

import pytest

from graphtool.commands import baseline
from graphtool.errors import UsageError

ENTRY = '{"model": "m.py", "kind": "graph_break", "file": "m.py", "line": 3, "reason": "print"}'


def _refusal(path) -> str:
    with pytest.raises(UsageError) as info:
        baseline.read(path)
    return info.value.message


def test_a_bad_entry_is_named_by_its_line_and_json_by_its_error_line(tmp_path):
    path = tmp_path / "gb.json"
    path.write_text('{"version": 2, "breaks": [\n  ' + ENTRY + ',\n  {"model": 3}\n]}\n')
    assert _refusal(path) == f"{path}:3: breaks[1]: 'model' must be a string, got number"
    path.write_text('{"version": 2,\n "breaks": [}\n')
    assert _refusal(path).startswith(f"{path}:2: not valid JSON")
    path.write_text('{"version": 99, "breaks": []}')
    assert _refusal(path).startswith(f"{path}: written by a newer graphtool")
    assert _refusal(tmp_path / "none.json") == f"{tmp_path / 'none.json'}: no such baseline file"
    assert _refusal(tmp_path) == f"{tmp_path}: not a baseline file (it is not a regular file)"


def test_what_is_read_is_what_was_written_and_a_merge_keeps_other_models(tmp_path):
    path = tmp_path / "gb.json"
    data = {"version": 2, "breaks": [{"model": "a.py", "kind": "graph_break"}, {"model": "b.py", "kind": "graph_break"}]}
    baseline.write(path, data)
    read = baseline.read(path)
    assert read["root"] == str(tmp_path.resolve()) and baseline.same(data, read)
    assert baseline.accepted(path) == read and baseline.accepted(data) is data and baseline.accepted(None) is None
    fresh = {"version": 2, "breaks": [{"model": "b.py", "kind": "recompile"}]}
    merged, kept = baseline.merged(read, fresh, {"b.py"})
    assert kept == 1 and [e["model"] for e in merged["breaks"]] == ["a.py", "b.py"] and "root" not in merged


def test_the_plugin_refuses_a_bad_file_with_the_same_words_and_its_own_option(tmp_path):
    from graphtool.pytest_plugin import _read

    path = tmp_path / "gb.json"
    path.write_text('{"version": 2, "breaks": [\n  {"model": "m.py"}\n]}')
    with pytest.raises(pytest.UsageError) as info:
        _read(path)
    assert str(info.value) == (f"--graphtool-baseline {path}:2: breaks[0]: 'kind' missing "
                               "(write it again with --graphtool-update-baseline)")
