"""ARFF files (Weka's format, used by the UCI sets): a small parser of our own.

Our own parser rather than ``scipy.io.arff`` so that every problem is reported
with the file, line and attribute it concerns.  Supported: numeric
(``numeric``, ``real``, ``integer``) and nominal attributes, quoted names and
values, ``?`` for missing values, comments, and sparse rows ``{i v, ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import DataFileError, InvalidDataError
from .dataset import at_line

NUMERIC_TYPES = ("numeric", "real", "integer")
OTHER_TYPES = ("string", "date", "relational")
CLASS_ATTRIBUTE = "Class"


@dataclass(frozen=True)
class ArffAttribute:
    """One ``@attribute`` line: its name, kind (``numeric``, ``nominal``, ...) and nominal values."""

    name: str
    kind: str
    values: tuple = ()


@dataclass(frozen=True, eq=False)
class ArffTable:
    """The parsed contents of an ARFF file.

    Attributes
    ----------
    relation : str
    attributes : list of ArffAttribute
    cells : ndarray of shape (n, m), object
        Raw values as strings (quotes removed), None where missing (``?``).
    lines : ndarray of shape (n,), int
        The 1-based line of the file that holds each row.
    """

    relation: str
    attributes: list
    cells: np.ndarray
    lines: np.ndarray

    def where(self, row) -> str:
        """How errors name data row ``row``: ``line L, row R`` (:func:`pll.data.dataset.at_line`)."""
        return at_line(self.lines[row], row)


def parse_arff(path) -> ArffTable:
    """Parse an ARFF file; raise DataFileError naming the line of any syntax problem.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.arff"
    >>> _ = p.write_text("@relation t\\n@attribute 'x y' numeric\\n@attribute c {a,'b c'}\\n@data\\n1.5,'b c'\\n?,a\\n")
    >>> t = parse_arff(p)
    >>> [a.name for a in t.attributes], t.attributes[1].values, t.cells.tolist()
    (['x y', 'c'], ('a', 'b c'), [['1.5', 'b c'], [None, 'a']])
    """
    try:
        text = open(path, encoding="utf-8").read()
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    relation, attributes, rows, lines = None, [], [], []
    in_data = False
    for number, raw in enumerate(text.split("\n"), start=1):  # read with universal newlines: \n, \r\n or \r
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        where = f"{path}, line {number}"
        if in_data:
            rows.append(_parse_row(line, attributes, f"{path}, {at_line(number, len(rows))}"))
            lines.append(number)
            continue
        keyword = line.split(None, 1)[0].lower()
        rest = line[len(keyword):].strip()
        if keyword == "@relation":
            relation = _name_and_rest(rest, where)[0]
        elif keyword == "@attribute":
            attributes.append(_parse_attribute(rest, where))
        elif keyword == "@data":
            if not attributes:
                raise DataFileError(f"{where}: @data before any @attribute")
            in_data = True
        else:
            raise DataFileError(f"{where}: expected @relation, @attribute or @data, found {line[:40]!r}")
    if not in_data:
        raise DataFileError(f"{path}: no @data section (not an ARFF file, or truncated)")
    cells = np.empty((len(rows), len(attributes)), dtype=object)
    if rows:
        cells[:] = rows
    return ArffTable(relation or "", attributes, cells, np.asarray(lines, dtype=np.int64))


def _split(text, where):
    """Split comma-separated values; quoted values keep their text, an unquoted ``?`` is None."""
    if "'" not in text and '"' not in text:
        return [None if v == "?" else v for v in (t.strip() for t in text.split(","))]
    values, current, quoted, quote = [], [], False, None
    chars = iter(text)
    for c in chars:
        if quote:
            if c == "\\":
                current.append(next(chars, ""))
            elif c == quote:
                quote = None
            else:
                current.append(c)
        elif c in "'\"":
            quote, quoted = c, True
        elif c == ",":
            values.append(_token(current, quoted))
            current, quoted = [], False
        else:
            current.append(c)
    if quote:
        raise DataFileError(f"{where}: unterminated quote")
    values.append(_token(current, quoted))
    return values


def _token(chars, quoted):
    text = "".join(chars)
    if quoted:
        return text.strip(" \t")
    text = text.strip()
    return None if text == "?" else text


def _name_and_rest(text, where):
    """The leading (possibly quoted) name of ``text`` and the rest."""
    if not text:
        raise DataFileError(f"{where}: a name is missing")
    if text[0] in "'\"":
        end = text.find(text[0], 1)
        if end < 0:
            raise DataFileError(f"{where}: unterminated quote in a name")
        return text[1:end], text[end + 1 :].strip()
    parts = text.split(None, 1)
    return parts[0], (parts[1] if len(parts) > 1 else "")


def _parse_attribute(text, where):
    name, spec = _name_and_rest(text, where)
    if spec.startswith("{"):
        if not spec.endswith("}"):
            raise DataFileError(f"{where}: nominal values of attribute {name!r} lack a closing '}}'")
        values = tuple(_split(spec[1:-1], where))
        if any(v is None or v == "" for v in values) or len(set(values)) != len(values):
            raise DataFileError(f"{where}: attribute {name!r} has empty or repeated nominal values")
        return ArffAttribute(name, "nominal", values)
    kind = spec.split(None, 1)[0].lower() if spec else ""
    if kind in NUMERIC_TYPES:
        return ArffAttribute(name, "numeric")
    if kind in OTHER_TYPES:
        return ArffAttribute(name, kind)
    raise DataFileError(f"{where}: attribute {name!r} has an unknown type {spec[:30]!r}")


def _parse_row(line, attributes, where):
    m = len(attributes)
    if line.startswith("{"):
        if not line.endswith("}"):
            raise DataFileError(f"{where}: sparse row lacks a closing '}}'")
        row = [a.values[0] if a.kind == "nominal" else "0" for a in attributes]
        body = line[1:-1].strip()
        for entry in _split(body, where) if body else []:
            index, _, value = (entry or "").partition(" ")
            if not index.isdigit() or int(index) >= m:
                raise DataFileError(f"{where}: sparse entry {entry!r} does not start with an attribute index < {m}")
            value = value.strip()
            row[int(index)] = None if value == "?" else value
        return row
    row = _split(line, where)
    if len(row) != m:
        raise DataFileError(f"{where}: {len(row)} values but {m} attributes (a corrupt or truncated row)")
    return row


def arff_features(path, table: ArffTable, class_attribute=CLASS_ATTRIBUTE):
    """Features, class indices and class names of a parsed ARFF table.

    Numeric attributes become one column each, nominal attributes one 0/1
    column per declared value (one-hot); the class attribute gives the labels,
    its declared values the class names (in declared order).

    Returns
    -------
    X : ndarray of shape (n, d), float64
    y : ndarray of shape (n,), int64
    classes : ndarray of shape (l,), str
    info : dict
    """
    target = _class_index(path, table.attributes, class_attribute)
    columns, nominal = [], []
    for j, attribute in enumerate(table.attributes):
        if j == target:
            continue
        if attribute.kind == "numeric":
            columns.append(_numeric_column(path, table, j)[:, None])
        elif attribute.kind == "nominal":
            columns.append(_nominal_codes(path, table, j, missing="feature")[:, None] == np.arange(len(attribute.values)))
            nominal.append(attribute.name)
        else:
            raise DataFileError(
                f"{path}: attribute {attribute.name!r} has type {attribute.kind}; "
                "only numeric and nominal attributes can be features"
            )
    n = table.cells.shape[0]
    X = np.hstack(columns).astype(np.float64) if columns else np.empty((n, 0))
    y = _nominal_codes(path, table, target, missing="class")
    classes = np.asarray(table.attributes[target].values, dtype=str)
    info = {
        "relation": table.relation,
        "class_attribute": table.attributes[target].name,
        "nominal_attributes": nominal,
        "one_hot_columns": int(sum(len(a.values) for a in table.attributes if a.name in nominal)),
    }
    return X, y, classes, info


def _class_index(path, attributes, class_attribute):
    names = [a.name for a in attributes]
    matches = [j for j, a in enumerate(names) if a == class_attribute]
    if not matches:
        matches = [j for j, a in enumerate(names) if a.lower() == class_attribute.lower()]
    if len(matches) != 1:
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise DataFileError(f"{path}: no single class attribute {class_attribute!r}; attributes are {shown}")
    if attributes[matches[0]].kind != "nominal":
        raise DataFileError(
            f"{path}: the class attribute {names[matches[0]]!r} must be nominal, "
            f"it is {attributes[matches[0]].kind}"
        )
    return matches[0]


def _numeric_column(path, table, j):
    column = table.cells[:, j]
    _no_missing(path, table, j, column, "feature")
    try:
        return column.astype(np.float64)
    except ValueError:
        for row, value in enumerate(column):
            try:
                float(value)
            except ValueError:
                raise InvalidDataError(
                    f"{path}, {table.where(row)}: attribute {table.attributes[j].name!r} "
                    f"is numeric but holds {value!r}"
                ) from None
        raise


def _nominal_codes(path, table, j, missing):
    attribute = table.attributes[j]
    column = table.cells[:, j]
    _no_missing(path, table, j, column, missing)
    lookup = {v: i for i, v in enumerate(attribute.values)}
    codes = np.fromiter((lookup.get(v, -1) for v in column), dtype=np.int64, count=column.size)
    if (codes < 0).any():
        row = int(np.argmax(codes < 0))
        raise InvalidDataError(
            f"{path}, {table.where(row)}: attribute {attribute.name!r} has value {column[row]!r}, "
            f"not one of its declared values {{{','.join(attribute.values)}}}"
        )
    return codes


def _no_missing(path, table, j, column, what):
    absent = np.equal(column, None)
    if absent.any():
        row = int(np.argmax(absent))
        raise InvalidDataError(
            f"{path}, {table.where(row)}: missing value '?' for {what} attribute "
            f"{table.attributes[j].name!r} ({int(absent.sum())} row(s)); missing features or labels "
            "are not supported"
        )
