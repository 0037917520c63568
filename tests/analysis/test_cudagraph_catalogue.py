"""The catalogue is complete, consistent, and docs/cudagraphs.md is generated from it."""

from __future__ import annotations

from pathlib import Path

from graphtool.analysis.cudagraphs import catalogue as cat

ROOT = Path(__file__).resolve().parents[2]


def test_docs_match_the_catalogue():
    """Regenerate with: python -m graphtool.analysis.cudagraphs.catalogue > docs/cudagraphs.md"""
    assert (ROOT / "docs" / "cudagraphs.md").read_text() == cat.markdown()


def test_codes_are_unique_and_complete():
    codes = [e.code for e in cat.ENTRIES_LIST]
    assert len(codes) == len(set(codes))
    for e in cat.ENTRIES_LIST:
        assert e.kind in ("skip", "split", "risk", "note") and e.decided in ("predicted", "risk") and e.fix
        assert set(e.applies_to) <= set(cat.ALL) and e.applies_to
        if e.kind != "note" and e.emitted_by != "graphtool":
            assert e.template or e.silent, f"{e.code}: torch says nothing, so the entry must say so"
    assert set(cat.INCOMPATIBLE.values()) | set(cat.SPLITS.values()) <= set(cat.ENTRIES)
    # the count: about 17 reasons decidable before a run
    assert sum(e.decided == "predicted" and e.kind in ("skip", "split") for e in cat.ENTRIES_LIST) >= 17


def test_every_finding_code_the_verdict_emits_is_catalogued():
    import re

    src = (ROOT / "graphtool" / "analysis" / "cudagraphs" / "verdict.py").read_text()
    slugs = set(re.findall(r'_reason\(\s*"([a-z-]+)"', src))
    assert slugs and slugs <= {e.slug for e in cat.ENTRIES_LIST}


def test_release_ranges_parse():
    assert all(e.on((2, 99)) or "-" in e.releases for e in cat.ENTRIES_LIST)
    assert all(e.on((2, 11)) or e.on((2, 15)) for e in cat.ENTRIES_LIST)


def test_templates_are_torchs_words():
    """Each template's fixed words appear in the installed torch's source (where this torch has the reason)."""
    import re

    import torch

    base = Path(torch.__file__).parent
    files = [base / "_inductor" / f for f in ("cudagraph_utils.py", "output_code.py", "compile_fx.py", "lowering.py", "ir.py",
                                              "scheduler.py", "cudagraph_trees.py")] + [base / "_dynamo" / "backends" / "cudagraphs.py"]
    text = "\n".join(f.read_text() for f in files)
    missing = []
    installed = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    for e in cat.ENTRIES_LIST:
        if not e.template or not e.on(installed):  # a reason this torch does not have
            continue
        words = e.template.removeprefix(cat.PREFIX).translate(str.maketrans("", "", "[]'"))
        longest = max(re.split(r"\{[^}]*\}|\n|Found from.*", words), key=len).strip(" .:")
        newer = e.reworded.partition(": ")[2]  # a later torch's words for the same reason
        if longest and longest[:14] not in text and not (newer and newer[:14] in text):  # f-strings split long messages
            missing.append((e.code, longest[:14]))
    assert missing == []


def test_clean_message():
    assert cat.clean_message("skipping cudagraphs due to skipping cudagraphs due to multiple devices: cuda:0, cuda:1") == \
        "skipping cudagraphs due to multiple devices: cuda:0, cuda:1"
    assert cat.clean_message("skipping cudagraphs due to mutated inputs (2 instances). Found from : \n  File x") == \
        "skipping cudagraphs due to mutated inputs (2 instances)"
    assert cat.clean_message("disabling cudagraphs due to override_cudagraphs annotation") == \
        "disabling cudagraphs due to override_cudagraphs annotation"
