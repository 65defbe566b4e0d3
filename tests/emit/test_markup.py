"""The JUnit and HTML reports escape exactly as the standard library does (their bytes are a
contract), without importing `xml.sax.saxutils` (urllib.request, http.client, email, ssl)."""

from __future__ import annotations

import html
import subprocess
import sys
from xml.sax.saxutils import escape, quoteattr

from hypothesis import given, settings
from hypothesis import strategies as st

from spanjudge.emit.markup import html_escape, xml_escape, xml_quoteattr

_text = st.text(alphabet=st.sampled_from("ab &<>\"'\n\r\t\u00e9;#x"), max_size=24) | st.text()


@settings(max_examples=400, deadline=None)
@given(_text)
def test_the_same_escaping_as_the_standard_library(text: str) -> None:
    assert xml_escape(text) == escape(text)
    assert xml_quoteattr(text) == quoteattr(text)
    assert html_escape(text) == html.escape(text, quote=True)


def test_a_junit_report_imports_no_network_modules() -> None:
    code = (
        "import sys; import spanjudge.emit.junit, spanjudge.emit.html; "
        "print(' '.join(m for m in ('urllib.request', 'http.client', 'email', 'ssl', "
        "'xml.sax', 'html.entities') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
