"""docs/options.md is the options reference made from ``options.OPTIONS``: an option added,
renamed or given another default without the page made again fails here."""

from pathlib import Path

from pytest_gpuprof.options import OPTIONS, reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_the_options_page_is_made_from_the_option_table():
    assert PAGE.read_text() == reference(), "make it again: python -m pytest_gpuprof.options > docs/options.md"


def test_every_option_has_its_row_with_its_ini_key():
    rows = [line for line in PAGE.read_text().splitlines() if line.startswith("| `--gpuprof")]
    assert [row.split("`")[1] for row in rows] == [o.flag for o in OPTIONS]
    assert [row.split("`")[3] for row in rows] == [o.ini for o in OPTIONS]


def test_the_ncu_help_names_every_key_the_marker_takes():
    from pytest_gpuprof.capture.marker import NCU_KEYS
    from pytest_gpuprof.options import BY_NAME

    assert all(f"'{key}': " in BY_NAME["ncu"].help for key in NCU_KEYS), BY_NAME["ncu"].help
    assert all(f"'{key}': " in PAGE.read_text() for key in NCU_KEYS)
