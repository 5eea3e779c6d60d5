"""Loaders: every shared file with its shapes, every .mat layout, ARFF/CSV/Parquet, and every bad input."""

from pathlib import Path

import re

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.io.arff
import scipy.sparse

import pll
from pll.data import BUILTIN_NAMES, FILE_FORMATS, check_source, load_dataset
from pll.data.arff import parse_arff
from pll.data.csvlines import row_locator
from pll.data import parse_mat_variables
from pll.errors import DataFileError, DatasetNotFoundError, InvalidDataError, InvalidParameterError, PllError

UCI_SHAPES = {  # rows, features after one-hot, classes
    "ecoli": (336, 7, 8),
    "first-order-theorem": (6118, 51, 6),
    "flare": (1389, 20, 6),
    "mfeat-fourier": (2000, 76, 10),
    "pendigits": (10992, 16, 10),
    "semeion": (1593, 256, 10),
    "statlog-landsat-satellite": (2859, 36, 6),
}


# ---------------------------------------------------------------- shared data


@pytest.mark.parametrize(
    "name, shape",
    [("bird-song", (4998, 38, 13)), ("msrc-v2", (1758, 48, 23))],
)
def test_real_world_mat_files_load_with_their_own_bags(shared_data, name, shape):
    path = shared_data / "realworld" / f"{name}.mat"
    ds = load_dataset(path)
    assert (ds.n_rows, ds.n_features, ds.n_classes) == shape
    raw = scipy.io.loadmat(path)
    np.testing.assert_array_equal(ds.S, raw["partial_target"].toarray().T == 1)
    np.testing.assert_array_equal(ds.y, raw["target"].toarray().argmax(axis=0))
    assert ds.S[np.arange(ds.n_rows), ds.y].all()
    summary = ds.summary()
    assert summary["average_bag_size"] > 1.5  # real partial labels, not one-hot
    assert summary["format"] == "mat" and summary["bags_stored"] == "l x n"
    assert summary["source"] == str(path)


@pytest.mark.parametrize("name", sorted(UCI_SHAPES))
def test_uci_arff_files_match_scipys_reader(shared_data, name):
    path = shared_data / "uci" / f"{name}.arff"
    ds = load_dataset(path)
    assert (ds.n_rows, ds.n_features, ds.n_classes) == UCI_SHAPES[name]
    data, meta = scipy.io.arff.loadarff(path)
    declared = meta["Class"][1]
    assert ds.classes.tolist() == list(declared)
    np.testing.assert_array_equal(ds.classes[ds.y], data["Class"].astype(str))
    assert (ds.S.sum(axis=1) == 1).all() and ds.S[np.arange(ds.n_rows), ds.y].all()
    numeric = [n for n in meta.names() if meta[n][0] == "numeric"]
    column = 0
    for attribute in meta.names():
        kind, values = meta[attribute]
        if attribute == "Class":
            continue
        if kind == "numeric":
            np.testing.assert_array_equal(ds.X[:, column], data[attribute])
            column += 1
        else:
            block = ds.X[:, column : column + len(values)]
            np.testing.assert_array_equal(block.argmax(axis=1), [values.index(v) for v in data[attribute].astype(str)])
            assert (block.sum(axis=1) == 1).all()
            column += len(values)
    assert column == ds.n_features and len(numeric) <= ds.n_features


@pytest.mark.parametrize("name, shape", [("digits", (1797, 64, 10)), ("iris", (150, 4, 3)), ("wine", (178, 13, 3))])
def test_builtins_are_fully_labelled(name, shape):
    ds = load_dataset(name)
    assert (ds.n_rows, ds.n_features, ds.n_classes) == shape
    np.testing.assert_array_equal(ds.S, np.eye(ds.n_classes, dtype=bool)[ds.y])
    assert set(BUILTIN_NAMES) == {"digits", "iris", "wine"}


# ---------------------------------------------------------------- .mat layouts


def _palm_arrays(n=40, d=3, l=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, l, size=n)
    S = rng.random((n, l)) < 0.3
    S[np.arange(n), y] = True
    return X, S, y


@pytest.mark.parametrize("layout", ["top-level", "struct", "transposed", "sparse", "struct-sparse-transposed"])
def test_mat_layouts_give_the_same_data_set(tmp_path, layout):
    X, S, y = _palm_arrays()
    bags, target = S.T.astype(float), np.eye(5)[y].T  # PALM: l x n
    if "transposed" in layout:
        bags, target = bags.T, target.T
    if "sparse" in layout:
        bags, target = scipy.sparse.csc_matrix(bags), scipy.sparse.csc_matrix(target)
    fields = {"data": X, "partial_target": bags, "target": target}
    path = tmp_path / "f.mat"
    scipy.io.savemat(path, {"dataset": fields} if "struct" in layout else fields)
    ds = load_dataset(path)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.S, S)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.info["struct"] == ("dataset" if "struct" in layout else None)
    assert ds.info["bags_stored"] == ("n x l" if "transposed" in layout else "l x n")


def test_mat_target_is_optional(tmp_path):
    X, S, _ = _palm_arrays()
    scipy.io.savemat(tmp_path / "f.mat", {"data": X, "partial_target": S.T.astype(float)})
    ds = load_dataset(tmp_path / "f.mat")
    assert ds.y is None and ds.summary()["has_true_labels"] is False
    np.testing.assert_array_equal(ds.S, S)


def _renamed_mat(path, fmt="5", struct=False, sparse=False):
    """A .mat file whose variables are features (n x d), p_labels (l x n) and logitlabels (l x n)."""
    X, S, y = _palm_arrays()
    bags, target = S.T.astype(float), np.eye(5)[y].T
    if sparse:
        bags, target = scipy.sparse.csc_matrix(bags), scipy.sparse.csc_matrix(target)
    fields = {"features": X, "p_labels": bags, "logitlabels": target, "notes": np.ones((1, 2))}
    scipy.io.savemat(path, {"palm": fields} if struct else fields, format=fmt)
    return X, S, y


NAMES = {"features": "features", "partial_labels": "p_labels", "labels": "logitlabels"}


@pytest.mark.parametrize(
    "fmt, struct, sparse",
    [("5", False, False), ("5", True, False), ("5", False, True), ("5", True, True), ("4", False, False), ("4", False, True)],
)
def test_mat_variables_with_other_names_load_when_named(tmp_path, fmt, struct, sparse):
    path = tmp_path / "renamed.mat"
    X, S, y = _renamed_mat(path, fmt, struct, sparse)
    ds = load_dataset(path, variables=NAMES)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.S, S)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.info["variables"] == NAMES and ds.info["struct"] == ("palm" if struct else None)
    assert ds.info["sparse"] == (["logitlabels", "p_labels"] if sparse else [])
    with pytest.raises(DataFileError) as err:  # unnamed, the defaults are searched and the error lists the file
        load_dataset(path)
    for part in ("missing variable(s) data (features)", "logitlabels", "p_labels", "--mat-variables"):
        assert part in str(err.value)


def test_mat_variables_left_out_keep_their_default_names(tmp_path):
    X, S, y = _palm_arrays()
    decoy = np.eye(5)[(y + 1) % 5].T
    fields = {"data": X, "partial_target": S.T.astype(float), "target": decoy, "truth": np.eye(5)[y].T}
    scipy.io.savemat(tmp_path / "f.mat", fields)
    ds = load_dataset(tmp_path / "f.mat", variables={"labels": "truth"})
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.info["variables"] == {"features": "data", "partial_labels": "partial_target", "labels": "truth"}
    assert load_dataset(tmp_path / "f.mat", allow_true_label_outside=True).info["variables"]["labels"] == "target"
    scipy.io.savemat(tmp_path / "g.mat", {"X": X, "partial_target": S.T.astype(float)})
    unlabelled = load_dataset(tmp_path / "g.mat", variables={"features": "X"})
    assert unlabelled.y is None and unlabelled.info["variables"] == {"features": "X", "partial_labels": "partial_target"}


@pytest.mark.parametrize(
    "variables, error, words",
    [
        ({"feature": "features"}, InvalidParameterError, ["unknown key 'feature'", "features, partial_labels, labels"]),
        ({**NAMES, "labels": "y_true"}, DataFileError, ["missing variable(s) y_true (labels)"]),
        ({"features": "X", "partial_labels": "bags"}, DataFileError, ["X (features), bags (partial_labels)"]),
        ({"features": "p_labels", "partial_labels": "p_labels"}, InvalidParameterError, ["features and partial_labels both name the variable 'p_labels'"]),
        ({"features": ""}, InvalidParameterError, ["features must name a variable, got ''"]),
        ("features=features", InvalidParameterError, ["must be a mapping", "got str"]),
    ],
)
def test_bad_mat_variables_are_one_line_listing_the_file(tmp_path, variables, error, words):
    path = tmp_path / "renamed.mat"
    _renamed_mat(path, struct=True)
    with pytest.raises(error) as err:
        load_dataset(path, variables=variables)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    for word in [*words, "palm (struct with fields features, p_labels, logitlabels, notes)", "--mat-variables"]:
        assert word in message


def test_mat_variables_apply_to_mat_files_only_and_not_to_v73(tmp_path):
    for call in (load_dataset, check_source):
        with pytest.raises(InvalidParameterError, match=r"iris: the variable names \(--mat-variables\) apply to \.mat files only"):
            call("iris", variables=NAMES)
    with pytest.raises(InvalidParameterError, match=r"nothere\.mat: --mat-variables: unknown key 'feature'"):
        check_source(tmp_path / "nothere.mat", variables={"feature": "x"})  # before looking for the file
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 .".ljust(116)
    (tmp_path / "h.mat").write_bytes(header + b"\0" * 8 + b"\x00\x02IM" + b"\0" * 384)  # the v7.3 header
    with pytest.raises(DataFileError, match=r"h\.mat: MATLAB v7\.3 \(HDF5\) files are not supported"):
        load_dataset(tmp_path / "h.mat", variables=NAMES)


def test_parse_mat_variables_reads_the_command_line_text(tmp_path):
    text = "features=features, partial_labels=p_labels,labels=logitlabels"
    assert parse_mat_variables(text) == NAMES
    assert parse_mat_variables(" partial_labels = p_labels ") == {"partial_labels": "p_labels"}
    X, S, _ = _renamed_mat(tmp_path / "r.mat")
    ds = load_dataset(tmp_path / "r.mat", variables=parse_mat_variables(text))
    np.testing.assert_array_equal(ds.S, S)


@pytest.mark.parametrize(
    "text, words",
    [
        ("features", "'features' is not KEY=NAME"),
        ("features=a,", "'' is not KEY=NAME"),
        ("=a", "'=a' is not KEY=NAME"),
        ("features=a,labels=", "'labels=' is not KEY=NAME"),
        ("", "'' is not KEY=NAME"),
        ("features=a,features=b", "'features' is given twice"),
        ("feature=a", "unknown key 'feature'; the keys are features, partial_labels, labels"),
        ("features=a,labels=a", "features and labels both name the variable 'a'"),
    ],
)
def test_parse_mat_variables_names_the_bad_part(text, words):
    with pytest.raises(InvalidParameterError) as err:
        parse_mat_variables(text)
    assert str(err.value).startswith("--mat-variables: ") and words in str(err.value)


# ---------------------------------------------------------------- ARFF


def test_arff_parser_handles_quotes_comments_nominal_and_sparse_rows(tmp_path):
    path = tmp_path / "q.arff"
    path.write_text(
        "% a comment\n"
        "@RELATION 'quoted relation'\n"
        "@ATTRIBUTE 'width cm' REAL\n"
        "@attribute colour {red, 'light blue', \"x,y\"}\n"
        "@attribute n integer\n"
        "@attribute Class {'cat a', dog, 3}\n"
        "\n@data\n"
        "1.5, red, 2, 'cat a'\n"
        "% inside data\n"
        "-2e1,'light blue',0,dog\n"
        '0,"x,y",7,3\n'
        "{0 4, 1 'light blue', 3 dog}\n"
    )
    ds = load_dataset(path)
    assert ds.classes.tolist() == ["cat a", "dog", "3"]
    assert ds.y.tolist() == [0, 1, 2, 1]
    expected = [[1.5, 1, 0, 0, 2], [-20, 0, 1, 0, 0], [0, 0, 0, 1, 7], [4, 0, 1, 0, 0]]
    np.testing.assert_array_equal(ds.X, expected)
    assert ds.info["nominal_attributes"] == ["colour"] and ds.info["one_hot_columns"] == 3
    assert parse_arff(path).lines.tolist() == [9, 11, 12, 13]


# ---------------------------------------------------------------- CSV and Parquet


def test_csv_string_labels_sorted_by_name(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("f1,candidates,f2,label\n0.5,dog|cat,1,cat\n1.5,ant,2,ant\n2.5, cat | ant ,3,ant\n")
    ds = load_dataset(path)
    assert ds.classes.tolist() == ["ant", "cat", "dog"]
    np.testing.assert_array_equal(ds.S, [[0, 1, 1], [1, 0, 0], [1, 1, 0]])
    assert ds.y.tolist() == [1, 0, 0]
    np.testing.assert_array_equal(ds.X, [[0.5, 1], [1.5, 2], [2.5, 3]])


def test_csv_integer_labels_sorted_numerically_without_true_labels(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("x,candidates\n1,10|2\n2,1\n3,2|1\n")
    ds = load_dataset(path)
    assert ds.classes.tolist() == ["1", "2", "10"]
    assert ds.y is None
    np.testing.assert_array_equal(ds.S, [[0, 1, 1], [1, 0, 0], [1, 1, 0]])


@pytest.mark.parametrize(
    ("rows", "found", "written"),
    [
        ('1,"1,2"\n2,3\n3,1\n', "','", "'1|2'"),  # no label column: would have been a class named "1,2"
        ('1,"1,2",2\n2,3,3\n3,1,1\n', "','", "'1|2'"),  # with one: refused for the separator, not the label
        ("1,cat; dog\n2,cat\n3,dog\n", "';'", "'cat|dog'"),
        ("1,cat dog|ant\n2,cat\n3,dog\n", "' '", "'cat|dog|ant'"),
        ("1,1 2\n2,3\n3,1\n", "' '", "'1|2'"),
    ],
)
def test_a_cell_listing_labels_with_another_separator_is_refused_naming_both(tmp_path, rows, found, written):
    path = tmp_path / "sep.csv"
    label = ",label" if rows.split("\n")[1].count(",") == 2 else ""
    path.write_text(f"x,candidates{label}\n{rows}")
    with pytest.raises(InvalidDataError, match=rf"line 2, row 0: column 'candidates': .* reads as labels separated by "
                                               rf"{found}, but candidate labels are separated by '\|' \(write {re.escape(written)}\)"):
        load_dataset(path)


def test_names_with_spaces_stay_names_and_a_parquet_list_may_hold_a_comma(tmp_path):
    path = tmp_path / "names.csv"
    path.write_text("x,candidates\n1,red car|bus\n2,bus\n3,red car\n4,car\n")
    assert load_dataset(path).classes.tolist() == ["bus", "car", "red car"]  # 'red' is no label: a name
    frame = pd.DataFrame({"candidates": [["a,b", "c"], ["c"], ["d"]], "x": [0.0, 1.0, 2.0]})
    frame.to_parquet(tmp_path / "comma.parquet")
    assert load_dataset(tmp_path / "comma.parquet").classes.tolist() == ["a,b", "c", "d"]


def test_declared_classes_fix_the_label_set(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("x,candidates\n1,b|a\n2,b\n")
    ds = load_dataset(path, classes=["c", "b", "a"])
    assert ds.classes.tolist() == ["c", "b", "a"]
    np.testing.assert_array_equal(ds.S, [[0, 1, 1], [0, 1, 0]])


def test_parquet_with_list_candidates_and_integer_labels(tmp_path):
    frame = pd.DataFrame(
        {"candidates": [[3, 1], [2], [1, 2, 3]], "label": [1, 2, 3], "a": [0.0, 1.0, 2.0], "b": [True, False, True]}
    )
    frame.to_parquet(tmp_path / "d.parquet")
    ds = load_dataset(tmp_path / "d.parquet")
    assert ds.classes.tolist() == ["1", "2", "3"]
    np.testing.assert_array_equal(ds.S, [[1, 0, 1], [0, 1, 0], [1, 1, 1]])
    assert ds.y.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(ds.X, [[0, 1], [1, 0], [2, 1]])


def test_csv_and_parquet_of_the_same_table_agree(tmp_path):
    X, S, y = _palm_arrays(n=25, l=4)
    names = np.array(["w", "x", "y", "z"])
    frame = pd.DataFrame(X, columns=["f0", "f1", "f2"])
    frame["candidates"] = ["|".join(names[row]) for row in S]
    frame["label"] = names[y]
    frame.to_csv(tmp_path / "t.csv", index=False)
    frame.to_parquet(tmp_path / "t.parquet")
    a, b = load_dataset(tmp_path / "t.csv"), load_dataset(tmp_path / "t.parquet")
    for ds in (a, b):
        np.testing.assert_allclose(ds.X, X, rtol=1e-15)
        np.testing.assert_array_equal(ds.S, S)
        np.testing.assert_array_equal(ds.y, y)


def test_repeated_cells_are_read_once_and_give_every_row_its_own_bag(tmp_path):
    """Bags and labels come from the distinct cells; each row still gets exactly its own, and errors name the first row."""
    rng = np.random.default_rng(0)
    cells = ["a|b", "b", "c|a|b", "", "c"]
    frame = pd.DataFrame({"x": rng.normal(size=300), "candidates": rng.choice(cells, 300),
                          "label": rng.choice(["a", "b", "c"], 300)})
    frame.to_csv(tmp_path / "r.csv", index=False)
    frame.to_parquet(tmp_path / "r.parquet")
    expected = np.array([[name in cell.split("|") for name in "abc"] for cell in frame["candidates"]])
    noisy = {"allow_empty_bags": True, "allow_true_label_outside": True}
    for ds in (load_dataset(tmp_path / "r.csv", **noisy), load_dataset(tmp_path / "r.parquet", **noisy)):
        np.testing.assert_array_equal(ds.S, expected)
        assert ds.classes[ds.y].tolist() == frame["label"].tolist()
    frame.loc[[7, 40, 200], "candidates"] = "a|d"
    frame.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(InvalidDataError, match=r"row 7: column 'candidates': label 'd' is not a class"):
        load_dataset(tmp_path / "bad.parquet", classes=["a", "b", "c"])


# ---------------------------------------------------------------- bad input: one test per case


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(DataFileError, match=r"nothere\.mat: no such file"):
        load_dataset(tmp_path / "nothere.mat")


@pytest.mark.parametrize("suffix", list(FILE_FORMATS))
def test_empty_file_names_the_file(tmp_path, suffix):
    path = tmp_path / f"empty{suffix}"
    path.touch()
    with pytest.raises(DataFileError, match=rf"empty{suffix}: the file is empty"):
        load_dataset(path)


def _truncated(source, fraction):
    data = Path(source).read_bytes()
    return data[: int(len(data) * fraction)]


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("garbage.mat", b"this is not a MATLAB file at all" * 8, "not a readable MATLAB file"),
        ("cut.mat", None, "not a readable MATLAB file"),
        ("cut.arff", b"@relation r\n@attribute a numeric\n@attribute Class {x,y,z}\n@data\n1,x\n2,y\n3", r"line 7, row 2: 1 values"),
        ("noheader.arff", b"1,2,3\n", "line 1: expected @relation"),
        ("nodata.arff", b"@relation r\n@attribute a numeric\n", "no @data section"),
        ("quote.arff", b"@relation r\n@attribute a numeric\n@attribute Class {x,y,z}\n@data\n1,'x\n", "line 5, row 0: unterminated quote"),
        ("cut.parquet", None, "cannot be read"),
        ("binary.csv", b"\xff\xfe\x00\x81garbage", "not a text file"),
        ("unclosed.csv", b'a,candidates\n\n1,"x|y\n2,y\n', "line 3, row 0: a quote opened in this row is never closed"),
        ("long.csv", b'a,candidates\n1,"x|\ny"\n2,y,3,4\n', "line 4, row 1: 4 values but the header names 2 columns"),
        ("noquote.csv", b'a,candidates\n1,x\n2,y"\n3,z,4\n', "line 4, row 2: 3 values"),
    ],
)
def test_corrupt_or_truncated_file_is_a_data_file_error(tmp_path, shared_data, name, content, message):
    if content is None and name.endswith(".mat"):
        content = _truncated(shared_data / "realworld" / "msrc-v2.mat", 0.6)
    if content is None:
        pd.DataFrame({"a": [1.0, 2.0], "candidates": ["x|y", "y"]}).to_parquet(tmp_path / "full.parquet")
        content = _truncated(tmp_path / "full.parquet", 0.5)
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=message) as err:
        load_dataset(path)
    assert name in str(err.value)


def test_mat_without_the_fields_lists_what_it_found(tmp_path):
    scipy.io.savemat(tmp_path / "f.mat", {"features": np.ones((4, 2)), "info": {"bags": np.ones((4, 3))}})
    with pytest.raises(DataFileError) as err:
        load_dataset(tmp_path / "f.mat")
    message = str(err.value)
    assert "f.mat" in message and "missing variable(s) data (features), partial_target (partial_labels)" in message
    assert "features (4x2)" in message and "info (struct with fields bags)" in message
    assert "--mat-variables features=NAME,partial_labels=NAME,labels=NAME" in message


@pytest.mark.parametrize(
    "name, write, where",
    [
        ("nan.csv", lambda p: p.write_text("a,b,candidates\n1,2,x|y\n3,,y\n4,5,z\n"), r"line 3, row 1: feature column 'b': an empty cell"),
        ("inf.csv", lambda p: p.write_text("a,b,candidates\n1,2,x|y\n3,4,y\ninf,5,z\n"), r"line 4, row 2: feature column 'a': 'inf'"),
        ("text.csv", lambda p: p.write_text("a,candidates\n1,x|y\nabc,y\n4,z\n"), r"line 3, row 1: feature column 'a': 'abc'"),
        (
            "missing.arff",
            lambda p: p.write_text("@relation r\n@attribute a numeric\n@attribute Class {x,y,z}\n@data\n1,x\n?,y\n"),
            r"line 6, row 1: missing value '\?' for feature attribute 'a'",
        ),
        (
            "nan.mat",
            lambda p: scipy.io.savemat(p, {"data": np.array([[1.0], [np.nan], [2.0]]), "partial_target": np.eye(3)}),
            r"NaN or infinite \(first at row 1, feature 0\)",
        ),
    ],
)
def test_nan_or_infinite_features_name_the_row_and_column(tmp_path, name, write, where):
    write(tmp_path / name)
    with pytest.raises(InvalidDataError, match=where) as err:
        load_dataset(tmp_path / name)
    assert name in str(err.value)


CSV_TEXT = 'a,b,candidates,label\n1,2,"x|\ny",x\n\n3,4,y,y\n{bad},5,z,z\n6,7,x,x\n'  # a cell over two lines, a blank line
ARFF_TEXT = (
    "% rows with comments between them\n@relation r\n@attribute a numeric\n@attribute b numeric\n"
    "@attribute Class {{x,y,z}}\n\n@data\n1,2,x\n% a comment\n3,4,y\n\n{bad},5,z\n6,7,x\n"
)


def _editor_line(text, bad):
    """The line an editor shows ``bad`` on: 1-based, every line of the file counted."""
    return next(i for i, line in enumerate(text.split("\n"), start=1) if line.startswith(bad))


@pytest.mark.parametrize("bad", ["abc", "inf", "nan", "1e999"])
def test_csv_and_arff_errors_name_the_same_row_and_the_line_each_editor_shows(tmp_path, bad):
    messages = {}
    for suffix, template in ((".csv", CSV_TEXT), (".arff", ARFF_TEXT)):
        text = template.format(bad=bad)
        path = tmp_path / f"t{suffix}"
        path.write_text(text)
        with pytest.raises(InvalidDataError) as err:
            load_dataset(path)
        messages[suffix] = str(err.value)
        assert f"line {_editor_line(text, bad)}, row 2" in messages[suffix]
        assert str(path) in messages[suffix] and "\n" not in messages[suffix]
    assert "line 6, row 2" in messages[".csv"] and "line 12, row 2" in messages[".arff"]


def test_binary_formats_name_the_same_row_without_lines(tmp_path):
    X = np.arange(8.0).reshape(4, 2)
    X[2, 0] = np.nan
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "candidates": ["x|y", "y", "z", "x"]})
    frame.to_parquet(tmp_path / "t.parquet")
    scipy.io.savemat(tmp_path / "t.mat", {"data": X, "partial_target": np.eye(4)[:, :3].T})
    for name, where in (("t.parquet", r"t\.parquet, row 2: feature column 'a'"), ("t.mat", r"t\.mat: .*first at row 2, feature 0")):
        with pytest.raises(InvalidDataError, match=where) as err:
            load_dataset(tmp_path / name)
        assert "line" not in str(err.value)


def test_csv_rows_are_named_without_a_line_when_the_lines_cannot_be_matched(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,candidates\n1,x\n\n2,y\n")
    assert [row_locator(path, 2)(r) for r in (0, 1)] == ["line 2, row 0", "line 4, row 1"]
    assert row_locator(path, 3)(1) == "row 1"  # pandas read another count: no line rather than a wrong one
    assert row_locator(tmp_path / "gone.csv", 2)(1) == "row 1"


def test_empty_bag_is_allowed_only_when_enabled(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("a,candidates,label\n1,x|y,x\n2,,y\n3,z,z\n")
    with pytest.raises(InvalidDataError, match=r"e\.csv: 1 row\(s\) have an empty candidate bag \(first at line 3, row 1\)"):
        load_dataset(path, allow_true_label_outside=True)
    ds = load_dataset(path, allow_empty_bags=True, allow_true_label_outside=True)
    assert ds.summary()["empty_bags"] == 1


def test_true_label_outside_its_bag_only_for_noisy_labels_and_counted(tmp_path):
    path = tmp_path / "o.csv"
    path.write_text("a,candidates,label\n1,x|y,z\n2,y,y\n3,z|x,y\n")
    with pytest.raises(InvalidDataError, match=r"o\.csv: the true label of 2 row\(s\) is not in its bag \(first at line 2, row 0\)"):
        load_dataset(path)
    ds = load_dataset(path, allow_true_label_outside=True)
    assert ds.summary()["true_label_outside_bag"] == 2


def test_fewer_than_three_classes(tmp_path):
    path = tmp_path / "two.arff"
    path.write_text("@relation r\n@attribute a numeric\n@attribute Class {x,y}\n@data\n1,x\n2,y\n")
    with pytest.raises(InvalidDataError, match=r"two\.arff: .*at least three classes, found 2"):
        load_dataset(path)


def test_mismatched_row_counts(tmp_path):
    scipy.io.savemat(tmp_path / "m.mat", {"data": np.ones((5, 2)), "partial_target": np.ones((3, 4))})
    with pytest.raises(InvalidDataError, match=r"m\.mat: 'data' has 5 rows but 'partial_target' is 3 x 4"):
        load_dataset(tmp_path / "m.mat")


def test_csv_candidate_that_is_not_a_class(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,candidates\n1,x|y\n2,y|w\n3,z\n")
    with pytest.raises(InvalidDataError, match=r"c\.csv, line 3, row 1: column 'candidates': label 'w' is not a class \(classes: x, y, z\)"):
        load_dataset(path, classes=["x", "y", "z"])
    path.write_text("a,candidates\n1,x|y\n2,y||z\n3,z\n")
    with pytest.raises(InvalidDataError, match=r"line 3, row 1: column 'candidates': 'y\|\|z' has an empty label name"):
        load_dataset(path)


def test_unknown_dataset_name_lists_the_known_names():
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("no-such-set")
    assert "unknown data set 'no-such-set'" in str(err.value)
    for name in (*BUILTIN_NAMES, *FILE_FORMATS):
        assert name in str(err.value)


def test_other_bad_inputs_are_typed_errors(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(DataFileError, match=r"x\.txt: unsupported file type '\.txt'"):
        load_dataset(tmp_path / "x.txt")
    with pytest.raises(InvalidParameterError, match="CSV and Parquet files only"):
        load_dataset("iris", classes=["a", "b", "c"])
    (tmp_path / "n.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFileError, match=r"n\.csv: no column 'candidates'.*found columns a, b"):
        load_dataset(tmp_path / "n.csv")
    (tmp_path / "v.arff").write_text("@relation r\n@attribute a numeric\n@attribute Class {x,y,z}\n@data\n1,w\n")
    with pytest.raises(InvalidDataError, match=r"v\.arff, line 5, row 0: attribute 'Class' has value 'w'"):
        load_dataset(tmp_path / "v.arff")
    (tmp_path / "s.arff").write_text("@relation r\n@attribute a string\n@attribute Class {x,y,z}\n@data\nhi,x\n")
    with pytest.raises(DataFileError, match=r"attribute 'a' has type string"):
        load_dataset(tmp_path / "s.arff")
    (tmp_path / "nc.arff").write_text("@relation r\n@attribute a numeric\n@attribute label {x,y,z}\n@data\n1,x\n")
    with pytest.raises(DataFileError, match=r"no single class attribute 'Class'; attributes are a, label"):
        load_dataset(tmp_path / "nc.arff")
    two = np.eye(3)[[0, 1, 1]]
    two[2, 2] = 1
    scipy.io.savemat(tmp_path / "t.mat", {"data": np.ones((3, 1)), "partial_target": np.ones((3, 3)), "target": two.T})
    with pytest.raises(InvalidDataError, match=r"t\.mat, row 2: field 'target' must mark exactly one true label per row, this row marks 2"):
        load_dataset(tmp_path / "t.mat")


def test_every_loader_error_is_a_pll_error():
    for error in (DataFileError, DatasetNotFoundError, InvalidDataError, InvalidParameterError):
        assert issubclass(error, PllError)
    assert pll.load_dataset is load_dataset


def test_pll_datasets_lists_the_built_in_names_and_file_formats(capsys):
    from pll_pipeline.flows.cli import main

    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    for name in (*BUILTIN_NAMES, *FILE_FORMATS, "dst-pll", "cluster_dependent", "pl_aknn_real"):
        assert name in out
