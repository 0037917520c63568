"""``graphtool diff``: what changed between two graphtool documents (two reports, or two runs), torch-free.

:mod:`.documents` reads each side (its ``graphtool`` header, then each model's facts in one shape),
:mod:`.matching` pairs graph breaks by what they are (kind, file, source text) before where they are, and
:mod:`.compare` compares the facts and judges ``--fail-on``.
"""

from graphtool.analysis.diff.compare import DiffReport, FailOn, diff_documents, parse_fail_on
from graphtool.analysis.diff.documents import Document, read_document

__all__ = ["DiffReport", "Document", "FailOn", "diff_documents", "parse_fail_on", "read_document"]
