"""JUnit XML stays well-formed whatever a break reason or an error message holds."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

from graphtool.render.lint import format_junit
from tests.render import test_views as v

NASTY = "boom \x1b[31mred\x1b[0m \x00 nul \x07 bell <tag> & \"quote\" \ud800"


def test_control_characters_in_messages_stay_well_formed():
    report = v.LINT_ERRORED
    models = tuple(replace(m, error=NASTY, error_detail=NASTY) if m.status == "error" else m for m in report.models)
    text = format_junit(replace(report, models=models))
    root = ET.fromstring(text.encode("utf-8", "surrogatepass"))  # was: not well-formed (invalid token)
    errors = [e for e in root.iter("error")]
    assert errors and "\\x1b[31mred" in errors[0].get("message") and "<tag>" in errors[0].text
