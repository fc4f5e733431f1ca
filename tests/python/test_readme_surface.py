"""The README's table of the PyTorch surface kiln covers is true: every name
in its "names" column exists where the row says, and has the name torch
gives it there."""
import pathlib
import re

import pytest
import torch

import kiln

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def surface_rows():
    text = README.read_text()
    table = text.split("<!-- surface -->", 1)[1].split("<!-- /surface -->", 1)[0]
    rows = []
    for line in table.strip().splitlines()[2:]:  # past the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        area, where, names = cells[0], cells[1].strip("`"), cells[2]
        # The names are the backquoted words before any "(" aside.
        listed = re.findall(r"`([A-Za-z_][\w.]*)`", re.sub(r"\([^)]*\)", "", names))
        rows.append((area, where, listed))
    return rows


def resolve(root, dotted):
    obj = root
    for part in filter(None, dotted.split(".")):
        obj = getattr(obj, part)
    return obj


def kiln_object(where):
    if where == "kiln.Tensor":
        return kiln.ones(1)
    if where == "kiln.nn.Module":
        return kiln.nn.Linear(1, 1)
    return resolve(kiln, where.removeprefix("kiln").lstrip("."))


TORCH_EQUIVALENT = {"kiln": torch, "kiln.Tensor": torch.ones(1),
                    "kiln.nn.Module": torch.nn.Linear(1, 1)}


@pytest.mark.parametrize("area, where, names", surface_rows(), ids=lambda v: str(v)[:20])
def test_every_listed_name_exists_in_kiln_and_in_torch(area, where, names):
    assert names, f"row {area!r} lists no names"
    owner = kiln_object(where)
    torch_owner = TORCH_EQUIVALENT.get(where) or resolve(torch, where.replace("kiln", "", 1)
                                                         .lstrip("."))
    missing = [n for n in names if not _has(owner, n)]
    assert not missing, f"{area}: kiln lacks {missing} under {where}"
    not_torch = [n for n in names if not _has(torch_owner, n)]
    assert not not_torch, f"{area}: torch has no {not_torch} there; the table uses torch's names"


def _has(owner, dotted):
    try:
        resolve(owner, dotted)
    except AttributeError:
        return False
    return True
