"""Escaping for the XML and HTML reports: the same text as the standard library's
`xml.sax.saxutils.escape` / `quoteattr` and `html.escape`, without their imports
(`xml.sax.saxutils` imports `urllib.request`, and with it `http.client`, `email`, `ssl` and
`socket`: some 45 modules for a JUnit report; `html` imports its 2,000-entry entity table)."""

from __future__ import annotations


def xml_escape(data: str) -> str:
    """``xml.sax.saxutils.escape(data)``: ``&``, ``<`` and ``>``."""
    return data.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def xml_quoteattr(data: str) -> str:
    """``xml.sax.saxutils.quoteattr(data)``: escaped, line breaks and tabs as character
    references, in double quotes (single quotes when the value holds only ``"``)."""
    data = xml_escape(data).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' in data:
        if "'" in data:
            return '"{}"'.format(data.replace('"', "&quot;"))
        return f"'{data}'"
    return f'"{data}"'


def html_escape(text: str) -> str:
    """``html.escape(text, quote=True)``."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )
