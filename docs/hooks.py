"""MkDocs hook: the docstrings' Sphinx roles (:class:`~pll.X`, :func:`f`, ...) shown as code names, not as raw roles.

The docstrings are read by ``help()`` and Sphinx-minded tools too, so they keep their roles; mkdocstrings
renders a role as its text followed by the code, which this turns into the code alone (``~`` keeps the last
part of the name, as Sphinx does).
"""

import re

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|term):<code>(~?)([^<]+)</code>")


def _name(match):
    tilde, name = match.groups()
    return f"<code>{name.rsplit('.', 1)[-1] if tilde else name}</code>"


def on_page_content(html, **kwargs):
    return ROLE.sub(_name, html)
